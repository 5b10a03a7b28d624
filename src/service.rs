//! A per-session service of the launcher's on a unix socket bound into the jail: the filtering ssh
//! agent (`ssh_agent::serve`) and the Docker filter (`docker::serve`) are started, handed their
//! configuration and served the same way, here once.
//!
//! Guards against the jail reaching the launcher through a service: the socket is bound in a 0700
//! session directory by the launcher, then served by a process of its own (executed as an internal
//! subcommand, its listener at fd 3, its configuration on stdin), in a process group of its own,
//! dying with the launcher (`PR_SET_PDEATHSIG`) and killed when the session ends (`Running`'s drop);
//! and against a flood of connections (`serve_each`: a bound number at once, more closed).

use serde::{de::DeserializeOwned, Serialize};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

const LISTENER_FD: RawFd = 3;

/// What every service reads on its stdin: its own configuration and the process's conditions.
#[derive(serde::Serialize, serde::Deserialize)]
struct Envelope<T> {
    body: T,
    /// The runtime directory and the session, for alerts and the log file.
    alerts: (PathBuf, String),
    /// The launcher's pid: the service ends if it is not its parent (it died meanwhile).
    parent: i32,
    log: String,
    live: bool,
}

/// A serving service; ended when dropped: asked first (SIGTERM: the audit records of its alerts
/// are shipped before it exits, `audit::finish`), killed if it has not ended within `ENDING`.
pub(crate) struct Running(std::process::Child);

/// How long a service has to end when asked: above the audit's shipping wait (at most 2 s).
const ENDING: std::time::Duration = std::time::Duration::from_millis(2500);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(pid) = i32::try_from(self.0.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let until = std::time::Instant::now() + ENDING;
            while std::time::Instant::now() < until {
                if matches!(self.0.try_wait(), Ok(Some(_)) | Err(_)) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The services a launch's policy asks for, started; each ended when dropped (the Docker filter's
/// end removes the session's containers).
pub(crate) struct Services {
    _ssh_agent: Option<Running>,
    _docker: Option<crate::docker::Running>,
}

pub(crate) fn for_policy(
    policy: &crate::jail::policy::Policy,
    runtime: &Path,
    session: &str,
) -> crate::error::Result<Services> {
    Ok(Services {
        _ssh_agent: crate::ssh_agent::serve::for_policy(policy, runtime, session)?,
        _docker: crate::docker::serve::for_policy(policy, runtime, session)?,
    })
}

/// Make `dir` (0700) and bind `name` in it, replacing a stale socket.
pub(crate) fn bind(dir: &Path, name: &str) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)?;
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    crate::net::proxy::bind_unix(dir, &path)
}

/// Execute `claude-sandbox SUBCOMMAND` serving `listener`, handing it `body`.
pub(crate) fn start<T: Serialize>(
    subcommand: &str,
    listener: &UnixListener,
    body: T,
    runtime: &Path,
    session: &str,
) -> std::io::Result<Running> {
    let envelope = Envelope {
        body,
        alerts: (runtime.to_path_buf(), session.to_string()),
        parent: i32::try_from(std::process::id()).unwrap_or(0),
        log: tracing::level_filters::LevelFilter::current()
            .to_string()
            .to_ascii_lowercase(),
        live: crate::logfile::live(),
    };
    let text = serde_json::to_vec(&envelope).map_err(std::io::Error::other)?;
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.arg(subcommand)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null());
    let l = listener.as_raw_fd();
    // SAFETY: between fork and exec only fcntl and dup2, async-signal-safe, on a descriptor that
    // stays open (copied above the target first, so that placing it never closes it).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            let high = libc::fcntl(l, libc::F_DUPFD, 10);
            if high < 0 || libc::dup2(high, LISTENER_FD) != LISTENER_FD {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&text)?;
    }
    Ok(Running(child))
}

/// What an executed service received: its body, its listener, and `(runtime, session)`.
pub(crate) struct Received<T> {
    pub body: T,
    pub listener: UnixListener,
    pub alerts: (PathBuf, String),
}

/// In the executed service (`what` names it in the log): read the envelope, take the process's
/// conditions (`net::proxy::prepare_process`) and the listener. `Err`: the exit status.
pub(crate) fn receive<T: DeserializeOwned>(
    subcommand: &str,
    what: &str,
) -> Result<Received<T>, i32> {
    let mut text = Vec::new();
    if std::io::stdin().read_to_end(&mut text).is_err() {
        return Err(1);
    }
    let Ok(e) = serde_json::from_slice::<Envelope<T>>(&text) else {
        eprintln!("claude-sandbox: {subcommand} is internal: the launcher starts it");
        return Err(crate::error::EXIT_USAGE);
    };
    crate::cli::init_process_logging(&e.log, e.live);
    crate::net::proxy::prepare_process(e.parent, &[LISTENER_FD]);
    crate::logfile::divert_process(&e.alerts.0, &format!("{what} of session {}", e.alerts.1));
    // SAFETY: the launcher placed this socket here for this process alone.
    let listener = unsafe { UnixListener::from(OwnedFd::from_raw_fd(LISTENER_FD)) };
    // Asked to end (`Running::drop`): what it recorded goes to the team's pipeline first.
    if let Ok(mut term) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM]) {
        let _ = std::thread::Builder::new()
            .name("service-end".into())
            .spawn(move || {
                if term.forever().next().is_some() {
                    crate::audit::finish();
                    std::process::exit(0);
                }
            });
    }
    Ok(Received {
        body: e.body,
        listener,
        alerts: e.alerts,
    })
}

/// Serve each connection on a thread of its own, at most `max` at once (one more is closed).
pub(crate) fn serve_each<S: Send + Sync + 'static>(
    listener: &UnixListener,
    max: usize,
    what: &'static str,
    shared: &Arc<S>,
    serve: fn(&S, UnixStream),
) {
    let open = Arc::new(AtomicUsize::new(0));
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if open.fetch_add(1, Ordering::SeqCst) >= max {
            open.fetch_sub(1, Ordering::SeqCst);
            tracing::info!("{what}: {max} connections open; one more closed");
            continue;
        }
        let (s, o) = (Arc::clone(shared), Arc::clone(&open));
        let spawned = std::thread::Builder::new()
            .name(what.into())
            .spawn(move || {
                serve(&s, conn);
                o.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
