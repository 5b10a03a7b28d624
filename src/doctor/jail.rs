//! The checks that a jail can be made here: bwrap runs, user namespaces are allowed (Docker's
//! seccomp profile and Ubuntu's `AppArmor` restriction refuse them, each at a different step), and a
//! real jail launches in a throwaway workspace.

use super::{command_output, fail, pass, read_trim, warn, Check};
use crate::host::HostEnv;
use std::path::PathBuf;

pub(super) fn check_bwrap(env: &HostEnv) -> Vec<Check> {
    match env.find_bwrap() {
        Ok(p) => match command_output(&p, &["--version"]) {
            Some((true, v)) => vec![pass("bwrap", format!("{} ({v})", p.display()))],
            _ => vec![fail(
                "bwrap",
                format!("{} does not run", p.display()),
                "reinstall: apt-get install --reinstall bubblewrap",
            )],
        },
        Err(e) => vec![fail(
            "bwrap",
            e.to_string(),
            "apt-get install bubblewrap (or apk add bubblewrap, dnf install bubblewrap)",
        )],
    }
}

/// All three options at once: each one missing fails a different step of bwrap's set-up, so a fix
/// that named only the one that failed first cost a container rebuild per option.
const SECURITY_OPTS_FIX: &str = "devcontainer.json: \"runArgs\": [\"--security-opt\", \"seccomp=unconfined\", \"--security-opt\", \"apparmor=unconfined\", \"--security-opt\", \"systempaths=unconfined\"] (Podman: also --security-opt unmask=ALL), or the claude-sandbox Feature, which sets them; then rebuild the container (docs/devcontainer.md)";

pub(super) fn check_userns(env: &HostEnv) -> Vec<Check> {
    let Ok(bwrap) = env.find_bwrap() else {
        return vec![fail(
            "user namespaces",
            "cannot test without bwrap",
            "install bubblewrap first",
        )];
    };
    let args = [
        "--unshare-user",
        "--unshare-pid",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "true",
    ];
    match command_output(&bwrap, &args) {
        Some((true, _)) => vec![pass(
            "user namespaces",
            "bwrap can create user, mount and PID namespaces",
        )],
        Some((false, msg)) => {
            let apparmor = read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
                .as_deref()
                == Some("1");
            let seccomp = std::fs::read_to_string("/proc/self/status")
                .unwrap_or_default()
                .lines()
                .any(|l| l.starts_with("Seccomp:") && l.trim_end().ends_with('2'));
            let (why, fix) = if msg.contains("mount proc") {
                (
                    "the container masks parts of /proc, so a new PID namespace cannot mount its own procfs (\"mount too revealing\")",
                    SECURITY_OPTS_FIX,
                )
            } else if apparmor {
                (
                    "Ubuntu's AppArmor restriction refuses unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)",
                    "on the host: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile that allows userns for /usr/bin/bwrap",
                )
            } else if seccomp {
                (
                    "a seccomp filter (Docker's default profile) refuses the namespace syscalls",
                    SECURITY_OPTS_FIX,
                )
            } else {
                ("the kernel refused to create namespaces", "check user.max_user_namespaces (sysctl) and the container runtime's security options")
            };
            vec![fail("user namespaces", format!("{why}: {msg}"), fix)]
        }
        None => vec![fail(
            "user namespaces",
            "could not run bwrap",
            "reinstall bubblewrap",
        )],
    }
}

pub(super) fn check_jail(_: &HostEnv) -> Vec<Check> {
    let Ok(exe) = std::env::current_exe() else {
        return vec![fail(
            "jail",
            "cannot find the claude-sandbox binary",
            "reinstall",
        )];
    };
    let Some(out) = trial_launch(&exe, "jail", &["-v"], &[]) else {
        return vec![fail(
            "jail",
            "cannot create a throwaway workspace in /var/tmp",
            "make /var/tmp writable",
        )];
    };
    match out {
        Ok(o) if o.status.success() => {
            let log = String::from_utf8_lossy(&o.stderr);
            let sealing = match log.lines().find_map(|l| l.split_once("sealing from outside failed ")) {
                Some((_, why)) => warn(
                    "sealing",
                    format!("$HOME, the workspace and the seals are mounted by bwrap, ~0.4 ms per mount: sealing from outside failed {why}"),
                    "Linux 5.12+ (mount_setattr) and a bwrap that is not setuid; the jail is the same either way",
                ),
                None => pass("sealing", "$HOME, the workspace and the seals mounted from outside the jail (~1.5 ms for all)"),
            };
            vec![pass("jail", "`claude-sandbox run -- true` works"), sealing]
        }
        Ok(o) => vec![fail(
            "jail",
            format!(
                "`claude-sandbox run -- true` failed ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            "fix the checks above; then run it by hand with -vv",
        )],
        Err(e) => vec![fail("jail", e.to_string(), "reinstall claude-sandbox")],
    }
}

/// `claude-sandbox GLOBAL... run RUN... --workspace DIR -- true` in a throwaway workspace under
/// /var/tmp (removed afterwards): the doctor's trial launches. `None`: no workspace could be made.
pub(crate) fn trial_launch(
    exe: &std::path::Path,
    tag: &str,
    global: &[&str],
    run: &[&str],
) -> Option<std::io::Result<std::process::Output>> {
    let dir = PathBuf::from(format!(
        "/var/tmp/claude-sandbox-doctor-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).ok()?;
    let out = std::process::Command::new(exe)
        .args(global)
        .arg("run")
        .args(run)
        .arg("--workspace")
        .arg(&dir)
        .args(["--", "true"])
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    Some(out)
}
