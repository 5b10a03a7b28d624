//! The proxy's side of "use without reading" (`secrets::inject`): in the requests of a connection
//! it terminated (`tls`), each placeholder of the connection's own host is replaced by the real
//! value, in the `Authorization` header only and in three shapes (`Bearer PH`, `token PH`, the
//! password of `Basic`); and a placeholder anywhere else in a request head it sees, or one
//! belonging to another host, refuses the request.
//!
//! Guards against the real value leaving towards anyone but its own host, or coming back to the
//! jail: the substitution is decided per connection, on the host the proxy itself connected to and
//! verified, and only for a request whose `Host` and target name that host (a shared front end
//! routes by them: domain fronting); outside those shapes the value could be echoed back (a header
//! a server reflects, a URL it logs, a user name it greets), and `TRACE`/`TRACK` echo the whole
//! request, so those are refused, not replaced. What a request's body holds is passed as it is: a
//! placeholder there is worthless. Responses are not inspected (docs/network.md says why).

use super::http::{self, Body, Framing};
use crate::secrets::inject::Credential;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// It carried the placeholder of `owner`'s credential to another host.
    Foreign { owner: String },
    /// It carried its own host's placeholder outside `Authorization`.
    Misplaced,
    /// It carried its own host's placeholder in an `Authorization` value of another shape than
    /// `Bearer PH`, `token PH` or `Basic` with PH as the password, or in two of them.
    Shape,
    /// It carried its own host's placeholder but names another host (`Host`, absolute target).
    Addressed { named: String },
    /// A `TRACE` or `TRACK`, whose response shows the jail the request the server received.
    Echo,
    /// A head that does not parse (the proxy cannot decide on what it cannot read).
    Bad(String),
}

impl Refused {
    /// The sentence the refused client reads.
    pub(crate) fn sentence(&self, host: &str) -> String {
        let why = match self {
            Refused::Foreign { owner } => format!(
                "it carries the placeholder of the credential for {owner}; the sandbox puts a \
                 credential only into requests to its own host"
            ),
            Refused::Misplaced => "it carries the credential's placeholder outside the \
                                   `Authorization` header, where the sandbox never puts the \
                                   real value"
                .into(),
            Refused::Shape => "it carries the credential's placeholder in an `Authorization` \
                               value the sandbox does not fill (it fills `Bearer PH`, `token PH` \
                               and the password of `Basic`, once per request)"
                .into(),
            Refused::Addressed { named } => format!(
                "it carries the credential's placeholder but names another host ({named}); the \
                 sandbox puts a credential only into requests whose `Host` is the host connected to"
            ),
            Refused::Echo => "TRACE and TRACK are refused where the sandbox puts in credentials: \
                              their response shows the request as the server received it"
                .into(),
            Refused::Bad(e) => format!("its request head does not parse ({e})"),
        };
        format!(
            "claude-sandbox: the request to {host} was refused by the sandbox's credential guard: \
             {why}. This is a deliberate block, not a network fault.\n"
        )
    }
}

/// The credential whose placeholder `bytes` hold, if any (for a head the proxy forwards in plain
/// HTTP, where nothing is ever substituted).
pub(crate) fn placeholder_in<'c>(bytes: &[u8], creds: &'c [Credential]) -> Option<&'c Credential> {
    creds
        .iter()
        .find(|c| contains(bytes, c.placeholder.as_bytes()))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// The request stream of one terminated connection to `host:port`: heads rewritten, bodies passed.
pub(crate) struct Rewrite<'c> {
    host: String,
    port: u16,
    creds: &'c [Credential],
    head: Vec<u8>,
    body: Option<Body>,
    /// After a protocol switch (`Upgrade`): no more HTTP to read.
    opaque: bool,
}

impl<'c> Rewrite<'c> {
    pub(crate) fn new(host: &str, port: u16, creds: &'c [Credential]) -> Rewrite<'c> {
        Rewrite {
            host: host.to_string(),
            port,
            creds,
            head: Vec::new(),
            body: None,
            opaque: false,
        }
    }

    /// Take the next plaintext bytes from the client; append what goes to the server to `out`.
    pub(crate) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Refused> {
        let mut input = input.to_vec();
        loop {
            if self.opaque {
                out.extend_from_slice(&input);
                return Ok(());
            }
            if let Some(body) = &mut self.body {
                let (n, done) = body.take(&input).map_err(|e| Refused::Bad(e.to_string()))?;
                out.extend_from_slice(&input[..n]);
                input.drain(..n);
                if !done {
                    return Ok(());
                }
                self.body = None;
            }
            if input.is_empty() {
                return Ok(());
            }
            let from = self.head.len().saturating_sub(3);
            self.head.extend_from_slice(&input);
            let Some(end) = self.head[from..]
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| from + i + 4)
            else {
                if self.head.len() > http::MAX_HEAD {
                    return Err(Refused::Bad("the head is longer than 64 KiB".into()));
                }
                return Ok(());
            };
            input = self.head.split_off(end);
            let head = std::mem::take(&mut self.head);
            let (rewritten, framing, upgrade) = self.rewrite_head(&head)?;
            out.extend_from_slice(&rewritten);
            self.opaque = upgrade;
            self.body = Some(Body::new(framing));
        }
    }

