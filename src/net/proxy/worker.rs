//! One connection after its head: the decision, the connection upstream, the relay. A thread each
//! (`serve::hand_off` bounds how many).

use super::http::{self, Body, Response, Target, Via};
use super::relay::{relay, End, Pass, Stage};
use super::serve::Head;
use super::{denial_sentence, socks, upstream, Failure, Route, Shared};
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How long a refusal or an error may take to write (the client may not be reading).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn serve(conn: UnixStream, head: Head, shared: &Shared) {
    if conn.set_nonblocking(false).is_err() {
        return;
    }
    let _ = conn.set_write_timeout(Some(ANSWER_TIMEOUT));
    match head {
        Head::Http { head, rest } => request(conn, &head, &rest, shared),
        Head::Socks { host, port, rest } => socks5(conn, &host, port, &rest, shared),
    }
}

fn answer(mut conn: UnixStream, bytes: &[u8]) {
    let _ = conn.write_all(bytes);
}

fn refusal(host: &str, port: u16, failure: &Failure) -> Vec<u8> {
    match failure {
        Failure::Refused(r) => http::respond("403 Forbidden", &denial_sentence(host, r)),
        Failure::Upstream(e) => http::respond(
            "502 Bad Gateway",
            &format!("claude-sandbox: {host}:{port} is allowed, but the connection failed: {e}\n"),
        ),
    }
}

fn request(mut conn: UnixStream, head: &[u8], rest: &[u8], shared: &Shared) {
    let bad =
        |e: http::BadRequest| http::respond("400 Bad Request", &format!("claude-sandbox: {e}\n"));
    let req = match http::parse(head) {
        Ok(r) => r,
        Err(e) => return answer(conn, &bad(e)),
    };
    let target = match req.target() {
        Ok(t) => t,
        Err(e) => return answer(conn, &bad(e)),
    };
    match target {
        Target::Connect { host, port } => {
            let mut up = match shared.open(&host, port, super::Purpose::Tunnel) {
                Ok(up) => up,
                Err(f) => return answer(conn, &refusal(&host, port, &f)),
            };
            if conn
                .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .is_err()
            {
                return;
            }
            let name = super::normalize(&host);
            if let Some(tls) = shared.inject.as_ref().filter(|t| t.intercepts(&name, port)) {
                // Records go out as soon as they are made (a handshake's last flight and the
                // request are two writes: Nagle would hold the second for the server's ACK).
                let _ = up.stream.set_nodelay(true);
                let (c, s) = (&mut conn, &mut up.stream);
                return super::inject::serve_intercepted(shared, tls, c, s, rest, &name, port);
            }
            relay(
                &mut conn,
                &mut up.stream,
                &mut Pass,
                &mut Pass,
                rest,
                End::BothClosed,
            );
        }
        Target::Absolute { host, port, path } => {
            let framing = match req.framing() {
                Ok(f) => f,
                Err(e) => return answer(conn, &bad(e)),
            };
            // A placeholder in plain HTTP is never replaced: it is going to the wrong place.
            let creds = shared
                .inject
                .as_ref()
                .map_or(&[][..], |t| &t.credentials[..]);
            if let Some(c) = super::inject::placeholder_in(head, creds) {
                let why = super::inject::Refused::Foreign {
                    owner: format!("{}:{}", c.host, c.port),
                };
                shared.credential_refused(&host, port, &why);
                return answer(conn, &http::respond("403 Forbidden", &why.sentence(&host)));
            }
            let mut up = match shared.open(&host, port, super::Purpose::Http) {
                Ok(up) => up,
                Err(f) => return answer(conn, &refusal(&host, port, &f)),
            };
            let (via, response) = match &up.route {
                Route::Direct => (Via::Direct, Response::default()),
                Route::Proxy { auth, shown } => (
                    Via::Proxy(auth.as_deref()),
                    Response::through_upstream(format!(
                        "claude-sandbox: {host}:{port} is allowed, but the upstream proxy {shown}: \
                         {}\n",
                        upstream::AUTH_REQUIRED
                    )),
                ),
            };
            let out = req.forward(&host, port, &path, via);
            if up.stream.write_all(&out).is_err() {
                return answer(
                    conn,
                    &refusal(&host, port, &Failure::Upstream("the server closed".into())),
                );
            }
            let mut body = BodyStage(Body::new(framing));
            let mut response = ResponseStage(response);
            relay(
                &mut conn,
                &mut up.stream,
                &mut body,
                &mut response,
                rest,
                End::ServerClosed,
            );
            if !body.0.done() {
                tracing::debug!("network: {host}:{port}: the request body did not end");
            }
        }
    }
}

/// The request's body, and nothing after it.
struct BodyStage(Body);

impl Stage for BodyStage {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()> {
        let (n, done) = self.0.take(input).map_err(|_| ())?;
        out.extend_from_slice(&input[..n]);
        Ok(done)
    }
}

/// The response, its final head with `Connection: close`.
struct ResponseStage(Response);

impl Stage for ResponseStage {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()> {
        self.0.feed(input, out)
    }
}

fn socks5(mut conn: UnixStream, host: &str, port: u16, rest: &[u8], shared: &Shared) {
    match shared.open(host, port, super::Purpose::Tunnel) {
        Ok(mut up) => {
            let name = super::normalize(host);
            let listed = shared.inject.as_ref().filter(|t| t.intercepts(&name, port));
            if conn.write_all(&socks::reply(0)).is_err() {
                return;
            }
            let (c, s) = (&mut conn, &mut up.stream);
            match listed {
                Some(tls) => {
                    let _ = s.set_nodelay(true);
                    super::inject::serve_intercepted(shared, tls, c, s, rest, &name, port);
                }
                None => relay(c, s, &mut Pass, &mut Pass, rest, End::BothClosed),
            }
        }
        // 2: "connection not allowed by ruleset"; SOCKS has no room for the sentence.
        Err(Failure::Refused(_)) => answer(conn, &socks::reply(2)),
        Err(Failure::Upstream(_)) => answer(conn, &socks::reply(4)),
    }
}
