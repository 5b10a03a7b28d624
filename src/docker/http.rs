//! HTTP/1.1 as the Docker API speaks it over a unix socket, as little as the filter needs: a
//! request read from the jail (`read_request`: the head, then the body by `Content-Length` or
//! chunked, both bounded), written on to the engine (`write_request`), and a response read whole
//! when the filter must look inside it (`read_response`).
//!
//! Guards against a request the judge did not see reaching the engine: a head past `MAX_HEAD`, a
//! body past `MAX_BODY`, both `Content-Length` and `Transfer-Encoding` (the smuggling pair), a
//! header line without a colon, and a request target that is not a path are each refused before
//! anything is forwarded; the request is written anew from what was parsed, `Connection: close`
//! (one request per connection: a second request on it would go unjudged).

use std::io::{BufRead, Read, Write};

/// The largest request head read.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// The largest request body read (a container's create body is a few KiB).
pub(crate) const MAX_BODY: usize = 1024 * 1024;

/// One request as parsed; `path` without the `/vN.NN` prefix, which is kept in `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    pub method: String,
    pub version: String,
    pub path: String,
    /// The query as sent, without `?`.
    pub query: String,
    /// Headers but `Content-Length`, `Transfer-Encoding` and `Connection`, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// `Upgrade: tcp` asked (attach's hijacked connection).
    pub upgrade: bool,
}

/// Why a request was not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The connection closed before a request began.
    Closed,
    Io(String),
    /// Not a request this filter reads (the reason).
    Bad(&'static str),
    TooLarge,
}

impl Request {
    /// A query parameter's value, decoded.
    pub(crate) fn param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (decode(k) == name).then(|| decode(v))
        })
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A query's key or value: `%XX` and `+` decoded, as the engine decodes them (a bad escape kept as
/// written: the engine drops that pair).
pub(crate) fn decode(v: &str) -> String {
    let v = v.replace('+', " ");
    crate::net::upstream::percent_decode(&v).map_or(v, |b| String::from_utf8_lossy(&b).into_owned())
}

/// Every byte but the unreserved ones escaped.
pub(crate) fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Read one request (head and body) from `r`.
pub(crate) fn read_request(r: &mut impl BufRead) -> Result<Request, ReadError> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let n = r
            .by_ref()
            .take((MAX_HEAD + 1 - head.len()) as u64)
            .read_until(b'\n', &mut head)
            .map_err(|e| ReadError::Io(e.to_string()))?;
        if n == 0 {
            return Err(if head.is_empty() {
                ReadError::Closed
            } else {
                ReadError::Bad("the connection closed inside the request head")
            });
        }
        if head.len() > MAX_HEAD {
            return Err(ReadError::TooLarge);
        }
        let line = &head[before..];
        if line == b"\r\n" || line == b"\n" {
            if before == 0 {
                head.clear(); // a blank line before the request line is tolerated (RFC 9112 2.2)
                continue;
            }
            break;
        }
    }
    let text = std::str::from_utf8(&head).map_err(|_| ReadError::Bad("a head not in UTF-8"))?;
    let mut lines = text.lines();
    let mut req = parse_request_line(lines.next().unwrap_or(""))?;
    let (mut length, mut chunked) = (None, false);
    for line in lines.filter(|l| !l.is_empty()) {
        let (k, v) = line
            .split_once(':')
            .ok_or(ReadError::Bad("a header line without a colon"))?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || k.contains(char::is_whitespace) {
            return Err(ReadError::Bad("a bad header name"));
        }
        if v.chars().any(|c| c.is_control() && c != '\t') {
            return Err(ReadError::Bad("a control character in a header"));
        }
        if k.eq_ignore_ascii_case("content-length") {
            let n: usize = v
                .parse()
                .map_err(|_| ReadError::Bad("a bad Content-Length"))?;
            if length.replace(n).is_some_and(|m| m != n) {
                return Err(ReadError::Bad("two Content-Lengths"));
            }
        } else if k.eq_ignore_ascii_case("transfer-encoding") {
            if !v.eq_ignore_ascii_case("chunked") {
                return Err(ReadError::Bad("a Transfer-Encoding other than chunked"));
            }
            chunked = true;
        } else if k.eq_ignore_ascii_case("connection") {
            req.upgrade |= v.to_ascii_lowercase().contains("upgrade");
        } else {
            req.headers.push((k.into(), v.into()));
        }
    }
    req.upgrade &= req
        .header("upgrade")
        .is_some_and(|u| u.eq_ignore_ascii_case("tcp"));
    req.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("upgrade"));
    req.body = match (length, chunked) {
        (Some(_), true) => return Err(ReadError::Bad("both Content-Length and chunked")),
        (Some(n), false) if n > MAX_BODY => return Err(ReadError::TooLarge),
        (Some(n), false) => {
            let mut b = vec![0; n];
            r.read_exact(&mut b)
                .map_err(|_| ReadError::Bad("the body ended early"))?;
            b
        }
        (None, true) => read_chunked(r, MAX_BODY)?,
        (None, false) => Vec::new(),
    };
    Ok(req)
}

