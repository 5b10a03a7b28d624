//! The commands the battery starts (set-ups, payloads, triggers, clean-ups), each in a session of
//! its own, with a bounded life.
//!
//! Guards against the battery reaching anything it did not start. A command in a background
//! process group of the caller's terminal that runs `bash -i` stops itself on SIGTTIN and the
//! battery hangs; a timed-out command must end exactly what it started. So every command gets a new
//! session (`setsid`): it has no controlling terminal (`bash -i` runs without job control, as in CI,
//! and still reads `~/.bashrc`) and its own process group, whose id is its pid. On a time-out that
//! group is killed by the system call while its leader is still unreaped: a zombie's pid cannot be
//! taken by a new process, so the id still names only what we started. Every wait after that is
//! bounded; a process that left the group and holds our pipes costs at most `GRACE`.

use crate::process::signal_group;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions};
use std::fmt::Write as _;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long to wait for a killed command to be reaped, or for its pipes to close after it ended.
const GRACE: Duration = Duration::from_secs(5);

/// What a command did.
pub(super) struct Ran {
    pub ok: bool,
    pub output: String,
}

/// Run `c` in a new session with its output captured; after `timeout` its whole group is killed.
/// `started` is told the command's pid as soon as it runs (a case may signal its own launcher).
pub(super) fn run_contained(mut c: Command, timeout: Duration, started: impl FnOnce(u32)) -> Ran {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: `setsid` is a single async-signal-safe system call; nothing else runs between fork
    // and exec.
    unsafe {
        c.pre_exec(|| {
            rustix::process::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = match super::interrupt::spawn(&mut c) {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                ok: false,
                output: format!("cannot start: {e}"),
            }
        }
    };
    started(child.id());
    let output = drain(&mut child);
    let t0 = Instant::now();
    let timed_out = loop {
        if ended_unreaped(&child) {
            break false;
        }
        if t0.elapsed() > timeout {
            break true;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if timed_out {
        // The leader has not been reaped (`ended_unreaped` never reaps), so its pid, which is the
        // group's id since `setsid`, cannot name anything else.
        if let Err(e) = signal_group(Pid::from_child(&child).as_raw_nonzero().get(), Signal::KILL) {
            tracing::warn!("ending a timed-out battery command: {e}");
        }
    }
    // Before the reap, while the leader's pid still names only its group.
    super::interrupt::ended(child.id());
    let status = reap_within(&mut child, GRACE);
    let mut text = output.recv_timeout(GRACE).unwrap_or_else(|_| {
        "(output incomplete: a process the command left behind still holds it)\n".into()
    });
    if timed_out {
        let _ = writeln!(text, "timed out after {} s", timeout.as_secs());
        return Ran {
            ok: false,
            output: text,
        };
    }
    Ran {
        ok: status.is_some_and(|s| s.success()),
        output: text,
    }
}

/// Whether the child has ended, leaving it a zombie (`WNOWAIT`) so that its pid stays its own.
fn ended_unreaped(child: &Child) -> bool {
    let Some(pid) = Pid::from_raw(Pid::from_child(child).as_raw_nonzero().get()) else {
        return true;
    };
    matches!(
        rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ),
        Ok(Some(_)) | Err(_)
    )
}

fn reap_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if t0.elapsed() < limit => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                tracing::warn!("battery command {} was not reaped in time", child.id());
                return None;
            }
        }
    }
}

/// Read stdout and stderr to their ends on threads; the result arrives when both are closed.
fn drain(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let pipes: Vec<Box<dyn Read + Send>> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .collect();
    std::thread::spawn(move || {
        let readers: Vec<_> = pipes
            .into_iter()
            .map(|mut p| {
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let _ = p.read_to_end(&mut buf);
                    buf
                })
            })
            .collect();
        let text: String = readers
            .into_iter()
            .map(|r| String::from_utf8_lossy(&r.join().unwrap_or_default()).into_owned())
            .collect();
        let _ = tx.send(text);
    });
    rx
}

/// Give the battery a session keyring of its own (a new anonymous one, `KEYCTL_JOIN_SESSION_KEYRING`),
/// inherited by every command it starts: a case's set-up adds its key there, never to the human's
/// keyring, and the payload started next inherits it as the jail would inherit the human's
/// (`session-keyring`). Where the call is refused (a seccomp profile), that case finds no key.
pub(super) fn own_session_keyring() {
    const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;
    // SAFETY: a system call with a null name, which touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    if r < 0 {
        tracing::debug!(
            "battery: no session keyring of its own: {}",
            std::io::Error::last_os_error()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_has_no_terminal_and_leads_its_own_session() {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "if (: </dev/tty) 2>/dev/null; then echo tty; else echo no-tty; fi; ps -o sid= -p $$; echo $$",
        ]);
        let r = run_contained(c, Duration::from_secs(10), |_| {});
        assert!(r.ok, "{}", r.output);
        let lines: Vec<&str> = r.output.split_whitespace().collect();
        assert_eq!(lines[0], "no-tty");
        assert_eq!(lines[1], lines[2], "session id = own pid: {}", r.output);
    }

    #[test]
    fn a_timed_out_command_and_its_group_end_within_bounds() {
        let mut c = Command::new("sh");
        // A child in the same group that ignores TERM and keeps the pipe open.
        c.args(["-c", "trap '' TERM; sleep 60 & echo started; wait"]);
        let t0 = Instant::now();
        let mut pid = 0;
        let r = run_contained(c, Duration::from_millis(300), |p| pid = p);
        assert!(!r.ok);
        assert!(r.output.contains("started"), "{}", r.output);
        assert!(r.output.contains("timed out"), "{}", r.output);
        assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
        // Nothing of the group is left but zombies waiting for init to reap them.
        let left = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|s| {
                let fields: Vec<&str> = s
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                fields.get(2) == Some(&pid.to_string().as_str()) && fields.first() != Some(&"Z")
            })
            .count();
        assert_eq!(left, 0, "members of group {pid} survived");
    }
}