    /// One head: its `Authorization` substituted, checked for placeholders elsewhere.
    fn rewrite_head(&self, head: &[u8]) -> Result<(Vec<u8>, Framing, bool), Refused> {
        use std::fmt::Write;
        let req = http::parse(head).map_err(|e| Refused::Bad(e.to_string()))?;
        let framing = req.framing().map_err(|e| Refused::Bad(e.to_string()))?;
        let upgrade = req
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("upgrade"));
        // A request the server sends back as it is would show the jail what was put in it.
        if is_echo(req.method) {
            return Err(Refused::Echo);
        }
        let own: Vec<&Credential> = self
            .creds
            .iter()
            .filter(|c| c.host == self.host && c.port == self.port)
            .collect();
        if own.iter().any(|c| contains(head, c.placeholder.as_bytes())) {
            self.addressed_here(&req)?;
        }
        let foreign = |bytes: &[u8]| {
            self.creds
                .iter()
                .filter(|c| !(c.host == self.host && c.port == self.port))
                .find(|c| contains(bytes, c.placeholder.as_bytes()))
                .map(|c| Refused::Foreign {
                    owner: format!("{}:{}", c.host, c.port),
                })
        };
        let text = String::from_utf8_lossy(head);
        let mut out = String::with_capacity(head.len() + 64);
        let mut substituted = false;
        for (i, line) in text.split_inclusive("\r\n").enumerate() {
            let header = (i > 0).then(|| line.split_once(':')).flatten();
            match header {
                Some((name, value)) if name.eq_ignore_ascii_case("authorization") => {
                    let value = value.trim_end_matches("\r\n").trim();
                    if let Some(r) = foreign(value.as_bytes()).or_else(|| foreign(&basic(value))) {
                        return Err(r);
                    }
                    let new = substitute(value, &own).ok_or(Refused::Shape)?;
                    if new != value {
                        if substituted {
                            return Err(Refused::Shape);
                        }
                        substituted = true;
                    }
                    let _ = write!(out, "{name}: {new}\r\n");
                }
                _ => {
                    if let Some(r) = foreign(line.as_bytes()) {
                        return Err(r);
                    }
                    if own.iter().any(|c| line.contains(&c.placeholder)) {
                        return Err(Refused::Misplaced);
                    }
                    out.push_str(line);
                }
            }
        }
        Ok((out.into_bytes(), framing, upgrade))
    }

    /// A request that carries this connection's placeholder names, in its one `Host` header and in
    /// any absolute-form target, the host the proxy connected to: a shared front end routes by
    /// those names, and would hand the credential to whichever site they name.
    fn addressed_here(&self, req: &http::Request<'_>) -> Result<(), Refused> {
        let hosts: Vec<&str> = req
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
            .map(|(_, v)| *v)
            .collect();
        let [host] = hosts[..] else {
            return Err(Refused::Addressed {
                named: format!("{} Host headers", hosts.len()),
            });
        };
        let mut named = vec![host];
        if !req.target.starts_with('/') && req.target != "*" {
            named.push(absolute_authority(req.target));
        }
        let here = (super::normalize(&self.host), self.port);
        for n in named {
            let parsed = (!n.contains('@'))
                .then(|| super::split_host_port(n, Some(443)))
                .flatten()
                .map(|(h, p)| (super::normalize(&h), p));
            if parsed.as_ref() != Some(&here) {
                // The jail's bytes: shown escaped and cut short in the log and the alert.
                let shown: String = crate::escape::visible(n).chars().take(100).collect();
                return Err(Refused::Addressed { named: shown });
            }
        }
        Ok(())
    }
}

/// Methods whose response is the request itself (`TRACK` is IIS's `TRACE`).
fn is_echo(method: &str) -> bool {
    method.eq_ignore_ascii_case("TRACE") || method.eq_ignore_ascii_case("TRACK")
}

