//! Chaining through the launcher's own proxy (issue 34, item 1): an upstream proxy on this
//! machine's loopback that requires Basic credentials, named in the launcher's `HTTPS_PROXY` /
//! `HTTP_PROXY` (credentials in the URL) with a `NO_PROXY`; the allowlist's decisions stay ours;
//! real `npm install` and `pip install` from a TLS registry through both proxies.

use crate::common::*;
use crate::network::{Server, SENTENCE};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// `cs@user:p:ss`, as the URL spells it and as Basic sends it.
const URL_CREDENTIALS: &str = "cs%40user:p%3Ass";
const BASIC: &str = "Basic Y3NAdXNlcjpwOnNz";

/// An upstream proxy: CONNECT and absolute-form requests, each target reached on 127.0.0.1 at its
/// port (whatever its name); without the right `Proxy-Authorization`, 407. Records one line per
/// request: `CONNECT host:port auth=ok|wrong|none` or `GET http://… auth=…`.
struct Upstream {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let log2 = Arc::clone(&log);
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let log = Arc::clone(&log2);
                std::thread::spawn(move || serve_upstream(c, &log));
            }
        });
        Upstream { port, log }
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn serve_upstream(mut c: TcpStream, log: &Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if !matches!(c.read(&mut b), Ok(1)) {
            return;
        }
        head.push(b[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let line = text.lines().next().unwrap_or_default().to_string();
    let auth = text
        .lines()
        .find_map(|l| l.strip_prefix("Proxy-Authorization: "))
        .map_or("none", |a| if a == BASIC { "ok" } else { "wrong" });
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    log.lock()
        .unwrap()
        .push(format!("{method} {target} auth={auth}"));
    if auth != "ok" {
        let _ = c.write_all(
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"t\"\r\nContent-Length: 0\r\n\r\n",
        );
        return;
    }
    let (authority, rest) = match target.strip_prefix("http://") {
        Some(after) => {
            let i = after.find('/').unwrap_or(after.len());
            (&after[..i], Some(&after[i..]))
        }
        None => (target, None),
    };
    let port: u16 = authority
        .rsplit(':')
        .next()
        .unwrap_or("80")
        .parse()
        .unwrap_or(80);
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        let _ = c.write_all(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    match rest {
        None => {
            let _ = c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n");
        }
        Some(path) => {
            // Absolute form: sent on in origin form, the proxy's credentials dropped.
            let mut out = format!(
                "{method} {} {}\r\n",
                if path.is_empty() { "/" } else { path },
                parts.next().unwrap_or("HTTP/1.1")
            );
            for l in text
                .lines()
                .skip(1)
                .filter(|l| !l.is_empty() && !l.starts_with("Proxy-Authorization"))
            {
                out.push_str(l);
                out.push_str("\r\n");
            }
            out.push_str("\r\n");
            let _ = s.write_all(out.as_bytes());
        }
    }
    let (mut c2, mut s2) = (c.try_clone().unwrap(), s.try_clone().unwrap());
    let t = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut s, &mut c);
    let _ = c.shutdown(std::net::Shutdown::Write);
    let _ = t.join();
}

/// `mixed.test` has a loopback address (allowed here) and a private one.
const HOSTS: &str = "allowed.test=127.0.0.1,direct.test=127.0.0.1,private.test=10.0.0.1,\
    registry.test=127.0.0.1,mixed.test=127.0.0.1,mixed.test=10.0.0.2";

fn run_chained(
    f: &Fixture,
    proxy_url: &str,
    env: &[(&str, &Path)],
    script: &str,
) -> std::process::Output {
    let mut args = vec!["run", "--network", "allowlist"];
    for d in [
        "allowed.test",
        "direct.test",
        "private.test",
        "registry.test",
        "mixed.test",
        "127.0.0.1",
    ] {
        args.extend(["--allow-domain", d]);
    }
    args.extend(["--", "bash", "-c", script]);
    f.cmd(args)
        .envs(env.iter().copied())
        .env("CLAUDE_SANDBOX_TEST_HOSTS", HOSTS)
        .env("HTTPS_PROXY", proxy_url)
        .env("http_proxy", proxy_url)
        .env("NO_PROXY", "direct.test,.internal")
        .output()
        .unwrap()
}

#[test]
fn the_allowlist_chains_through_the_launchers_authenticating_proxy_and_keeps_its_decisions() {
    let f = Fixture::new();
    let srv = Server::start();
    let up = Upstream::start();
    let p = srv.port;
    let script = format!(
        "echo '== tunnel'; curl -sS -m 10 -p http://allowed.test:{p}/tunnel; echo
         echo '== plain'; curl -sS -m 10 http://allowed.test:{p}/plain; echo
         echo '== denied'; curl -sS -m 10 http://denied.test:{p}/denied; echo
         echo '== private'; curl -sS -m 10 http://private.test/; echo
         echo '== mixed'; curl -sS -m 10 http://mixed.test:{p}/mixed; echo
         echo '== direct'; curl -sS -m 10 -p http://direct.test:{p}/direct; echo
         echo '== own-proxy'; http_proxy=http://127.0.0.1:{u} curl -sS -m 5 -p http://allowed.test:{p}/own 2>&1; echo \" rc=$?\"
         echo '== env'; env | grep -i '^https_proxy=' ; echo
         echo '== every-env'; cat /proc/[0-9]*/environ | tr '\\0' '\\n'; grep -rs 'p%3Ass' /tmp /run; echo
         echo '== end'",
        u = up.port
    );
    let url = format!("http://{URL_CREDENTIALS}@127.0.0.1:{}", up.port);
    // Copies of the launcher's proxy and its credentials that a client in the jail would read.
    let copies = [
        ("npm_config_https_proxy", Path::new(&url)),
        ("JAVA_TOOL_OPTIONS", Path::new("-Dhttps.proxyPassword=p:ss")),
        // A variable every jail goes without: not in bwrap's own environment either.
        ("DOCKER_HOST", Path::new("tcp://docker.secret:2375")),
    ];
    let o = run_chained(&f, &url, &copies, &script);
    let out = ok(&o);
    let section = |name: &str| -> String {
        let start = out
            .find(&format!("== {name}\n"))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        let rest = &out[start + name.len() + 4..];
        rest[..rest.find("== ").unwrap()].to_string()
    };
    assert!(section("tunnel").contains("outside:/tunnel"), "{out}");
    assert!(section("plain").contains("outside:/plain"), "{out}");
    assert!(section("denied").contains(SENTENCE), "{out}");
    assert!(section("private").contains("resolves to 10.0.0.1"), "{out}");
    // The upstream would pick among the name's addresses: each must pass, not just one.
    assert!(section("mixed").contains("resolves to 10.0.0.2"), "{out}");
    assert!(section("direct").contains("outside:/direct"), "{out}");
    // The jail cannot pick another way out: its own proxy variable leads nowhere.
    assert!(
        !section("own-proxy").contains("outside:") && !section("own-proxy").contains(" rc=0"),
        "{out}"
    );
    // The jail sees the allowlist proxy, never the launcher's (nor its credentials).
    assert!(section("env").contains("=http://127.0.0.1:3128"), "{out}");
    let every = section("every-env");
    assert!(every.contains("CLAUDE_SANDBOX=1"), "{out}");
    for secret in [
        "cs%40user",
        "p%3Ass",
        "p:ss",
        BASIC,
        "npm_config_https_proxy",
    ] {
        assert!(!out.contains(secret), "{secret}: {out}");
    }
    let log = up.log();
    assert!(
        log.contains(&format!("CONNECT allowed.test:{p} auth=ok")),
        "{log:?}"
    );
    assert!(
        log.contains(&format!("GET http://allowed.test:{p}/plain auth=ok")),
        "{log:?}"
    );
    // Only what the allowlist let through reached the upstream; NO_PROXY's host went direct.
    assert_eq!(log.len(), 2, "{log:?}");
    let seen = srv.seen();
    assert!(
        seen.contains(&"GET /direct HTTP/1.1".to_string()),
        "{seen:?}"
    );
}

#[test]
fn wrong_credentials_or_an_unusable_proxy_are_said() {
    let f = Fixture::new();
    let srv = Server::start();
    let up = Upstream::start();
    // The ssh ProxyCommand prints the proxy's answer on a refusal.
    let script = format!(
        "$CLAUDE_SANDBOX_HOOK __connect allowed.test {} </dev/null 2>&1; echo \" rc=$?\"",
        srv.port
    );
    let plain = format!(
        "{script}; curl -sS -m 10 -w ' code=%{{http_code}}' http://allowed.test:{}/plain",
        srv.port
    );
    let url = format!("http://cs:wrong@127.0.0.1:{}", up.port);
    let out = ok(&run_chained(&f, &url, &[], &plain));
    assert!(out.contains(" rc=1"), "{out}");
    // Both the tunnel and plain HTTP say it, the upstream's 407 challenge replaced by a 502.
    assert_eq!(
        out.matches("asks for credentials (407)").count(),
        2,
        "{out}"
    );
    assert!(out.contains(" code=502"), "{out}");
    assert!(
        out.contains("http://***@127.0.0.1:") && !out.contains("wrong"),
        "{out}"
    );
    assert_eq!(
        up.log(),
        vec![
            format!("CONNECT allowed.test:{} auth=wrong", srv.port),
            format!("GET http://allowed.test:{}/plain auth=wrong", srv.port)
        ]
    );
    // No credentials at all: the same sentence (the upstream is named without a user).
    let up = Upstream::start();
    let url = format!("http://127.0.0.1:{}", up.port);
    let out = ok(&run_chained(&f, &url, &[], &script));
    assert!(out.contains(" rc=1"), "{out}");
    assert!(
        out.contains(&format!(
            "the upstream proxy http://127.0.0.1:{}: it asks for credentials (407)",
            up.port
        )),
        "{out}"
    );
    assert_eq!(
        up.log(),
        vec![format!("CONNECT allowed.test:{} auth=none", srv.port)]
    );
    // A proxy the allowlist cannot chain through stops the launch, saying why and what to do.
    let o = run_chained(&f, "https://proxy.example:443", &[], "true");
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("HTTPS_PROXY is a https:// proxy"),
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("--network host"), "{}", stderr(&o));
    // `explain` names the upstream, its credentials masked.
    let cfg = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[network]\nmode = \"allowlist\"\n").unwrap();
    let o = f
        .cmd(["explain"])
        .env(
            "HTTPS_PROXY",
            format!("http://{URL_CREDENTIALS}@127.0.0.1:{}", up.port),
        )
        .output()
        .unwrap();
    let out = ok(&o);
    assert!(
        out.contains(&format!(
            "upstream proxy (the launcher's HTTPS_PROXY/HTTP_PROXY): http://***@127.0.0.1:{}",
            up.port
        )),
        "{out}"
    );
    assert!(!out.contains("cs%40user"), "{out}");
    // So does `doctor`.
    let doc = f
        .cmd(["doctor", "--json"])
        .env(
            "HTTPS_PROXY",
            format!("http://{URL_CREDENTIALS}@127.0.0.1:{}", up.port),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doc.stdout).into_owned();
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&doc.stdout).unwrap();
    assert!(
        checks.iter().any(|c| c["name"] == "network"
            && c["mark"] == "pass"
            && c["why"]
                .as_str()
                .unwrap()
                .contains(&format!("upstream proxy (this environment's HTTPS_PROXY/HTTP_PROXY): http://***@127.0.0.1:{}", up.port))),
        "{text}"
    );
    assert!(!text.contains("cs%40user"), "{text}");
}

