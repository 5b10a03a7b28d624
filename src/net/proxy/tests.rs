use super::http::{self, BadRequest, Body, Framing, Response, Target, Via};
use super::socks::{self, Step};
use super::*;

#[test]
fn authorities() {
    let s = |h: &str, p: u16| Some((h.to_string(), p));
    assert_eq!(split_host_port("a.com:443", None), s("a.com", 443));
    assert_eq!(split_host_port("a.com", Some(80)), s("a.com", 80));
    assert_eq!(split_host_port("a.com", None), None);
    assert_eq!(split_host_port("[::1]:8080", None), s("::1", 8080));
    assert_eq!(split_host_port("u:p@a.com:81", Some(80)), s("a.com", 81));
    assert_eq!(split_host_port("::1:80", None), None);
    assert_eq!(split_host_port(":80", None), None);
}

#[test]
fn the_sentence_says_it_is_final() {
    let s = denial_sentence("evil.example", &Refusal::NotAllowed);
    assert!(s.contains("not allowed by the sandbox"));
    assert!(s.contains("will not work"));
    assert!(
        s.contains("they run `claude-sandbox allow evil.example` outside"),
        "{s}"
    );
    assert!(
        s.contains("or `claude-sandbox allow evil.example --session`, and this session"),
        "{s}"
    );
    let ip = "10.0.0.1".parse().unwrap();
    let s = denial_sentence("db.test", &Refusal::PrivateAddress(ip));
    assert!(s.contains("`claude-sandbox allow 10.0.0.1`"), "{s}");
    let s = denial_sentence("x.test", &Refusal::Denied);
    assert!(
        s.contains("denies it") && !s.contains("claude-sandbox allow"),
        "{s}"
    );
    // A name the jail chose with other characters is never offered as a command to paste.
    let s = denial_sentence("$(id).test", &Refusal::NotAllowed);
    assert!(!s.contains("claude-sandbox allow"), "{s}");
}

#[test]
fn test_hosts() {
    let h = parse_hosts("A.test.=127.0.0.1, bad, b.test=::1");
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].0, "a.test");
}

#[test]
fn limits_from_the_test_knob_and_within_the_descriptors() {
    let l = Limits::default().with("pending=3, tunnels=2,head_ms=150,bogus=1,pending=x");
    assert_eq!((l.pending, l.tunnels, l.head_ms), (3, 2, 150));
    // 1024 descriptors: (1024 - 64) / 4 = 240 of each; plenty stays the default.
    let l = Limits::default().within(1024);
    assert_eq!((l.pending, l.tunnels), (240, 240));
    assert_eq!(Limits::default().within(1 << 20), Limits::default());
    assert_eq!(Limits::default().within(10).tunnels, 1);
}

fn req(text: &str) -> Vec<u8> {
    text.replace('\n', "\r\n").into_bytes()
}

#[test]
fn a_request_head_is_split_and_its_target_read() {
    let head = req("GET http://a.test:8080/x?y HTTP/1.1\nHost: evil.test\nX-A:  b \n\n");
    let r = http::parse(&head).unwrap();
    assert_eq!((r.method, r.version), ("GET", "HTTP/1.1"));
    assert_eq!(r.headers, vec![("Host", "evil.test"), ("X-A", "b")]);
    assert_eq!(
        r.target().unwrap(),
        Target::Absolute {
            host: "a.test".into(),
            port: 8080,
            path: "/x?y".into()
        }
    );
    let head = req("GET http://a.test?q HTTP/1.0\n\n");
    let r = http::parse(&head).unwrap();
    assert_eq!(
        r.target().unwrap(),
        Target::Absolute {
            host: "a.test".into(),
            port: 80,
            path: "/?q".into()
        }
    );
    let head = req("CONNECT [::1]:443 HTTP/1.1\n\n");
    let r = http::parse(&head).unwrap();
    assert_eq!(
        r.target().unwrap(),
        Target::Connect {
            host: "::1".into(),
            port: 443
        }
    );
    for bad in [
        "GET /origin-form HTTP/1.1\n\n",
        "GET https://a.test/ HTTP/1.1\n\n",
    ] {
        let head = req(bad);
        let r = http::parse(&head).unwrap();
        assert_eq!(r.target(), Err(BadRequest::Target), "{bad}");
    }
}

