//! The filter's process: executed by the launcher (`__ssh-agent`) for the session's life, with its
//! listening socket at fd 3 and its configuration on stdin; a thread per connection from the jail,
//! each with its own connection to the human's agent (a `session-bind` holds for the connection it
//! was made on).
//!
//! Guards against the jail reaching the launcher through the agent (whatever it makes the filter
//! hold, the filter holds), against a flood of connections (`MAX_CONNECTIONS` at once; more are
//! closed), and against an alert per message (one per kind of refusal and session). The process
//! is in a process group of its own, dies with the launcher (`PR_SET_PDEATHSIG`) and is killed
//! when the session ends (`Running`'s drop).

use super::judge::{self, ConnState, Refusal, Verdict};
use super::{known_hosts, wire};
use crate::alerts::{Action, Alert, AlertKind, Severity};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// argv\[1\] of the executed filter.
pub(crate) const SUBCOMMAND: &str = "__ssh-agent";

const LISTENER_FD: RawFd = 3;

/// Connections served at once; one more is closed as it comes.
const MAX_CONNECTIONS: usize = 64;

/// How long the filter waits for the human's agent to answer (a hardware key waits for a touch).
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(120);

/// What the executed filter reads on its stdin.
#[derive(serde::Serialize, serde::Deserialize)]
struct Handover {
    upstream: PathBuf,
    policy: judge::Policy,
    entries: Vec<known_hosts::Entry>,
    /// The runtime directory and the session, for alerts.
    alerts: (PathBuf, String),
    parent: i32,
    log: String,
    live: bool,
}

/// The serving filter; ended when dropped: asked first (SIGTERM: its alerts' audit records are
/// shipped before it exits, `audit::finish`), killed if it has not ended within `ENDING`.
pub(crate) struct Running(std::process::Child);

/// How long the filter has to end when asked: above the audit's shipping wait (at most 2 s).
const ENDING: std::time::Duration = std::time::Duration::from_millis(2500);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.0.id()) {
            let _ = rustix::process::kill_process(
                rustix::process::Pid::from_raw(pid).expect("a child's pid is positive"),
                rustix::process::Signal::TERM,
            );
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

/// The filter a launch's policy asks for (`[ssh]`), started: served outside for the session's
/// life, killed when dropped.
pub(crate) fn for_policy(
    policy: &crate::jail::policy::Policy,
    runtime: &Path,
    session: &str,
) -> crate::error::Result<Option<Running>> {
    policy
        .ssh
        .as_ref()
        .map(|f| start(f, runtime, session))
        .transpose()
}

/// Bind the socket in `filter.dir` (made 0700) and start the filter's process.
fn start(filter: &super::Filter, runtime: &Path, session: &str) -> crate::error::Result<Running> {
    use std::os::unix::fs::DirBuilderExt;
    let err = |e: std::io::Error| {
        crate::error::Error::Jail(format!(
            "starting the filtering ssh agent in {}: {e}",
            filter.dir.display()
        ))
    };
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&filter.dir)
        .map_err(err)?;
    let path = filter.dir.join(crate::jail::layout::SSH_SOCKET);
    let _ = std::fs::remove_file(&path);
    let listener = crate::net::proxy::bind_unix(&filter.dir, &path).map_err(err)?;
    let handover = Handover {
        upstream: filter.upstream.clone(),
        policy: filter.policy.clone(),
        entries: filter.entries.clone(),
        alerts: (runtime.to_path_buf(), session.to_string()),
        parent: i32::try_from(std::process::id()).unwrap_or(0),
        log: tracing::level_filters::LevelFilter::current()
            .to_string()
            .to_ascii_lowercase(),
        live: crate::logfile::live(),
    };
    let text = serde_json::to_vec(&handover).map_err(|e| err(std::io::Error::other(e)))?;
    let mut cmd = std::process::Command::new(std::env::current_exe().map_err(err)?);
    cmd.arg(SUBCOMMAND)
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
    let mut child = cmd.spawn().map_err(err)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&text).map_err(err)?;
    }
    Ok(Running(child))
}

