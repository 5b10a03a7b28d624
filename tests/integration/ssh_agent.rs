//! The filtering ssh agent (issue 41): with `[ssh] allow`, the jail's `$SSH_AUTH_SOCK` is a filter
//! the launcher serves, which logs in only to allowed hosts (by their `known_hosts` key, on a
//! connection the real agent bound), lists and uses only the allowed keys, signs commits only when
//! allowed, and never changes the agent. Real sshd on this machine's loopback (unprivileged, its own
//! host key), a real ssh-agent, real ssh and git in a real jail; the jail reaches sshd through a
//! `[network] loopback` port (allowlist mode).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SSHD: &str = "/usr/sbin/sshd";

fn have_ssh(test: &str) -> bool {
    if !Path::new(SSHD).is_file() {
        assert!(
            std::env::var_os("CLAUDE_SANDBOX_CI").is_none(),
            "{test}: {SSHD} is missing, and .ci/run installs openssh-server"
        );
        eprintln!("\n*** {test}: NOT RUN here — {SSHD} is not installed ***\n");
        return false;
    }
    tool_or_say(test, "ssh-agent", false) && tool_or_say(test, "ssh-keygen", false)
}

/// A key pair made with ssh-keygen; `public`: the `.pub` line's type and key.
struct Key {
    path: PathBuf,
    public: String,
    fingerprint: String,
}

fn keygen(dir: &Path, name: &str) -> Key {
    let path = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let line = std::fs::read_to_string(path.with_extension("pub")).unwrap();
    let public = line
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let fp = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(path.with_extension("pub"))
        .output()
        .unwrap();
    let fingerprint = stdout(&fp).split_whitespace().nth(1).unwrap().to_string();
    Key {
        path,
        public,
        fingerprint,
    }
}

/// An sshd on 127.0.0.1, unprivileged, with its own host key; anyone holding a key in
/// `authorized` logs in as this user.
struct Sshd {
    _d: Daemon,
    port: u16,
    host_key: Key,
}

impl Sshd {
    fn start(dir: &Path, name: &str, authorized: &[&Key]) -> Sshd {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let host_key = keygen(&dir, "host_key");
        let auth = dir.join("authorized_keys");
        let keys: Vec<&str> = authorized.iter().map(|k| k.public.as_str()).collect();
        std::fs::write(&auth, keys.join("\n") + "\n").unwrap();
        let port = free_port();
        let config = dir.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nAuthorizedKeysFile {}\n\
                 StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin yes\nAllowAgentForwarding yes\nPidFile none\n",
                host_key.path.display(),
                auth.display()
            ),
        )
        .unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap();
        let d = Daemon(child);
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "sshd did not start: {}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Sshd {
            _d: d,
            port,
            host_key,
        }
    }

    /// Its `known_hosts` line.
    fn known(&self) -> String {
        format!("[127.0.0.1]:{} {}\n", self.port, self.host_key.public)
    }
}

/// The human's ssh-agent with keys added.
struct Agent {
    _d: Daemon,
    sock: PathBuf,
}

impl Agent {
    fn start(dir: &Path, keys: &[&Key]) -> Agent {
        let sock = dir.join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let d = Daemon(child);
        let t = Instant::now();
        while std::os::unix::net::UnixStream::connect(&sock).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "ssh-agent did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let a = Agent { _d: d, sock };
        for k in keys {
            let out = a.ssh_add(&[k.path.to_str().unwrap()]);
            assert!(out.status.success(), "{}", stderr(&out));
        }
        a
    }

    fn ssh_add(&self, args: &[&str]) -> std::process::Output {
        Command::new("ssh-add")
            .args(args)
            .env("SSH_AUTH_SOCK", &self.sock)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `ssh-add -l` outside, as the human sees it.
    fn listed(&self) -> String {
        stdout(&self.ssh_add(&["-l"]))
    }
}

/// A fixture, a user key and a second key the agent holds, the agent, and one allowed sshd.
struct Scene {
    f: Fixture,
    user: Key,
    other: Key,
    agent: Agent,
    allowed: Sshd,
}

impl Scene {
    fn new() -> Scene {
        let f = Fixture::new();
        let keys = f.root.join("keys");
        std::fs::create_dir_all(&keys).unwrap();
        let user = keygen(&keys, "user");
        let other = keygen(&keys, "other");
        let agent = Agent::start(&f.root, &[&user, &other]);
        let allowed = Sshd::start(&f.root, "allowed", &[&user, &other]);
        std::fs::create_dir_all(f.home.join(".ssh")).unwrap();
        std::fs::write(f.home.join(".ssh/known_hosts"), allowed.known()).unwrap();
        Scene {
            f,
            user,
            other,
            agent,
            allowed,
        }
    }

