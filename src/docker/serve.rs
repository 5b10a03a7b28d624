//! The Docker filter's process: executed by the launcher (`__docker`) for the session's life
//! (`crate::service`); one request per connection from the jail, judged (`judge`), then forwarded
//! on a connection of its own to the engine and its response relayed as it streams (logs, wait),
//! or, for attach, the connection hijacked both ways after the engine's `101`.
//!
//! Guards against a second request on a connection going unjudged (each is sent to the engine with
//! `Connection: close` and the jail's connection is closed after its response), against a flood of
//! connections (`MAX_CONNECTIONS`; a request head is waited for `HEAD_TIMEOUT` at most), and
//! against an alert per request (one per kind of refusal and session; every refusal is logged).

use super::http::{self, ReadError};
use super::judge::{self, Refusal, SessionState, Verdict};
use crate::alerts::{Action, Alert, AlertKind, Severity};
use std::collections::BTreeSet;
use std::io::{BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// argv\[1\] of the executed filter.
pub(crate) const SUBCOMMAND: &str = "__docker";

const MAX_CONNECTIONS: usize = 64;
const HEAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What the executed filter reads on its stdin (`service::start`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Handover {
    upstream: PathBuf,
    policy: judge::Policy,
}

/// The filter a launch's policy asks for (`[containers] docker`), started.
pub(crate) fn for_policy(
    policy: &crate::jail::policy::Policy,
    runtime: &Path,
    session: &str,
) -> crate::error::Result<Option<super::Running>> {
    let Some(filter) = &policy.docker else {
        return Ok(None);
    };
    let err = |e: std::io::Error| {
        crate::error::Error::Jail(format!(
            "starting the Docker filter in {}: {e}",
            filter.dir.display()
        ))
    };
    super::sweep(&filter.upstream, runtime, session);
    let listener =
        crate::service::bind(&filter.dir, crate::jail::layout::DOCKER_SOCKET).map_err(err)?;
    let handover = Handover {
        upstream: filter.upstream.clone(),
        policy: judge::Policy {
            session: session.to_string(),
            runtime: runtime.display().to_string(),
            isolated: filter.isolated,
        },
    };
    let running =
        crate::service::start(SUBCOMMAND, &listener, handover, runtime, session).map_err(err)?;
    Ok(Some(super::Running {
        service: Some(running),
        upstream: filter.upstream.clone(),
        session: session.to_string(),
    }))
}

/// `claude-sandbox __docker`: the filter executed.
pub(crate) fn exec_main() -> i32 {
    let r = match crate::service::receive::<Handover>(SUBCOMMAND, "Docker filter") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let shared = Arc::new(Shared {
        upstream: r.body.upstream,
        policy: r.body.policy,
        state: Mutex::new(SessionState::default()),
        alerts: r.alerts,
        alerted: Mutex::new(BTreeSet::new()),
    });
    crate::service::serve_each(
        &r.listener,
        MAX_CONNECTIONS,
        "docker",
        &shared,
        Shared::connection,
    );
    0
}

struct Shared {
    upstream: PathBuf,
    policy: judge::Policy,
    state: Mutex<SessionState>,
    alerts: (PathBuf, String),
    alerted: Mutex<BTreeSet<&'static str>>,
}

impl Shared {
    fn connection(&self, jail: UnixStream) {
        let _ = jail.set_read_timeout(Some(HEAD_TIMEOUT));
        let Ok(read_half) = jail.try_clone() else {
            return;
        };
        let mut reader = BufReader::new(read_half);
        let mut jail = jail;
        let req = match http::read_request(&mut reader) {
            Ok(r) => r,
            Err(ReadError::Closed | ReadError::Io(_)) => return,
            Err(ReadError::TooLarge) => {
                let _ = jail.write_all(&http::error_response(413, "request too large"));
                return;
            }
            Err(ReadError::Bad(why)) => {
                tracing::info!("docker filter: a bad request from the jail: {why}");
                let _ = jail.write_all(&http::error_response(400, why));
                return;
            }
        };
        let _ = jail.set_read_timeout(None);
        let verdict = match self.state.lock() {
            Ok(state) => judge::judge(&req, &self.policy, &state),
            Err(_) => return,
        };
        let forwarded = match &verdict {
            Verdict::Refuse(r) => {
                self.refused(r);
                let _ = jail.write_all(&http::error_response(403, &r.describe()));
                return;
            }
            Verdict::Forward(r) | Verdict::Create(r, _) | Verdict::Upgrade(r) => r,
        };
        tracing::debug!(
            "docker filter: {} {}",
            req.method,
            crate::escape::visible(&req.path)
        );
        let mut up = match UnixStream::connect(&self.upstream) {
            Ok(u) => u,
            Err(e) => {
                let why = format!("the Docker engine does not answer: {e}");
                let _ = jail.write_all(&http::error_response(502, &why));
                return;
            }
        };
        if http::write_request(&mut up, forwarded).is_err() {
            return;
        }
        match verdict {
            Verdict::Create(_, name) => {
                let Ok(resp) = http::read_response(&mut up) else {
                    return;
                };
                if resp.status == 201 {
                    let id = serde_json::from_slice::<serde_json::Value>(&resp.body)
                        .ok()
                        .and_then(|v| v.get("Id")?.as_str().map(str::to_string));
                    if let (Some(id), Ok(mut s)) = (id, self.state.lock()) {
                        s.created(&id, name);
                    }
                }
                let _ = jail.write_all(&resp.raw);
            }
            Verdict::Upgrade(_) => hijack(reader, jail, up),
            _ => {
                let _ = std::io::copy(&mut up, &mut jail);
            }
        }
    }

    /// Log every refusal; alert once per kind of refusal and session.
    fn refused(&self, r: &Refusal) {
        let what = crate::escape::visible(&r.describe()).into_owned();
        tracing::info!("docker filter: refused {what}");
        if !self.alerted.lock().is_ok_and(|mut a| a.insert(r.class())) {
            return;
        }
        let (runtime, session) = &self.alerts;
        let severity = if r.is_high() {
            Severity::High
        } else {
            Severity::Info
        };
        let detail = format!(
            "the jail asked the Docker engine for {what}; refused by the filter ([containers] in \
             your configuration; docs/containers.md). Further refusals of this kind in this \
             session are logged, not alerted."
        );
        let path = PathBuf::from(format!("docker:{}", r.class()));
        let alert = Alert::new(AlertKind::DockerRefused, severity, &path, detail, session)
            .action(Action::Denied)
            .fingerprint(format!("docker-refused:{session}:{}", r.class()));
        if let Err(e) = crate::alerts::Store::new(runtime).add(&alert) {
            tracing::warn!("docker filter: the alert was not recorded: {e}");
        }
    }
}

/// The head of the engine's answer to an attach, and any bytes read past it; `None`: no whole
/// head within 64 KiB.
fn engine_head(up: &mut UnixStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    while got.len() < 64 * 1024 {
        let n = up.read(&mut buf).ok().filter(|n| *n > 0)?;
        got.extend_from_slice(&buf[..n]);
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(i + 4);
            return Some((got, rest));
        }
    }
    None
}

/// Whether an answer's head takes the connection over: `101`, or a `200` of the raw stream.
pub(crate) fn takes_over(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    let status = text.split_whitespace().nth(1).unwrap_or_default();
    status == "101"
        || (status == "200"
            && text
                .lines()
                .any(|l| l.starts_with("content-type:") && l.contains("application/vnd.docker.")))
}

/// Attach after the engine's answer: bytes both ways until the engine closes (the jail's side
/// half-closed on its own end of file, as the docker CLI closes stdin). Only once the engine has
/// taken the connection over: an attach it refused (a 400) leaves its HTTP connection open, and
/// what the jail sent next would be read there as a request nobody judged. Then the answer goes
/// back and both ends are closed.
fn hijack(mut from_jail: BufReader<UnixStream>, mut jail: UnixStream, mut up: UnixStream) {
    let Some((head, rest)) = engine_head(&mut up) else {
        let _ = jail.shutdown(std::net::Shutdown::Both);
        return;
    };
    let _ = jail.write_all(&head);
    let _ = jail.write_all(&rest);
    if !takes_over(&head) {
        // Not taken over: the rest of a short answer (an error's JSON), then nothing more.
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let length = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        if rest.len() < length {
            let _ = up.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let mut buf = [0; 16 * 1024];
            if let Ok(n) = up.read(&mut buf) {
                let _ = jail.write_all(&buf[..n]);
            }
        }
        let _ = jail.shutdown(std::net::Shutdown::Both);
        let _ = up.shutdown(std::net::Shutdown::Both);
        return;
    }
    let Ok(mut up_w) = up.try_clone() else {
        return;
    };
    let to_engine = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_jail, &mut up_w);
        let _ = up_w.shutdown(std::net::Shutdown::Write);
    });
    let mut buf = [0; 16 * 1024];
    loop {
        match up.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if jail.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = jail.shutdown(std::net::Shutdown::Both);
    let _ = up.shutdown(std::net::Shutdown::Both);
    let _ = to_engine.join();
}
