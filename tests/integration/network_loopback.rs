//! Chosen loopback services (issue 34, item 2): in allowlist mode a port of the container's
//! loopback listed in `[network] loopback`, or named by a live IDE's lock file, is reachable on the
//! same port of the jail's loopback; every other port of the container's loopback is not, directly
//! or through the proxy. Real servers on this machine's loopback, real bwrap.

use crate::common::*;
use crate::network::Server;

fn user_config(f: &Fixture, text: &str) {
    let dir = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// A raw TCP client in the jail (no proxy variable is consulted): sends `ping`, prints the answer
/// or the error's name.
fn tcp_probe(port: u16) -> String {
    format!(
        "python3 -c 'import socket,sys\ntry:\n s=socket.create_connection((\"127.0.0.1\",{port}),5); s.sendall(b\"ping\"); print(\"{port}:\"+s.recv(100).decode())\nexcept OSError as e: print(\"{port}:\"+type(e).__name__)'; "
    )
}

#[test]
fn a_listed_loopback_port_is_reachable_and_an_unlisted_one_is_not() {
    let f = Fixture::new();
    let (listed, other) = (Server::start(), Server::start());
    user_config(
        &f,
        &format!(
            "[network]\nmode = \"allowlist\"\nloopback = [\"db:{}\"]\n",
            listed.port
        ),
    );
    let (l, o) = (listed.port, other.port);
    let script = format!(
        "{}{}curl -sS -m 10 http://127.0.0.1:{l}/listed; echo; \
         curl -sS -m 10 http://localhost:{l}/by-name; echo; \
         curl -sS -m 5 http://127.0.0.1:{o}/unlisted 2>&1; echo \" direct-rc=$?\"; \
         curl -sS -m 5 --noproxy '' -x http://127.0.0.1:3128 http://127.0.0.1:{o}/proxied -o /dev/null -w 'proxied:%{{http_code}}\\n'; \
         curl -sS -m 5 --noproxy '' -x http://127.0.0.1:3128 http://localhost:{o}/proxied -o /dev/null -w 'proxied-name:%{{http_code}}\\n'",
        tcp_probe(l),
        tcp_probe(o)
    );
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &script])
        .output()
        .unwrap());
    assert!(out.contains(&format!("{l}:echo:ping")), "{out}");
    assert!(out.contains("outside:/listed"), "{out}");
    assert!(out.contains("outside:/by-name"), "{out}");
    assert!(
        out.contains(&format!("{o}:ConnectionRefusedError")),
        "{out}"
    );
    assert!(out.contains("direct-rc=7"), "{out}");
    assert!(out.contains("proxied:403"), "{out}");
    assert!(out.contains("proxied-name:403"), "{out}");
    assert!(other.seen().is_empty(), "{:?}", other.seen());
    assert!(
        listed.seen().iter().any(|s| s == "GET /listed HTTP/1.1"),
        "{:?}",
        listed.seen()
    );

    // explain names it; the workspace file cannot open one.
    let said = ok(&f.cmd(["explain"]).output().unwrap());
    assert!(
        said.contains(&format!("{l}: [network] loopback (db)")),
        "{said}"
    );
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        format!("[network]\nloopback = [{o}]\n"),
    )
    .unwrap();
    let refused = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("`network.loopback` loosens"),
        "{}",
        stderr(&refused)
    );
}

