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
                return Err(Refused::Addressed { named: n.into() });
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
mod tests {
    use super::*;
    use crate::net::upstream::base64;

    fn cred(host: &str, ph: &str, secret: &str) -> Credential {
        Credential {
            host: host.into(),
            port: 443,
            placeholder: ph.into(),
            secret: secret.into(),
            source: "test".into(),
        }
    }

    fn creds() -> Vec<Credential> {
        vec![
            cred("git.test", "csb-ph-aaaa", "REAL-GIT"),
            cred("npm.test", "csb-ph-bbbb", "REAL-NPM"),
        ]
    }

    fn run(host: &str, input: &[&[u8]]) -> Result<String, Refused> {
        let c = creds();
        let mut r = Rewrite::new(host, 443, &c);
        let mut out = Vec::new();
        for chunk in input {
            r.feed(chunk, &mut out)?;
        }
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn base64_round_trips() {
        for s in ["", "a", "ab", "abc", "user:csb-ph-aaaa", "x\u{e9}y:z"] {
            assert_eq!(base64_decode(&base64(s.as_bytes())).unwrap(), s.as_bytes());
        }
        assert_eq!(base64_decode("dXNlcg").unwrap(), b"user");
        assert_eq!(base64_decode("@@@@"), None);
        assert_eq!(base64_decode("abcde"), None);
    }

    #[test]
    fn the_own_placeholder_is_replaced_in_authorization_bearer_and_basic() {
        let basic = base64(b"me:csb-ph-aaaa");
        let head = format!(
            "GET /a HTTP/1.1\r\nHost: git.test\r\nAuthorization: Basic {basic}\r\n\r\n\
             POST /b HTTP/1.1\r\nHost: git.test\r\nauthorization: Bearer csb-ph-aaaa\r\n\
             Content-Length: 16\r\n\r\nbody csb-ph-aaaa"
        );
        // Split anywhere: the rewrite keeps state across reads.
        let (a, b) = head.as_bytes().split_at(37);
        let out = run("git.test", &[a, b]).unwrap();
        assert!(
            out.contains(&format!(
                "Authorization: Basic {}\r\n",
                base64(b"me:REAL-GIT")
            )),
            "{out}"
        );
        assert!(out.contains("authorization: Bearer REAL-GIT\r\n"), "{out}");
        // A body passes as it is (the placeholder there is worthless).
        assert!(out.ends_with("\r\n\r\nbody csb-ph-aaaa"), "{out}");
    }

    #[test]
    fn another_hosts_placeholder_or_one_outside_authorization_is_refused() {
        let foreign =
            "GET / HTTP/1.1\r\nHost: git.test\r\nAuthorization: Bearer csb-ph-bbbb\r\n\r\n";
        assert_eq!(
            run("git.test", &[foreign.as_bytes()]),
            Err(Refused::Foreign {
                owner: "npm.test:443".into()
            })
        );
        let basic = format!(
            "GET / HTTP/1.1\r\nAuthorization: Basic {}\r\n\r\n",
            base64(b"u:csb-ph-aaaa")
        );
        assert!(matches!(
            run("npm.test", &[basic.as_bytes()]),
            Err(Refused::Foreign { .. })
        ));
        let in_url = "GET /?t=csb-ph-bbbb HTTP/1.1\r\nHost: git.test\r\n\r\n";
        assert!(matches!(
            run("git.test", &[in_url.as_bytes()]),
            Err(Refused::Foreign { .. })
        ));
        let echoed = "GET / HTTP/1.1\r\nHost: git.test\r\nX-Echo: csb-ph-aaaa\r\n\r\n";
        assert_eq!(
            run("git.test", &[echoed.as_bytes()]),
            Err(Refused::Misplaced)
        );
        assert!(matches!(
            run("git.test", &[b"garbage\r\n\r\n"]),
            Err(Refused::Bad(_))
        ));
    }

    #[test]
    fn a_head_without_placeholders_passes_unchanged_and_chunked_bodies_are_followed() {
        let req = "POST /x HTTP/1.1\r\nHost: git.test\r\nTransfer-Encoding: chunked\r\n\r\n\
                   5\r\nhello\r\n0\r\n\r\nGET /y HTTP/1.1\r\nHost: git.test:443\r\n\
                   Authorization: token csb-ph-aaaa\r\n\r\n";
        let out = run("git.test", &[req.as_bytes()]).unwrap();
        assert_eq!(out, req.replace("csb-ph-aaaa", "REAL-GIT"));
    }

    fn with_auth(host_lines: &str, auth: &str) -> String {
        format!("GET / HTTP/1.1\r\n{host_lines}Authorization: {auth}\r\n\r\n")
    }

    #[test]
    fn the_placeholder_is_sent_only_where_host_and_target_name_the_connected_host() {
        let bearer = "Bearer csb-ph-aaaa";
        for ok in ["Host: git.test\r\n", "Host: GIT.test.:443\r\n"] {
            let out = run("git.test", &[with_auth(ok, bearer).as_bytes()]).unwrap();
            assert!(out.contains("Bearer REAL-GIT"), "{ok}: {out}");
        }
        for bad in [
            "Host: evil.test\r\n",
            "Host: git.test:8443\r\n",
            "Host: me@git.test\r\n",
            "",
            "Host: git.test\r\nHost: git.test\r\n",
        ] {
            assert!(
                matches!(
                    run("git.test", &[with_auth(bad, bearer).as_bytes()]),
                    Err(Refused::Addressed { .. })
                ),
                "{bad:?}"
            );
        }
        let absolute = |target: &str| {
            format!("GET {target} HTTP/1.1\r\nHost: git.test\r\nAuthorization: {bearer}\r\n\r\n")
        };
        assert!(run("git.test", &[absolute("https://git.test/x").as_bytes()]).is_ok());
        for bad in [
            "https://evil.test/x",
            "https://git.test@evil.test/",
            "evil.test:443",
        ] {
            assert!(
                matches!(
                    run("git.test", &[absolute(bad).as_bytes()]),
                    Err(Refused::Addressed { .. })
                ),
                "{bad}"
            );
        }
        // Without a placeholder nothing is sent, so nothing is checked.
        let plain = "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n";
        assert_eq!(run("git.test", &[plain.as_bytes()]).unwrap(), plain);
    }

    #[test]
    fn trace_and_track_are_refused() {
        for m in ["TRACE", "track"] {
            let head = format!(
                "{m} / HTTP/1.1\r\nHost: git.test\r\nAuthorization: Bearer csb-ph-aaaa\r\n\r\n"
            );
            assert_eq!(
                run("git.test", &[head.as_bytes()]),
                Err(Refused::Echo),
                "{m}"
            );
        }
    }

    #[test]
    fn only_bearer_token_and_the_basic_password_are_filled() {
        let h = "Host: git.test\r\n";
        for good in ["bearer csb-ph-aaaa", "TOKEN csb-ph-aaaa"] {
            assert!(
                run("git.test", &[with_auth(h, good).as_bytes()])
                    .unwrap()
                    .contains("REAL-GIT"),
                "{good}"
            );
        }
        let refused = [
            format!("Basic {}", base64(b"csb-ph-aaaa:x")),
            format!("Basic {}", base64(b"csb-ph-aaaa:csb-ph-aaaa")),
            format!("Basic {}", base64(b"u:xcsb-ph-aaaa")),
            "Digest username=\"csb-ph-aaaa\", realm=\"r\"".into(),
            "Bearer csb-ph-aaaa csb-ph-aaaa".into(),
            "Bearer xcsb-ph-aaaa".into(),
        ];
        for bad in &refused {
            assert_eq!(
                run("git.test", &[with_auth(h, bad).as_bytes()]),
                Err(Refused::Shape),
                "{bad}"
            );
        }
        let twice = format!("{h}Authorization: Bearer csb-ph-aaaa\r\n");
        assert_eq!(
            run(
                "git.test",
                &[with_auth(&twice, "token csb-ph-aaaa").as_bytes()]
            ),
            Err(Refused::Shape)
        );
        // One filled, another Authorization without a placeholder: passed (the server decides).
        let other = format!("{h}Authorization: Bearer unrelated\r\n");
        assert!(run(
            "git.test",
            &[with_auth(&other, "token csb-ph-aaaa").as_bytes()]
        )
        .is_ok());
    }

    #[test]
    fn a_plain_head_with_any_placeholder_is_found() {
        let c = creds();
        let got = placeholder_in(b"GET http://x/ HTTP/1.1\r\nA: csb-ph-bbbb\r\n\r\n", &c);
        assert_eq!(got.map(|c| c.host.as_str()), Some("npm.test"));
        assert!(placeholder_in(b"GET / HTTP/1.1\r\n\r\n", &c).is_none());
    }
}