    /// The user configuration: allowlist mode with `ports` bridged, and `ssh` in `[ssh]`.
    fn config(&self, ports: &[u16], ssh: &str) {
        let dir = self.f.home.join(".config/claude-sandbox");
        std::fs::create_dir_all(&dir).unwrap();
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "[network]\nmode = \"allowlist\"\nloopback = [{}]\n[ssh]\n{ssh}",
                ports.join(", ")
            ),
        )
        .unwrap();
    }

    /// `script` in the jail, with the human's agent as `$SSH_AUTH_SOCK` outside; `$SSH` is ssh
    /// with the jail's `known_hosts` (ssh reads the passwd entry's home, not `$HOME`).
    fn jail(&self, script: &str) -> std::process::Output {
        let ssh = "ssh -o BatchMode=yes -o UserKnownHostsFile=$HOME/.ssh/known_hosts";
        self.f
            .cmd([
                "run",
                "--",
                "bash",
                "-c",
                &format!("SSH=\"{ssh}\"; export GIT_SSH_COMMAND=\"$SSH\"; {script}"),
            ])
            .env("SSH_AUTH_SOCK", &self.agent.sock)
            .output()
            .unwrap()
    }

    fn alerts(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.f.rt.join("alerts.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|a: &serde_json::Value| a["kind"] == "ssh-refused")
            .collect()
    }
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    stdout(&out).trim().to_string()
}