/// A self-signed certificate for `registry.test` (its key beside it), made with openssl.
pub(crate) fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("registry.pem"), dir.join("registry.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=registry.test",
        ])
        .args(["-addext", "subjectAltName=DNS:registry.test"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "openssl: {}", stderr(&made));
    (cert, key)
}

/// A wheel of `cs-wheel` 1.0 whose module says `says`.
fn wheel(dir: &Path, says: &str) -> PathBuf {
    let whl = dir.join("cs_wheel-1.0-py3-none-any.whl");
    let script = format!(
        r#"
import zipfile, sys
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("cs_wheel/__init__.py", 'SAYS = {says:?}\n')
    z.writestr("cs_wheel-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: cs-wheel\nVersion: 1.0\n")
    z.writestr("cs_wheel-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    z.writestr("cs_wheel-1.0.dist-info/RECORD", "")
"#
    );
    let made = Command::new("python3")
        .args(["-c", &script])
        .arg(&whl)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    whl
}

#[test]
fn npm_and_pip_install_from_a_tls_registry_through_both_proxies() {
    if !tool_or_say(
        "npm_and_pip_install_from_a_tls_registry_through_both_proxies",
        "npm",
        false,
    ) || !tool_or_say(
        "npm_and_pip_install_from_a_tls_registry_through_both_proxies",
        "openssl",
        false,
    ) {
        return;
    }
    let f = Fixture::new();
    let files = f.root.join("registry");
    std::fs::create_dir_all(&files).unwrap();
    npm_tarball(&files, "hello from the registry");
    wheel(&files, "wheel from the registry");
    let (cert, key) = certificate(&f.root);
    let port_file = f.root.join("registry.port");
    // Carried in the test binary: CI runs it as another user from a copy without the sources.
    let script_path = f.root.join("registry.py");
    std::fs::write(&script_path, include_str!("../fixtures/registry.py")).unwrap();
    let mut registry = Running(Some(
        Command::new("python3")
            .arg(&script_path)
            .args([&files, Path::new("registry.test"), &cert, &key, &port_file])
            .args(["--seconds", "120"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let mut port = String::new();
    for _ in 0..100 {
        port = std::fs::read_to_string(&port_file).unwrap_or_default();
        if !port.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!port.is_empty(), "the registry did not start");
    let up = Upstream::start();
    let script = format!(
        "set -e
         npm install --no-audit --no-fund --registry https://registry.test:{port}/ hello-cs >/dev/null 2>npm.err || cat npm.err
         node_modules/.bin/hello-cs
         python3 -m pip install --quiet --disable-pip-version-check --no-cache-dir --target pylib \
             --index-url https://registry.test:{port}/simple/ cs-wheel
         PYTHONPATH=pylib python3 -c 'import cs_wheel; print(cs_wheel.SAYS)'"
    );
    let url = format!("http://{URL_CREDENTIALS}@127.0.0.1:{}", up.port);
    // The container's own CA settings (a corporate CA) reach the tools in the jail unchanged: TLS
    // is end to end, the proxies only carry it.
    let ca = [
        ("npm_config_cafile", cert.as_path()),
        ("REQUESTS_CA_BUNDLE", cert.as_path()),
    ];
    let o = run_chained(&f, &url, &ca, &script);
    let out = ok(&o);
    assert!(out.contains("hello from the registry"), "{out}");
    assert!(out.contains("wheel from the registry"), "{out}");
    let log = up.log();
    assert!(
        !log.is_empty()
            && log
                .iter()
                .all(|l| l == &format!("CONNECT registry.test:{} auth=ok", port.trim())),
        "{log:?}"
    );
    if let Some(mut c) = registry.0.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}