#[test]
fn heads_a_server_could_read_otherwise_are_refused() {
    for (bad, why) in [
        // A lone LF inside a header: a lenient server sees a second `Host`.
        (
            "GET http://a.test/ HTTP/1.1\r\nX: a\nHost: evil.test\r\n\r\n",
            BadRequest::Malformed,
        ),
        (
            "GET http://a.test/ HTTP/1.1\r\nX: a\rHost: evil\r\n\r\n",
            BadRequest::Malformed,
        ),
        (
            "GET http://a.test/ HTTP/1.1\r\nX: a\0b\r\n\r\n",
            BadRequest::Malformed,
        ),
        // Obsolete line folding.
        (
            "GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            BadRequest::Malformed,
        ),
        (
            "GET http://a.test/ HTTP/1.1\r\nBad Name: a\r\n\r\n",
            BadRequest::Malformed,
        ),
        (
            "GET http://a.test/ HTTP/1.1\r\nNoColon\r\n\r\n",
            BadRequest::Malformed,
        ),
        (
            "GET  http://a.test/ HTTP/1.1\r\n\r\n",
            BadRequest::RequestLine,
        ),
        ("GET http://a.test/ HTTP/2\r\n\r\n", BadRequest::RequestLine),
        (
            "GET http://a.test/\tx HTTP/1.1\r\n\r\n",
            BadRequest::RequestLine,
        ),
    ] {
        assert_eq!(http::parse(bad.as_bytes()), Err(why), "{bad:?}");
    }
}

#[test]
fn a_body_has_one_framing_or_the_request_is_refused() {
    let framing = |h: &str| http::parse(&req(h)).unwrap().framing();
    assert_eq!(framing("GET http://a/ HTTP/1.1\n\n"), Ok(Framing::None));
    assert_eq!(
        framing("POST http://a/ HTTP/1.1\nContent-Length: 12\n\n"),
        Ok(Framing::Length(12))
    );
    assert_eq!(
        framing("POST http://a/ HTTP/1.1\nContent-Length: 5\ncontent-length: 5, 5\n\n"),
        Ok(Framing::Length(5))
    );
    assert_eq!(
        framing("POST http://a/ HTTP/1.1\nTransfer-Encoding: gzip, Chunked\n\n"),
        Ok(Framing::Chunked)
    );
    for bad in [
        // CL.TE and TE.CL smuggling: both framings at once.
        "POST http://a/ HTTP/1.1\nContent-Length: 4\nTransfer-Encoding: chunked\n\n",
        "POST http://a/ HTTP/1.1\nContent-Length: 4\nContent-Length: 40\n\n",
        "POST http://a/ HTTP/1.1\nContent-Length: -1\n\n",
        "POST http://a/ HTTP/1.1\nContent-Length: +4\n\n",
        "POST http://a/ HTTP/1.0\nTransfer-Encoding: chunked\n\n",
    ] {
        assert_eq!(framing(bad), Err(BadRequest::AmbiguousLength), "{bad}");
    }
    for bad in [
        "POST http://a/ HTTP/1.1\nTransfer-Encoding: chunked, gzip\n\n",
        "POST http://a/ HTTP/1.1\nTransfer-Encoding: chunked\nTransfer-Encoding: chunked\n\n",
        "POST http://a/ HTTP/1.1\nTransfer-Encoding: xchunked\n\n",
    ] {
        assert_eq!(framing(bad), Err(BadRequest::Encoding), "{bad}");
    }
}

/// Found by the fuzzer (`net::proxy::fuzz`): `Connection` naming the framing header made `forward`
/// drop it, so the server read no body where the proxy sent one and took the body for a second
/// request (through an upstream proxy, an absolute URL to any host).
#[test]
fn a_request_whose_connection_names_its_framing_is_refused() {
    let framing = |h: &str| http::parse(&req(h)).unwrap().framing();
    for bad in [
        "POST http://a/ HTTP/1.1\nContent-Length: 41\nConnection: content-length\n\n",
        "POST http://a/ HTTP/1.1\nTransfer-Encoding: chunked\nConnection: keep-alive, Transfer-Encoding\n\n",
        // Named with no such header: refused all the same (nothing to gain from it).
        "GET http://a/ HTTP/1.1\nConnection: CONTENT-LENGTH\n\n",
    ] {
        assert_eq!(framing(bad), Err(BadRequest::HopFraming), "{bad}");
    }
}

