//! What the seccomp filter refuses, tried in a real jail: the kernel keyring (the human's session
//! keyring is inherited by bwrap, and keyrings are not namespaced) and nested user namespaces
//! (`allow_user_namespaces` lets them through); threads and child processes keep working without
//! `clone3`.

use crate::common::*;

/// Join a new session keyring, add a key to it, then exec the rest of argv: the human's terminal
/// after `keyctl session` (or a login with `pam_keyinit`).
const WITH_SESSION_KEY: &str = r#"
import ctypes, os, platform, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
assert libc.syscall(KEYCTL, 1, None) > 0, "join"
v = b"KEYRING-SECRET"
assert libc.syscall(ADD_KEY, b"user", b"cs-test", v, len(v), -3) > 0, "add"
os.execv(sys.argv[1], sys.argv[1:])
"#;

const READ_KEY: &str = r#"
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL = {"x86_64": 250, "aarch64": 219}[platform.machine()]
kid = libc.syscall(KEYCTL, 10, -3, b"user", b"cs-test", 0)
print("search", kid, ctypes.get_errno())
buf = ctypes.create_string_buffer(64)
n = libc.syscall(KEYCTL, 11, kid, buf, 64)
print("read", buf.raw[:max(n, 0)].decode(), ctypes.get_errno())
"#;

#[test]
fn the_humans_session_keyring_is_unreadable_in_the_jail() {
    let f = Fixture::new();
    let bin = bin();
    let script = format!("python3 -c '{READ_KEY}'; echo; true");
    let run = |inside: &[&str]| {
        std::process::Command::new("python3")
            .args(["-c", WITH_SESSION_KEY])
            .arg(&bin)
            .args(inside)
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // The key is there for the launcher's own children (the test would mean nothing otherwise).
    let outside = std::process::Command::new("python3")
        .args([
            "-c",
            WITH_SESSION_KEY,
            "/usr/bin/env",
            "python3",
            "-c",
            READ_KEY,
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&outside.stdout).contains("read KEYRING-SECRET"),
        "{}{}",
        String::from_utf8_lossy(&outside.stdout),
        stderr(&outside)
    );
    for mode in ["host", "allowlist"] {
        let out = ok(&run(&[
            "run",
            "--network",
            mode,
            "--",
            "bash",
            "-c",
            &script,
        ]));
        assert!(!out.contains("KEYRING-SECRET"), "{mode}: {out}");
        assert!(
            out.contains("search -1 1"),
            "{mode}: refused with EPERM: {out}"
        );
    }
}

#[test]
fn nested_user_namespaces_are_refused_unless_allowed() {
    let f = Fixture::new();
    let script = "unshare --user true 2>&1; echo \"rc=$?\"; \
                  python3 -c 'import threading; t = threading.Thread(target=print, args=(\"thread-ok\",)); t.start(); t.join()'; \
                  git --version >/dev/null && echo fork-ok";
    let out = ok(&f.jail(script));
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(out.contains("rc=1"), "{out}");
    // Without clone3, libc falls back to clone: threads and child processes work.
    assert!(
        out.contains("thread-ok") && out.contains("fork-ok"),
        "{out}"
    );
    // The workspace file may not turn it on; the user's file may.
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "allow_user_namespaces = true\n",
    )
    .unwrap();
    let o = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`allow_user_namespaces`"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_file(f.ws.join(".claude-sandbox.toml")).unwrap();
    let cfg = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "allow_user_namespaces = true\n").unwrap();
    let out = ok(&f.jail(script));
    assert!(out.contains("rc=0"), "{out}");
}
