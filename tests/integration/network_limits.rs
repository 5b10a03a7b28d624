//! The jail cannot starve the guard through the proxy, and cannot smuggle a request past it: real
//! launcher, real bwrap, servers on this machine's loopback outside the jail (issue 34, item 0).
//! The flood's figures are printed (`--nocapture`) and are in docs/network.md, "Limits".

use crate::common::*;
use crate::network::{allowlist, Server};
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;

const ALLOW: &[&str] = &[
    "--allow-domain",
    "allowed.test",
    "--allow-domain",
    "127.0.0.1",
];

/// Send each raw request to the bridge from inside the jail; print `== NAME` and the response's
/// first line and headers.
fn raw_requests(p: u16) -> String {
    format!(
        r#"python3 - <<'PY'
import socket
P = {p}
cases = [
  ("pipelined", b"GET http://allowed.test:%d/one HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://evil.test:%d/two HTTP/1.1\r\nHost: evil.test\r\n\r\n" % (P, P)),
  ("length", b"POST http://allowed.test:%d/post HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /smuggled1 HTTP/1.1\r\nHost: evil.test\r\n\r\n" % P),
  ("chunked", b"POST http://allowed.test:%d/chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n\r\nGET /smuggled2 HTTP/1.1\r\nHost: evil.test\r\n\r\n" % P),
  ("clte", b"POST http://allowed.test:%d/clte HTTP/1.1\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled3 HTTP/1.1\r\n\r\n" % P),
  ("lone-lf", b"GET http://allowed.test:%d/lf HTTP/1.1\r\nX: a\nHost: evil.test\r\n\r\n" % P),
]
for name, data in cases:
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(data)
    s.settimeout(10)
    got = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            got += b"[TIMEOUT]"
            break
        if not b:
            break
        got += b
    print("== " + name)
    print(got.decode(errors="replace"))
print("== end")
PY"#
    )
}

#[test]
fn plain_http_is_one_request_per_connection_and_nothing_smuggled_passes() {
    let f = Fixture::new();
    let srv = Server::start();
    let out = ok(&allowlist(&f, ALLOW, &raw_requests(srv.port)));
    let section = |name: &str| -> String {
        let start = out
            .find(&format!("== {name}\n"))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        let rest = &out[start + name.len() + 4..];
        rest[..rest.find("== ").unwrap()].to_string()
    };
    // The first request of each connection is served, told the connection closes after it.
    for (name, body) in [
        ("pipelined", "outside:/one"),
        ("length", "outside:/post"),
        ("chunked", "outside:/chunked"),
    ] {
        let s = section(name);
        assert!(s.starts_with("HTTP/1.1 200 OK"), "{name}: {s}");
        assert!(s.contains("Connection: close"), "{name}: {s}");
        assert!(s.contains(body) && !s.contains("[TIMEOUT]"), "{name}: {s}");
    }
    // Both framings at once, or a lone LF that a lenient server would split on: refused, unsent.
    assert!(section("clte").starts_with("HTTP/1.1 400"), "{out}");
    assert!(section("lone-lf").starts_with("HTTP/1.1 400"), "{out}");
    // The server received each body, and nothing after it.
    let raw = srv.raw();
    assert!(
        raw.contains("hello") && raw.contains("5\r\nworld\r\n0\r\n\r\n"),
        "{raw}"
    );
    for never in ["/two", "smuggled", "evil.test", "/clte", "/lf"] {
        assert!(!raw.contains(never), "{never} reached the server: {raw}");
    }
}

/// A TCP server that accepts and holds every connection open (a tunnel that stays up).
fn holding_server() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let mut b = [0u8; 1024];
                while matches!(c.read(&mut b), Ok(n) if n > 0) {}
            });
        }
    });
    port
}