/// Found by the fuzzer (`net::proxy::fuzz`): a chunk size with a sign (`+1`) was read as 1, where a
/// server refuses it or reads the body otherwise: the two ends disagree on where the body ends.
#[test]
fn a_chunk_size_is_hex_digits_only() {
    for bad in [
        "+1\r\na\r\n0\r\n\r\n",
        "-0\r\n\r\n",
        " 1\r\na\r\n0\r\n\r\n",
        "0x1\r\na\r\n0\r\n\r\n",
    ] {
        let mut body = http::Body::new(Framing::Chunked);
        assert_eq!(body.take(bad.as_bytes()), Err(BadRequest::Chunk), "{bad:?}");
    }
    let mut body = http::Body::new(Framing::Chunked);
    let good = b"01;x=y\r\na\r\n0\r\n\r\n";
    assert_eq!(body.take(good), Ok((good.len(), true)));
}

#[test]
fn the_head_sent_on_names_the_checked_authority_and_closes() {
    let head = req(
        "POST http://a.test/p HTTP/1.1\nHost: evil.test\nConnection: keep-alive, X-Secret\n\
         X-Secret: 1\nProxy-Authorization: Basic jail\nUpgrade: h2c\nTE: trailers\n\
         Content-Length: 3\n\n",
    );
    let r = http::parse(&head).unwrap();
    let out = String::from_utf8(r.forward("a.test", 80, "/p", Via::Direct)).unwrap();
    assert_eq!(
        out,
        "POST /p HTTP/1.1\r\nHost: a.test\r\nContent-Length: 3\r\nConnection: close\r\n\r\n"
    );
    let out =
        String::from_utf8(r.forward("::1", 8080, "/p", Via::Proxy(Some("Basic dTpw")))).unwrap();
    assert!(
        out.starts_with("POST http://[::1]:8080/p HTTP/1.1\r\nHost: [::1]:8080\r\n"),
        "{out}"
    );
    assert!(out.contains("Proxy-Authorization: Basic dTpw\r\n"), "{out}");
    assert!(!out.contains("jail"), "{out}");
}

#[test]
fn a_body_ends_where_its_framing_says_and_what_follows_is_not_taken() {
    let mut b = Body::new(Framing::Length(5));
    assert_eq!(b.take(b"abc"), Ok((3, false)));
    assert_eq!(b.take(b"deGET http://evil/"), Ok((2, true)));
    let mut b = Body::new(Framing::None);
    assert_eq!(b.take(b"GET http://evil/ HTTP/1.1\r\n\r\n"), Ok((0, true)));
    let body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\nGET http://evil/ HTTP/1.1\r\n\r\n";
    let end = body.len() - "GET http://evil/ HTTP/1.1\r\n\r\n".len();
    // Whole, and byte by byte: the end is found at the same place.
    let mut b = Body::new(Framing::Chunked);
    assert_eq!(b.take(body), Ok((end, true)));
    let mut b = Body::new(Framing::Chunked);
    let mut taken = 0;
    for (i, byte) in body.iter().enumerate() {
        let (n, done) = b.take(std::slice::from_ref(byte)).unwrap();
        taken += n;
        if done {
            assert_eq!(i + 1, end);
            break;
        }
    }
    assert_eq!(taken, end);
    for bad in [
        &b"x\r\n"[..],
        b"4\r\nWikiXX",
        b"4\nWiki\r\n",
        b"11111111111111111\r\n",
        b"\r\n",
    ] {
        let mut b = Body::new(Framing::Chunked);
        assert_eq!(
            b.take(bad).map(|(_, d)| d),
            Err(BadRequest::Chunk),
            "{bad:?}"
        );
    }
}

#[test]
fn the_final_response_head_says_close_and_interim_ones_pass() {
    let mut r = Response::default();
    let mut out = Vec::new();
    r.feed(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nConn",
        &mut out,
    )
    .unwrap();
    assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    r.feed(
        b"ection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\nhi",
        &mut out,
    )
    .unwrap();
    r.feed(b" more", &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\
         Connection: close\r\n\r\nhi more"
    );
    let mut r = Response::default();
    let mut out = Vec::new();
    assert!(r.feed(&vec![b'a'; http::MAX_HEAD + 1], &mut out).is_err());
}

