//! Network modes through the real launcher and real bwrap: `host` as before, `none` with only a
//! loopback, `allowlist` through the proxy. Every server is on this machine's loopback, outside the
//! jail; names are mapped by the proxy's test resolver (`CLAUDE_SANDBOX_TEST_HOSTS`), and loopback
//! is allowed explicitly (`--allow-domain 127.0.0.1`) only where a test needs it.

use crate::common::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::{Arc, Mutex};

/// A loopback server outside the jail. HTTP requests are answered `outside:PATH`; anything else is
/// echoed back. Records the first line (or first byte, for TLS) of each connection, and every byte
/// each connection carried (`raw`: what a smuggled request would show up in).
pub(crate) struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (log, all) = (Arc::clone(&seen), Arc::clone(&raw));
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (log, all) = (Arc::clone(&log), Arc::clone(&all));
                std::thread::spawn(move || {
                    let mut conn = conn;
                    let mut buf = vec![0u8; 4096];
                    let Ok(n) = conn.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    all.lock().unwrap().extend_from_slice(&buf[..n]);
                    if buf[0] == 0x16 {
                        log.lock().unwrap().push("TLS".into());
                        return;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let first = text.lines().next().unwrap_or_default().to_string();
                    log.lock().unwrap().push(first.clone());
                    if let Some(h) = text
                        .lines()
                        .find(|l| l.to_ascii_lowercase().starts_with("host:"))
                    {
                        log.lock().unwrap().push(format!("HOST {}", h[5..].trim()));
                    }
                    if first.starts_with("GET ") || first.starts_with("POST ") {
                        // Whatever trails the request on this connection is recorded too.
                        let _ = conn.set_read_timeout(Some(std::time::Duration::from_millis(100)));
                        while let Ok(n) = conn.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            all.lock().unwrap().extend_from_slice(&buf[..n]);
                        }
                        let path = first.split_whitespace().nth(1).unwrap_or_default();
                        let body = format!("outside:{path}");
                        let _ = write!(
                            conn,
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    } else {
                        let _ = conn.write_all(format!("echo:{text}").as_bytes());
                    }
                });
            }
        });
        Server { port, seen, raw }
    }

    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Every byte received so far, as text.
    pub fn raw(&self) -> String {
        String::from_utf8_lossy(&self.raw.lock().unwrap()).into_owned()
    }
}

/// An abstract unix socket served outside the jail (no path: only a network namespace hides it).
fn abstract_socket(name: &str) -> UnixListener {
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    assert!(std::os::unix::net::UnixStream::connect_addr(&addr).is_ok());
    l
}

fn abstract_probe(name: &str) -> String {
    format!(
        "python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); print(\"ABSTRACT-CONNECTED\")' 2>&1 | tail -1; "
    )
}

fn unique(tag: &str) -> String {
    format!("cs-test-{tag}-{}", std::process::id())
}

pub(crate) const SENTENCE: &str = "is not allowed by the sandbox's network policy";

/// The default (no file, no `--network`) is `allowlist`: the container's loopback TCP services
/// and its abstract unix sockets are out of the jail's reach, and the proxy is its way out. And a
/// runtime directory whose path is longer than a socket address holds still gets its proxy.
#[test]
fn allowlist_is_the_default_and_loopback_and_abstract_sockets_are_unreachable() {
    let f = Fixture::new();
    let srv = Server::start();
    let name = unique("dflt");
    let _l = abstract_socket(&name);
    let long = f.root.join("a-runtime-directory-whose-path-is-longer-than-a-unix-socket-address-holds-as-some-users-have");
    std::fs::create_dir_all(&long).unwrap();
    let script = format!(
        "{}curl -sS -m 5 --noproxy '*' http://127.0.0.1:{}/dflt 2>&1; echo \" direct-rc=$?\"; \
         env | grep -c '^HTTPS_PROXY=http://127.0.0.1:3128$'; test -S /tmp/.claude-sandbox-net/proxy.sock && echo NETDIR; true",
        abstract_probe(&name),
        srv.port
    );
    for runtime in [None, Some(&long)] {
        let mut cmd = f.cmd(["run", "--", "bash", "-c", &script]);
        if let Some(dir) = runtime {
            cmd.env("CLAUDE_SANDBOX_RUNTIME_DIR", dir);
        }
        let out = ok(&cmd.output().unwrap());
        assert!(!out.contains("ABSTRACT-CONNECTED"), "{out}");
        assert!(!out.contains("outside:/dflt"), "{out}");
        assert!(!out.contains("direct-rc=0"), "{out}");
        assert!(
            out.lines().any(|l| l.trim() == "1"),
            "no proxy variable: {out}"
        );
        assert!(out.contains("NETDIR"), "{out}");
    }
    assert!(srv.seen().is_empty(), "{:?}", srv.seen());
}

