//! The supervisor: bwrap started by `fork` + `execve` with the jail's fds in place, the sealer,
//! the gate the command waits at, the status pipe, signal forwarding and the exit status.
//!
//! Guards against a command that runs before the jail is complete, a signal lost on its way to the
//! jail, and a status misread (a signal reported as an exit).

use crate::error::{Error, Result, EXIT_JAIL};
use crate::jail::layout::{EXEC_FD, GO_FD, READY_FD, SECCOMP_FD, STATUS_FD, STDERR_FD};
use crate::jail::mounts::Mount;
use crate::jail::plan::Plan;
use crate::jail::policy::Sealing;
use crate::jail::{seal, seccomp};
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Signals forwarded to the jailed command.
pub(super) const FORWARDED: &[i32] =
    &[SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2];

/// What bwrap reported on its status fd.
#[derive(Debug, Default)]
pub(super) struct Status {
    pub(super) child_pid: Option<i32>,
    pub(super) exit_code: Option<i32>,
}

/// Mark every inherited fd above stderr close-on-exec, so that no socket or file the launcher was
/// given (by an IDE terminal, a supervisor) reaches the jail; only the fds placed for bwrap survive.
pub(super) fn close_inherited_fds() {
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds.into_iter().filter(|fd| *fd > 2) {
        // SAFETY: only the flag changes; an fd closed meanwhile (the read_dir's own) gives EBADF.
        let fd = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::io("creating a pipe", e.into()))
}

/// A started bwrap whose first process waits at the gate.
pub(super) struct Jail {
    pub(super) child: rustix::process::Pid,
    pub(super) status: Arc<Mutex<Status>>,
    pub(super) reader: std::thread::JoinHandle<()>,
    pub(super) bwrap_messages: std::thread::JoinHandle<String>,
    pub(super) forwarder: std::thread::JoinHandle<()>,
    pub(super) signals: signal_hook::iterator::Handle,
    pub(super) ready: OwnedFd,
    pub(super) go: OwnedFd,
    /// The sealer, started with bwrap; waits for its request.
    pub(super) sealer: Option<Sealer>,
    /// A forked sealer that has answered, to be reaped.
    pub(super) reap: Option<rustix::process::Pid>,
    /// The terminal's hang-up, once it began (`hangup`).
    pub(super) hangup: super::hangup::Hangup,
}

/// A process that seals the jail from outside (see `seal`).
pub(super) enum Sealer {
    /// Forked from the launcher (the usual case).
    Forked(seal::Forked),
    /// `claude-sandbox __seal`, when the launcher already runs threads and must not fork.
    Executed(std::process::Child),
}

/// Start `program` with `args`, the fds in `map` placed at fixed numbers and `stderr` as its
/// stderr, without waiting for the exec (the launcher has better things to do meanwhile; an exec
/// failure is reported on `stderr` and ends the child with 127, which the gate sees as a failed
/// setup).
pub(super) fn fork_exec(
    program: &Path,
    args: &[OsString],
    env: &[OsString],
    map: &[(i32, i32); 6],
    stderr: OwnedFd,
) -> std::io::Result<rustix::process::Pid> {
    use std::os::unix::ffi::OsStrExt;
    let cstring = |s: &std::ffi::OsStr| {
        std::ffi::CString::new(s.as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let program = cstring(program.as_os_str())?;
    let mut owned = vec![program.clone()];
    for a in args {
        owned.push(cstring(a)?);
    }
    let mut pointers: Vec<*const libc::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    pointers.push(std::ptr::null());
    let env = env
        .iter()
        .map(|e| cstring(e))
        .collect::<Result<Vec<_>, _>>()?;
    let mut env_pointers: Vec<*const libc::c_char> = env.iter().map(|c| c.as_ptr()).collect();
    env_pointers.push(std::ptr::null());
    let stderr_fd = stderr.as_raw_fd();
    // SAFETY: getpid has no preconditions.
    let launcher = unsafe { libc::getpid() };
    // The jail's first process is inherited by the launcher when bwrap exits without waiting for
    // it (`reap_inherited`), not by PID 1, which in a container may never reap it.
    // SAFETY: prctl with an integer argument; no memory is passed.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    // SAFETY: between fork and exec the child makes only async-signal-safe calls (prctl, getppid,
    // fcntl, dup2, sigaction, execve, write, _exit) on memory prepared before the fork.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => unsafe {
            const MSG: &[u8] = b"claude-sandbox: cannot execute bwrap\n";
            // bwrap dies with the launcher. Its own `--die-with-parent` is set after it starts, so
            // a launcher killed in between left it waiting for ever (faults::killed_at_any_moment…,
            // 7 in 200 kills); set here, before the exec, and the launcher gone already is seen. (A
            // set-user-ID bwrap clears it at the exec, and is left with its own.) The main thread
            // forks it, and lives as long as the launcher.
            let dies = libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == 0;
            if !dies || libc::getppid() != launcher {
                libc::_exit(127);
            }
            let placed = place_fds(map).is_ok()
                && libc::dup2(stderr_fd, 2) == 2
                && crate::jail::exec::ignore_terminal_signals().is_ok();
            if placed {
                libc::execve(program.as_ptr(), pointers.as_ptr(), env_pointers.as_ptr());
            }
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(127)
        },
        pid => {
            // The launcher's copy of the write end closes here, so that reading bwrap's stderr
            // ends when bwrap's copies do.
            drop(stderr);
            Ok(rustix::process::Pid::from_raw(pid).expect("fork returns a positive pid"))
        }
    }
}

