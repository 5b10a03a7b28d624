//! Issue 34, items 3 and 4 in a running session: `claude-sandbox allow HOST --session` lets the
//! running session reach a host it was refused, at once, without the configuration file and without
//! any other session; and Node's global `fetch` in the jail goes through the proxy (the preload for
//! Node releases that ignore the proxy variables, Node's own support where it has it).

use crate::common::*;
use crate::network::{Server, SENTENCE};
use std::path::Path;
use std::time::{Duration, Instant};

fn wait_for(path: &Path, what: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(
            Instant::now() < until,
            "{what}: {} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A session that asks for `denied.test` twice: before `NAME.ready` appears, and after `NAME.go`.
fn session(f: &Fixture, port: u16, name: &str) -> Running {
    let script = format!(
        "curl -sS -m 10 http://denied.test:{port}/{name}-before; echo; touch {name}.ready
         while [ ! -e {name}.go ]; do sleep 0.05; done
         curl -sS -m 10 http://denied.test:{port}/{name}-after; echo"
    );
    let child = f
        .cmd(["run", "--network", "allowlist", "--", "bash", "-c", &script])
        .env("CLAUDE_SANDBOX_TEST_HOSTS", "denied.test=127.0.0.1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    Running(Some(child))
}

#[test]
fn allow_session_lets_the_running_session_through_and_no_other() {
    require_jail();
    let f = Fixture::new();
    let srv = Server::start();
    let cfg = f.home.join(".config/claude-sandbox/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    let text = "[network]\nallow = [\"127.0.0.1\"] # loopback for the test\n";
    std::fs::write(&cfg, text).unwrap();

    let none = f
        .cmd(["allow", "denied.test", "--session"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2), "{}", stderr(&none));
    assert!(stderr(&none).contains("no session in allowlist mode is running"));

    let a = session(&f, srv.port, "a");
    wait_for(&f.ws.join("a.ready"), "session a");
    // `--session HOST`: the flag takes its id only as `--session=ID`.
    let said = ok(&f
        .cmd(["allow", "--session", "Denied.Test"])
        .output()
        .unwrap());
    assert!(said.contains("allowed denied.test for session"), "{said}");
    let b = session(&f, srv.port, "b");
    wait_for(&f.ws.join("b.ready"), "session b");
    let two = f
        .cmd(["allow", "other.test", "--session"])
        .output()
        .unwrap();
    assert_eq!(two.status.code(), Some(2), "{}", stderr(&two));
    assert!(stderr(&two).contains("2 sessions in allowlist mode are running"));
    let bad = f
        .cmd(["allow", "other.test", "--session=1-nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("no running session in allowlist mode has the id"));
    let inside = f.jail("$CLAUDE_SANDBOX_HOOK allow denied.test --session; echo \" rc=$?\"");
    let inside = String::from_utf8_lossy(&inside.stdout).into_owned() + &stderr(&inside);
    assert!(
        inside.contains("is for the human, outside the sandbox"),
        "{inside}"
    );

    std::fs::write(f.ws.join("a.go"), "").unwrap();
    std::fs::write(f.ws.join("b.go"), "").unwrap();
    let (a, b) = (a.wait(), b.wait());
    let (a, b) = (ok(&a), ok(&b));
    assert!(a.contains(SENTENCE), "{a}");
    assert!(a.contains("outside:/a-after"), "{a}");
    assert!(
        b.contains(SENTENCE) && !b.contains("outside:/b-after"),
        "{b}"
    );
    let seen = srv.seen();
    assert!(
        seen.contains(&"GET /a-after HTTP/1.1".to_string()),
        "{seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|l| l.contains("before") || l.contains("/b-")),
        "{seen:?}"
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);
}

/// An HTTPS server on loopback with `cert`, answering `tls:PATH`.
struct TlsServer {
    port: u16,
    _child: Running,
}

impl TlsServer {
    fn start(dir: &Path, cert: &Path, key: &Path) -> TlsServer {
        let port_file = dir.join("tls.port");
        let script = "import http.server, ssl, sys\n\
            class H(http.server.BaseHTTPRequestHandler):\n\
            \x20   def do_GET(self):\n\
            \x20       b = ('tls:' + self.path).encode()\n\
            \x20       self.send_response(200); self.send_header('Content-Length', str(len(b)))\n\
            \x20       self.end_headers(); self.wfile.write(b)\n\
            \x20   def log_message(self, *a): pass\n\
            s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)\n\
            c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[1], sys.argv[2])\n\
            s.socket = c.wrap_socket(s.socket, server_side=True)\n\
            open(sys.argv[3], 'w').write(str(s.server_address[1]))\n\
            s.serve_forever()\n";
        let child = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(cert)
            .arg(key)
            .arg(&port_file)
            .spawn()
            .unwrap();
        let child = Running(Some(child));
        wait_for(&port_file, "the TLS server");
        let mut port = String::new();
        for _ in 0..100 {
            port = std::fs::read_to_string(&port_file).unwrap_or_default();
            if !port.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        TlsServer {
            port: port.trim().parse().unwrap(),
            _child: child,
        }
    }
}

/// Node's version in the jail: the preload covers releases without `NODE_USE_ENV_PROXY`.
fn node_major_minor() -> Option<(u32, u32)> {
    let o = std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&o.stdout);
    let mut it = v.trim().trim_start_matches('v').split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[test]
fn node_fetch_reaches_an_allowed_host_through_the_proxy_and_reads_a_refusal() {
    require_jail();
    if !tool_or_say("node_fetch", "node", false) {
        return;
    }
    let f = Fixture::new();
    let srv = Server::start();
    let p = srv.port;
    let (cert, key) = crate::network_upstream::certificate(&f.root);
    let tls = TlsServer::start(&f.root, &cert, &key);
    let js = "fetch(process.argv[1]).then(r => r.text()).then(t => console.log('got', t), \
              e => console.log('failed', String(e.cause && e.cause.message || e)))";
    let script = format!(
        "node -e \"$JS\" http://allowed.test:{p}/node-allowed
         node -e \"$JS\" http://denied.test:{p}/node-denied
         node -e \"$JS\" https://registry.test:{}/node-tls
         echo \"opts=$NODE_OPTIONS\"",
        tls.port
    );
    let out = f
        .cmd([
            "run",
            "--network",
            "allowlist",
            "--allow-domain",
            "allowed.test",
            "--allow-domain",
            "registry.test",
            "--allow-domain",
            "127.0.0.1",
            "--",
            "bash",
            "-c",
            &script,
        ])
        .env("JS", js)
        .env("NODE_OPTIONS", "--max-old-space-size=256")
        .env(
            "CLAUDE_SANDBOX_TEST_HOSTS",
            "allowed.test=127.0.0.1,denied.test=127.0.0.1,registry.test=127.0.0.1",
        )
        .env("NODE_EXTRA_CA_CERTS", &cert)
        .output()
        .unwrap();
    let out = ok(&out);
    assert!(out.contains("got outside:/node-allowed"), "{out}");
    assert!(out.contains("got tls:/node-tls"), "{out}");
    assert!(out.contains("failed"), "{out}");
    assert!(
        out.contains(
            "opts=--max-old-space-size=256 --require /tmp/.claude-sandbox-net/node-proxy.cjs"
        ),
        "{out}"
    );
    let native = node_major_minor().is_some_and(|(ma, mi)| ma >= 24 || (ma == 22 && mi >= 21));
    if !native {
        // Through the preload: the refusal's sentence reaches the caller.
        assert!(out.contains(SENTENCE), "{out}");
    }
    let seen = srv.seen();
    assert!(
        seen.contains(&"GET /node-allowed HTTP/1.1".to_string()),
        "{seen:?}"
    );
    assert!(!seen.iter().any(|l| l.contains("node-denied")), "{seen:?}");
}
