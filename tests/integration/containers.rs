//! The Docker filter (issue 41 part 3): with `[containers] docker = true`, the jail's `$DOCKER_HOST`
//! is a filter the launcher serves, which runs a plain container, refuses a host bind mount,
//! `--privileged` and the host's network (alerted), keeps the human's containers out of reach,
//! and removes the session's containers at its end (and an ended session's at the next launch). A real dockerd of the test's own (a private
//! data root and socket, no bridge), a real docker CLI in a real jail, an image made from this
//! machine's own `sh` and `sleep` (no pull).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "claude-sandbox-test/mini:1";

/// A dockerd of the test's own; stopped (SIGTERM, so that it stops its containerd) when dropped.
pub struct Dockerd {
    child: std::process::Child,
    pub sock: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        signal(self.child.id(), nix::sys::signal::Signal::SIGTERM);
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ci() -> bool {
    std::env::var_os("CLAUDE_SANDBOX_CI").is_some_and(|v| v == "1")
}

/// Say why not; under CI a failure, but for the ordinary user's run (`ci_user_lacks_it`: dockerd
/// needs root, which CI's second pass is not).
fn not_run(test: &str, why: &str, ci_user_lacks_it: bool) -> Option<Dockerd> {
    assert!(
        !ci() || ci_user_lacks_it,
        "{test}: {why} (CI installs docker.io and Testcontainers: .ci/run)"
    );
    eprintln!("\n!!!!!!!! {test}: NOT RUN here — {why} !!!!!!!!\n");
    None
}

impl Dockerd {
    /// Start one with `IMAGE` imported, or say why not (a failure under CI).
    pub fn start(test: &str) -> Option<Dockerd> {
        if !is_root() {
            return not_run(test, "dockerd needs root", true);
        }
        if !Path::new("/usr/sbin/dockerd").is_file() && !Path::new("/usr/bin/dockerd").is_file() {
            return not_run(
                test,
                "dockerd is not installed (apt-get install docker.io)",
                false,
            );
        }
        if !tool_or_say(test, "docker", false) {
            return None;
        }
        // Short paths: containerd's socket lies below the exec root (108 bytes at most).
        let dir = tempfile::Builder::new()
            .prefix("cs-dk-")
            .tempdir_in(test_tmp())
            .unwrap();
        let d = dir.path();
        let sock = d.join("docker.sock");
        let log = d.join("log");
        let child = Command::new("dockerd")
            .arg("--data-root")
            .arg(d.join("data"))
            .arg("--exec-root")
            .arg(d.join("exec"))
            .arg("--pidfile")
            .arg(d.join("pid"))
            .arg("-H")
            .arg(format!("unix://{}", sock.display()))
            .args(["--bridge=none", "--iptables=false", "--ip6tables=false"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let dockerd = Dockerd { child, sock, dir };
        let t = Instant::now();
        while !dockerd.docker(&["info"]).status.success() {
            if t.elapsed() > Duration::from_secs(30) {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let last = tail.lines().last().unwrap_or("").to_string();
                return not_run(test, &format!("dockerd cannot start here: {last}"), false);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        dockerd.import_mini();
        Some(dockerd)
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.sock.display())
    }

    pub fn docker(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .args(args)
            .env("DOCKER_HOST", self.host())
            .env("DOCKER_CONFIG", self.dir.path().join("cli"))
            .output()
            .unwrap()
    }

    /// `IMAGE`: this machine's `sh`, `sleep`, `cat` and their libraries.
    fn import_mini(&self) {
        let script = format!(
            "set -e; files=$(for b in /bin/sh /bin/sleep /bin/cat /bin/true; do echo $b; \
             ldd $b | grep -o '/[^ ]*'; done | sort -u); \
             tar -chf - $files 2>/dev/null | DOCKER_HOST={} docker import - {IMAGE} >/dev/null",
            self.host()
        );
        let out = Command::new("bash").args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "import: {}", stderr(&out));
    }
}

fn refused_alerts(f: &Fixture) -> Vec<serde_json::Value> {
    std::fs::read_to_string(f.rt.join("alerts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|a: &serde_json::Value| a["kind"] == "docker-refused")
        .collect()
}

/// doctor says the filter starts; a high `docker-refused` alert for each kind of refusal the jail
/// tried, one per kind.
fn assert_doctor_and_alerts(f: &Fixture, d: &Dockerd) {
    let alerts = refused_alerts(f);
    for class in ["mount", "privileged", "host-namespace", "not-ours"] {
        let a = alerts
            .iter()
            .find(|a| a["path"] == format!("docker:{class}"))
            .unwrap_or_else(|| panic!("no {class} alert: {alerts:?}"));
        assert_eq!(a["severity"], "high", "{a}");
    }
    // doctor says the filter can start.
    let doc = f
        .cmd(["doctor"])
        .env("DOCKER_HOST", d.host())
        .output()
        .unwrap();
    assert!(
        stdout(&doc).contains("docker filter: the filter starts"),
        "{}",
        stdout(&doc)
    );
    // One per kind: --net host and --pid host are one alert.
    let ns = alerts
        .iter()
        .filter(|a| a["path"] == "docker:host-namespace")
        .count();
    assert_eq!(ns, 1, "{alerts:?}");
}

/// A fixture whose user file turns the filter on.
fn filter_on() -> Fixture {
    let f = Fixture::new();
    let cfg = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[containers]\ndocker = true\n").unwrap();
    f
}

fn names(d: &Dockerd) -> Vec<String> {
    let out = d.docker(&["ps", "-a", "--format", "{{.Names}}"]);
    stdout(&out).lines().map(str::to_string).collect()
}

#[test]
fn the_docker_cli_runs_through_the_filter_and_host_access_is_refused() {
    let Some(d) = Dockerd::start("containers::the_docker_cli_runs_through_the_filter") else {
        return;
    };
    let f = filter_on();
    // The human's own container, which the jail may not touch.
    let out = d.docker(&["run", "-d", "--name", "humans", IMAGE, "sleep", "300"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A session of this runtime directory killed outright left one (swept at this launch); one of
    // another runtime directory's is not this launcher's to judge (kept).
    let rt = format!("claude-sandbox.runtime={}", f.rt.display());
    for (name, runtime) in [
        ("dead", rt.as_str()),
        ("elsewhere", "claude-sandbox.runtime=/x"),
    ] {
        let out = d.docker(&[
            "create",
            "--name",
            name,
            "--label",
            "claude-sandbox.session=1-dead",
            "--label",
            runtime,
            IMAGE,
            "true",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let script = format!(
        r#"
        echo "host=$DOCKER_HOST"
        docker run --rm {IMAGE} sh -c 'echo hi from the container'; echo "plain=$?"
        docker run --rm -v /:/host {IMAGE} cat /host/etc/hostname; echo "bind=$?"
        docker run --rm --mount type=bind,src=/,dst=/host {IMAGE} true; echo "mount=$?"
        docker run --rm --privileged {IMAGE} true; echo "privileged=$?"
        docker run --rm --net host {IMAGE} true; echo "net=$?"
        docker run --rm --pid host {IMAGE} true; echo "pid=$?"
        docker stop humans; echo "stop-humans=$?"
        docker exec humans true; echo "exec=$?"
        docker run -d --name left {IMAGE} sleep 300 >/dev/null; echo "left=$?"
        docker inspect -f '{{{{.HostConfig.NetworkMode}}}}' left
        docker ps -a --format '{{{{.Names}}}}' | tr '\n' ' '; echo "<- listed"
        python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' \
            {real} 2>/dev/null; echo "real=$?"
        "#,
        real = d.sock.display()
    );
    let out = f
        .cmd(["run", "--", "bash", "-c", &script])
        .env("DOCKER_HOST", d.host())
        .output()
        .unwrap();
    let (so, se) = (stdout(&out), stderr(&out));
    let says = |k: &str, v: &str| {
        assert!(so.contains(&format!("{k}={v}\n")), "{k}={v}?\n{so}\n{se}");
    };
    says("host", "unix:///tmp/.claude-sandbox-docker/docker.sock");
    assert!(so.contains("hi from the container\n"), "{so}\n{se}");
    says("plain", "0");
    for k in ["bind", "mount", "privileged", "net", "pid"] {
        says(k, "125");
    }
    says("stop-humans", "1");
    says("exec", "1");
    says("left", "0");
    assert!(se.contains("claude-sandbox: HostConfig.Binds"), "{se}");
    assert!(se.contains("claude-sandbox: HostConfig.Privileged"), "{se}");
    assert!(se.contains("not one this session created"), "{se}");
    assert!(
        so.contains("\nnone\n"),
        "the jail's network is its own: {so}"
    );
    assert!(
        so.contains("left <- listed"),
        "the human's container is not listed: {so}"
    );
    assert!(
        !so.contains("real=0"),
        "the engine's own socket stays masked: {so}"
    );
    // After the session: its container removed, the human's untouched.
    let left = names(&d);
    assert!(!left.iter().any(|n| n == "left"), "{left:?}");
    assert!(left.iter().any(|n| n == "humans"), "{left:?}");
    assert!(!left.iter().any(|n| n == "dead"), "swept: {left:?}");
    assert!(left.iter().any(|n| n == "elsewhere"), "{left:?}");
    assert_doctor_and_alerts(&f, &d);
}

#[test]
fn the_workspace_file_cannot_turn_the_filter_on() {
    let Some(d) = Dockerd::start("containers::the_workspace_file_cannot_turn_the_filter_on") else {
        return;
    };
    let f = Fixture::new();
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "[containers]\ndocker = true\n",
    )
    .unwrap();
    let out = f
        .cmd(["run", "--", "true"])
        .env("DOCKER_HOST", d.host())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("containers.docker"),
        "{}",
        stderr(&out)
    );
}

/// Testcontainers' basic case, with Testcontainers for Python in `/opt/claude-sandbox-tc-venv`
/// (.ci/run installs it) and Ryuk off (it needs a pull).
#[test]
fn testcontainers_basic_case_runs_in_the_jail() {
    const TEST: &str = "containers::testcontainers_basic_case_runs_in_the_jail";
    // The engine first: an ordinary user has none (said, not failed), whatever else is there.
    let Some(d) = Dockerd::start(TEST) else {
        return;
    };
    let venv = Path::new("/opt/claude-sandbox-tc-venv/bin/python");
    if !venv.is_file() {
        let why = "python3 -m venv /opt/claude-sandbox-tc-venv && \
                   /opt/claude-sandbox-tc-venv/bin/pip install testcontainers";
        not_run(TEST, why, false);
        return;
    }
    let f = filter_on();
    let py = format!(
        "from testcontainers.core.container import DockerContainer\n\
         from testcontainers.core.waiting_utils import wait_for_logs\n\
         with DockerContainer('{IMAGE}').with_command(\"sh -c 'echo ready; sleep 5'\") as c:\n\
         \x20   wait_for_logs(c, 'ready', timeout=30)\n\
         \x20   print('testcontainers: ready seen')\n"
    );
    std::fs::write(f.ws.join("tc.py"), py).unwrap();
    let out = f
        .cmd(["run", "--", venv.to_str().unwrap(), "tc.py"])
        .env("DOCKER_HOST", d.host())
        .env("TESTCONTAINERS_RYUK_DISABLED", "true")
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("testcontainers: ready seen"),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(names(&d).is_empty(), "{:?}", names(&d));
}

/// Security review h41d: a second spelling of `HostConfig` (Go's decoder folds case and merges it
/// over the judged one), and a request smuggled behind an attach the engine refused without taking
/// the connection over: neither reaches the engine; no container of neither is left.
#[test]
fn a_second_spelling_and_a_request_behind_a_refused_attach_never_reach_the_engine() {
    let Some(d) = Dockerd::start("containers::a_second_spelling_and_a_request_behind") else {
        return;
    };
    let f = filter_on();
    let py = format!(
        r#"
import json, os, socket
path = os.environ["DOCKER_HOST"][len("unix://"):]
def send(raw):
    s = socket.socket(socket.AF_UNIX); s.connect(path); s.settimeout(5)
    s.sendall(raw); out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except socket.timeout:
        pass
    return out
def post(target, body):
    b = json.dumps(body).encode()
    return (f"POST {{target}} HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            f"Content-Length: {{len(b)}}\r\n\r\n").encode() + b
bad = {{"Image": "{IMAGE}", "Cmd": ["true"], "hostconfig": {{"Binds": ["/:/host"]}}}}
print("spelling", send(post("/v1.41/containers/create?name=spelt", bad)).split(b"\r\n")[0].decode())
own = send(post("/v1.41/containers/create?name=own", {{"Image": "{IMAGE}", "Cmd": ["true"]}}))
print("own", own.split(b"\r\n")[0].decode())
# A version the judge lets by and this engine refuses ("too new"), its connection kept open.
attach = (b"POST /v1.99/containers/own/attach?stream=1&stdin=1 HTTP/1.1\r\n"
          b"Host: d\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 0\r\n\r\n")
smuggled = post("/v1.41/containers/create?name=smuggled",
                {{"Image": "{IMAGE}", "Cmd": ["true"], "HostConfig": {{"Binds": ["/:/host"]}}}})
answers = send(attach + smuggled)
print("attach", answers.split(b"\r\n")[0].decode(), answers.count(b"HTTP/1.1"))
"#
    );
    let out = f
        .cmd(["run", "--", "python3", "-c", &py])
        .env("DOCKER_HOST", d.host())
        .output()
        .unwrap();
    let so = stdout(&out);
    assert!(out.status.success(), "{so}\n{}", stderr(&out));
    assert!(
        so.contains("spelling HTTP/1.1 403"),
        "{so}\n{}",
        stderr(&out)
    );
    assert!(so.contains("own HTTP/1.1 201"), "{so}\n{}", stderr(&out));
    let left = names(&d);
    assert!(
        !left.iter().any(|n| n == "smuggled" || n == "spelt"),
        "{left:?}\n{so}"
    );
}