/// Why sealing from outside failed: the gate stays shut, and the launch builds the jail again with
/// every mount given to bwrap.
#[derive(Debug, thiserror::Error)]
pub(super) enum SealFailure {
    #[error("cannot find the jail's init process")]
    NoInit,
    #[error(transparent)]
    Sealer(#[from] seal::SealError),
    #[error("waiting for the sealer: {0}")]
    Wait(std::io::Error),
}

/// How opening the gate went.
pub(super) enum Gate {
    /// The command runs.
    Opened(Jail),
    /// bwrap's setup failed before the jail's first process started.
    SetupFailed(Jail),
    /// The jail is up but could not be sealed from outside; the command has not run.
    SealFailed(Jail, SealFailure),
}

/// The jail behind a shut gate (see `Jail::hold_and_seal`).
pub(super) enum Held {
    Ready,
    SetupFailed,
    SealFailed(SealFailure),
}

impl Jail {
    /// Start bwrap and the sealer. `exec_sealer` (`CLAUDE_SANDBOX_SEAL=exec`, tests): execute
    /// `__seal` even when the launcher could fork it, so that the path a second attempt takes is
    /// tested too.
    pub(super) fn spawn(
        plan: &Plan,
        args: &[OsString],
        sealing: Sealing,
        exec_sealer: bool,
    ) -> Result<Jail> {
        close_inherited_fds();
        let self_exe = std::env::current_exe()
            .map_err(|e| Error::io("finding the claude-sandbox binary", e))?;
        let sealer = match sealing {
            Sealing::InBwrap => None,
            // Forked while this process has one thread (the first attempt); executed otherwise.
            Sealing::ByLauncher if seal::single_threaded() && !exec_sealer => Some(Sealer::Forked(
                seal::Forked::start().map_err(|e| Error::io("starting the sealer", e))?,
            )),
            Sealing::ByLauncher => Some(Sealer::Executed(
                std::process::Command::new(&self_exe)
                    .arg(seal::SUBCOMMAND)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| Error::io("starting the sealer", e))?,
            )),
        };
        // The audit records' thread waited for the fork above (`audit::ship`).
        crate::audit::release_shipping();
        let (seccomp_r, seccomp_w) = pipe()?;
        let (status_r, status_w) = pipe()?;
        // bwrap's own stderr is captured, so a setup failure becomes one clear line; the command
        // gets the real stderr back from the exec helper.
        let (err_r, err_w) = pipe()?;
        let (ready_r, ready_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let real_stderr = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3)
            .map_err(|e| Error::io("duplicating stderr", e.into()))?;
        let helper = std::fs::File::open(&self_exe)
            .map_err(|e| Error::io(format!("opening {}", self_exe.display()), e))?;
        let program = seccomp::program_bytes(plan.policy.seccomp);
        rustix::io::write(&seccomp_w, &program)
            .map_err(|e| Error::io("writing the seccomp filter", e.into()))?;
        drop(seccomp_w);

        // Register before spawning, so no signal in between kills the launcher with the jail running.
        let mut signals = SignalsInfo::<WithOrigin>::new(FORWARDED)
            .map_err(|e| Error::io("registering signal handlers", e))?;
        let handle = signals.handle();

        let map = [
            (seccomp_r.as_raw_fd(), SECCOMP_FD),
            (status_w.as_raw_fd(), STATUS_FD),
            (helper.as_raw_fd(), EXEC_FD),
            (real_stderr.as_raw_fd(), STDERR_FD),
            (ready_w.as_raw_fd(), READY_FD),
            (go_r.as_raw_fd(), GO_FD),
        ];
        // bwrap stays the jail's first process, whose initial environment the jail reads
        // (`/proc/1/environ`): what the jail must not see is left out of it, not only unset by
        // bwrap for the command (the upstream proxy's credentials, the agent sockets).
        let env: Vec<OsString> = std::env::vars_os()
            .filter(|(k, _)| !plan.policy.unsetenv.iter().any(|u| k == u.as_str()))
            .map(|(mut k, v)| {
                k.push("=");
                k.push(v);
                k
            })
            .collect();
        let child = fork_exec(&plan.policy.bwrap, args, &env, &map, err_w).map_err(|e| {
            Error::Jail(format!("cannot start {}: {e}", plan.policy.bwrap.display()))
        })?;
        drop((seccomp_r, status_w, helper, real_stderr, ready_w, go_r));

