//! The proxy's process: forked from the launcher while it runs one thread (executed as `__proxy`
//! otherwise), with nothing of the launcher's but the listening socket and a control socket.
//!
//! Guards against the jail reaching the guard through the proxy: whatever the jail makes the proxy
//! hold (descriptors, threads, memory), it holds in this process, not in the launcher, where the
//! watcher quarantines and the alerts are written. The process is in a process group of its own
//! (Ctrl-C, meant for the agent, does not end it), dies with the launcher (`PR_SET_PDEATHSIG`, and
//! end of file on the control socket), and tells the launcher its summary when the control socket
//! is shut.

use super::{serve, Config, Proxy, Shared, Summary};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// argv[1] of the executed proxy.
pub(crate) const SUBCOMMAND: &str = "__proxy";

/// Where the executed proxy finds its sockets.
const LISTENER_FD: RawFd = 3;
const CONTROL_FD: RawFd = 4;

/// How long the launcher waits for the summary when the session ends.
const SUMMARY_TIMEOUT: Duration = Duration::from_secs(2);

/// The soft descriptor limit the proxy raises itself to (within the hard one): the default limits
/// need about 1 100 (`Limits::within`).
const NOFILE: u64 = 2048;

/// A serving proxy process.
pub(crate) struct Running {
    pid: Option<rustix::process::Pid>,
    control: UnixStream,
}

/// What the executed proxy reads on its stdin.
#[derive(serde::Serialize, serde::Deserialize)]
struct Handover {
    config: Config,
    /// The launcher's pid: the proxy ends if it is not its parent (it died meanwhile).
    parent: i32,
    /// The log filter (`info`, `debug`, ...) and whether lines stay on stderr.
    log: String,
    live: bool,
}

/// Start the proxy process for `proxy`; `exec`: execute it even when it could be forked (tests).
pub(super) fn start(proxy: Proxy, exec: bool) -> std::io::Result<Running> {
    let (ours, theirs) = UnixStream::pair()?;
    let Proxy { listener, config } = proxy;
    if !exec && crate::jail::seal::single_threaded() {
        // SAFETY: the process is single-threaded (checked), so the child may run any code; it
        // never returns into the caller (it `_exit`s).
        return match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                drop(ours);
                let parent = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
                prepare(parent, &[listener.as_raw_fd(), theirs.as_raw_fd()]);
                let code = run(&listener, &theirs, config);
                // SAFETY: ending this child only, without the launcher's exit handlers.
                unsafe { libc::_exit(code) }
            }
            pid => Ok(Running {
                pid: rustix::process::Pid::from_raw(pid),
                control: ours,
            }),
        };
    }
    let exe = std::env::current_exe()?;
    let handover = Handover {
        config,
        parent: i32::try_from(std::process::id()).unwrap_or(0),
        log: tracing::level_filters::LevelFilter::current()
            .to_string()
            .to_ascii_lowercase(),
        live: crate::logfile::live(),
    };
    let text = serde_json::to_vec(&handover).map_err(std::io::Error::other)?;
    let (l, c) = (listener.as_raw_fd(), theirs.as_raw_fd());
    let mut cmd = std::process::Command::new(exe);
    cmd.arg(SUBCOMMAND)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    // SAFETY: between fork and exec only fcntl and dup2, async-signal-safe, on descriptors that
    // stay open. Both are first copied above the targets, so that placing one never closes the
    // other (the listener may be fd 4).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            let high = [
                libc::fcntl(l, libc::F_DUPFD, 10),
                libc::fcntl(c, libc::F_DUPFD, 10),
            ];
            for (from, to) in high.into_iter().zip([LISTENER_FD, CONTROL_FD]) {
                if from < 0 || libc::dup2(from, to) != to {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&text)?;
    }
    drop((listener, theirs));
    Ok(Running {
        pid: rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0)),
        control: ours,
    })
}

/// `claude-sandbox __proxy`: the proxy executed, its sockets at fds 3 and 4, its configuration
/// on stdin.
pub(crate) fn exec_main() -> i32 {
    let mut text = Vec::new();
    if std::io::stdin().read_to_end(&mut text).is_err() {
        return 1;
    }
    let Ok(h) = serde_json::from_slice::<Handover>(&text) else {
        eprintln!("claude-sandbox: {SUBCOMMAND} is internal: the launcher starts it");
        return crate::error::EXIT_USAGE;
    };
    crate::cli::init_process_logging(&h.log, h.live);
    prepare(h.parent, &[LISTENER_FD, CONTROL_FD]);
    // SAFETY: the launcher placed these two sockets here for this process alone.
    let (listener, control) = unsafe {
        (
            UnixListener::from(OwnedFd::from_raw_fd(LISTENER_FD)),
            UnixStream::from(OwnedFd::from_raw_fd(CONTROL_FD)),
        )
    };
    run(&listener, &control, h.config)
}

