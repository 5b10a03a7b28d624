//! The proxy's HTTP/1 and SOCKS5 readers on hostile bytes (issue 38, item 3; runner and seeds in
//! `crate::fuzz`). Beyond "no panic": a request the proxy accepts and sends on must be read by the
//! server exactly as the proxy read it (the same method, one `Host` that is the checked authority,
//! the same body framing, so nothing rides on the body), and SOCKS5 must answer `More` for every
//! prefix of a request and the same request for the whole of it.

use super::http::{self, Body, Framing, Response, Target, Via};
use super::socks::{self, Step};
use crate::fuzz::{check, mutated, seeds};
use proptest::prelude::*;

const METHODS: &[&str] = &["GET", "POST", "CONNECT", "PUT", "get", "G\u{e9}T", ""];
const TARGETS: &[&str] = &[
    "http://allowed.test/p",
    "http://allowed.test:8080/p?q",
    "http://allowed.test?q",
    "HTTP://allowed.test",
    "http://[::1]:80/x",
    "http://a@evil.test/",
    "allowed.test:443",
    "/relative",
    "*",
];
const HEADERS: &[&str] = &[
    "Host: evil.test",
    "Content-Length: 5",
    "Content-Length: 5, 5",
    "Content-Length: 6",
    "Content-Length: +5",
    "Transfer-Encoding: chunked",
    "Transfer-Encoding: gzip, chunked",
    "Transfer-Encoding: chunked, gzip",
    "Connection: close",
    "Connection: keep-alive, x-a",
    "Connection: content-length",
    "Connection: transfer-encoding",
    "Connection: host",
    "X-A: 1",
    "Proxy-Authorization: Basic eA==",
    "Upgrade: websocket",
    "TE: trailers",
    " folded",
    "X-B:\tv\t",
    "X:y\rz",
    "X: a\nb",
];

fn head() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(METHODS),
        proptest::sample::select(TARGETS),
        proptest::sample::select(&["HTTP/1.1", "HTTP/1.0", "HTTP/2"][..]),
        proptest::collection::vec(proptest::sample::select(HEADERS), 0..6),
    )
        .prop_map(|(m, t, v, h)| {
            let mut s = format!("{m} {t} {v}\r\n");
            for h in h {
                s.push_str(h);
                s.push_str("\r\n");
            }
            s.push_str("\r\n");
            s.into_bytes()
        })
}

fn request_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => head(),
        1 => mutated(seeds("http"), 4),
        1 => head().prop_flat_map(|h| (Just(h.clone()), proptest::collection::vec(crate::fuzz::edit_strategy(), 1..3)))
            .prop_map(|(h, e)| crate::fuzz::apply_edits(h, &e)),
    ]
}

#[test]
fn what_the_proxy_sends_on_is_read_by_the_server_as_the_proxy_read_it() {
    check("http", 2048, request_bytes(), |bytes| {
        let Ok(req) = http::parse(&bytes) else {
            return Ok(());
        };
        let framing = req.framing();
        let Ok(Target::Absolute { host, port, path }) = req.target() else {
            return Ok(());
        };
        let Ok(framing) = framing else {
            return Ok(());
        };
        for via in [Via::Direct, Via::Proxy(Some("Basic cA=="))] {
            let sent = req.forward(&host, port, &path, via);
            let server = http::parse(&sent).map_err(|e| {
                TestCaseError::fail(format!(
                    "the server cannot read what was sent ({e}): {}",
                    sent.escape_ascii()
                ))
            })?;
            prop_assert_eq!(server.method, req.method);
            prop_assert_eq!(
                server.framing(),
                Ok(framing),
                "the body is framed differently downstream: {}",
                sent.escape_ascii()
            );
            let hosts: Vec<&str> = server
                .headers
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case("host"))
                .map(|(_, v)| *v)
                .collect();
            prop_assert_eq!(hosts.len(), 1, "{}", sent.escape_ascii());
            // The checked authority, written as the URL's authority is (an IPv6 address in
            // brackets, the port unless it is 80).
            let shown = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            let authority = if port == 80 {
                shown
            } else {
                format!("{shown}:{port}")
            };
            prop_assert_eq!(hosts[0], authority.as_str(), "{}", sent.escape_ascii());
        }
        Ok(())
    });
}

/// A chunked body: chunks of the given sizes, each size written as a server would read it.
fn chunked() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    (
        proptest::collection::vec(
            (
                0usize..40,
                proptest::sample::select(&["", "", "0", "+", "-", " ", "0x"][..]),
            ),
            0..4,
        ),
        proptest::sample::select(&["", ";ext=1", ";e"][..]),
        proptest::collection::vec(any::<u8>(), 0..10),
        proptest::collection::vec(crate::fuzz::edit_strategy(), 0..3),
    )
        .prop_map(|(sizes, ext, after, edits)| {
            let mut body = Vec::new();
            for (n, prefix) in sizes.into_iter().filter(|(n, _)| *n > 0) {
                body.extend_from_slice(format!("{prefix}{n:x}{ext}\r\n").as_bytes());
                body.extend(std::iter::repeat_n(b'a', n));
                body.extend_from_slice(b"\r\n");
            }
            body.extend_from_slice(b"0\r\nX-T: 1\r\n\r\n");
            let edited = crate::fuzz::apply_edits(body.clone(), &edits);
            ([body, after].concat(), edited)
        })
}