/// `host`, chosen, is the container's network as before: no proxy, loopback and abstract sockets
/// reachable.
#[test]
fn host_mode_when_chosen_behaves_as_before() {
    let f = Fixture::new();
    let srv = Server::start();
    let name = unique("host");
    let _l = abstract_socket(&name);
    let script = format!(
        "{}curl -sS -m 10 http://127.0.0.1:{}/host; echo; env | grep -ci _proxy; test -e /tmp/.claude-sandbox-net && echo NETDIR; true",
        abstract_probe(&name),
        srv.port
    );
    let out = ok(&f
        .cmd(["run", "--network", "host", "--", "bash", "-c", &script])
        .output()
        .unwrap());
    assert!(out.contains("ABSTRACT-CONNECTED"), "{out}");
    assert!(out.contains("outside:/host"), "{out}");
    assert!(
        out.lines().any(|l| l.trim() == "0"),
        "proxy variables set: {out}"
    );
    assert!(!out.contains("NETDIR"), "{out}");
}

#[test]
fn none_mode_has_a_working_loopback_and_nothing_else() {
    let f = Fixture::new();
    let srv = Server::start();
    let name = unique("none");
    let _l = abstract_socket(&name);
    // A dev server started inside is reachable inside; the host's loopback and abstract sockets
    // are not.
    let script = format!(
        "{}python3 -m http.server 18080 --bind 127.0.0.1 >/dev/null 2>&1 & \
         for i in $(seq 100); do curl -s -m 1 -o /dev/null http://127.0.0.1:18080/ && break; sleep 0.1; done; \
         curl -s -m 5 -o /dev/null -w 'inside:%{{http_code}}\\n' http://127.0.0.1:18080/; \
         curl -sS -m 5 http://127.0.0.1:{}/outside 2>&1; echo \" outside-rc=$?\"; \
         ip -o link 2>/dev/null | cut -d: -f2; kill %1",
        abstract_probe(&name),
        srv.port
    );
    let out = ok(&f
        .cmd(["run", "--network", "none", "--", "bash", "-c", &script])
        .output()
        .unwrap());
    assert!(!out.contains("ABSTRACT-CONNECTED"), "{out}");
    assert!(out.contains("Connection refused"), "{out}");
    assert!(out.contains("inside:200"), "{out}");
    assert!(!out.contains("outside:/outside"), "{out}");
    assert!(out.contains("outside-rc=7"), "{out}");
    assert!(srv.seen().is_empty(), "{:?}", srv.seen());
}

#[test]
fn the_workspace_file_may_tighten_to_none_but_not_loosen() {
    let f = Fixture::new();
    let srv = Server::start();
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "[network]\nmode = \"none\"\n",
    )
    .unwrap();
    let script = format!(
        "curl -sS -m 5 http://127.0.0.1:{}/ws; echo \" rc=$?\"",
        srv.port
    );
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &script])
        .output()
        .unwrap());
    assert!(out.contains("rc=7"), "{out}");
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "[network]\nallow = [\"evil.example\"]\n",
    )
    .unwrap();
    let o = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`network.allow` loosens"),
        "{}",
        stderr(&o)
    );
}