#[test]
fn a_live_ide_lock_files_port_is_bridged_and_a_dead_ones_is_not() {
    let f = Fixture::new();
    user_config(&f, "[network]\nmode = \"allowlist\"\n");
    let (live, dead) = (Server::start(), Server::start());
    let ide = f.home.join(".claude/ide");
    std::fs::create_dir_all(&ide).unwrap();
    // The extension's format: the port is the file's name, the IDE's pid is in it.
    let lock = |pid: u32| {
        format!(
            "{{\"pid\":{pid},\"workspaceFolders\":[\"{}\"],\"ideName\":\"Visual Studio Code\",\"transport\":\"ws\",\"runningInWindows\":false,\"authToken\":\"tok-123\"}}",
            f.ws.display()
        )
    };
    let mut ide_process = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    std::fs::write(
        ide.join(format!("{}.lock", live.port)),
        lock(ide_process.id()),
    )
    .unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    std::fs::write(ide.join(format!("{}.lock", dead.port)), lock(gone_pid)).unwrap();

    let script = format!(
        "{}{}cat ~/.claude/ide/{}.lock; echo; ls ~/.claude/ide/",
        tcp_probe(live.port),
        tcp_probe(dead.port),
        live.port
    );
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &script])
        .output()
        .unwrap());
    assert!(out.contains(&format!("{}:echo:ping", live.port)), "{out}");
    assert!(
        out.contains(&format!("{}:ConnectionRefusedError", dead.port)),
        "{out}"
    );
    assert!(dead.seen().is_empty(), "{:?}", dead.seen());
    // The jail's Claude Code finds the live IDE's lock where it looks, naming a process it can see
    // alive (the jail's first, an ancestor of every process there), with the IDE's token; the dead
    // IDE's lock is not there.
    let jail_lock = out
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no lock in the jail: {out}"));
    let v: serde_json::Value = serde_json::from_str(jail_lock).unwrap();
    assert_eq!(
        (v["pid"].as_i64(), v["authToken"].as_str()),
        (Some(1), Some("tok-123")),
        "{out}"
    );
    assert!(!out.contains(&format!("{}.lock", dead.port)), "{out}");
    // Yours stays as the IDE wrote it.
    let yours = std::fs::read_to_string(ide.join(format!("{}.lock", live.port))).unwrap();
    assert!(
        yours.contains(&format!("\"pid\":{}", ide_process.id())),
        "{yours}"
    );
    // `ide = false`: the same live IDE is neither bridged nor handed in.
    user_config(&f, "[network]\nmode = \"allowlist\"\nide = false\n");
    let off = ok(&f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            &format!("{}ls -A ~/.claude/ide/; echo END", tcp_probe(live.port)),
        ])
        .output()
        .unwrap());
    assert!(
        off.contains(&format!("{}:ConnectionRefusedError", live.port)),
        "{off}"
    );
    assert!(!off.contains(".lock"), "{off}");
    let _ = ide_process.kill();
    let _ = ide_process.wait();
    // The IDE is gone: the next session (any mode) has no copy of its lock left.
    let after = ok(&f
        .cmd([
            "run",
            "--network",
            "host",
            "--",
            "bash",
            "-c",
            "ls -A ~/.claude/ide/; echo END",
        ])
        .output()
        .unwrap());
    assert!(!after.contains(".lock"), "{after}");
}

#[test]
fn a_listed_port_with_nothing_outside_is_refused_and_host_mode_needs_no_list() {
    let f = Fixture::new();
    // A port nothing listens on: bound and released.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let srv = Server::start();
    user_config(
        &f,
        &format!("[network]\nmode = \"allowlist\"\nloopback = [{free}]\n"),
    );
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &tcp_probe(free)])
        .output()
        .unwrap());
    // The jail's listener accepts, the proxy finds nothing outside: the connection is closed.
    assert!(
        out.contains(&format!("{free}:\n"))
            || out.contains(&format!("{free}:ConnectionResetError")),
        "{out}"
    );
    // `host` mode: the container's loopback as it is, every port.
    let out = ok(&f
        .cmd([
            "run",
            "--network",
            "host",
            "--",
            "bash",
            "-c",
            &tcp_probe(srv.port),
        ])
        .output()
        .unwrap());
    assert!(out.contains(&format!("{}:echo:ping", srv.port)), "{out}");
}

/// Gemini CLI's IDE companion file, found under the launcher's `TMPDIR` (here in the workspace, so
/// the jail sees the same directory): a live IDE's port is bridged, a gone one's is not.
#[test]
fn a_live_gemini_ide_companion_files_port_is_bridged_and_a_dead_ones_is_not() {
    let f = Fixture::new();
    user_config(&f, "[network]\nmode = \"allowlist\"\n");
    let (live, dead) = (Server::start(), Server::start());
    let tmp = f.ws.join("tmp");
    let dir = tmp.join("gemini/ide");
    std::fs::create_dir_all(&dir).unwrap();
    let file = |pid: u32, port: u16| {
        std::fs::write(
            dir.join(format!("gemini-ide-server-{pid}-{port}.json")),
            format!(
                "{{\"port\":{port},\"workspacePath\":\"{}\",\"authToken\":\"g-tok\"}}",
                f.ws.display()
            ),
        )
        .unwrap();
    };
    let mut ide_process = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    file(ide_process.id(), live.port);
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    file(gone_pid, dead.port);
    let script = format!("{}{}", tcp_probe(live.port), tcp_probe(dead.port));
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &script])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap());
    let said = ok(&f.cmd(["explain"]).env("TMPDIR", &tmp).output().unwrap());
    let _ = ide_process.kill();
    let _ = ide_process.wait();
    assert!(out.contains(&format!("{}:echo:ping", live.port)), "{out}");
    assert!(
        out.contains(&format!("{}:ConnectionRefusedError", dead.port)),
        "{out}"
    );
    assert!(dead.seen().is_empty(), "{:?}", dead.seen());
    assert!(
        said.contains(&format!("{}: Gemini CLI IDE companion file", live.port)),
        "{said}"
    );
}
