//! The credential guard's decisions, on request heads as a client sends them.

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
    let foreign = "GET / HTTP/1.1\r\nHost: git.test\r\nAuthorization: Bearer csb-ph-bbbb\r\n\r\n";
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

#[test]
fn a_host_the_refusal_names_is_shown_escaped_and_cut_short() {
    let host = format!("Host: \x1b]0;evil\x07{}\r\n", "x".repeat(300));
    let refused = run(
        "git.test",
        &[with_auth(&host, "Bearer csb-ph-aaaa").as_bytes()],
    );
    match refused {
        Err(Refused::Addressed { named }) => {
            assert!(
                !named.contains('\x1b') && !named.contains('\x07'),
                "{named:?}"
            );
            assert!(named.chars().count() <= 100, "{named:?}");
        }
        // A parser that refuses the control bytes outright is as good.
        Err(Refused::Bad(_)) => {}
        other => panic!("{other:?}"),
    }
}