/// The process's own conditions: its own process group, death with `parent`, only `keep` (and
/// stderr) open, stdin and stdout on `/dev/null` (the filtering ssh agent's too: `ssh_agent::serve`).
pub(crate) fn prepare(parent: i32, keep: &[RawFd]) {
    let _ = rustix::process::setpgid(None, None);
    let dies =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let parent_now = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
    if dies.is_err() || parent_now != parent {
        // SAFETY: ending this process only.
        unsafe { libc::_exit(0) };
    }
    if let Ok(rd) = std::fs::read_dir("/proc/self/fd") {
        let fds: Vec<RawFd> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        for fd in fds.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
            // SAFETY: closing inherited descriptors this process does not use.
            unsafe { libc::close(fd) };
        }
    }
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
    }
    // A log line written to the terminal from a background group must not stop the process.
    // SAFETY: installing SIG_IGN runs no handler code.
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGTTOU,
            nix::sys::signal::SigHandler::SigIgn,
        )
    };
}

/// With `[secrets] inject` the process holds the session CA's key and the real credentials: no
/// core file of it is written (`RLIMIT_CORE` 0), and it is not dumpable, so that a process of the
/// same user without `CAP_SYS_PTRACE` cannot attach to it or read its `/proc/PID/mem`.
fn keep_memory_in() -> rustix::io::Result<()> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    )?;
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
}

/// Raise the soft descriptor limit towards `NOFILE`; the limit in force.
fn raise_nofile() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let soft = now.current.unwrap_or(u64::MAX);
    let hard = now.maximum.unwrap_or(u64::MAX);
    if soft < NOFILE {
        let want = NOFILE.min(hard);
        if setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(want),
                maximum: now.maximum,
            },
        )
        .is_ok()
        {
            return want;
        }
    }
    soft
}

fn run(listener: &UnixListener, control: &UnixStream, mut config: Config) -> i32 {
    if config.inject.is_some() {
        if let Err(e) = keep_memory_in() {
            tracing::warn!("network proxy: its memory may be dumped or traced: {e}");
        }
    }
    if let Some((runtime, session)) = &config.alerts {
        crate::logfile::divert_process(runtime, &format!("network proxy of session {session}"));
    }
    config.limits = config.limits.within(raise_nofile());
    let shared = match Shared::new(config) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tracing::error!("network proxy: {e}");
            return 1;
        }
    };
    tracing::debug!(limits = ?shared.limits, "network proxy serving");
    serve::serve(listener, control, &shared);
    // Its alerts' audit records go to the team's pipeline before the launcher stops waiting.
    crate::audit::finish();
    let summary = shared.summary();
    tracing::debug!(?summary, "network proxy done");
    let mut c = control;
    let _ = control.set_nonblocking(false);
    let _ = control.set_write_timeout(Some(SUMMARY_TIMEOUT));
    let _ = serde_json::to_writer(&mut c, &summary);
    0
}

impl Running {
    /// Stop serving and say what was refused (one line per host, and the limits' count).
    pub(crate) fn summary(mut self) -> Vec<String> {
        match self.finish() {
            Ok(s) => s.lines(),
            Err(e) => vec![format!("the proxy's summary is missing ({e})")],
        }
    }

    fn finish(&mut self) -> std::io::Result<Summary> {
        let _ = self.control.shutdown(std::net::Shutdown::Write);
        let _ = self.control.set_read_timeout(Some(SUMMARY_TIMEOUT));
        let mut text = Vec::new();
        let read = (&self.control).read_to_end(&mut text);
        self.reap();
        read?;
        serde_json::from_slice(&text).map_err(std::io::Error::other)
    }

    /// Wait for the process a little, then end it.
    fn reap(&mut self) {
        let Some(pid) = self.pid.take() else {
            return;
        };
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG) {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok(None) => break,
            }
        }
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.control.shutdown(std::net::Shutdown::Both);
        self.reap();
    }
}

#[cfg(test)]
mod tests {
    /// In a child of its own (the settings are the process's, and the test harness's threads must
    /// keep theirs): afterwards the process is not dumpable and writes no core.
    #[test]
    fn an_injecting_proxy_is_not_dumpable_and_writes_no_core() {
        use rustix::process::{dumpable_behavior, getrlimit, DumpableBehavior, Resource};
        // SAFETY: the child calls prctl, getrlimit and _exit only, then ends.
        match unsafe { libc::fork() } {
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            0 => {
                let sealed = super::keep_memory_in().is_ok()
                    && dumpable_behavior().ok() == Some(DumpableBehavior::NotDumpable)
                    && getrlimit(Resource::Core).current == Some(0);
                // SAFETY: ending the child only.
                unsafe { libc::_exit(i32::from(!sealed)) }
            }
            pid => {
                let mut status = 0;
                // SAFETY: waiting for the child forked above.
                assert_eq!(unsafe { libc::waitpid(pid, &raw mut status, 0) }, pid);
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "{status}"
                );
            }
        }
    }
}