#[test]
fn the_proxy_bounds_pending_heads_open_connections_and_the_whole_head() {
    let f = Fixture::new();
    let srv = Server::start();
    let hold = holding_server();
    let script = format!(
        r#"python3 - <<'PY'
import socket, subprocess, threading, time
SOCK = "/tmp/.claude-sandbox-net/proxy.sock"
def closed(s):
    s.settimeout(0.2)
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
# Twenty idle connections: beyond the eight pending allowed, the oldest are closed.
idle = []
for i in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK); idle.append(s)
time.sleep(0.5)
print("idle closed: %d of the first 12, %d of the last 8" % (
    sum(closed(s) for s in idle[:12]), sum(closed(s) for s in idle[12:])), flush=True)
for s in idle:
    s.close()
# A drip: one byte every half second. The head's deadline is for all of it.
def drip():
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
    t = time.time()
    try:
        for c in b"CONNECT allowed.test:{hold} HTTP/1.1\r\nHost: x\r\n\r\n":
            s.send(bytes([c])); time.sleep(0.5)
        print("drip: served", flush=True)
    except OSError:
        print("drip: closed after %.1f s" % (time.time() - t), flush=True)
d = threading.Thread(target=drip); d.start()
r = subprocess.run(["curl", "-sS", "-m", "10", "http://allowed.test:{p}/through"], capture_output=True, text=True)
print("allowed:", r.stdout, r.stderr, flush=True)
time.sleep(0.5)  # its connection through the proxy ends when the server's does
# Two tunnels held open: the third is refused with a sentence, and served once one closes.
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.test:{hold} HTTP/1.1\r\nHost: x\r\n\r\n")
    s.settimeout(10)
    return s, s.recv(4096).decode(errors="replace")
held = [tunnel() for _ in range(2)]
print("held:", [h[1].split("\r\n")[0] for h in held], flush=True)
third = tunnel()
print("third:", third[1].split("\r\n")[0], "|", third[1].split("\r\n\r\n", 1)[-1].strip(), flush=True)
held[0][0].close(); time.sleep(0.5)
print("fourth:", tunnel()[1].split("\r\n")[0], flush=True)
d.join()
PY"#,
        hold = hold,
        p = srv.port
    );
    let o = f
        .cmd(
            [
                &["run", "--network", "allowlist"][..],
                ALLOW,
                &["--", "bash", "-c", script.as_str()],
            ]
            .concat(),
        )
        .env("CLAUDE_SANDBOX_TEST_HOSTS", "allowed.test=127.0.0.1")
        .env(
            "CLAUDE_SANDBOX_TEST_NET_LIMITS",
            "pending=8,tunnels=2,head_ms=3000",
        )
        .output()
        .unwrap();
    let out = ok(&o);
    assert!(
        out.contains("idle closed: 12 of the first 12, 0 of the last 8"),
        "{out}"
    );
    assert!(out.contains("allowed: outside:/through"), "{out}");
    assert!(
        out.contains(
            "held: ['HTTP/1.1 200 Connection Established', 'HTTP/1.1 200 Connection Established']"
        ),
        "{out}"
    );
    assert!(out.contains("third: HTTP/1.1 503"), "{out}");
    assert!(
        out.contains("connections open through the sandbox's proxy"),
        "{out}"
    );
    assert!(out.contains("fourth: HTTP/1.1 200"), "{out}");
    // The drip's head (49 bytes, 24 s at its pace) is cut at the deadline, well before it ends.
    let drip = out
        .lines()
        .find_map(|l| l.strip_prefix("drip: closed after "))
        .unwrap_or_else(|| panic!("the drip was served: {out}"));
    let secs: f64 = drip.trim_end_matches(" s").parse().unwrap();
    assert!(secs < 20.0, "{out}");
    let err = stderr(&o);
    assert!(err.contains("closed by the proxy's limits"), "{err}");
}

/// Descriptors and threads of a process, from outside.
fn fds_and_threads(pid: u32) -> Option<(usize, usize)> {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()?;
    Some((fds, threads))
}

/// The launcher's child that is the proxy: `claude-sandbox`, in a process group of its own.
fn proxy_of(launcher: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{launcher}/task/{launcher}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find(|c: &u32| {
            let stat = std::fs::read_to_string(format!("/proc/{c}/stat")).unwrap_or_default();
            let after = stat
                .rsplit_once(')')
                .map(|(_, r)| r.to_string())
                .unwrap_or_default();
            let pgid: Option<u32> = after.split_whitespace().nth(2).and_then(|p| p.parse().ok());
            std::fs::read_to_string(format!("/proc/{c}/comm"))
                .is_ok_and(|n| n.trim() == "claude-sandbox")
                && pgid == Some(*c)
        })
}

