//! The filter's process: executed by the launcher (`__ssh-agent`) for the session's life, with its
//! listening socket at fd 3 and its configuration on stdin; a thread per connection from the jail,
//! each with its own connection to the human's agent (a `session-bind` holds for the connection it
//! was made on).
//!
//! Guards against the jail reaching the launcher through the agent (whatever it makes the filter
//! hold, the filter holds), against a flood of connections (`MAX_CONNECTIONS` at once; more are
//! closed), and against an alert per message (one per kind of refusal and session). Started,
//! handed its configuration and ended as every per-session service is (`crate::service`).

use super::judge::{self, ConnState, Refusal, Verdict};
use super::{known_hosts, wire};
use crate::alerts::{Action, Alert, AlertKind, Severity};
use std::collections::BTreeSet;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// argv\[1\] of the executed filter.
pub(crate) const SUBCOMMAND: &str = "__ssh-agent";

/// Connections served at once; one more is closed as it comes.
const MAX_CONNECTIONS: usize = 64;

/// How long the filter waits for the human's agent to answer (a hardware key waits for a touch).
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(120);

/// What the executed filter reads on its stdin (`service::start`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Handover {
    upstream: PathBuf,
    policy: judge::Policy,
    entries: Vec<known_hosts::Entry>,
}

/// The filter a launch's policy asks for (`[ssh]`), started: served outside for the session's
/// life, killed when dropped.
pub(crate) fn for_policy(
    policy: &crate::jail::policy::Policy,
    runtime: &Path,
    session: &str,
) -> crate::error::Result<Option<crate::service::Running>> {
    let Some(filter) = &policy.ssh else {
        return Ok(None);
    };
    let err = |e: std::io::Error| {
        crate::error::Error::Jail(format!(
            "starting the filtering ssh agent in {}: {e}",
            filter.dir.display()
        ))
    };
    let listener =
        crate::service::bind(&filter.dir, crate::jail::layout::SSH_SOCKET).map_err(err)?;
    let handover = Handover {
        upstream: filter.upstream.clone(),
        policy: filter.policy.clone(),
        entries: filter.entries.clone(),
    };
    crate::service::start(SUBCOMMAND, &listener, handover, runtime, session)
        .map(Some)
        .map_err(err)
}

/// `claude-sandbox __ssh-agent`: the filter executed.
pub(crate) fn exec_main() -> i32 {
    let r = match crate::service::receive::<Handover>(SUBCOMMAND, "ssh agent") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut policy = r.body.policy;
    if let Some(host) = policy.hosts.first() {
        if accepts_a_forged_bind(&r.body.upstream, &host.blob) {
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
        upstream: r.body.upstream,
        policy,
        entries: r.body.entries,
        alerts: r.alerts,
        alerted: Mutex::new(BTreeSet::new()),
    });
    crate::service::serve_each(
        &r.listener,
        MAX_CONNECTIONS,
        "ssh-agent",
        &shared,
        Shared::connection,
    );
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
