//! HTTP/1 as the proxy reads it: a request head, its target, its body's framing, the head sent on,
//! and the response head passed back. Pure: bytes in, decisions and bytes out.
//!
//! Guards against a second request riding on the first (pipelining, request smuggling): a head with
//! a lone CR or LF, a NUL, a folded header line, or both `Content-Length` and `Transfer-Encoding`
//! (or two lengths that differ) is refused, because a server downstream could read its end
//! elsewhere than the proxy does. The body is forwarded by its framing exactly, and nothing after it
//! is read: each request is one connection upstream, checked by its own authority, with
//! `Connection: close` both ways.

use std::fmt::Write as _;

/// The longest request or response head read (the rest of the connection waits until it is done).
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size or trailer line of a chunked body.
const MAX_LINE: usize = 4096;

/// Why a request is refused with `400 Bad Request` (the text is the response's body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum BadRequest {
    #[error("the request head is not HTTP/1.x text (a control character, a lone CR or LF, or a folded line)")]
    Malformed,
    #[error("the request line is not `METHOD TARGET HTTP/1.x`")]
    RequestLine,
    #[error(
        "this is the sandbox's egress proxy: send CONNECT host:port or an absolute http:// URL"
    )]
    Target,
    #[error("the request has both Content-Length and Transfer-Encoding, or lengths that differ")]
    AmbiguousLength,
    #[error("the request's Transfer-Encoding does not end in chunked")]
    Encoding,
    #[error("the request's chunked body is malformed")]
    Chunk,
    #[error("the request's Connection header names its own Content-Length or Transfer-Encoding")]
    HopFraming,
}

/// A request head, split.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub version: &'a str,
    pub headers: Vec<(&'a str, &'a str)>,
}

/// Where a request goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `CONNECT host:port`: a tunnel.
    Connect { host: String, port: u16 },
    /// `GET http://host[:port]/path`: forwarded, the path in origin form.
    Absolute {
        host: String,
        port: u16,
        path: String,
    },
}

/// How a request's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    None,
    Length(u64),
    Chunked,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Split a head that ends with its blank line (`\r\n\r\n`).
pub(super) fn parse(head: &[u8]) -> Result<Request<'_>, BadRequest> {
    let text = std::str::from_utf8(head).map_err(|_| BadRequest::Malformed)?;
    let text = text.strip_suffix("\r\n\r\n").ok_or(BadRequest::Malformed)?;
    // Tabs only in values; no other control character anywhere, and CR and LF only as the pairs
    // that split the lines.
    let control = |b: u8| (b < 0x20 && b != b'\t') || b == 0x7f;
    if text.split("\r\n").any(|l| l.bytes().any(control)) {
        return Err(BadRequest::Malformed);
    }
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(BadRequest::RequestLine);
    };
    if !is_token(method)
        || target.is_empty()
        || target.contains('\t')
        || !matches!(version, "HTTP/1.1" | "HTTP/1.0")
    {
        return Err(BadRequest::RequestLine);
    }
    let mut headers = Vec::new();
    for l in lines {
        if l.starts_with([' ', '\t']) {
            return Err(BadRequest::Malformed); // obsolete line folding
        }
        let (name, value) = l.split_once(':').ok_or(BadRequest::Malformed)?;
        if !is_token(name) {
            return Err(BadRequest::Malformed);
        }
        headers.push((name, value.trim_matches([' ', '\t'])));
    }
    Ok(Request {
        method,
        target,
        version,
        headers,
    })
}