/// In the jail: 2000 connections of one byte each to the proxy (fewer if the jail's descriptor
/// limit says so), a slow drip, an allowed request during the flood, and a plant in ~/.local/bin.
fn flood_script(port: u16) -> String {
    format!(
        r##"python3 - <<'PY'
import os, resource, socket, subprocess, threading, time
SOCK = "/tmp/.claude-sandbox-net/proxy.sock"
# The jail's own descriptor limit first (an ordinary user's soft limit is 1024).
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 2100 if hard == resource.RLIM_INFINITY else min(hard, 2100)
if soft != resource.RLIM_INFINITY and soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft = want
n = 2000 if soft == resource.RLIM_INFINITY else min(2000, soft - 64)
print("flood:", n, flush=True)
flood = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
    try: s.send(b"G")
    except OSError: pass
    flood.append(s)
def drip():
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
    try:
        for c in b"GET http://allowed.test/ HTTP/1.1\r\n\r\n":
            s.send(bytes([c])); time.sleep(0.3)
    except OSError:
        pass
threading.Thread(target=drip, daemon=True).start()
open("flooding", "w").close()
r = subprocess.run(["curl", "-sS", "-m", "20", "http://allowed.test:{port}/during-flood"], capture_output=True, text=True)
print("allowed:", r.stdout, r.stderr, flush=True)
git = os.path.expanduser("~/.local/bin/git")
with open(git, "w") as g:
    g.write("#!/bin/sh\necho PLANTED\n")
os.chmod(git, 0o755)
time.sleep(3)
os.unlink("flooding")
PY"##
    )
}