fn parse_request_line(line: &str) -> Result<Request, ReadError> {
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(proto), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad("not a request line"));
    };
    if !proto.starts_with("HTTP/1.")
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
    {
        return Err(ReadError::Bad("not an HTTP/1 request"));
    }
    if !target.starts_with('/') || target.contains('#') {
        return Err(ReadError::Bad("a request target that is not a path"));
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if query.contains(';') {
        return Err(ReadError::Bad("a ';' in the query"));
    }
    let (version, path) = split_version(path);
    // The judge reads the path decoded: `%2F` and `..` must not hide a segment from it.
    let path = crate::net::upstream::percent_decode(path)
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or(ReadError::Bad("a bad escape in the path"))?;
    if path.split('/').any(|s| s == ".." || s == ".") {
        return Err(ReadError::Bad("a dot segment in the path"));
    }
    Ok(Request {
        method: method.into(),
        version: version.into(),
        path,
        query: query.into(),
        headers: Vec::new(),
        body: Vec::new(),
        upgrade: false,
    })
}

/// `/v1.43/containers/json` → (`/v1.43`, `/containers/json`).
fn split_version(path: &str) -> (&str, &str) {
    let Some(rest) = path.strip_prefix("/v") else {
        return ("", path);
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let v = &rest[..end];
    let numeric = v.split_once('.').is_some_and(|(a, b)| {
        !a.is_empty() && !b.is_empty() && (a.bytes().chain(b.bytes())).all(|c| c.is_ascii_digit())
    });
    if numeric {
        (&path[..end + 2], &path[end + 2..])
    } else {
        ("", path)
    }
}

/// A chunked body, at most `max` bytes, trailers skipped.
fn read_chunked(r: &mut impl BufRead, max: usize) -> Result<Vec<u8>, ReadError> {
    let bad = |_| ReadError::Bad("a bad chunk");
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        r.by_ref().take(1024).read_line(&mut line).map_err(bad)?;
        let size = line.trim_end().split(';').next().unwrap_or("");
        let n = usize::from_str_radix(size.trim(), 16)
            .map_err(|_| ReadError::Bad("a bad chunk size"))?;
        if n == 0 {
            loop {
                let mut t = String::new();
                if r.by_ref().take(1024).read_line(&mut t).map_err(bad)? == 0 || t.trim().is_empty()
                {
                    return Ok(body);
                }
            }
        }
        if body.len() + n > max {
            return Err(ReadError::TooLarge);
        }
        let at = body.len();
        body.resize(at + n, 0);
        r.read_exact(&mut body[at..]).map_err(bad)?;
        let mut crlf = [0; 2];
        r.read_exact(&mut crlf).map_err(bad)?;
        if crlf != *b"\r\n" {
            return Err(ReadError::Bad("a chunk not ended by CRLF"));
        }
    }
}

/// Write `req` to the engine: its path and query as given (the judge may have rewritten them),
/// the body with its length, `Connection: close` unless the connection is upgraded.
pub(crate) fn write_request(w: &mut impl Write, req: &Request) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let mut out = format!("{} {}{}", req.method, req.version, encode_path(&req.path));
    if !req.query.is_empty() {
        out.push('?');
        out.push_str(&req.query);
    }
    out.push_str(" HTTP/1.1\r\n");
    for (k, v) in &req.headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    if req.upgrade {
        out.push_str("Connection: Upgrade\r\nUpgrade: tcp\r\n");
    } else {
        out.push_str("Connection: close\r\n");
    }
    if !req.body.is_empty() || matches!(req.method.as_str(), "POST" | "PUT") {
        let _ = write!(out, "Content-Length: {}\r\n", req.body.len());
    }
    out.push_str("\r\n");
    w.write_all(out.as_bytes())?;
    w.write_all(&req.body)?;
    w.flush()
}