        let status = Arc::new(Mutex::new(Status::default()));
        let reader = spawn_status_reader(status_r, Arc::clone(&status));
        let bwrap_messages = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::fs::File::from(err_r), &mut text);
            text
        });
        let hangup = super::hangup::Hangup::new(child.as_raw_nonzero().get(), Arc::clone(&status));
        let forwarder = {
            let status = Arc::clone(&status);
            let hangup = hangup.clone();
            std::thread::spawn(move || {
                for origin in signals.forever() {
                    if origin.signal == SIGHUP {
                        // The terminal is gone, whoever says so: the session ends (`hangup`).
                        hangup.begin("SIGHUP");
                        continue;
                    }
                    if origin.cause == Cause::Kernel {
                        continue; // from the terminal: the command, in our process group, got it too
                    }
                    let init = status.lock().map_or(None, |s| s.child_pid);
                    if let Some(init) = init {
                        forward(init, origin.signal);
                    }
                }
            })
        };
        super::hangup::watch_terminal();
        Ok(Jail {
            child,
            status,
            reader,
            bwrap_messages,
            forwarder,
            signals: handle,
            ready: ready_r,
            go: go_w,
            sealer,
            reap: None,
            hangup,
        })
    }

    /// Wait until bwrap's setup is done, and seal from outside if asked. The command still waits at
    /// the gate (see `open_gate`).
    pub(super) fn hold_and_seal(&mut self, ops: &[Mount], t0: std::time::Instant) -> Held {
        let mut byte = [0u8; 1];
        let ready = loop {
            match rustix::io::read(&self.ready, &mut byte) {
                Err(rustix::io::Errno::INTR) => {}
                r => break matches!(r, Ok(1)),
            }
        };
        if !ready {
            return Held::SetupFailed;
        }
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "jail set up, held at the gate"
        );
        if let Some(sealer) = self.sealer.take() {
            if let Err(why) = self.seal(sealer, ops) {
                return Held::SealFailed(why);
            }
            tracing::debug!(
                ms = t0.elapsed().as_secs_f64() * 1e3,
                mounts = ops.len(),
                "sealed from outside"
            );
        }
        Held::Ready
    }

    /// Let the command run, if `hold_and_seal` found the jail ready.
    pub(super) fn open_gate(self, held: Held) -> Gate {
        match held {
            Held::SetupFailed => Gate::SetupFailed(self),
            Held::SealFailed(why) => Gate::SealFailed(self, why),
            Held::Ready => match rustix::io::write(&self.go, &[crate::jail::exec::GO]) {
                Ok(1) => Gate::Opened(self),
                _ => Gate::SetupFailed(self),
            },
        }
    }

    /// Hand the jail's init PID and the mounts to the sealer and wait for its answer.
    pub(super) fn seal(
        &mut self,
        sealer: Sealer,
        ops: &[Mount],
    ) -> std::result::Result<(), SealFailure> {
        let bwrap = self.child.as_raw_nonzero();
        // bwrap's only child is the jail's init; the helper is waiting, so it exists.
        let init = std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next()?.parse::<i32>().ok())
            .ok_or(SealFailure::NoInit);
        let request = |pid| seal::SealRequest {
            pid,
            ops: ops.to_vec(),
        };
        match sealer {
            Sealer::Forked(forked) => {
                self.reap = Some(forked.pid);
                Ok(forked.seal(&request(init?))?)
            }
            Sealer::Executed(mut child) => {
                let text = serde_json::to_vec(&request(init?)).map_err(seal::SealError::Request)?;
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(&text);
                }
                let out = child.wait_with_output().map_err(SealFailure::Wait)?;
                if out.status.success() {
                    return Ok(());
                }
                let msg = String::from_utf8_lossy(&out.stderr);
                let line = msg.lines().next().unwrap_or("no message").trim();
                Err(seal::SealError::Refused(line.to_string()).into())
            }
        }
    }

    /// Shut the gate for good (the command never runs) and wait for bwrap to go.
    pub(super) fn abort(self) {
        let _ = self.wait();
    }

    /// Wait for bwrap; the command's exit status, or bwrap's setup failure.
    pub(super) fn wait(self) -> Result<i32> {
        let Jail {
            child,
            status,
            reader,
            bwrap_messages,
            forwarder,
            signals,
            ready,
            go,
            sealer,
            reap,
            hangup,
        } = self;
        // Closing our ends: a helper still at the gate sees end of file and exits.
        drop((ready, go));
        let unused = match sealer {
            Some(Sealer::Forked(f)) => Some(f.pid),
            Some(Sealer::Executed(mut c)) => {
                let _ = c.kill();
                let _ = c.wait();
                None
            }
            None => None,
        };
        if let Some(pid) = unused {
            let _ = crate::process::signal_process(
                pid.as_raw_nonzero().get(),
                rustix::process::Signal::KILL,
            );
        }
        for pid in unused.into_iter().chain(reap) {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
        let exit = loop {
            match rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) | Ok(None) => {}
                Err(e) => return Err(Error::io("waiting for bwrap", e.into())),
                Ok(Some((_, status))) => break status,
            }
        };
        if let Some(init) = status.lock().ok().and_then(|s| s.child_pid) {
            reap_inherited(init);
        }
        let _ = reader.join();
        signals.close();
        let _ = forwarder.join();
        let messages = bwrap_messages.join().unwrap_or_default();
        let exit_code = status.lock().map_or(None, |s| s.exit_code);
        match (exit_code, exit.terminating_signal()) {
            // Its init killed at the end of a hang-up: the status is the hang-up's, not the command's.
            _ if hangup.killed() => Ok(128 + SIGHUP),
            (Some(code), _) => {
                if !messages.is_empty() {
                    // Not `eprint!`: it panics on a terminal that went away.
                    let _ = std::io::stderr().write_all(messages.as_bytes());
                }
                Ok(code)
            }
            (None, Some(sig)) => Ok(128 + sig),
            (None, None) => {
                let first = messages
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no message")
                    .trim();
                Err(Error::Jail(format!(
                    "{first} (bwrap exit status {})",
                    exit.exit_status().unwrap_or(EXIT_JAIL)
                )))
            }
        }
    }
}