#[test]
fn git_push_over_ssh_works_to_an_allowed_host_with_only_the_allowed_key_listed() {
    if !have_ssh("git_push_over_ssh") {
        return;
    }
    let s = Scene::new();
    let port = s.allowed.port;
    s.config(
        &[port],
        &format!(
            "allow = [\"[127.0.0.1]:{port}\"]\nkeys = [\"{}\"]\n",
            s.user.fingerprint
        ),
    );
    let bare = s.f.root.join("remote.git");
    s.f.git(&s.f.root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    let url = format!("ssh://{}@127.0.0.1:{port}{}", user(), bare.display());
    let out = s.jail(&format!(
        "echo SOCK=$SSH_AUTH_SOCK; ssh-add -l; git push -q {url} HEAD:refs/heads/main && echo PUSHED"
    ));
    let text = ok(&out);
    assert!(
        text.contains("SOCK=/tmp/.claude-sandbox-ssh/agent.sock"),
        "{text}"
    );
    assert!(text.contains(&s.user.fingerprint), "{text}");
    assert!(
        !text.contains(&s.other.fingerprint),
        "a key off [ssh] keys was listed: {text}"
    );
    assert!(text.contains("PUSHED"), "{text}\n{}", stderr(&out));
    let head = Command::new("git")
        .args([
            "--git-dir",
            bare.to_str().unwrap(),
            "log",
            "--oneline",
            "main",
        ])
        .output()
        .unwrap();
    assert!(stdout(&head).contains("init"), "{}", stderr(&head));
    assert!(s.alerts().is_empty(), "{:?}", s.alerts());
    let said = ok(&s
        .f
        .cmd(["explain"])
        .env("SSH_AUTH_SOCK", &s.agent.sock)
        .output()
        .unwrap());
    assert!(
        said.contains(&format!(
            "ssh agent: filtered — logins to [127.0.0.1]:{port} only"
        )),
        "{said}"
    );
    let doctor =
        s.f.cmd(["doctor"])
            .env("SSH_AUTH_SOCK", &s.agent.sock)
            .output()
            .unwrap();
    let doctor = stdout(&doctor);
    let line = format!("ssh agent: filtered — logins to [127.0.0.1]:{port} only");
    assert!(doctor.contains(&line), "{doctor}");
    assert!(doctor.contains(&s.allowed.host_key.fingerprint), "{doctor}");
}

#[test]
fn a_host_not_allowed_another_key_and_other_data_get_no_signature_and_are_alerted() {
    if !have_ssh("a_host_not_allowed") {
        return;
    }
    let s = Scene::new();
    let other_host = Sshd::start(&s.f.root, "other", &[&s.user]);
    // Its key is known (the human logs in there), but it is not in [ssh] allow.
    let mut known = s.allowed.known();
    known.push_str(&other_host.known());
    std::fs::write(s.f.home.join(".ssh/known_hosts"), known).unwrap();
    let (a, o) = (s.allowed.port, other_host.port);
    s.config(
        &[a, o],
        &format!(
            "allow = [\"[127.0.0.1]:{a}\"]\nkeys = [\"{}\"]\n",
            s.user.fingerprint
        ),
    );
    // Raw requests: a signature with the key off the list, and one over data that is no login,
    // each answered SSH_AGENT_FAILURE (5).
    let other_blob = s.other.public.split(' ').nth(1).unwrap().to_string();
    let user_blob = s.user.public.split(' ').nth(1).unwrap().to_string();
    let probe = s.f.root.join("probe.py");
    std::fs::write(
        &probe,
        format!(
            r"import base64, os, socket, struct
def s(b): return struct.pack('>I', len(b)) + b
def ask(body):
    c = socket.socket(socket.AF_UNIX); c.connect(os.environ['SSH_AUTH_SOCK'])
    c.sendall(struct.pack('>I', len(body)) + body)
    n = struct.unpack('>I', c.recv(4))[0]; print('answer', c.recv(n)[0])
for k in ('{other_blob}', '{user_blob}'):
    ask(bytes([13]) + s(base64.b64decode(k)) + s(b'any data at all') + struct.pack('>I', 0))
"
        ),
    )
    .unwrap();
    let probe = format!("python3 {}", probe.display());
    let out = s.jail(&format!(
        "$SSH -p {o} {u}@127.0.0.1 echo LOGGED-IN-OTHER; echo rc=$?; \
         $SSH -p {a} {u}@127.0.0.1 echo LOGGED-IN-ALLOWED; {probe}",
        u = user()
    ));
    let text = stdout(&out);
    assert!(!text.contains("LOGGED-IN-OTHER"), "{text}");
    assert!(text.contains("rc=255"), "{text}\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("Permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(
        text.contains("LOGGED-IN-ALLOWED"),
        "{text}\n{}",
        stderr(&out)
    );
    assert_eq!(text.matches("answer 5").count(), 2, "{text}");
    let alerts = s.alerts();
    let detail = |class: &str| {
        alerts
            .iter()
            .find(|a| a["path"] == format!("ssh-agent:{class}"))
            .map_or_else(
                || panic!("no {class} alert: {alerts:?}"),
                |a| a["detail"].as_str().unwrap().to_string(),
            )
    };
    assert!(
        detail("host").contains(&format!(
            "[127.0.0.1]:{o} (host key {}",
            other_host.host_key.fingerprint
        )),
        "{alerts:?}"
    );
    assert!(detail("key").contains(&s.other.fingerprint), "{alerts:?}");
    assert!(detail("unbound").contains("bind"), "{alerts:?}");
    assert_eq!(alerts.len(), 3, "one alert per kind of refusal: {alerts:?}");
    assert!(alerts.iter().all(|a| a["severity"] == "info"), "{alerts:?}");
}

#[test]
fn the_jail_cannot_remove_add_or_lock_keys_nor_forward_the_agent_further() {
    if !have_ssh("the_jail_cannot_change_the_agent") {
        return;
    }
    let s = Scene::new();
    let port = s.allowed.port;
    s.config(&[port], &format!("allow = [\"[127.0.0.1]:{port}\"]\n"));
    let before = s.agent.listed();
    assert!(before.contains(&s.user.fingerprint) && before.contains(&s.other.fingerprint));
    let new_key = s.f.ws.join("new_key");
    // Forwarding further: the remote ssh (outside the jail, on the sshd's side) asks the
    // forwarded agent to log in again; the jail's ssh bound that connection with is_forwarding.
    let remote = format!(
        "ssh -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
         -p {port} 127.0.0.1 echo SECOND-HOP; echo hop-rc=$?"
    );
    let out = s.jail(&format!(
        "ssh-add -D; echo D=$?; ssh-keygen -q -t ed25519 -N '' -f {k}; ssh-add {k}; echo ADD=$?; \
         echo pw | ssh-add -x; echo X=$?; ssh-add -l | wc -l; \
         $SSH -A -p {port} {u}@127.0.0.1 '{remote}'",
        k = new_key.display(),
        u = user()
    ));
    let text = stdout(&out);
    assert!(text.contains("D=1") && text.contains("ADD=1"), "{text}");
    assert!(text.contains("X=1"), "{text}");
    assert!(
        text.contains("\n2\n"),
        "both keys still listed in the jail: {text}"
    );
    assert!(!text.contains("SECOND-HOP"), "{text}\n{}", stderr(&out));
    assert!(text.contains("hop-rc=255"), "{text}\n{}", stderr(&out));
    assert_eq!(s.agent.listed(), before, "the human's agent changed");
    let alerts = s.alerts();
    let change = alerts
        .iter()
        .find(|a| a["path"] == "ssh-agent:change")
        .unwrap_or_else(|| panic!("{alerts:?}"));
    assert_eq!(change["severity"], "high");
    assert!(
        change["detail"]
            .as_str()
            .unwrap()
            .contains("remove all identities"),
        "{change}"
    );
    let fwd = alerts
        .iter()
        .find(|a| a["path"] == "ssh-agent:forwarding")
        .unwrap_or_else(|| panic!("no forwarding alert: {alerts:?}"));
    assert_eq!(fwd["severity"], "high");
}

#[test]
fn commits_are_signed_only_with_sign_commits() {
    if !have_ssh("commits_are_signed_only_with_sign_commits") {
        return;
    }
    let s = Scene::new();
    let port = s.allowed.port;
    let signing = format!(
        "git -c gpg.format=ssh -c user.signingkey='key::{}' commit -q --allow-empty -S -m signed \
         && echo SIGNED; echo rc=$?",
        s.user.public
    );
    for on in [false, true] {
        s.config(
            &[port],
            &format!("allow = [\"[127.0.0.1]:{port}\"]\nsign_commits = {on}\n"),
        );
        let out = s.jail(&signing);
        let text = stdout(&out);
        assert_eq!(text.contains("SIGNED"), on, "{text}\n{}", stderr(&out));
    }
    let signers = s.f.root.join("allowed_signers");
    std::fs::write(&signers, format!("t@example.invalid {}\n", s.user.public)).unwrap();
    let verify = Command::new("git")
        .args([
            "-c",
            &format!("gpg.ssh.allowedSignersFile={}", signers.display()),
        ])
        .args(["verify-commit", "HEAD"])
        .current_dir(&s.f.ws)
        .envs(s.f.env())
        .output()
        .unwrap();
    assert!(verify.status.success(), "{}", stderr(&verify));
    assert!(
        stderr(&verify).contains("Good \"git\" signature"),
        "{}",
        stderr(&verify)
    );
    let sshsig = s
        .alerts()
        .into_iter()
        .find(|a| a["path"] == "ssh-agent:sshsig")
        .unwrap_or_else(|| panic!("{:?}", s.alerts()));
    assert!(sshsig["detail"]
        .as_str()
        .unwrap()
        .contains("sign_commits is off"));
}

#[test]
fn a_dead_agent_is_said_and_the_jail_runs_without_one() {
    let f = Fixture::new();
    let dir = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "[ssh]\nallow = [\"github.com\"]\n").unwrap();
    let dead = f.root.join("dead.sock");
    let out = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "echo ${SSH_AUTH_SOCK:-unset}; ls /tmp/.claude-sandbox-ssh 2>&1 | head -1",
        ])
        .env("SSH_AUTH_SOCK", &dead)
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(text.starts_with("unset\n"), "{text}");
    assert!(text.contains("No such file"), "{text}");
    assert!(stderr(&out).contains("does not answer"), "{}", stderr(&out));
    // The workspace file cannot add a host.
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "[ssh]\nallow = [\"evil.example\"]\n",
    )
    .unwrap();
    let refused = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains(":1: `ssh.allow` loosens"),
        "{}",
        stderr(&refused)
    );
}