/// The authority of an absolute-form target (`https://host:port/path`); the whole target when it
/// has no `scheme://` (which then names no host the proxy accepts).
fn absolute_authority(target: &str) -> &str {
    let Some((_, rest)) = target.split_once("://") else {
        return target;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// An `Authorization` value with its own host's placeholder replaced, in the three shapes a client
/// sends a token in: `Bearer PH`, `token PH` (either case), and as the password of `Basic
/// base64(user:PH)`. `None` when a placeholder is anywhere else in it (a Basic user name, a Digest
/// parameter): a server may show those back (a "logged in as" page, an error), so they are refused,
/// not replaced. A value without a placeholder is returned as it is.
pub(crate) fn substitute(value: &str, own: &[&Credential]) -> Option<String> {
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    let rest = rest.trim();
    let tokenish = scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token");
    if tokenish {
        if let Some(c) = own.iter().find(|c| rest == c.placeholder) {
            return Some(format!("{scheme} {}", c.secret));
        }
    }
    let decoded = basic(value);
    if let Some(i) = decoded.iter().position(|b| *b == b':') {
        let (user, pass) = (&decoded[..i], &decoded[i + 1..]);
        let in_user = own.iter().any(|c| contains(user, c.placeholder.as_bytes()));
        if let Some(c) = own.iter().find(|c| pass == c.placeholder.as_bytes()) {
            if in_user {
                return None;
            }
            let mut plain = user.to_vec();
            plain.push(b':');
            plain.extend_from_slice(c.secret.as_bytes());
            return Some(format!("{scheme} {}", crate::net::upstream::base64(&plain)));
        }
    }
    let anywhere = |bytes: &[u8]| {
        own.iter()
            .any(|c| contains(bytes, c.placeholder.as_bytes()))
    };
    if anywhere(value.as_bytes()) || anywhere(&decoded) {
        return None;
    }
    Some(value.to_string())
}

/// A `Basic` value's decoded credentials (empty when it is not one).
fn basic(value: &str) -> Vec<u8> {
    match value.split_once(' ') {
        Some((scheme, b64)) if scheme.eq_ignore_ascii_case("basic") => {
            base64_decode(b64.trim()).unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

/// Standard base64 with optional padding (RFC 4648); `None` for anything else.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    };
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// Serve a CONNECT to a host whose TLS the proxy terminates; a refusal is logged and alerted.
pub(super) fn serve_intercepted<C, S>(
    shared: &super::Shared,
    tls: &super::tls::Tls,
    client: &mut C,
    server: &mut S,
    first: &[u8],
    host: &str,
    port: u16,
) where
    C: std::io::Read + std::io::Write + std::os::fd::AsFd + super::relay::Shut,
    S: std::io::Read + std::io::Write + std::os::fd::AsFd + super::relay::Shut,
{
    tracing::info!("network: {host}:{port}: TLS terminated to inject its credential");
    match super::tls::intercept(tls, client, server, first, host, port) {
        Ok(()) => {}
        Err(super::tls::Ended::Refused(r)) => shared.credential_refused(host, port, &r),
        Err(super::tls::Ended::Failed(e)) => {
            tracing::info!("network: {host}:{port}: the terminated connection failed: {e}");
        }
    }
}

impl super::Shared {
    /// A request refused by the credential guard: logged, counted in the summary, alerted once
    /// per host and session (as the policy's refusals are).
    pub(super) fn credential_refused(&self, host: &str, port: u16, why: &Refused) {
        use crate::alerts::{Action, Alert, AlertKind, Severity};
        let sentence = why.sentence(&format!("{host}:{port}"));
        tracing::warn!("network: refused a request to {host}:{port}: {why:?}");
        let first = self.denied.lock().is_ok_and(|mut d| {
            let e = d
                .entry(host.to_string())
                .or_insert((0, "a credential's placeholder".into()));
            e.0 += 1;
            e.0 == 1
        });
        let Some((runtime, session)) = self.alerts.as_ref().filter(|_| first) else {
            return;
        };
        let path = std::path::PathBuf::from(format!("{host}:{port}"));
        let alert = Alert {
            id: crate::alerts::new_id("n"),
            ..Alert::new(
                AlertKind::NetworkDenied,
                Severity::High,
                &path,
                sentence.trim_end().to_string(),
                session,
            )
        }
        .action(Action::Denied)
        .fingerprint(format!("network:{session}:{host}:placeholder"));
        if let Err(e) = crate::alerts::Store::new(runtime).add(&alert) {
            tracing::warn!("network: the alert for {host} was not recorded: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