/// In the child after fork: move fds to fixed numbers without CLOEXEC. No allocation here.
pub(super) fn place_fds(map: &[(i32, i32); 6]) -> std::io::Result<()> {
    use rustix::fd::BorrowedFd;
    use std::os::fd::FromRawFd;
    // First lift every source above the targets, so no dup2 clobbers a source not yet moved.
    let mut lifted: [Option<OwnedFd>; 6] = Default::default();
    for (i, (src, _)) in map.iter().enumerate() {
        // SAFETY: the fd numbers are open in the parent and inherited by this child.
        lifted[i] = Some(rustix::io::fcntl_dupfd_cloexec(
            unsafe { BorrowedFd::borrow_raw(*src) },
            64,
        )?);
    }
    for (i, (_, dst)) in map.iter().enumerate() {
        let high = lifted[i].as_ref().expect("lifted above");
        // SAFETY: dup2 onto a fixed number is the point; the OwnedFd is forgotten, never closed.
        let mut target = unsafe { OwnedFd::from_raw_fd(*dst) };
        let res = rustix::io::dup2(high, &mut target);
        std::mem::forget(target);
        res?;
    }
    Ok(())
}

pub(super) fn spawn_status_reader(
    fd: OwnedFd,
    status: Arc<Mutex<Status>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let reader = std::io::BufReader::new(std::fs::File::from(fd));
        for line in reader.lines().map_while(std::result::Result::ok) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if let Ok(mut s) = status.lock() {
                if let Some(pid) = v.get("child-pid").and_then(serde_json::Value::as_i64) {
                    s.child_pid = i32::try_from(pid).ok();
                }
                if let Some(code) = v.get("exit-code").and_then(serde_json::Value::as_i64) {
                    s.exit_code = i32::try_from(code).ok();
                }
            }
        }
    })
}

/// Send `sig` to every child of the jail's init (the command, and orphans it adopted).
pub(super) fn forward(init: i32, sig: i32) {
    let children =
        std::fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap_or_default();
    let Ok(signal) = rustix::process::Signal::from_named_raw(sig).ok_or(()) else {
        return;
    };
    for pid in children
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        let _ = crate::process::signal_process(pid, signal);
    }
}

/// Reap the jail's first process (PID `init` here) if bwrap left it to the launcher: bwrap learns
/// of its end through an event fd and exits without waiting for it, and the zombie, reparented to
/// the launcher (a subreaper: `fork_exec`), would otherwise stay under PID 1 where PID 1 does not
/// reap (seen on every launch here). Only a process whose parent is the launcher is waited for (it
/// is dying: bwrap set its `PR_SET_PDEATHSIG`), so no other process's status is taken.
fn reap_inherited(init: i32) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{init}/stat")) else {
        return;
    };
    // The parent's PID is the second field after the command's name (in parentheses, any bytes).
    let parent = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse::<i32>().ok());
    // SAFETY: getpid has no preconditions.
    if parent != Some(unsafe { libc::getpid() }) {
        return;
    }
    if let Some(pid) = rustix::process::Pid::from_raw(init) {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
    }
}