impl Request<'_> {
    fn values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s str> + 's {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// CONNECT's authority or an absolute `http://` URL.
    pub(super) fn target(&self) -> Result<Target, BadRequest> {
        if self.method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) =
                super::split_host_port(self.target, None).ok_or(BadRequest::Target)?;
            return Ok(Target::Connect { host, port });
        }
        let after = self
            .target
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"))
            .map(|_| &self.target[7..])
            .ok_or(BadRequest::Target)?;
        let (authority, path) = match after.find(['/', '?']) {
            Some(i) if after.as_bytes()[i] == b'/' => (&after[..i], after[i..].to_string()),
            Some(i) => (&after[..i], format!("/{}", &after[i..])),
            None => (after, "/".to_string()),
        };
        let (host, port) = super::split_host_port(authority, Some(80)).ok_or(BadRequest::Target)?;
        Ok(Target::Absolute { host, port, path })
    }

    /// The body's framing (RFC 9112 §6): one reading only, or a refusal. A request whose
    /// `Connection` names its framing header is refused: `forward` drops what `Connection` names,
    /// so the server would read no body where the proxy sends one, and take the body for the next
    /// request (through an upstream proxy, to any host).
    pub(super) fn framing(&self) -> Result<Framing, BadRequest> {
        if self
            .values("connection")
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .any(|t| {
                t.eq_ignore_ascii_case("content-length")
                    || t.eq_ignore_ascii_case("transfer-encoding")
            })
        {
            return Err(BadRequest::HopFraming);
        }
        let codings: Vec<String> = self
            .values("transfer-encoding")
            .flat_map(|v| v.split(','))
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        let lengths: Vec<&str> = self
            .values("content-length")
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        if !codings.is_empty() {
            if !lengths.is_empty() || self.version == "HTTP/1.0" {
                return Err(BadRequest::AmbiguousLength);
            }
            let chunked = codings.iter().filter(|c| *c == "chunked").count();
            return if codings.last().is_some_and(|c| c == "chunked") && chunked == 1 {
                Ok(Framing::Chunked)
            } else {
                Err(BadRequest::Encoding)
            };
        }
        let Some(first) = lengths.first() else {
            return Ok(Framing::None);
        };
        if lengths.iter().any(|l| l != first)
            || first.is_empty()
            || !first.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(BadRequest::AmbiguousLength);
        }
        first
            .parse()
            .map(Framing::Length)
            .map_err(|_| BadRequest::AmbiguousLength)
    }

    /// The head sent on: origin form to the server (absolute form to an upstream proxy, with its
    /// credentials), `Host` the authority that was checked, hop-by-hop headers and the client's
    /// `Host` and proxy credentials dropped, `Connection: close`.
    pub(super) fn forward(&self, host: &str, port: u16, path: &str, via: Via<'_>) -> Vec<u8> {
        let shown = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let authority = if port == 80 {
            shown
        } else {
            format!("{shown}:{port}")
        };
        let named: Vec<String> = self
            .values("connection")
            .flat_map(|v| v.split(','))
            .map(|t| t.trim().to_ascii_lowercase())
            .collect();
        let mut out = match via {
            Via::Direct => format!("{} {path} {}\r\n", self.method, self.version),
            Via::Proxy(_) => format!(
                "{} http://{authority}{path} {}\r\n",
                self.method, self.version
            ),
        };
        let _ = write!(out, "Host: {authority}\r\n");
        for (name, value) in &self.headers {
            let lower = name.to_ascii_lowercase();
            if !HOP.contains(&lower.as_str()) && !named.contains(&lower) {
                let _ = write!(out, "{name}: {value}\r\n");
            }
        }
        if let Via::Proxy(Some(credentials)) = via {
            let _ = write!(out, "Proxy-Authorization: {credentials}\r\n");
        }
        out.push_str("Connection: close\r\n\r\n");
        out.into_bytes()
    }
}

/// Headers of one hop only: never sent on (nor the headers the request's `Connection` names).
const HOP: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "upgrade",
];

/// How a plain-HTTP request reaches its server.
#[derive(Debug, Clone, Copy)]
pub(super) enum Via<'a> {
    Direct,
    /// Through the launcher's upstream proxy, with its `Proxy-Authorization` value if it has one.
    Proxy(Option<&'a str>),
}

/// The request's body as it streams by: how much of each read belongs to it, and when it is over
/// (what follows is not read).
#[derive(Debug)]
pub(super) enum Body {
    Length(u64),
    Chunked(Chunked),
}

impl Body {
    pub(super) fn new(framing: Framing) -> Body {
        match framing {
            Framing::None => Body::Length(0),
            Framing::Length(n) => Body::Length(n),
            Framing::Chunked => Body::Chunked(Chunked::default()),
        }
    }

    /// How many bytes of `input` belong to the body (`consumed`), and whether it is complete.
    pub(super) fn take(&mut self, input: &[u8]) -> Result<(usize, bool), BadRequest> {
        match self {
            Body::Length(left) => {
                let n = usize::try_from(*left)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                *left -= n as u64;
                Ok((n, *left == 0))
            }
            Body::Chunked(c) => {
                let n = c.feed(input)?;
                Ok((n, c.done()))
            }
        }
    }

    pub(super) fn done(&self) -> bool {
        match self {
            Body::Length(left) => *left == 0,
            Body::Chunked(c) => c.done(),
        }
    }
}

