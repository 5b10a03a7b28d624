//! The launcher's contract: exit statuses, signals, terminal injection, escape hatches, placeholders
//! and the runtime directory. Real bwrap, real processes, a real terminal (tmux).

use crate::common::*;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn exit_status_is_the_commands() {
    let f = Fixture::new();
    assert_eq!(f.jail("exit 7").status.code(), Some(7));
    assert_eq!(f.jail("true").status.code(), Some(0));
    assert_eq!(f.jail("kill -TERM $$").status.code(), Some(143));
    assert_eq!(f.jail("kill -KILL $$").status.code(), Some(137));
}

/// A launch working as designed says nothing, and logs no warning. (A command over before the socket
/// judge looked for its jail was logged as a miss, and said as a diagnostic line on every short
/// launch on a large workspace, where the judge starts later; this small one does not always lose
/// that race: `sockets::later`'s unit test holds the rule.)
#[test]
fn a_short_clean_launch_says_nothing_and_logs_no_warning() {
    let f = Fixture::new();
    for _ in 0..3 {
        // `true` itself, not through a shell: over before the judge starts.
        let out = f.cmd(["run", "--", "true"]).output().unwrap();
        let log = || std::fs::read_to_string(f.rt.join("claude-sandbox.log")).unwrap_or_default();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "",
            "a clean launch prints nothing; the log: {}",
            log()
        );
    }
    let log = std::fs::read_to_string(f.rt.join("claude-sandbox.log")).unwrap_or_default();
    assert!(!log.contains("WARN"), "{log}");
}

/// The launcher leaves no process behind, not even a zombie: bwrap exits without waiting for the
/// jail's first process, which was reparented to PID 1 and stayed a zombie where PID 1 does not
/// reap (this machine's, and a container's `sleep infinity`). The launcher now inherits and reaps
/// it. Everything in the launcher's process group is looked for once it has exited.
#[test]
fn a_launch_leaves_no_process_behind_not_even_a_zombie() {
    use std::os::unix::process::CommandExt;
    let f = Fixture::new();
    for _ in 0..3 {
        let mut cmd = f.cmd(["run", "--", "true"]);
        cmd.process_group(0);
        let child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let group = child.id();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
            .filter(|stat| {
                let fields: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
                fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(group)
            })
            .collect();
        assert!(left.is_empty(), "left in the launcher's group: {left:?}");
    }
}

#[test]
fn command_not_found_and_not_executable() {
    let f = Fixture::new();
    let out = f
        .cmd(["run", "--", "no-such-command-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-command-xyz: command not found"));
    std::fs::write(f.ws.join("script"), "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(f.ws.join("script"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = f.cmd(["run", "--", "./script"]).output().unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", stderr(&out));
    assert!(!stdout(&out).contains("ran"));
}

#[test]
fn jail_setup_failure_is_125_and_nothing_is_written() {
    let f = Fixture::new();
    let before = f.snapshot();
    let out = f
        .cmd(["run", "--", "true"])
        .env("CLAUDE_SANDBOX_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains("bwrap") && err.contains("doctor"), "{err}");
    assert_same(&before, &f.snapshot(), "a failed launch wrote to the host");
    assert!(
        !f.rt.exists(),
        "a failed launch created the runtime directory"
    );
}

#[test]
fn bad_config_is_2_with_file_and_line() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".config/claude-sandbox")).unwrap();
    std::fs::write(
        f.home.join(".config/claude-sandbox/config.toml"),
        "masked = []\nbogus = 1\n",
    )
    .unwrap();
    let out = f.jail("echo STARTED");
    assert_eq!(out.status.code(), Some(2));
    assert!(!stdout(&out).contains("STARTED"));
    assert!(
        stderr(&out).contains("claude-sandbox/config.toml:2:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_are_2() {
    let f = Fixture::new();
    assert_eq!(f.cmd(["run"]).output().unwrap().status.code(), Some(2));
    assert_eq!(
        f.cmd(["frobnicate"]).output().unwrap().status.code(),
        Some(2)
    );
}

#[test]
fn environment_and_namespaces_inside() {
    let f = Fixture::new();
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", "echo $CLAUDE_SANDBOX; echo ${SSH_AUTH_SOCK:-unset}; echo $$; grep CapEff /proc/self/status; touch /usr/x 2>/dev/null || echo ro-root; ls /tmp | wc -l; for fd in /proc/$$/fd/*; do printf '%s ' \"${fd##*/}\"; done"])
        .env("SSH_AUTH_SOCK", "/nonexistent/agent.sock")
        .stdin(inherited_extra_fd())
        .output()
        .unwrap());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1");
    assert_eq!(lines[1], "unset");
    assert_eq!(lines[2], "2", "the command is PID 2 in a new PID namespace");
    assert!(
        lines[3].ends_with("0000000000000000"),
        "no capabilities: {}",
        lines[3]
    );
    assert_eq!(lines[4], "ro-root");
    assert_eq!(lines[5], "0", "/tmp is private and empty");
    // Only stdin/stdout/stderr (and the directory fd of the glob): no inherited fd reaches the
    // jail. Listed by a glob in bash itself: `ls /proc/$$/fd | tr` raced with bash, which holds
    // both ends of the pipe (fds 3 and 4) until it has started both sides.
    assert_eq!(
        lines[6]
            .split_whitespace()
            .filter(|fd| fd.parse::<i32>().unwrap() > 3)
            .count(),
        0,
        "fds inside: {}",
        lines[6]
    );
}