pub(crate) fn allowlist(f: &Fixture, extra: &[&str], script: &str) -> std::process::Output {
    let mut args = vec!["run", "--network", "allowlist"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", "bash", "-c", script]);
    f.cmd(args)
        .env(
            "CLAUDE_SANDBOX_TEST_HOSTS",
            "allowed.test=127.0.0.1,private.test=10.0.0.1,meta.test=169.254.169.254,denied.test=127.0.0.1",
        )
        .output()
        .unwrap()
}

#[test]
fn allowlist_lets_allowed_names_through_and_refuses_the_rest_with_a_sentence() {
    let f = Fixture::new();
    let srv = Server::start();
    let p = srv.port;
    let name = unique("allow");
    let _l = abstract_socket(&name);
    let script = format!(
        "echo \"== plain\"; curl -sS -m 10 http://allowed.test:{p}/plain; echo \" rc=$?\"
         echo \"== fronted\"; curl -sS -m 10 -H 'Host: evil.test' http://allowed.test:{p}/fronted; echo \" rc=$?\"
         echo \"== tunnel\"; curl -sS -m 10 -p http://allowed.test:{p}/tunnel; echo \" rc=$?\"
         echo \"== tls\"; curl -sS -m 10 https://allowed.test:{p}/tls 2>&1; echo \" rc=$?\"
         echo \"== socks\"; curl -sS -m 10 --socks5-hostname 127.0.0.1:3128 http://allowed.test:{p}/socks; echo \" rc=$?\"
         echo \"== denied\"; curl -sS -m 10 http://denied.test:{p}/denied; echo \" rc=$?\"
         echo \"== denied-again\"; curl -sS -m 10 -p http://denied.test:{p}/denied2 2>&1; echo \" rc=$?\"
         echo \"== private\"; curl -sS -m 10 http://private.test/; echo \" rc=$?\"
         echo \"== meta\"; curl -sS -m 10 http://meta.test/; echo \" rc=$?\"
         echo \"== ip\"; curl -sS -m 10 http://93.184.216.34/; echo \" rc=$?\"
         echo \"== bypass\"; curl -sS -m 5 --noproxy '*' http://allowed.test:{p}/bypass 2>&1; echo \" rc=$?\"
         echo \"== bypass-ip\"; curl -sS -m 5 --noproxy '*' http://127.0.0.1:{p}/bypass 2>&1; echo \" rc=$?\"
         echo \"== abstract\"; {}
         echo \"== end\"",
        abstract_probe(&name)
    );
    let o = allowlist(
        &f,
        &[
            "--allow-domain",
            "allowed.test",
            "--allow-domain",
            "127.0.0.1",
            "--allow-domain",
            "private.test",
            "--allow-domain",
            "meta.test",
        ],
        &script,
    );
    let out = ok(&o);
    let section = |name: &str| -> String {
        let start = out
            .find(&format!("== {name}\n"))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        let rest = &out[start + name.len() + 4..];
        rest[..rest.find("== ").unwrap()].to_string()
    };
    assert!(section("plain").contains("outside:/plain rc=0"), "{out}");
    assert!(section("tunnel").contains("outside:/tunnel rc=0"), "{out}");
    // A plain request's Host is the authority that was checked, never the client's.
    assert!(
        section("fronted").contains("outside:/fronted rc=0"),
        "{out}"
    );
    let seen = srv.seen();
    assert!(!seen.iter().any(|l| l == "HOST evil.test"), "{seen:?}");
    assert!(seen.contains(&format!("HOST allowed.test:{p}")), "{seen:?}");
    // A TLS handshake went through the CONNECT tunnel (the server is plain, so curl then fails).
    assert!(srv.seen().contains(&"TLS".to_string()), "{:?}", srv.seen());
    assert!(section("socks").contains("outside:/socks rc=0"), "{out}");
    assert!(section("denied").contains(SENTENCE), "{out}");
    assert!(section("denied").contains("will not work"), "{out}");
    assert!(section("denied-again").contains("403"), "{out}");
    assert!(section("private").contains("resolves to 10.0.0.1"), "{out}");
    assert!(
        section("meta").contains("resolves to 169.254.169.254"),
        "{out}"
    );
    assert!(section("ip").contains(SENTENCE), "{out}");
    assert!(!section("bypass").contains("outside:"), "{out}");
    assert!(!section("bypass").contains(" rc=0"), "{out}");
    assert!(!section("bypass-ip").contains(" rc=0"), "{out}");
    assert!(!section("abstract").contains("ABSTRACT-CONNECTED"), "{out}");
    let seen = srv.seen();
    assert!(
        !seen
            .iter()
            .any(|l| l.contains("denied") || l.contains("bypass")),
        "{seen:?}"
    );
    // Every refusal is summed up at the end; each host is alerted once, retries are counted.
    let err = stderr(&o);
    assert!(err.contains("denied.test: 2 attempt(s) refused"), "{err}");
    let alerts = f.cmd(["alerts", "--json"]).output().unwrap();
    let alerts: serde_json::Value = serde_json::from_slice(&alerts.stdout).unwrap();
    let net: Vec<&serde_json::Value> = alerts
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "network-denied")
        .collect();
    let hosts: Vec<&str> = net.iter().map(|a| a["path"].as_str().unwrap()).collect();
    assert_eq!(net.len(), 4, "{hosts:?}");
    assert_eq!(
        hosts
            .iter()
            .filter(|h| h.starts_with("denied.test:"))
            .count(),
        1,
        "{hosts:?}"
    );
}