/// A chunked body's decoder: it only finds where the body ends (the bytes go on as they are).
#[derive(Debug, Default)]
pub(super) struct Chunked {
    state: ChunkState,
    line: Vec<u8>,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum ChunkState {
    /// Reading a chunk-size line.
    #[default]
    Size,
    /// This many data bytes left.
    Data(u64),
    /// The CRLF after a chunk's data: how many of its two bytes were seen.
    DataEnd(u8),
    /// The trailer section's lines, until an empty one.
    Trailer,
    Done,
}

impl Chunked {
    fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consume what belongs to the body from `input`; returns how much.
    fn feed(&mut self, input: &[u8]) -> Result<usize, BadRequest> {
        let mut i = 0;
        while i < input.len() && self.state != ChunkState::Done {
            match self.state {
                ChunkState::Size | ChunkState::Trailer => {
                    let b = input[i];
                    i += 1;
                    self.line.push(b);
                    if self.line.len() > MAX_LINE {
                        return Err(BadRequest::Chunk);
                    }
                    if b != b'\n' {
                        continue;
                    }
                    let line = std::mem::take(&mut self.line);
                    let line = line.strip_suffix(b"\r\n").ok_or(BadRequest::Chunk)?;
                    if line.iter().any(|b| *b == b'\r' || *b == b'\n' || *b == 0) {
                        return Err(BadRequest::Chunk);
                    }
                    self.state = match self.state {
                        ChunkState::Size => {
                            let size = line.split(|b| *b == b';').next().unwrap_or_default();
                            let size = std::str::from_utf8(size)
                                .ok()
                                // Hex digits only (RFC 9112 §7.1): `from_str_radix` also takes
                                // a sign, which a server refuses or reads otherwise.
                                .filter(|s| {
                                    !s.is_empty()
                                        && s.len() <= 16
                                        && s.bytes().all(|b| b.is_ascii_hexdigit())
                                })
                                .and_then(|s| u64::from_str_radix(s, 16).ok())
                                .ok_or(BadRequest::Chunk)?;
                            if size == 0 {
                                ChunkState::Trailer
                            } else {
                                ChunkState::Data(size)
                            }
                        }
                        _ if line.is_empty() => ChunkState::Done,
                        _ => ChunkState::Trailer,
                    };
                }
                ChunkState::Data(left) => {
                    let n = usize::try_from(left)
                        .unwrap_or(usize::MAX)
                        .min(input.len() - i);
                    i += n;
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd(0)
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::DataEnd(seen) => {
                    let want = if seen == 0 { b'\r' } else { b'\n' };
                    if input[i] != want {
                        return Err(BadRequest::Chunk);
                    }
                    i += 1;
                    self.state = if seen == 0 {
                        ChunkState::DataEnd(1)
                    } else {
                        ChunkState::Size
                    };
                }
                ChunkState::Done => {}
            }
        }
        Ok(i)
    }
}

/// The response as it streams back: interim (1xx) heads pass as they are, the final head gets
/// `Connection: close` (the client must not send another request on this connection: it would not
/// be read), the rest passes.
#[derive(Debug, Default)]
pub(super) struct Response {
    buf: Vec<u8>,
    passing: bool,
    /// Through the launcher's upstream proxy: what the client reads instead of its `407` (the
    /// credentials are the launcher's, the client can do nothing with a challenge).
    instead_of_407: Option<String>,
}

impl Response {
    /// A response that came through the launcher's upstream proxy: its `407` becomes a `502`
    /// saying `sentence`.
    pub(super) fn through_upstream(sentence: String) -> Response {
        Response {
            instead_of_407: Some(sentence),
            ..Response::default()
        }
    }

    /// Add `input`; what may be sent to the client is appended to `out`. `Ok(true)`: the response
    /// was replaced, nothing more is to be read. An error: a head longer than `MAX_HEAD`.
    pub(super) fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()> {
        if self.passing {
            out.extend_from_slice(input);
            return Ok(false);
        }
        self.buf.extend_from_slice(input);
        loop {
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                if self.buf.len() > MAX_HEAD {
                    return Err(());
                }
                return Ok(false);
            };
            let head: Vec<u8> = self.buf.drain(..end + 4).collect();
            let text = String::from_utf8_lossy(&head);
            let status: Option<u16> = text
                .strip_prefix("HTTP/1.")
                .and_then(|r| r.get(2..5))
                .and_then(|s| s.parse().ok());
            match status {
                Some(s) if (100..200).contains(&s) && s != 101 => out.extend_from_slice(&head),
                Some(407) if self.instead_of_407.is_some() => {
                    let sentence = self.instead_of_407.take().unwrap_or_default();
                    out.extend_from_slice(&respond("502 Bad Gateway", &sentence));
                    self.buf.clear();
                    return Ok(true);
                }
                Some(_) => {
                    out.extend_from_slice(&close_head(&text));
                    out.append(&mut self.buf);
                    self.passing = true;
                    return Ok(false);
                }
                None => {
                    // Not an HTTP/1.x response: passed on as it is (the connection closes after it).
                    out.extend_from_slice(&head);
                    out.append(&mut self.buf);
                    self.passing = true;
                    return Ok(false);
                }
            }
        }
    }
}

fn close_head(text: &str) -> Vec<u8> {
    let body = text.strip_suffix("\r\n\r\n").unwrap_or(text);
    let mut out = String::new();
    for (i, line) in body.split("\r\n").enumerate() {
        let name = line.split(':').next().unwrap_or_default().trim();
        if i > 0
            && ["connection", "keep-alive", "proxy-connection"]
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// A response the proxy makes itself (a refusal, an error).
pub(super) fn respond(status: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Claude-Sandbox: network-policy\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