/// The path with each segment's reserved bytes escaped again (an image name's `/` stays a `/`).
fn encode_path(path: &str) -> String {
    path.split('/')
        .map(|s| {
            s.bytes()
                .map(|b| {
                    if b.is_ascii_alphanumeric() || b"-_.~:@+=,".contains(&b) {
                        (b as char).to_string()
                    } else {
                        format!("%{b:02X}")
                    }
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A response read whole (to the connection's end: requests are sent `Connection: close`): its
/// status, its raw bytes, and its body decoded.
pub(crate) struct Response {
    pub status: u16,
    pub raw: Vec<u8>,
    pub body: Vec<u8>,
}

/// Read a response whole, at most `MAX_BODY` bytes.
pub(crate) fn read_response(r: &mut impl Read) -> std::io::Result<Response> {
    let mut raw = Vec::new();
    r.take(MAX_BODY as u64).read_to_end(&mut raw)?;
    let bad = || std::io::Error::other("not an HTTP response");
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(bad)?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let rest = &raw[end + 4..];
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        read_chunked(&mut std::io::BufReader::new(rest), MAX_BODY).map_err(|_| bad())?
    } else {
        rest.to_vec()
    };
    Ok(Response { status, raw, body })
}

/// A Docker-style error response: `{"message": "..."}`.
pub(crate) fn error_response(status: u16, message: &str) -> Vec<u8> {
    let reason = match status {
        400 => "Bad Request",
        413 => "Payload Too Large",
        502 => "Bad Gateway",
        _ => "Forbidden",
    };
    let body = serde_json::json!({ "message": format!("claude-sandbox: {message}") }).to_string();
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &[u8]) -> Result<Request, ReadError> {
        read_request(&mut std::io::BufReader::new(s))
    }

    #[test]
    fn the_version_prefix_is_kept_apart_and_the_path_decoded() {
        let r =
            read(b"GET /v1.43/containers/abc/json?all=1 HTTP/1.1\r\nHost: docker\r\n\r\n").unwrap();
        assert_eq!(
            (r.version.as_str(), r.path.as_str()),
            ("/v1.43", "/containers/abc/json")
        );
        assert_eq!(r.param("all").as_deref(), Some("1"));
        assert_eq!(r.headers, [("Host".to_string(), "docker".to_string())]);
        let r = read(b"GET /_ping HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.version.as_str(), r.path.as_str()), ("", "/_ping"));
        // Not a version: `/vx/...` stays the path.
        assert_eq!(read(b"GET /v1/x HTTP/1.1\r\n\r\n").unwrap().path, "/v1/x");
        let r = read(b"POST /v1.41/containers/a%2Fb/start HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(r.path, "/containers/a/b/start", "decoded before judging");
        let mut out = Vec::new();
        write_request(&mut out, &r).unwrap();
        assert!(out.starts_with(b"POST /v1.41/containers/a/b/start HTTP/1.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"));
    }

    #[test]
    fn bodies_by_length_and_chunked_are_bounded() {
        let r = read(b"POST /containers/create HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!(r.body, b"{}");
        let r = read(b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n1;ext\r\n \r\n0\r\n\r\n").unwrap();
        assert_eq!(r.body, b"{} ");
        let big = format!(
            "POST /x HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_BODY + 1
        );
        assert_eq!(read(big.as_bytes()), Err(ReadError::TooLarge));
        let big = format!(
            "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
            MAX_BODY + 1
        );
        assert_eq!(read(big.as_bytes()), Err(ReadError::TooLarge));
        let head = format!("GET /x HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert_eq!(read(head.as_bytes()), Err(ReadError::TooLarge));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            &b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"GET /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"GET /x HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
            b"GET /x HTTP/1.1\r\nno colon\r\n\r\n",
            b"GET http://x/ HTTP/1.1\r\n\r\n",
            b"GET /containers/../images HTTP/1.1\r\n\r\n",
            b"GET /containers/%2e%2e/images HTTP/1.1\r\n\r\n",
            b"get /x HTTP/1.1\r\n\r\n",
            b"GET /x SPDY\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
            b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}",
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"GET /x HTTP/1.1\r\n",
            b"GET /containers/json?filters=a;filters=b HTTP/1.1\r\n\r\n",
            b"GET /containers/%zz/json HTTP/1.1\r\n\r\n",
            b"GET /x HTTP/1.1\r\nX: a\rb\r\n\r\n",
        ] {
            assert!(
                matches!(read(bad), Err(ReadError::Bad(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(read(b""), Err(ReadError::Closed));
    }

    #[test]
    fn an_upgrade_is_tcp_only() {
        let r = read(b"POST /containers/a/attach?stream=1 HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n").unwrap();
        assert!(r.upgrade && r.headers.is_empty());
        let r =
            read(b"GET /x HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n").unwrap();
        assert!(!r.upgrade);
    }

    #[test]
    fn a_response_is_read_whole() {
        let raw = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        let r = read_response(&mut &raw[..]).unwrap();
        assert_eq!((r.status, r.body.as_slice()), (201, &b"{\"a\":1}"[..]));
        assert!(read_response(&mut &b"garbage"[..]).is_err());
        let e = error_response(403, "no");
        assert!(String::from_utf8(e)
            .unwrap()
            .ends_with("{\"message\":\"claude-sandbox: no\"}"));
    }
}