/// `claude-sandbox __ssh-agent`: the filter executed.
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
    crate::net::proxy::prepare_process(h.parent, &[LISTENER_FD]);
    crate::logfile::divert_process(&h.alerts.0, &format!("ssh agent of session {}", h.alerts.1));
    // SAFETY: the launcher placed this socket here for this process alone.
    let listener = unsafe { UnixListener::from(OwnedFd::from_raw_fd(LISTENER_FD)) };
    // Asked to end (`Running::drop`): what it recorded goes to the team's pipeline first.
    if let Ok(mut term) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM]) {
        let _ = std::thread::Builder::new()
            .name("ssh-agent-end".into())
            .spawn(move || {
                if term.forever().next().is_some() {
                    crate::audit::finish();
                    std::process::exit(0);
                }
            });
    }
    let mut policy = h.policy;
    if let Some(host) = policy.hosts.first() {
        if accepts_a_forged_bind(&h.upstream, &host.blob) {
            // The filter's one trust in the human's agent is that it verifies a bind's signature:
            // an agent that does not would let the jail bind an allowed host's key to any session.
            tracing::warn!(
                "ssh agent: the human's agent accepted a session-bind with a forged signature: \
                 no login signature is given through the filter (commit signing unaffected)"
            );
            policy.hosts.clear();
        }
    }
    let shared = Arc::new(Shared {
        upstream: h.upstream,
        policy,
        entries: h.entries,
        alerts: h.alerts,
        alerted: Mutex::new(BTreeSet::new()),
        open: AtomicUsize::new(0),
    });
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        if shared.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.open.fetch_sub(1, Ordering::SeqCst);
            tracing::info!("ssh agent: {MAX_CONNECTIONS} connections open; one more closed");
            continue;
        }
        let s = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("ssh-agent".into())
            .spawn(move || {
                s.connection(conn);
                s.open.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.open.fetch_sub(1, Ordering::SeqCst);
        }
    }
    0
}

/// Whether the agent at `upstream` answers SUCCESS to a `session-bind` whose signature cannot be
/// valid (64 zero bytes over a made-up session id), on a connection of its own. OpenSSH's agent
/// verifies it and answers FAILURE; an agent that does not support the extension answers FAILURE
/// too (and then no bind is ever recorded: no login signatures, fail closed).
fn accepts_a_forged_bind(upstream: &std::path::Path, host_key: &[u8]) -> bool {
    let Ok(mut up) = UnixStream::connect(upstream) else {
        return false;
    };
    let _ = up.set_read_timeout(Some(Duration::from_secs(5)));
    let key_type = wire::Reader::new(host_key)
        .string()
        .unwrap_or(b"ssh-ed25519");
    let mut sig = Vec::new();
    wire::put_string(&mut sig, key_type);
    wire::put_string(&mut sig, &[0u8; 64]);
    let mut body = vec![wire::EXTENSION];
    wire::put_string(&mut body, wire::SESSION_BIND);
    wire::put_string(&mut body, host_key);
    wire::put_string(&mut body, &[0x5a; 32]);
    wire::put_string(&mut body, &sig);
    body.push(0);
    if wire::write_frame(&mut up, &body).is_err() {
        return false;
    }
    wire::read_frame(&mut up).is_ok_and(|a| a.first() == Some(&wire::SUCCESS))
}

struct Shared {
    upstream: PathBuf,
    policy: judge::Policy,
    entries: Vec<known_hosts::Entry>,
    alerts: (PathBuf, String),
    /// The kinds of refusal already alerted this session.
    alerted: Mutex<BTreeSet<&'static str>>,
    open: AtomicUsize,
}