#[test]
fn a_flood_from_the_jail_leaves_the_launcher_alone_and_a_plant_is_still_quarantined() {
    let f = Fixture::sharing_local_bin();
    let srv = Server::start();
    let script = flood_script(srv.port);
    let mut child = f
        .cmd(
            [
                &["run", "--network", "allowlist"][..],
                ALLOW,
                &["--", "bash", "-c", script.as_str()],
            ]
            .concat(),
        )
        .env("CLAUDE_SANDBOX_TEST_HOSTS", "allowed.test=127.0.0.1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let (mut launcher_max, mut proxy_max, mut sampled) = ((0, 0), (0, 0), 0);
    let flooding = f.ws.join("flooding");
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 120 {
        if flooding.exists() {
            sampled += 1;
            if let Some((fds, th)) = fds_and_threads(launcher) {
                launcher_max = (launcher_max.0.max(fds), launcher_max.1.max(th));
            }
            if let Some((fds, th)) = proxy_of(launcher).and_then(fds_and_threads) {
                proxy_max = (proxy_max.0.max(fds), proxy_max.1.max(th));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let out = ok(&o);
    // Past the proxy's caps (256 pending, 256 open) many times over, whatever the jail's limit.
    let n: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("flood: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(n >= 900, "the jail could open only {n} connections: {out}");
    eprintln!(
        "flood of {n} + drip: launcher at most {} fds / {} threads; proxy at most {} fds / {} threads ({sampled} samples)",
        launcher_max.0, launcher_max.1, proxy_max.0, proxy_max.1
    );
    assert!(sampled > 5, "the flood was never sampled: {out}");
    assert!(out.contains("allowed: outside:/during-flood"), "{out}");
    // The launcher holds what it held before the flood; the proxy stays within its limits
    // (256 pending, 256 open connections of two descriptors each, and a margin).
    assert!(
        launcher_max.0 < 64 && launcher_max.1 < 16,
        "{launcher_max:?}"
    );
    assert!(
        proxy_max.0 > 200,
        "the flood did not reach the proxy: {proxy_max:?}"
    );
    assert!(proxy_max.0 <= 256 + 2 * 256 + 64, "{proxy_max:?}");
    assert!(proxy_max.1 <= 256 + 2, "{proxy_max:?}");
    // The plant made during the flood was quarantined.
    let git = f.home.join(".local/bin/git");
    assert!(!git.exists(), "the plant survived the session");
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&alerts).unwrap();
    let quarantined = v.as_array().unwrap().iter().any(|a| {
        a["path"].as_str().map(Path::new) == Some(git.as_path()) && a["action"] == "quarantined"
    });
    assert!(quarantined, "{alerts}");
}

#[test]
fn the_proxy_executed_instead_of_forked_serves_the_same() {
    // `CLAUDE_SANDBOX_SEAL=exec`: what a launcher that already runs threads does.
    let f = Fixture::new();
    let srv = Server::start();
    let script = format!(
        "curl -sS -m 10 http://allowed.test:{}/exec; echo; curl -sS -m 10 http://denied.test/",
        srv.port
    );
    let o = f
        .cmd(
            [
                &["run", "--network", "allowlist"][..],
                ALLOW,
                &["--", "bash", "-c", script.as_str()],
            ]
            .concat(),
        )
        .env("CLAUDE_SANDBOX_TEST_HOSTS", "allowed.test=127.0.0.1")
        .env("CLAUDE_SANDBOX_SEAL", "exec")
        .output()
        .unwrap();
    let out = ok(&o);
    assert!(out.contains("outside:/exec"), "{out}");
    assert!(out.contains(crate::network::SENTENCE), "{out}");
    assert!(
        stderr(&o).contains("denied.test: 1 attempt(s) refused"),
        "{}",
        stderr(&o)
    );
}

/// In the jail: `n` CONNECT tunnels at once to a server that holds them, all asked before any
/// answer is read; the answers counted; then all closed and one more request made.
fn tunnels_script(hold: u16, port: u16) -> String {
    format!(
        r#"python3 - <<'PY'
import os, resource, socket, subprocess, time
SOCK = "/tmp/.claude-sandbox-net/proxy.sock"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = 1100 if hard == resource.RLIM_INFINITY else min(hard, 1100)
if soft != resource.RLIM_INFINITY and soft < want:
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft = want
n = 1000 if soft == resource.RLIM_INFINITY else min(1000, soft - 64)
conns = []
t0 = time.time()
for i in range(n):
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
    s.sendall(b"CONNECT allowed.test:{hold} HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
    conns.append(s)
codes = {{}}
for s in conns:
    s.settimeout(20)
    try:
        line = s.recv(4096).split(b"\r\n")[0].decode(errors="replace")
    except OSError as e:
        line = "error " + type(e).__name__
    code = line.split(" ")[1] if line.startswith("HTTP/") else line
    codes[code] = codes.get(code, 0) + 1
print("tunnels: %d asked, answers %s in %.1f s" % (n, sorted(codes.items()), time.time() - t0), flush=True)
open("loaded", "w").close()
time.sleep(3)
os.unlink("loaded")
for s in conns:
    s.close()
time.sleep(1)
r = subprocess.run(["curl", "-sS", "-m", "20", "http://allowed.test:{port}/after"], capture_output=True, text=True)
print("after:", r.stdout, r.stderr, flush=True)
PY"#
    )
}

/// Issue 38, item 4: a thousand connections served at once (not idle ones: each asks for a tunnel
/// to a loopback server that holds it). The proxy serves its cap and refuses the rest with a
/// sentence; the launcher holds what it held before; all closed, the next request is served.
#[test]
fn a_thousand_tunnels_at_once_are_capped_and_the_launcher_left_alone() {
    let f = Fixture::new();
    let srv = Server::start();
    let hold = holding_server();
    let script = tunnels_script(hold, srv.port);
    let mut child = f
        .cmd(
            [
                &["run", "--network", "allowlist"][..],
                ALLOW,
                &["--", "bash", "-c", script.as_str()],
            ]
            .concat(),
        )
        .env("CLAUDE_SANDBOX_TEST_HOSTS", "allowed.test=127.0.0.1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let (mut launcher_max, mut proxy_max, mut sampled) = ((0, 0), (0, 0), 0);
    let loaded = f.ws.join("loaded");
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed().as_secs() < 180 {
        if loaded.exists() {
            sampled += 1;
            if let Some((fds, th)) = fds_and_threads(launcher) {
                launcher_max = (launcher_max.0.max(fds), launcher_max.1.max(th));
            }
            if let Some((fds, th)) = proxy_of(launcher).and_then(fds_and_threads) {
                proxy_max = (proxy_max.0.max(fds), proxy_max.1.max(th));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let out = ok(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("tunnels: "))
        .unwrap_or_else(|| panic!("{out}"));
    eprintln!(
        "{line}; launcher at most {} fds / {} threads; proxy at most {} fds / {} threads ({sampled} samples)",
        launcher_max.0, launcher_max.1, proxy_max.0, proxy_max.1
    );
    let asked: usize = line["tunnels: ".len()..]
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(asked >= 900, "{line}");
    // The cap (256, or fewer if the proxy's descriptor limit is lower) served, every other one
    // refused with a 503, none left unanswered.
    let count = |code: &str| -> usize {
        line.split(&format!("('{code}', "))
            .nth(1)
            .and_then(|r| r.split(')').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let (served, busy) = (count("200"), count("503"));
    assert!(served > 0 && served <= 256, "{line}");
    assert_eq!(served + busy, asked, "{line}");
    assert!(sampled > 5, "the load was never sampled: {out}");
    assert!(
        launcher_max.0 < 64 && launcher_max.1 < 16,
        "{launcher_max:?}"
    );
    // A thread and two descriptors per tunnel, the pending ones, and a margin.
    assert!(proxy_max.1 <= served + 8, "{proxy_max:?}");
    assert!(proxy_max.0 <= 3 * 256 + 64, "{proxy_max:?}");
    assert!(out.contains("after: outside:/after"), "{out}");
}