/// A stdin for a child that also inherits an extra open unix socket (as an IDE terminal may pass one).
fn inherited_extra_fd() -> Stdio {
    let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
    rustix::io::fcntl_setfd(&b, rustix::io::FdFlags::empty()).unwrap();
    std::mem::forget(b); // stays open, without CLOEXEC, in every child this test process spawns
    Stdio::from(std::os::fd::OwnedFd::from(a))
}

#[test]
fn nothing_started_in_the_jail_outlives_it() {
    let f = Fixture::new();
    let marker = f.ws.join("late");
    ok(&f.jail("(sleep 1; echo late > late) & disown; exit 0"));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !marker.exists(),
        "a background process survived the session"
    );
}

/// (SIGHUP ends the session: `lifetime::a_hang_up_ends_a_session_that_ignores_it_and_finishes_it`.)
#[test]
fn signals_sent_to_the_launcher_reach_the_command() {
    use nix::sys::signal::Signal as S;
    let f = Fixture::new();
    let script = r#"
        for s in TERM INT QUIT WINCH USR1 USR2; do trap "echo $s >> got" $s; done
        echo ready > ready
        while [ "$(wc -l < got 2>/dev/null || echo 0)" -lt 6 ]; do sleep 0.05; done
        exit 0
    "#;
    let mut child = f
        .cmd(["run", "--", "bash", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = f.ws.join("ready");
    wait_for("the jailed script", Duration::from_secs(10), || {
        ready.exists()
    });
    let got = f.ws.join("got");
    let sigs = [
        ("TERM", S::SIGTERM),
        ("INT", S::SIGINT),
        ("QUIT", S::SIGQUIT),
        ("WINCH", S::SIGWINCH),
        ("USR1", S::SIGUSR1),
        ("USR2", S::SIGUSR2),
    ];
    for (i, (sig, signo)) in sigs.iter().enumerate() {
        signal(child.id(), *signo);
        wait_for(&format!("SIG{sig} inside"), Duration::from_secs(5), || {
            std::fs::read_to_string(&got).is_ok_and(|s| s.lines().count() > i)
        });
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let got = std::fs::read_to_string(&got).unwrap();
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        ["TERM", "INT", "QUIT", "WINCH", "USR1", "USR2"]
    );
}

#[test]
fn a_served_unix_socket_is_unreachable_inside() {
    let f = Fixture::new();
    let sock = f.root.join("docker.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock_s = sock.display().to_string();
    // Outside, the socket answers; inside, connecting fails.
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok());
    let _ = listener.accept();
    let script = format!(
        "python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"CONNECTED\")' {sock_s} 2>&1 | tail -1"
    );
    let out = ok(&f
        .cmd(["run", "--", "bash", "-c", &script])
        .env("SSH_AUTH_SOCK", &sock_s)
        .output()
        .unwrap());
    assert!(
        !out.contains("CONNECTED"),
        "the socket was reachable from the jail: {out}"
    );
    assert!(
        out.contains("Connection refused") || out.contains("Errno"),
        "{out}"
    );
}

#[test]
fn privileged_binaries_and_the_guard_itself_are_masked() {
    let f = Fixture::new();
    let bin = std::fs::canonicalize(bin()).unwrap();
    let script = format!(
        "cat {b} | wc -c; echo x > {b} 2>/dev/null && echo WROTE; mv {b} {b}.old 2>/dev/null && echo MOVED; \
         for p in /usr/bin/sudo /usr/bin/su /bin/su; do [ -e $p ] && {{ [ -s $p ] && echo \"VISIBLE $p\"; $p -c true 2>/dev/null && echo \"RAN $p\"; }}; done; \
         [ -s /usr/bin/bwrap ] && echo VISIBLE-bwrap; echo END",
        b = bin.display()
    );
    let out = ok(&f.jail(&script));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0], "0",
        "the claude-sandbox binary must read as empty inside"
    );
    assert_eq!(lines[1..], ["END"], "{out}");
    assert!(std::fs::metadata(&bin).unwrap().len() > 0);
}