#[test]
fn allowlist_refuses_a_name_resolving_to_loopback_unless_loopback_is_listed() {
    let f = Fixture::new();
    let srv = Server::start();
    let script = format!("curl -sS -m 10 http://allowed.test:{}/rebind", srv.port);
    let out = ok(&allowlist(&f, &["--allow-domain", "allowed.test"], &script));
    assert!(out.contains("resolves to 127.0.0.1"), "{out}");
    assert!(srv.seen().is_empty(), "{:?}", srv.seen());
}

#[test]
fn git_ssh_proxy_command_tunnels_through_the_proxy_and_reports_refusals() {
    let f = Fixture::new();
    let srv = Server::start();
    let script = format!(
        "case \"$GIT_SSH_COMMAND\" in *'__connect %h %p'*) echo HAS-PROXYCOMMAND;; esac
         printf 'SSH-2.0-test\\r\\n' | $CLAUDE_SANDBOX_HOOK __connect allowed.test {p}; echo \" rc=$?\"
         $CLAUDE_SANDBOX_HOOK __connect evil.test 22 </dev/null 2>&1; echo \" rc=$?\"",
        p = srv.port
    );
    let out = ok(&allowlist(
        &f,
        &[
            "--allow-domain",
            "allowed.test",
            "--allow-domain",
            "127.0.0.1",
        ],
        &script,
    ));
    assert!(out.contains("HAS-PROXYCOMMAND"), "{out}");
    assert!(out.contains("echo:SSH-2.0-test"), "{out}");
    assert!(out.contains(SENTENCE) && out.contains(" rc=1"), "{out}");
}

