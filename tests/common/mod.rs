//! Test fixtures: a throwaway HOME, workspace (a real git repository) and runtime directory, and a
//! way to run the real `claude-sandbox` binary against them with real bwrap.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Once;

/// The binary under test: `CLAUDE_SANDBOX_BIN` (CI runs the tests as another user from a copy),
/// else the one cargo built.
pub fn bin() -> PathBuf {
    std::env::var_os("CLAUDE_SANDBOX_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_claude-sandbox")),
        PathBuf::from,
    )
}

/// Fail loudly (never skip quietly) when this machine cannot run a jail at all.
pub fn require_jail() {
    static CHECK: Once = Once::new();
    CHECK.call_once(|| {
        let out = Command::new("bwrap")
            .args(["--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "\n\n*** THIS MACHINE CANNOT RUN THE JAIL TESTS: bwrap failed: {}\n*** user namespaces are refused here; \
                 run `claude-sandbox doctor`. These tests are NOT skipped: they fail.\n",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("\n\n*** bwrap is not installed ({e}): apt-get install bubblewrap. These tests fail, not skip.\n"),
        }
    });
}

pub fn is_root() -> bool {
    unsafe_getuid() == 0
}

fn unsafe_getuid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| std::os::unix::fs::MetadataExt::uid(&m))
}

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub rt: PathBuf,
}

/// Where fixtures live: not under /tmp, which the jail replaces with a private tmpfs.
pub fn test_tmp() -> PathBuf {
    std::env::var_os("CLAUDE_SANDBOX_TEST_TMP")
        .map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from)
}

impl Fixture {
    /// A HOME with a .bashrc and .profile, a git identity, `~/.local/bin`, and a workspace that is a
    /// git repository with one commit.
    pub fn new() -> Self {
        require_jail();
        let dir = tempfile::Builder::new()
            .prefix("cs-test-")
            .tempdir_in(test_tmp())
            .expect("tempdir");
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        let ws = root.join("ws");
        let rt = root.join("rt");
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(home.join(".config")).unwrap();
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        std::fs::write(home.join(".bashrc"), "# bashrc\n").unwrap();
        std::fs::write(home.join(".profile"), "# profile\n").unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            "[user]\n\tname = Test\n\temail = t@example.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        let f = Fixture {
            _dir: dir,
            root,
            home,
            ws,
            rt,
        };
        f.git(&f.ws, &["init", "-q"]);
        std::fs::write(f.ws.join("README"), "hello\n").unwrap();
        f.git(&f.ws, &["add", "README"]);
        f.git(&f.ws, &["commit", "-qm", "init"]);
        f
    }

    /// `new`, with `~/.local/bin` shared with the jail by your configuration (`writable` in
    /// `~/.config/claude-sandbox/config.toml`): a PATH directory that stays yours, writable and
    /// watched, as the workspace's `node_modules/.bin` is. By default it is the jail's own layer
    /// (docs/layers.md); these tests exercise the watcher on a shared PATH directory.
    pub fn sharing_local_bin() -> Self {
        let f = Self::new();
        f.share_local_bin("");
        f
    }

    /// Write the user configuration: `writable = ["~/.local/bin"]` and then `more`.
    pub fn share_local_bin(&self, more: &str) {
        let dir = self.home.join(".config/claude-sandbox");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!("writable = [\"~/.local/bin\"]\n{more}"),
        )
        .unwrap();
    }

    /// Run git outside the jail, as the human would.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .envs(self.env())
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), self.home.display().to_string()),
            (
                "CLAUDE_SANDBOX_RUNTIME_DIR".into(),
                self.rt.display().to_string(),
            ),
            // The jail's cache layers beside the runtime directory, so that before/after snapshots
            // of the home see only what the jail did (the default, ~/.local/state, has its test).
            (
                "CLAUDE_SANDBOX_LAYERS_DIR".into(),
                self.root.join("layers").display().to_string(),
            ),
            // The audit trail too (its default, ~/.local/state, has its test: tests/integration/audit.rs).
            (
                "CLAUDE_SANDBOX_AUDIT_DIR".into(),
                self.root.join("audit").display().to_string(),
            ),
            (
                "PATH".into(),
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    self.home.join(".local/bin").display()
                ),
            ),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("NO_COLOR".into(), "1".into()),
            // What the installer puts in /etc is looked for in the fixture: a machine with the
            // prompt hook or a system configuration installed runs the same tests.
            (
                "CLAUDE_SANDBOX_SYSTEM_CONFIG".into(),
                self.etc()
                    .join("claude-sandbox/config.toml")
                    .display()
                    .to_string(),
            ),
            (
                "CLAUDE_SANDBOX_PROFILE_HOOK".into(),
                self.etc()
                    .join("profile.d/claude-sandbox.sh")
                    .display()
                    .to_string(),
            ),
        ]
    }

    /// Claude Code's directory name for the workspace's project (`~/.claude/projects/<name>`).
    #[allow(dead_code)]
    pub fn claude_project(&self) -> String {
        self.ws
            .to_str()
            .unwrap()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect()
    }

    /// The fixture's stand-in for `/etc` (empty unless a test installs something there).
    pub fn etc(&self) -> PathBuf {
        self.root.join("etc")
    }

    /// `claude-sandbox ARGS...` with the fixture's environment, from the workspace.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(&self.ws)
            .env_clear()
            .envs(self.env())
            .stdin(Stdio::null());
        c
    }

    /// `claude-sandbox run -- bash -c SCRIPT`.
    pub fn jail(&self, script: &str) -> Output {
        self.cmd(["run", "--", "bash", "-c", script])
            .output()
            .expect("spawn claude-sandbox")
    }

    /// Every path under the fixture's workspace and home, for before/after comparisons.
    pub fn snapshot(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        for top in [&self.ws, &self.home] {
            for e in walkdir::WalkDir::new(top)
                .sort_by_file_name()
                .into_iter()
                .flatten()
            {
                let content = if e.file_type().is_file() {
                    std::fs::read(e.path()).unwrap_or_default()
                } else {
                    Vec::new()
                };
                out.push((e.path().to_path_buf(), content));
            }
        }
        out
    }
}