#[test]
fn the_runtime_directory_is_invisible_inside() {
    let f = Fixture::new();
    ok(&f.jail("true")); // creates it
    std::fs::write(f.rt.join("secret"), "alerts").unwrap();
    let out = ok(&f.jail(&format!(
        "ls -A {} | wc -l; echo x > {}/y 2>/dev/null && echo WROTE; true",
        f.rt.display(),
        f.rt.display()
    )));
    assert_eq!(out.trim(), "0");
    let mode = std::fs::metadata(&f.rt).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn a_runtime_directory_owned_by_someone_else_is_refused() {
    let f = Fixture::new();
    // As root, hand a directory to another user; as a user, a root-owned directory is someone else's.
    let foreign = if is_root() {
        let d = f.root.join("foreign");
        std::fs::create_dir(&d).unwrap();
        assert!(Command::new("chown")
            .args(["65534", d.to_str().unwrap()])
            .status()
            .unwrap()
            .success());
        d
    } else {
        std::path::PathBuf::from("/usr")
    };
    let out = f
        .cmd(["run", "--", "bash", "-c", "echo STARTED"])
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", &foreign)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(!stdout(&out).contains("STARTED"));
    assert!(stderr(&out).contains("owned by uid"), "{}", stderr(&out));
}

#[test]
fn dry_run_prints_the_argv_and_writes_nothing() {
    let f = Fixture::new();
    // The agent need not be installed on this machine: a stand-in on the fixture's PATH.
    let agent = f.home.join(".local/bin/claude");
    std::fs::write(&agent, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = f.snapshot();
    let out = f
        .cmd(["run", "--dry-run", "--", "claude", "--resume"])
        .output()
        .unwrap();
    let text = ok(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with("bwrap"), "{text}");
    assert!(lines.contains(&"--die-with-parent") && lines.contains(&"--unshare-pid"));
    assert!(lines.contains(&"--seccomp"));
    assert_eq!(lines[lines.len() - 3..], ["--", "claude", "--resume"]);
    assert!(lines.iter().any(|l| l.ends_with("/.git/hooks")));
    assert_same(&before, &f.snapshot(), "--dry-run wrote to the host");
}

#[test]
fn explain_names_entry_points_masks_and_json_parses() {
    let f = Fixture::new();
    let text = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(
        text.contains(".git/hooks") && text.contains("runs: git"),
        "{text}"
    );
    assert!(text.contains("Not covered"));
    let json: serde_json::Value =
        serde_json::from_slice(&f.cmd(["explain", "--json"]).output().unwrap().stdout).unwrap();
    assert!(json["policy"]["sealed"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["path"].as_str().unwrap().ends_with(".devcontainer")));
    // `~/.local/bin` lies in the jail's own `~/.local` layer: not a writable PATH directory of
    // yours, so not watched.
    let local_bin = f.home.join(".local/bin");
    assert!(
        !json["watched_path_dirs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str() == local_bin.to_str()),
        "{}",
        json["watched_path_dirs"]
    );
    assert!(json["policy"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l["path"].as_str() == f.home.join(".local").to_str()));
}

/// Placeholders exist only while a session runs, and programs outside see no empty rc files.
#[test]
fn placeholders_exist_only_during_the_session() {
    let f = Fixture::new();
    let before = f.snapshot();
    let mut child = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "echo up > .git/../up-marker-ignored 2>/dev/null; touch running; sleep 30",
        ])
        .spawn()
        .unwrap();
    let running = f.ws.join("running");
    wait_for("the session", Duration::from_secs(10), || running.exists());
    assert!(
        f.ws.join(".devcontainer").is_dir(),
        "the .devcontainer placeholder is an empty directory during the session"
    );
    assert!(
        !f.home.join(".bash_profile").exists(),
        "no rc-file stub in the real $HOME"
    );
    let status = f.git(&f.ws, &["status", "--porcelain"]);
    assert_eq!(
        stdout(&status)
            .lines()
            .filter(|l| !l.contains("running") && !l.contains("up-marker"))
            .count(),
        0,
        "placeholders show in git status outside: {}",
        stdout(&status)
    );
    child.kill().unwrap(); // SIGKILL the launcher: its jail dies with it, its placeholders stay...
    child.wait().unwrap();
    std::fs::remove_file(&running).unwrap();
    let _ = std::fs::remove_file(f.ws.join("up-marker-ignored"));
    assert!(
        f.ws.join(".devcontainer").exists(),
        "expected the killed session's placeholder to be left"
    );
    ok(&f.jail("true")); // ...and the next run removes them.
    assert_same(&before, &f.snapshot(), "placeholders survived");
}

/// Makes a directory unwritable for the test's user, and writable again when dropped: `chattr +i`
/// for root (DAC does not stop root), else the mode.
struct Unwritable(std::path::PathBuf);

impl Unwritable {
    fn new(dir: &std::path::Path) -> Self {
        if is_root() {
            let out = Command::new("chattr").arg("+i").arg(dir).output().unwrap();
            assert!(
                out.status.success(),
                "as root this test needs `chattr +i` (ext4, xfs, btrfs) under \
                 CLAUDE_SANDBOX_TEST_TMP: {}",
                stderr(&out)
            );
        } else {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        Unwritable(dir.to_path_buf())
    }
}

impl Drop for Unwritable {
    fn drop(&mut self) {
        if is_root() {
            let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        } else {
            let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// The seals' placeholders are made while bwrap starts, beside the watcher. One that cannot be
/// made (here `.git/commondir`, in a `.git` the user cannot write) stops the launch: exit 125
/// naming it, the command never runs, and the placeholders already made are gone again.
#[test]
fn a_placeholder_that_cannot_be_made_stops_the_launch_and_leaves_nothing() {
    let f = Fixture::new();
    let before = f.snapshot();
    let out = {
        let _locked = Unwritable::new(&f.ws.join(".git"));
        f.jail("echo RAN; touch ran-marker")
    };
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(!stdout(&out).contains("RAN"), "the command ran");
    assert!(
        err.contains("cannot create placeholder") && err.contains(".git/commondir"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert_same(
        &before,
        &f.snapshot(),
        "a stopped launch left something behind",
    );
    // The session's directory (its `$HOME`) goes too: the launch's guards undo what it made.
    let sessions = f.rt.join("sessions");
    assert_eq!(
        std::fs::read_dir(sessions).unwrap().count(),
        0,
        "a stopped launch left its session directory"
    );
}

#[test]
fn no_placeholder_survives_a_normal_exit() {
    let f = Fixture::new();
    let before = f.snapshot();
    assert_eq!(f.jail("exit 3").status.code(), Some(3));
    assert_same(
        &before,
        &f.snapshot(),
        "a placeholder survived a normal exit",
    );
    let sessions = f.rt.join("sessions");
    assert_eq!(
        std::fs::read_dir(sessions).unwrap().count(),
        0,
        "a session directory survived"
    );
}

#[test]
fn claude_json_is_a_private_copy_merged_back_with_mcp_servers_held() {
    let f = Fixture::new();
    std::fs::write(
        f.home.join(".claude.json"),
        r#"{"numStartups":1,"mcpServers":{}}"#,
    )
    .unwrap();
    // Save the way Claude Code does: a temporary file in $HOME renamed over the real one.
    let script = r#"python3 - <<'EOF'
import json, os
p = os.path.expanduser("~/.claude.json")
d = json.load(open(p))
d["numStartups"] += 1
d["mcpServers"] = {"evil": {"command": "sh", "args": ["-c", "touch /var/tmp/pwned"]}}
tmp = p + ".tmp.123.abc"
json.dump(d, open(tmp, "w"))
os.rename(tmp, p)
print("saved")
EOF"#;
    let out = f.jail(script);
    assert_eq!(ok(&out).trim(), "saved");
    assert!(
        stderr(&out).contains("1 change(s) from the jail that run something")
            && stderr(&out).contains("claude-sandbox review"),
        "{}",
        stderr(&out)
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(v["numStartups"], 2);
    assert_eq!(v["mcpServers"], serde_json::json!({}));
    // Held, not lost: accepted, the server lands as the jail wrote it, the rest as it is now.
    let review: serde_json::Value =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    let id = review[0]["id"].as_str().unwrap().to_string();
    assert!(
        review[0]["what"]
            .as_str()
            .unwrap()
            .starts_with("mcpServers = "),
        "{review}"
    );
    ok(&f.cmd(["review", "accept", &id]).output().unwrap());
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap()).unwrap();
    assert_eq!(v["mcpServers"]["evil"]["command"], "sh");
    assert_eq!(v["numStartups"], 2);
    assert_eq!(
        f.cmd(["review"]).output().unwrap().status.code(),
        Some(0),
        "nothing waits"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&f.home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty());
}

/// TIOCSTI from inside cannot type into the human's terminal (driven by tmux outside), while a TUI
/// inside still gets window-size changes and Ctrl-C.
#[test]
fn terminal_injection_is_blocked_while_the_tui_keeps_working() {
    let f = Fixture::new();
    require_tmux();
    let sock = f.root.join("tmux.sock");
    let tmux = |args: &[&str]| {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux {args:?}: {}", stderr(&out));
        stdout(&out)
    };
    std::fs::write(f.ws.join("sti.py"), "import fcntl, termios\ntry:\n    [fcntl.ioctl(0, termios.TIOCSTI, bytes([c])) for c in b'touch INJECTED\\n']\n    print('STI-WORKED')\nexcept OSError as e:\n    print('STI-REFUSED', e.errno)\n").unwrap();
    std::fs::write(f.ws.join("tui.sh"), "trap 'echo \"WINCH $(stty size)\"' WINCH\ntrap 'echo GOT-INT; exit 42' INT\necho READY $(stty size)\nwhile :; do sleep 0.05; done\n").unwrap();
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let shell = format!(
        "cd {} && env -i {} bash --norc --noprofile",
        f.ws.display(),
        env.join(" ")
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "100",
        "-y",
        "30",
        &shell,
    ]);
    let screen = || tmux(&["capture-pane", "-p", "-t", "t"]);
    let bin = bin().display().to_string();
    // Control: without the jail the same script injects (so this test can fail).
    tmux(&["send-keys", "-t", "t", "python3 sti.py", "Enter"]);
    wait_for("the unjailed STI attempt", Duration::from_secs(10), || {
        screen().contains("STI-")
    });
    let legacy = screen().contains("STI-WORKED");
    if legacy {
        wait_for("the control injection", Duration::from_secs(5), || {
            f.ws.join("INJECTED").exists()
        });
        std::fs::remove_file(f.ws.join("INJECTED")).unwrap();
    } else {
        eprintln!("note: this kernel refuses TIOCSTI outright (dev.tty.legacy_tiocsti=0); the jailed attempt must still fail");
    }
    tmux(&["send-keys", "-t", "t", "clear", "Enter"]);
    tmux(&[
        "send-keys",
        "-t",
        "t",
        &format!("{bin} run -- python3 sti.py; echo EXIT=$?"),
        "Enter",
    ]);
    wait_for("the jailed STI attempt", Duration::from_secs(15), || {
        screen().contains("EXIT=")
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(screen().contains("STI-REFUSED 1"), "{}", screen());
    assert!(
        !f.ws.join("INJECTED").exists(),
        "input pushed from the jail ran in the outer shell"
    );
    // The TUI path: resize and Ctrl-C reach the jailed program through the real terminal.
    tmux(&["send-keys", "-t", "t", "clear", "Enter"]);
    tmux(&[
        "send-keys",
        "-t",
        "t",
        &format!("{bin} run -- bash tui.sh; echo EXIT=$?"),
        "Enter",
    ]);
    wait_for("the TUI to start", Duration::from_secs(15), || {
        screen().contains("READY 30 100")
    });
    tmux(&["resize-window", "-t", "t", "-x", "80", "-y", "20"]);
    wait_for("SIGWINCH inside", Duration::from_secs(5), || {
        screen().contains("WINCH 20 80")
    });
    tmux(&["send-keys", "-t", "t", "C-c"]);
    wait_for("Ctrl-C inside", Duration::from_secs(5), || {
        screen().contains("EXIT=42")
    });
    assert!(screen().contains("GOT-INT"));
    kill_tmux_server(&sock);
}

#[test]
fn stdout_and_stdin_pass_through() {
    use std::io::Write;
    let f = Fixture::new();
    let mut child = f
        .cmd(["run", "--", "tr", "a-z", "A-Z"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"hello\n").unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(out, "HELLO\n");
    assert!(child.wait().unwrap().success());
}

/// Two sessions on one workspace: the one that ends first must not pull the placeholders away from
/// the one still running (removing a mount point on the host detaches it in the other jail).
#[test]
fn concurrent_sessions_keep_each_others_placeholders() {
    let f = Fixture::new();
    let script = "touch a-running; while [ ! -e b-done ]; do sleep 0.05; done; \
                  mkdir -p .devcontainer/x 2>/dev/null && echo ESCAPED; mkdir .vscode/x 2>/dev/null && echo ESCAPED; echo A-END";
    let a = f
        .cmd(["run", "--", "bash", "-c", script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed (its jail with it) if an assertion fails before B is done: it would wait forever.
    let a = Running(Some(a));
    let running = f.ws.join("a-running");
    wait_for("session A", Duration::from_secs(10), || running.exists());
    ok(&f.jail("mkdir -p .devcontainer/y 2>/dev/null && echo ESCAPED; true"));
    assert!(
        f.ws.join(".devcontainer").is_dir(),
        "session B removed a placeholder session A still holds"
    );
    std::fs::write(f.ws.join("b-done"), "").unwrap();
    let out = a.wait();
    assert_eq!(
        stdout(&out).trim(),
        "A-END",
        "session A's seals must hold after B ended"
    );
    assert!(
        !f.ws.join(".devcontainer").exists(),
        "the last session out removes the placeholder"
    );
}

/// The seals made from outside the jail (the default) and the same seals made by bwrap
/// (`CLAUDE_SANDBOX_SEAL=bwrap`) give the command the same mounts, with the same flags; and the
/// default really seals from outside (no silent fallback on this machine).
#[test]
fn sealing_from_outside_matches_bwraps_own_sealing() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("sub/nested")).unwrap();
    f.git(&f.ws.join("sub/nested"), &["init", "-q"]);
    std::fs::write(f.ws.join(".envrc"), "export A=1\n").unwrap();
    std::os::unix::fs::symlink(".config/vimrc", f.home.join(".vimrc")).unwrap();
    std::fs::create_dir_all(f.home.join(".ssh/config.d")).unwrap();
    std::fs::write(f.home.join(".ssh/config"), "Host x\n").unwrap();
    std::fs::write(f.home.join(".ssh/id_rsa"), "KEY\n").unwrap();
    // Mount point, and the flags that matter, of every mount under the workspace and home; what
    // `$HOME` looks like and where it can be written; plus what a write through the working
    // directory (the workspace: an anchor covers it) does.
    let script = "awk '{print $5, $6}' /proc/self/mountinfo | grep -E \"^($WS|$HOME|/tmp/.claude-sandbox|/run)\" \
        | sed -E 's/,relatime|,noatime//' | sort; find ~ -maxdepth 1 -printf '%y %p %l\\n' | sort; \
        touch ~/.cache/w && echo cache-writable; (touch ~/.local/bin/w 2>/dev/null && echo local-bin-writable) || echo local-bin-read-only; \
        touch ~/.config/w 2>/dev/null || echo config-read-only; touch ~/new && echo home-top-private; \
        grep -c claude-sandbox-host /proc/self/mountinfo; echo $PWD; \
        echo x >> .envrc 2>/dev/null && echo WROTE-envrc; \
        cat /dev/null > sub/nested/.git/config 2>/dev/null && echo WROTE-config; echo END";
    let run = |seal: Option<&str>| {
        let mut c = f.cmd(["-vv", "run", "--", "bash", "-c", script]);
        c.env("WS", &f.ws);
        if let Some(s) = seal {
            c.env("CLAUDE_SANDBOX_SEAL", s);
        }
        c.output().expect("spawn claude-sandbox")
    };
    let outside = run(None);
    let inside = run(Some("bwrap"));
    // The sealer executed rather than forked (what a second attempt does): the same jail.
    let executed = run(Some("exec"));
    // One difference by design: the `~/.local` data layer is an overlay (writable, the jail's own)
    // when the sealer mounts it, and your directory read-only when bwrap makes every mount
    // (bubblewrap 0.8 has no overlay; docs/layers.md).
    let local = format!("{}/.local ", f.home.display());
    // And another: the sealer gives the jail its own git configs (a symlink mounted over each
    // repository's config, its copies bound at /tmp/.claude-sandbox-git, `~/.gitconfig` a symlink;
    // `git config` inside writes the copy: tests/integration/gitconfig.rs); bwrap cannot mount a symlink and
    // keeps them read-only. Those lines are compared apart.
    let gitcopy = |l: &str| {
        l.contains("/tmp/.claude-sandbox-git")
            || l.contains("/.git/claude-sandbox ")
            || l.contains("/.gitconfig")
            || l == "WROTE-config"
    };
    let without = |t: String| {
        t.lines()
            .filter(|l| !gitcopy(l))
            .fold(String::new(), |s, l| s + l + "\n")
    };
    // So is its PATH directory, `~/.local/bin`: the jail's in the overlay, yours read-only in bwrap's.
    let ro = ok(&inside);
    let b = without(
        ro.replace(&format!("{local}ro,"), &format!("{local}rw,"))
            .replace("-bin-read-only", "-bin-writable"),
    );
    let a_full = ok(&outside);
    assert!(
        a_full.contains("WROTE-config"),
        "the jail writes its own copy: {a_full}"
    );
    assert!(
        a_full.contains(&format!(
            "l {}/.gitconfig /tmp/.claude-sandbox-git/0.config",
            f.home.display()
        )),
        "{a_full}"
    );
    assert!(
        !ok(&inside).contains("WROTE-config"),
        "bwrap keeps the config read-only"
    );
    let a = without(a_full);
    assert!(
        stderr(&executed).contains("sealed from outside"),
        "{}",
        stderr(&executed)
    );
    assert_eq!(
        without(ok(&executed)),
        b,
        "executed sealer (left) and bwrap (right) differ"
    );
    assert!(
        ro.contains(&format!("{local}ro,")) && ro.contains("local-bin-read-only"),
        "bwrap made your ~/.local or its bin writable"
    );
    assert!(
        stderr(&outside).contains("sealed from outside"),
        "the default launch did not seal from outside:\n{}",
        stderr(&outside)
    );
    assert!(!stderr(&inside).contains("sealed from outside"));
    assert!(a.contains(".envrc ro,nosuid,nodev"), "{a}");
    assert!(a.contains("nested/.git/config ro,nosuid,nodev"), "{a}");
    for want in [
        "cache-writable",
        "local-bin-writable",
        "config-read-only",
        "home-top-private",
        "/.vimrc .config/vimrc",
        "/tmp/.claude-sandbox ro,nosuid,nodev",
        "/tmp/.claude-sandbox/claude-sandbox ro,nosuid,nodev",
    ] {
        assert!(a.contains(want), "{want} missing from:\n{a}");
    }
    assert!(
        a.contains(&format!("\n0\n{}\n", f.ws.display())),
        "the staging tree is still mounted, or the working directory is wrong:\n{a}"
    );
    assert!(!a.contains("WROTE"), "{a}");
    assert!(a.ends_with("END\n"), "{a}");
    assert_eq!(a, b, "outside (left) and bwrap (right) differ");
}

/// When sealing from outside fails halfway, the command must not have run in the half-sealed jail:
/// it runs once, in a jail bwrap sealed, and the seals hold.
#[test]
fn a_failed_seal_from_outside_falls_back_without_running_the_command_twice() {
    // Failing with a reason, and dying without a word (as when Ctrl-C kills the sealer): neither
    // may be taken for success.
    for mode in ["fail-halfway", "die-halfway"] {
        failed_seal_falls_back(mode);
    }
}

fn failed_seal_falls_back(mode: &str) {
    let f = Fixture::new();
    let count = f.ws.join("ran");
    let script = format!(
        "echo ran >> {c}; mkdir -p .devcontainer/x 2>/dev/null && echo WROTE; echo END",
        c = count.display()
    );
    let out = f
        .cmd(["-v", "run", "--", "bash", "-c", &script])
        .env("CLAUDE_SANDBOX_SEAL", mode)
        .output()
        .unwrap();
    let text = ok(&out);
    assert_eq!(text, "END\n", "[{mode}] {text}");
    assert!(
        stderr(&out).contains("bwrap makes the seals instead"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "ran\n");
}

/// A workspace under a directory the jail gets fresh (`/dev` is bwrap's own tmpfs, `/tmp` a private
/// one) is not visible to the sealer inside the jail: it binds it from the host's tree, which bwrap
/// shows it at a staging point that is gone before the command runs.
#[test]
fn a_workspace_the_jail_does_not_see_by_itself_is_still_bound_and_sealed() {
    let f = Fixture::new();
    let shm = tempfile::Builder::new()
        .prefix("cs-test-ws-")
        .tempdir_in("/dev/shm")
        .expect("a directory in /dev/shm");
    let ws = std::fs::canonicalize(shm.path()).unwrap();
    f.git(&ws, &["init", "-q"]);
    std::fs::write(ws.join(".envrc"), "export A=1\n").unwrap();
    let out = f
        .cmd([
            "-vv",
            "run",
            "--",
            "sh",
            "-c",
            "pwd; echo new > file && echo wrote-file; echo x >> .envrc 2>/dev/null || echo envrc-sealed; \
             grep -c claude-sandbox-host /proc/self/mountinfo; exit 0",
        ])
        .current_dir(&ws)
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(
        stderr(&out).contains("sealed from outside"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        text,
        format!("{}\nwrote-file\nenvrc-sealed\n0\n", ws.display()),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(ws.join("file")).unwrap(), "new\n");
    assert_eq!(
        std::fs::read_to_string(ws.join(".envrc")).unwrap(),
        "export A=1\n"
    );
}

/// A nested repository made by root (a `postCreateCommand`, `docker exec` as root) in the workspace
/// of an ordinary user: no placeholder can be made in its `.git`, and none is needed, since the
/// agent cannot create anything there either. The launch works, explain says what was not sealed
/// and why, and the agent still cannot plant a hook there.
#[test]
fn a_nested_repository_owned_by_root_does_not_stop_the_launch() {
    if !is_root() {
        eprintln!(
            "\n*** a_nested_repository_owned_by_root_does_not_stop_the_launch: NOT RUN as this user — \
             it needs root to make a directory owned by someone else; the root run covers it.\n"
        );
        return;
    }
    let f = Fixture::new();
    let nested = f.ws.join("vendor/lib");
    std::fs::create_dir_all(&nested).unwrap();
    f.git(&nested, &["init", "-q"]);
    // Everything but the nested repository belongs to the ordinary user who launches.
    let user = 65534u32; // nobody
    let bin_copy = f.root.join("claude-sandbox");
    std::fs::copy(bin(), &bin_copy).unwrap();
    for e in walkdir::WalkDir::new(&f.root).into_iter().flatten() {
        if e.path().starts_with(nested.join(".git")) || e.path() == nested {
            continue;
        }
        std::os::unix::fs::lchown(e.path(), Some(user), Some(user)).unwrap();
    }
    let as_user = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bin_copy)
            .args(args)
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = as_user(&[
        "run",
        "--",
        "sh",
        "-c",
        "echo launched; touch vendor/lib/.git/hooks/pre-commit 2>/dev/null && echo PLANTED; true",
    ]);
    let text = ok(&out);
    assert!(text.contains("launched"), "{text}");
    assert!(!text.contains("PLANTED"), "{text}");
    assert!(!nested.join(".git/hooks/pre-commit").exists());
    let explain = ok(&as_user(&["explain"]));
    assert!(
        explain.contains("is not sealed") && explain.contains("vendor/lib/.git"),
        "{explain}"
    );
    // Hand the tree back so the fixture can be removed.
    for e in walkdir::WalkDir::new(&f.root).into_iter().flatten() {
        let _ = std::os::unix::fs::lchown(e.path(), Some(0), Some(0));
    }
}