impl Shared {
    /// Serve one connection from the jail until either side closes or misbehaves.
    fn connection(&self, mut jail: UnixStream) {
        let mut up = match UnixStream::connect(&self.upstream) {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!("ssh agent: the human's agent does not answer: {e}");
                return;
            }
        };
        let _ = up.set_read_timeout(Some(UPSTREAM_TIMEOUT));
        let mut state = ConnState::default();
        loop {
            let body = match wire::read_frame(&mut jail) {
                Ok(b) => b,
                Err(wire::FrameError::Closed) => return,
                Err(e) => {
                    tracing::info!("ssh agent: connection from the jail closed: {e}");
                    return;
                }
            };
            match self.answer(&body, &mut state, &mut up) {
                Some(answer) => {
                    if wire::write_frame(&mut jail, &answer).is_err() {
                        return;
                    }
                }
                None => return,
            }
        }
    }

    /// The answer to one message; `None`: the human's agent failed (the connection is closed).
    fn answer(&self, body: &[u8], state: &mut ConnState, up: &mut UnixStream) -> Option<Vec<u8>> {
        let req = wire::parse(body);
        let name = |blob: &[u8]| known_hosts::describe(&self.entries, blob);
        let verdict = judge::judge(&self.policy, state, &req, &name);
        let mut ask = || -> Option<Vec<u8>> {
            wire::write_frame(up, body).ok()?;
            wire::read_frame(up).ok()
        };
        Some(match verdict {
            Verdict::Refuse(r) => {
                self.refused(&r);
                vec![wire::FAILURE]
            }
            Verdict::Forward => ask()?,
            Verdict::Identities => {
                let answer = ask()?;
                match wire::identities(&answer) {
                    Some(ids) => {
                        let kept: Vec<_> = ids
                            .into_iter()
                            .filter(|(blob, _)| self.policy.key_allowed(blob))
                            .collect();
                        wire::identities_answer(&kept)
                    }
                    None => vec![wire::FAILURE],
                }
            }
            Verdict::Bind => {
                let wire::Request::Bind {
                    host_key,
                    session_id,
                    forwarding,
                } = req
                else {
                    return Some(vec![wire::FAILURE]);
                };
                let verified = ask()? == [wire::SUCCESS];
                state.bind(host_key, session_id, forwarding, verified);
                if !verified {
                    tracing::info!(
                        "ssh agent: the human's agent did not verify a session-bind (an agent \
                         older than OpenSSH 8.9?): logins on this connection are refused"
                    );
                }
                vec![if verified {
                    wire::SUCCESS
                } else {
                    wire::FAILURE
                }]
            }
        })
    }

    /// Log every refusal; alert once per kind of refusal and session.
    fn refused(&self, r: &Refusal) {
        let what = r.describe();
        tracing::info!("ssh agent: refused {what}");
        let first = self.alerted.lock().is_ok_and(|mut a| a.insert(r.class()));
        if !first {
            return;
        }
        let (runtime, session) = &self.alerts;
        let severity = if r.is_attempt() {
            Severity::High
        } else {
            Severity::Info
        };
        let detail = format!(
            "the jail asked the ssh agent for {what}; refused by the filter ([ssh] in your \
             configuration; docs/ssh.md). Further refusals of this kind in this session are logged, \
             not alerted."
        );
        let path = PathBuf::from(format!("ssh-agent:{}", r.class()));
        let alert = Alert::new(AlertKind::SshRefused, severity, &path, detail, session)
            .action(Action::Denied)
            .fingerprint(format!("ssh-refused:{session}:{}", r.class()));
        if let Err(e) = crate::alerts::Store::new(runtime).add(&alert) {
            tracing::warn!("ssh agent: the alert was not recorded: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent on a socket that answers every message with `answer`.
    fn agent(dir: &std::path::Path, answer: u8) -> std::path::PathBuf {
        let path = dir.join(format!("agent-{answer}.sock"));
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for mut c in l.incoming().flatten() {
                while wire::read_frame(&mut c).is_ok() {
                    if wire::write_frame(&mut c, &[answer]).is_err() {
                        break;
                    }
                }
            }
        });
        path
    }

    #[test]
    fn an_agent_that_accepts_a_forged_bind_is_found_and_one_that_verifies_is_not() {
        let d = tempfile::tempdir().unwrap();
        let mut key = Vec::new();
        wire::put_string(&mut key, b"ssh-ed25519");
        wire::put_string(&mut key, &[7u8; 32]);
        assert!(accepts_a_forged_bind(&agent(d.path(), wire::SUCCESS), &key));
        assert!(!accepts_a_forged_bind(
            &agent(d.path(), wire::FAILURE),
            &key
        ));
        assert!(!accepts_a_forged_bind(&d.path().join("none.sock"), &key));
    }
}