#[test]
fn explain_and_doctor_show_the_mode_the_list_and_what_fails_by_design() {
    let f = Fixture::new();
    let cfg = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "[network]\nmode = \"allowlist\"\nallow = [\"*.example.org\"]\ndeny = [\"github.com\"]\n",
    )
    .unwrap();
    let out = ok(&f.cmd(["explain"]).output().unwrap());
    assert!(out.contains("Network: allowlist"), "{out}");
    // The short form names a few and counts the rest; --full lists every one.
    assert!(
        out.contains("allow: api.anthropic.com") && out.contains("more"),
        "{out}"
    );
    assert!(out.contains("deny (wins): github.com"), "{out}");
    let full = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(
        full.contains("api.anthropic.com") && full.contains("*.example.org"),
        "{full}"
    );
    let json = f.cmd(["explain", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["policy"]["network"]["mode"], "allowlist");
    assert_eq!(v["policy"]["network"]["deny"][0], "github.com");
    let doc = f.cmd(["doctor", "--json"]).output().unwrap();
    let checks: Vec<serde_json::Value> = serde_json::from_slice(&doc.stdout).unwrap();
    let net: Vec<&serde_json::Value> = checks.iter().filter(|c| c["name"] == "network").collect();
    // The mode, the bridged loopback ports (none listed here), the namespace trial.
    assert_eq!(net.len(), 3, "{net:#?}");
    assert!(
        net[1]["why"]
            .as_str()
            .unwrap()
            .contains("container loopback: nothing reachable"),
        "{net:#?}"
    );
    assert!(net.iter().all(|c| c["mark"] == "pass"), "{net:#?}");
    assert!(
        net[0]["why"].as_str().unwrap().contains("no route"),
        "{net:#?}"
    );
}

/// The real agents send their API connections to the proxy, which allows them by the default list
/// (on a machine that cannot reach the APIs the upstream connection then fails: the decision is what
/// is tested). Needs `claude`, `codex` and `gemini` installed (CI installs them with npm). Gemini
/// CLI is a Node program (its own proxy agent, whatever Node's release), the other two native.
#[test]
#[ignore = "needs the real agents (claude, codex, gemini) installed; CI runs it with --ignored"]
fn real_agents_reach_their_apis_through_the_proxy() {
    let f = Fixture::new();
    for (cmd, host) in [
        // `timeout`: an agent that cannot reach its API retries for minutes; the decision comes first.
        (
            vec!["timeout", "20", "claude", "-p", "hi"],
            "api.anthropic.com:443",
        ),
        (
            vec![
                "timeout",
                "20",
                "codex",
                "exec",
                "--skip-git-repo-check",
                "hi",
            ],
            "api.openai.com:443",
        ),
        (
            vec!["timeout", "20", "gemini", "-p", "hi"],
            "generativelanguage.googleapis.com:443",
        ),
    ] {
        let mut args = vec!["-v", "run", "--network", "allowlist", "--"];
        args.extend(cmd.iter().copied());
        let o = f
            .cmd(args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            // Gemini CLI: a key of the right name (it asks for none) and no trust prompt.
            .env("GEMINI_API_KEY", "not-a-key")
            .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(
            err.contains(&format!("network: allowed {host}")),
            "{cmd:?}: {err}"
        );
    }
}

/// A container that refuses network namespaces (here a user namespace whose
/// `max_net_namespaces` is 0): the default launch stops before the command, naming the cause and
/// the choice (`host`), and nothing is weakened; `--network host` starts.
#[test]
fn where_network_namespaces_are_refused_the_launch_stops_and_names_host_mode() {
    let f = Fixture::new();
    let run = |mode: &str| {
        let script = "echo 0 > /proc/sys/user/max_net_namespaces && exec \"$@\"";
        let mut c = std::process::Command::new("unshare");
        c.args(["-Ur", "sh", "-c", script, "sh"])
            .arg(bin())
            .arg("run");
        if !mode.is_empty() {
            c.args(["--network", mode]);
        }
        c.args(["--", "sh", "-c", "echo RAN"])
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let refused = run("");
    let err = stderr(&refused);
    assert_eq!(refused.status.code(), Some(125), "{err}");
    assert!(!stdout(&refused).contains("RAN"), "{}", stdout(&refused));
    assert!(
        err.lines().count() == 1
            && err.contains("mode = \"host\"")
            && err.contains("network namespace"),
        "{err}"
    );
    let host = run("host");
    assert_eq!(stdout(&host), "RAN\n", "{}", stderr(&host));
}