/// `RFC 9112 §7.1`'s chunk-size is hex digits only: what a server accepts, to compare with.
fn rfc_chunked_len(b: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        let line_end = i + b[i..].windows(2).position(|w| w == b"\r\n")?;
        let line = &b[i..line_end];
        let size_part = line.split(|c| *c == b';').next()?;
        if size_part.is_empty() || !size_part.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let size = usize::from_str_radix(std::str::from_utf8(size_part).ok()?, 16).ok()?;
        i = line_end + 2;
        if size == 0 {
            loop {
                let end = i + b[i..].windows(2).position(|w| w == b"\r\n")?;
                let empty = end == i;
                i = end + 2;
                if empty {
                    return Some(i);
                }
            }
        }
        if b.get(i + size..i + size + 2)? != b"\r\n" {
            return None;
        }
        i += size + 2;
    }
}

#[test]
fn a_chunked_body_ends_where_a_server_ends_it() {
    check("http-chunked", 1024, chunked(), |(whole, edited)| {
        for (input, split) in [(&whole, 1usize), (&edited, 3)] {
            let mut body = Body::new(Framing::Chunked);
            let mut consumed = 0;
            let mut refused = false;
            // Fed in pieces, as reads arrive.
            for piece in input.chunks(split.max(1)) {
                if let Ok((n, _)) = body.take(piece) {
                    consumed += n;
                } else {
                    refused = true;
                    break;
                }
                if body.done() {
                    break;
                }
            }
            match rfc_chunked_len(input) {
                Some(len) if !refused => {
                    prop_assert!(body.done(), "{}", input.escape_ascii());
                    prop_assert_eq!(consumed, len, "{}", input.escape_ascii());
                }
                Some(_) => {} // stricter than a server (a trailer line it refuses): fails closed
                None => prop_assert!(
                    refused || !body.done(),
                    "the proxy ended a body no server reads as ended: {}",
                    input.escape_ascii()
                ),
            }
        }
        Ok(())
    });
}

#[test]
fn any_response_head_is_passed_without_a_panic() {
    let strategy = prop_oneof![
        mutated(seeds("http"), 6),
        proptest::collection::vec(any::<u8>(), 0..64),
    ];
    check("http-response", 1024, strategy, |bytes| {
        for mut r in [Response::default(), Response::through_upstream("s".into())] {
            let mut out = Vec::new();
            for piece in bytes.chunks(7) {
                if r.feed(piece, &mut out) != Ok(false) {
                    break;
                }
            }
        }
        Ok(())
    });
}

fn socks_request() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| [
            &[5, 1, 0, 1][..],
            &a,
            &p.to_be_bytes()
        ]
        .concat()),
        (any::<[u8; 16]>(), any::<u16>()).prop_map(|(a, p)| [
            &[5, 1, 0, 4][..],
            &a,
            &p.to_be_bytes()
        ]
        .concat()),
        (proptest::collection::vec(any::<u8>(), 0..40), any::<u16>()).prop_map(|(n, p)| {
            [
                &[5, 1, 0, 3, u8::try_from(n.len()).unwrap()][..],
                &n,
                &p.to_be_bytes(),
            ]
            .concat()
        }),
    ]
}

#[test]
fn socks5_reads_a_request_only_when_all_of_it_is_there() {
    let strategy = (
        socks_request(),
        proptest::collection::vec(any::<u8>(), 0..8),
        mutated(seeds("socks5"), 4),
    );
    check("socks5", 2048, strategy, |(req, after, noise)| {
        let whole = [&req[..], &after].concat();
        let Step::Request { len, command, .. } = socks::request(&whole) else {
            return Err(TestCaseError::fail(format!("{:?}", socks::request(&whole))));
        };
        prop_assert_eq!(len, req.len());
        prop_assert_eq!(command, 1);
        for cut in 0..req.len() {
            prop_assert_eq!(socks::request(&req[..cut]), Step::More, "cut at {}", cut);
        }
        for buf in [&noise[..], &whole] {
            if let Step::Request { len, .. } | Step::Greeting { len, .. } = socks::greeting(buf) {
                prop_assert!(len <= buf.len());
            }
            if let Step::Request { len, .. } = socks::request(buf) {
                prop_assert!(len <= buf.len());
            }
        }
        Ok(())
    });
}