/// Assert two snapshots are equal, naming the paths that differ.
pub fn assert_same(before: &[(PathBuf, Vec<u8>)], after: &[(PathBuf, Vec<u8>)], what: &str) {
    let b: std::collections::BTreeMap<_, _> = before.iter().cloned().collect();
    let a: std::collections::BTreeMap<_, _> = after.iter().cloned().collect();
    let mut diffs = Vec::new();
    for (p, c) in &b {
        match a.get(p) {
            None => diffs.push(format!("removed: {}", p.display())),
            Some(c2) if c2 != c => diffs.push(format!("changed: {}", p.display())),
            _ => {}
        }
    }
    for p in a.keys().filter(|p| !b.contains_key(*p)) {
        diffs.push(format!("added: {}", p.display()));
    }
    assert!(diffs.is_empty(), "{what}:\n{}", diffs.join("\n"));
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert the jailed script succeeded, with its output in the message.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// Fail loudly when tmux is missing (the terminal tests cannot run without it).
pub fn require_tmux() {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "tmux is required: apt-get install tmux");
}

/// A real terminal: a tmux server on a private socket, one window.
pub struct Tmux {
    sock: PathBuf,
}

impl Tmux {
    /// Start `shell` (a command line) in a 150x40 window.
    pub fn start(root: &Path, shell: &str) -> Tmux {
        require_tmux();
        let t = Tmux {
            sock: root.join(format!("tmux-{}.sock", std::process::id())),
        };
        t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "150",
            "-y",
            "40",
            shell,
        ]);
        t
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Type a line and press Enter.
    pub fn line(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
        self.run(&["send-keys", "-t", "t", "Enter"]);
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "t"])
    }

    /// Wait until the screen contains `text` (at least `count` times). The bound is for a hang,
    /// not a speed claim: `doctor` in a terminal took over 15 s on 2 cores under a parallel build.
    pub fn wait_for(&self, text: &str, count: usize) -> String {
        let t0 = std::time::Instant::now();
        loop {
            let s = self.screen();
            if s.matches(text).count() >= count {
                return s;
            }
            assert!(
                t0.elapsed().as_secs() < 60,
                "timed out waiting for {text:?} x{count}; screen:\n{s}"
            );
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        kill_tmux_server(&self.sock);
    }
}