#[test]
fn socks5_is_read_as_it_arrives() {
    assert_eq!(socks::greeting(&[5]), Step::More);
    assert_eq!(socks::greeting(&[5, 2, 0]), Step::More);
    assert_eq!(
        socks::greeting(&[5, 2, 2, 0]),
        Step::Greeting {
            len: 4,
            no_auth: true
        }
    );
    assert_eq!(
        socks::greeting(&[5, 1, 2]),
        Step::Greeting {
            len: 3,
            no_auth: false
        }
    );
    assert_eq!(socks::greeting(&[4, 1]), Step::Bad(None));
    let mut name = vec![5, 1, 0, 3, 6];
    name.extend_from_slice(b"a.test");
    assert_eq!(socks::request(&name), Step::More);
    name.extend_from_slice(&[1, 187, 9]);
    assert_eq!(
        socks::request(&name),
        Step::Request {
            len: 13,
            command: 1,
            host: "a.test".into(),
            port: 443
        }
    );
    assert_eq!(
        socks::request(&[5, 1, 0, 1, 127, 0, 0, 1, 0, 80]),
        Step::Request {
            len: 10,
            command: 1,
            host: "127.0.0.1".into(),
            port: 80
        }
    );
    assert_eq!(socks::request(&[5, 1, 0, 9, 1]), Step::Bad(Some(8)));
    assert_eq!(socks::request(&[4, 1, 0, 1]), Step::Bad(None));
}

fn shared(hosts: &str, upstream: &str) -> Shared {
    let upstream = super::upstream::Upstream::from_env(&|k| {
        (k == "HTTPS_PROXY" && !upstream.is_empty()).then(|| upstream.to_string())
    })
    .unwrap();
    Shared::new(Config {
        allow: vec!["mixed.test".into()],
        deny: Vec::new(),
        hosts: parse_hosts(hosts),
        alerts: None,
        limits: Limits::default(),
        upstream,
        session_allow: None,
        loopback: Vec::new(),
        inject: None,
    })
    .unwrap()
}

#[test]
fn through_the_upstream_every_address_of_a_name_must_pass() {
    let hosts = "mixed.test=192.0.2.1,mixed.test=127.0.0.1";
    // Direct, the proxy connects to the address that passed: the first public one.
    assert_eq!(
        shared(hosts, "").decide("mixed.test", 443).ok(),
        Some("192.0.2.1:443".parse().unwrap())
    );
    // Through an upstream that would pick its own address, a loopback one refuses the name
    // (before anything is sent: port 9 of loopback is never connected to).
    let s = shared(hosts, "http://127.0.0.1:9");
    let refused = |host: &str| match s.open(host, 443, Purpose::Tunnel) {
        Err(Failure::Refused(r)) => r.reason(),
        Err(Failure::Upstream(e)) => panic!("{host} went upstream: {e}"),
        Ok(_) => panic!("{host} went through"),
    };
    assert!(
        refused("mixed.test").contains("127.0.0.1"),
        "{}",
        refused("mixed.test")
    );
    assert!(
        refused("other.test").contains("allow"),
        "{}",
        refused("other.test")
    );
}

#[test]
fn an_upstream_407_on_plain_http_becomes_a_502_that_says_why() {
    let mut r = Response::through_upstream("the upstream asks for credentials\n".into());
    let mut out = Vec::new();
    let over = r
        .feed(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\nx",
            &mut out,
        )
        .unwrap();
    assert!(over);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{text}");
    assert!(
        text.ends_with("\r\n\r\nthe upstream asks for credentials\n"),
        "{text}"
    );
    assert!(!text.contains("Proxy-Authenticate"), "{text}");
    // Any other answer passes, and a 407 of a direct connection too.
    let mut out = Vec::new();
    assert!(!Response::through_upstream(String::new())
        .feed(b"HTTP/1.1 200 OK\r\n\r\n", &mut out)
        .unwrap());
    let mut out = Vec::new();
    assert!(!Response::default()
        .feed(b"HTTP/1.1 407 No\r\n\r\n", &mut out)
        .unwrap());
    assert!(out.starts_with(b"HTTP/1.1 407"));
}