/// End the tmux server on `sock` and wait (at most 5 s) until it and everything its panes ran are
/// gone: a shell writes its history as it exits, which would recreate a fixture being removed. Each
/// pane is a session led by its first process; a shell that `sh -c` started is in that session.
pub fn kill_tmux_server(sock: &Path) {
    let mut server = Vec::new();
    let mut sessions = Vec::new();
    if let Ok(o) = Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(["list-panes", "-a", "-F", "#{pid} #{pane_pid}"])
        .output()
    {
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let mut it = line
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok());
            server.extend(it.next());
            sessions.extend(it.next());
        }
    }
    let _ = Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .arg("kill-server")
        .output();
    let alive = || {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    return false;
                };
                let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                    return false;
                };
                let f: Vec<&str> = stat
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .split_whitespace()
                    .collect();
                // Fields after the command: state, ppid, pgrp, session.
                let sid = f.get(3).and_then(|s| s.parse::<u32>().ok());
                f.first() != Some(&"Z")
                    && (server.contains(&pid) || sid.is_some_and(|s| sessions.contains(&s)))
            })
    };
    let t0 = std::time::Instant::now();
    while alive() && t0.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The repository's files (`CLAUDE_SANDBOX_SRC` when CI runs the tests as another user from a copy).
pub fn src_dir() -> PathBuf {
    std::env::var_os("CLAUDE_SANDBOX_SRC")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The repository's prompt hook.
pub fn hook_path() -> PathBuf {
    src_dir().join("profile.d/claude-sandbox.sh")
}

/// Send `sig` to one process the test started, by the system call (a `kill` program may read a
/// negative id as an option and signal every process). Ids of 1 or less are never sent.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let pid = i32::try_from(pid).expect("a pid fits in i32");
    assert!(pid > 1, "refusing to signal pid {pid}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).expect("signalling a child");
}

/// Whether `program` is on the standard PATH; when it is not, say so loudly. Under CI
/// (`CLAUDE_SANDBOX_CI=1`, set by `.ci/run`, which installs every tool the tests use) a missing tool
/// fails the test instead, unless `ci_user_lacks_it` (cargo, which only root has there).
#[allow(dead_code)]
pub fn tool_or_say(test: &str, program: &str, ci_user_lacks_it: bool) -> bool {
    let found =
        std::env::split_paths("/usr/local/bin:/usr/bin:/bin").any(|d| d.join(program).is_file());
    if found {
        return true;
    }
    let ci = std::env::var_os("CLAUDE_SANDBOX_CI").is_some_and(|v| v == "1");
    assert!(
        !ci || ci_user_lacks_it,
        "{test}: `{program}` is missing, and .ci/run installs it"
    );
    eprintln!("\n*** {test}: NOT RUN here — `{program}` is not installed for this user ***\n");
    false
}

/// Whether the system's pip runs (`/usr/bin/python3 -m pip`: what the jail's `pip install --user`
/// uses); says loudly when not, and fails under CI, which installs python3-pip.
pub fn pip_or_say(test: &str) -> bool {
    let pip = Command::new("/usr/bin/python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !pip {
        assert!(
            std::env::var_os("CLAUDE_SANDBOX_CI").is_none(),
            "{test}: pip is missing, and .ci/run installs python3-pip"
        );
        eprintln!("\n*** {test}: NOT RUN here — apt-get install python3-pip ***\n");
    }
    pip
}

/// A loopback TCP port free a moment ago (for a daemon a test starts, or one nothing listens on).
#[allow(dead_code)]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A daemon a test starts (sshd, ssh-agent, rsyslogd, a receiver), killed and reaped when dropped.
#[allow(dead_code)]
pub struct Daemon(pub std::process::Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A launcher that is killed (and its jail with it: `--die-with-parent`) if the test fails before it
/// ends, so that no jail outlives its fixture.
#[allow(dead_code)]
pub struct Running(pub Option<std::process::Child>);

impl Running {
    pub fn wait(mut self) -> std::process::Output {
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            signal(c.id(), nix::sys::signal::Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

/// A package `hello-cs` 1.0.0 as npm's tarball under `root`, whose `bin` `hello-cs` prints `says`.
#[allow(dead_code)]
pub fn npm_tarball(root: &Path, says: &str) -> PathBuf {
    let pkg = root.join("pkg/package");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("package.json"),
        r#"{"name":"hello-cs","version":"1.0.0","bin":{"hello-cs":"bin.js"}}"#,
    )
    .unwrap();
    std::fs::write(
        pkg.join("bin.js"),
        format!("#!/usr/bin/env node\nconsole.log('{says}')\n"),
    )
    .unwrap();
    // Executable, as `npm pack` publishes a bin: pnpm 12 copies a bin it must chmod instead of
    // linking it from its store.
    std::fs::set_permissions(
        pkg.join("bin.js"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let tgz = root.join("hello-cs-1.0.0.tgz");
    let made = Command::new("tar")
        .arg("czf")
        .arg(&tgz)
        .arg("-C")
        .arg(root.join("pkg"))
        .arg("package")
        .status()
        .unwrap();
    assert!(made.success());
    tgz
}

/// How many items wait in the fixture's review (`claude-sandbox review --json`).
#[allow(dead_code)]
pub fn held_count(f: &Fixture) -> usize {
    let out = f.cmd(["review", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("review --json");
    v.as_array()
        .expect("an array")
        .iter()
        .filter(|e| e["kind"] == "held")
        .count()
}

/// A wheel made by hand under `dir` (a wheel is a zip: the package, its metadata, a console script
/// `<package>-py` with `-` for `_`, when `script`): package `pkg` 1.0, whose `main()` prints `says`.
#[allow(dead_code)]
pub fn wheel(dir: &Path, pkg: &str, says: &str, script: bool) -> PathBuf {
    let name = pkg.replace('_', "-");
    wheel_script(
        dir,
        pkg,
        says,
        script.then(|| format!("{name}-py")).as_deref(),
    )
}

/// `wheel`, with the console script (if any) named `script`.
pub fn wheel_script(dir: &Path, pkg: &str, says: &str, script_name: Option<&str>) -> PathBuf {
    let name = pkg.replace('_', "-");
    let script = script_name.is_some();
    let script_name = script_name.unwrap_or("none");
    let whl = dir.join(format!("{pkg}-1.0-py3-none-any.whl"));
    let script = format!(
        r#"
import zipfile, hashlib, base64
files = {{
 "{pkg}/__init__.py": "def main():\n    print('{says}')\n",
 "{pkg}-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
 "{pkg}-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
 "{pkg}-1.0.dist-info/entry_points.txt": "[console_scripts]\n{script_name} = {pkg}:main\n",
}}
if not {script}:
    del files["{pkg}-1.0.dist-info/entry_points.txt"]
rows = []
with zipfile.ZipFile("{whl}", "w") as z:
    for name, text in files.items():
        data = text.encode()
        z.writestr(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{{name}},sha256={{digest}},{{len(data)}}")
    rows.append("{pkg}-1.0.dist-info/RECORD,,")
    z.writestr("{pkg}-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
"#,
        whl = whl.display(),
        script = if script { "True" } else { "False" },
    );
    let st = Command::new("/usr/bin/python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(st.success());
    whl
}
