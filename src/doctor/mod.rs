//! `claude-sandbox doctor`: what works here, what does not, and the exact fix.
//!
//! Guards against a guard that silently is not there: no bwrap, user namespaces refused by Docker's
//! seccomp profile or Ubuntu's `AppArmor` restriction, a filesystem where inotify sees nothing, a prompt
//! hook that another rc file overwrote, a `claude` that runs unguarded. Each check has a mark
//! (pass/warn/fail), one line of why, and the fix; a check that crashes is a failed check, not a crash.
//! Read-only: it changes nothing (the jail check runs a real jail in a throwaway workspace).

use crate::host::HostEnv;
use crate::jail::launch;
mod agents;
mod devices;
mod jail;
mod layers;
mod policy;
mod prompt_hook;
pub(crate) use agents::installer_command;
use agents::{check_agent_versions, check_wrappers};
pub(crate) use jail::trial_launch;
use jail::{check_bwrap, check_jail, check_userns};
use layers::check_layers;
use prompt_hook::check_hook;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mark {
    Pass,
    Warn,
    Fail,
    /// The check does not apply here (e.g. the prompt hook outside an interactive shell).
    #[serde(rename = "n/a")]
    NotApplicable,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub mark: Mark,
    pub why: String,
    pub fix: Option<String>,
}

fn pass(name: &'static str, why: impl Into<String>) -> Check {
    Check {
        name,
        mark: Mark::Pass,
        why: why.into(),
        fix: None,
    }
}
fn warn(name: &'static str, why: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name,
        mark: Mark::Warn,
        why: why.into(),
        fix: Some(fix.into()),
    }
}
fn not_applicable(name: &'static str, why: impl Into<String>) -> Check {
    Check {
        name,
        mark: Mark::NotApplicable,
        why: why.into(),
        fix: None,
    }
}
fn fail(name: &'static str, why: impl Into<String>, fix: impl Into<String>) -> Check {
    Check {
        name,
        mark: Mark::Fail,
        why: why.into(),
        fix: Some(fix.into()),
    }
}

type CheckFn = fn(&HostEnv) -> Vec<Check>;

/// Every check, cheap ones first.
const CHECKS: &[(&str, CheckFn)] = &[
    ("bwrap", check_bwrap),
    ("user namespaces", check_userns),
    ("jail", check_jail),
    ("runtime directory", check_runtime),
    ("inotify", check_inotify),
    ("watched directories", check_watched),
    ("PATH", check_path),
    ("git repositories", check_git),
    ("TIOCSTI", check_tiocsti),
    ("prompt hook", check_hook),
    ("agent wrappers", check_wrappers),
    ("agent versions", check_agent_versions),
    ("leftovers", check_leftovers),
    ("cache layers", check_layers),
    ("alerts", check_alerts),
    ("network", crate::net::doctor::check_network),
    ("ssh agent", crate::ssh_agent::check_doctor),
    ("docker filter", crate::docker::check_doctor),
    ("devices", devices::check_devices),
    ("policy", policy::check_policy),
];

pub fn run_all(env: &HostEnv) -> Vec<Check> {
    let mut out = Vec::new();
    for (name, f) in CHECKS {
        match std::panic::catch_unwind(|| f(env)) {
            Ok(checks) => out.extend(checks),
            Err(_) => out.push(fail(
                name,
                "the check crashed",
                "report this as a bug, with `claude-sandbox doctor -vv`",
            )),
        }
    }
    out
}

/// Print and return the exit status: 0 when nothing failed.
pub fn doctor(json: bool, env: &HostEnv) -> i32 {
    // Panics inside checks are reported as failed checks; keep the default hook from printing them.
    std::panic::set_hook(Box::new(|_| {}));
    let checks = run_all(env);
    let _ = std::panic::take_hook();
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&checks).expect("checks serialise")
        );
    } else {
        let color = crate::cli::color_on(std::io::stdout());
        for c in &checks {
            let (mark, code) = match c.mark {
                Mark::Pass => ("[✓]", "32"),
                Mark::Warn => ("[!]", "33"),
                Mark::Fail => ("[✗]", "31"),
                Mark::NotApplicable => ("[-]", "2"),
            };
            let mark = if color {
                format!("\x1b[{code}m{mark}\x1b[0m")
            } else {
                mark.to_string()
            };
            // A finding can name what the jail shaped (a planted file's name): escaped.
            let _ = writeln!(out, "{mark} {}: {}", c.name, crate::escape::visible(&c.why));
            if let Some(fix) = &c.fix {
                let _ = writeln!(out, "      fix: {}", crate::escape::visible(fix));
            }
        }
        let fails = checks.iter().filter(|c| c.mark == Mark::Fail).count();
        let warns = checks.iter().filter(|c| c.mark == Mark::Warn).count();
        let na = checks
            .iter()
            .filter(|c| c.mark == Mark::NotApplicable)
            .count();
        let _ = writeln!(
            out,
            "\n{fails} failed, {warns} warnings, {} passed, {na} not applicable",
            checks.len() - fails - warns - na
        );
    }
    i32::from(checks.iter().any(|c| c.mark == Mark::Fail))
}

fn command_output(program: &Path, args: &[&str]) -> Option<(bool, String)> {
    let o = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    Some((o.status.success(), text.trim().to_string()))
}

fn read_trim(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn check_runtime(env: &HostEnv) -> Vec<Check> {
    use std::os::unix::fs::MetadataExt;
    let dir = crate::runtime_dir::locate(env);
    match std::fs::symlink_metadata(&dir) {
        Err(_) => vec![pass(
            "runtime directory",
            format!("{} will be created on first use", dir.display()),
        )],
        Ok(m) if !m.is_dir() => vec![fail(
            "runtime directory",
            format!("{} is not a directory", dir.display()),
            format!("remove {}", dir.display()),
        )],
        Ok(m) if m.uid() != rustix::process::getuid().as_raw() => vec![fail(
            "runtime directory",
            format!("{} is owned by uid {}, not you", dir.display(), m.uid()),
            format!("remove it (as root) or set {}", crate::host::RUNTIME_DIR),
        )],
        Ok(m) if m.mode() & 0o077 != 0 => vec![warn(
            "runtime directory",
            format!("{} is mode {:o}", dir.display(), m.mode() & 0o777),
            format!("chmod 700 {}", dir.display()),
        )],
        Ok(_) => vec![pass(
            "runtime directory",
            format!("{} (yours, 0700)", dir.display()),
        )],
    }
}

fn check_inotify(_: &HostEnv) -> Vec<Check> {
    let limits: Vec<String> = [
        "max_user_watches",
        "max_user_instances",
        "max_queued_events",
    ]
    .iter()
    .map(|k| {
        format!(
            "{k}={}",
            read_trim(&format!("/proc/sys/fs/inotify/{k}")).unwrap_or_else(|| "?".into())
        )
    })
    .collect();
    match inotify::Inotify::init() {
        Ok(_) => {
            let watches: u64 = read_trim("/proc/sys/fs/inotify/max_user_watches")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if watches < 8192 {
                vec![warn(
                    "inotify",
                    format!("available, but few watches ({})", limits.join(" ")),
                    "on the host: sysctl -w fs.inotify.max_user_watches=524288",
                )]
            } else {
                vec![pass("inotify", format!("available ({})", limits.join(" ")))]
            }
        }
        Err(e) => vec![warn(
            "inotify",
            format!("unavailable ({e}): every directory is swept once a second"),
            "a native (not emulated) container; raise fs.inotify.max_user_instances on the host",
        )],
    }
}

/// PATH directories the jail could write, for the current directory's workspace, and whether that
/// workspace is read-only to you (and so to the jail).
fn writable_path_dirs(env: &HostEnv) -> crate::Result<(Vec<PathBuf>, PathBuf, bool)> {
    let opts = launch::RunOptions {
        command: vec!["true".into()],
        ..Default::default()
    };
    let (input, _) = launch::plan_input(&opts, "doctor", env)?;
    let plan = crate::jail::plan::plan(&input)?;
    Ok((
        crate::explain::writable_path_dirs(&plan, &input.path_env),
        plan.policy.workspace,
        plan.policy.read_only_workspace,
    ))
}

fn check_watched(env: &HostEnv) -> Vec<Check> {
    let mut out = Vec::new();
    let dirs = match writable_path_dirs(env) {
        Ok((dirs, ws, read_only)) => {
            if read_only {
                out.push(warn(
                    "workspace",
                    format!(
                        "{} is read-only to you, so the jail sees it read-only",
                        ws.display()
                    ),
                    "`chmod u+w` it (or work in a copy you own) to let the agent write there",
                ));
            }
            dirs
        }
        // A broken configuration file stops `run` with file:line; say the same here.
        Err(e @ crate::Error::Config { .. }) => {
            return vec![fail(
                "configuration",
                e.to_string(),
                "correct that line: `claude-sandbox run` refuses to start until then",
            )]
        }
        Err(e) => {
            return vec![warn(
                "watched directories",
                format!("could not plan a jail for the current directory: {e}"),
                "run doctor from your workspace",
            )]
        }
    };
    if dirs.is_empty() {
        out.push(pass("watched directories", "no writable directory on PATH"));
        return out;
    }
    out.extend(dirs.iter().map(|d| {
        let existing = d.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
        match crate::watch::poll_only_fs(existing) {
            Some(fs) => warn(
                "watched directories",
                format!(
                    "{}: {fs}, swept once a second (inotify misses changes there)",
                    d.display()
                ),
                "keep writable PATH directories on the container's own filesystem",
            ),
            None => pass("watched directories", format!("{}: inotify", d.display())),
        }
    }));
    out
}

fn check_path(env: &HostEnv) -> Vec<Check> {
    let entries: Vec<PathBuf> = std::env::split_paths(env.path()).collect();
    let mut out = Vec::new();
    let relative: Vec<String> = entries
        .iter()
        .filter(|p| !p.is_absolute())
        .map(|p| format!("{:?}", p.display().to_string()))
        .collect();
    if !relative.is_empty() {
        out.push(fail(
            "PATH",
            format!(
                "relative or empty entries: {} (any directory you enter can shadow commands)",
                relative.join(", ")
            ),
            "remove them from PATH in your shell's rc file",
        ));
    }
    let system = entries
        .iter()
        .position(|p| p == Path::new("/usr/bin") || p == Path::new("/bin"));
    let mut early = Vec::new();
    for (i, p) in entries.iter().enumerate() {
        let existing = p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
        let writable =
            p.is_absolute() && rustix::fs::access(existing, rustix::fs::Access::WRITE_OK).is_ok();
        if writable && system.is_some_and(|s| i < s) {
            early.push(p.display().to_string());
        }
    }
    if !early.is_empty() {
        out.push(warn(
            "PATH",
            format!("writable by you and searched before /usr/bin: {} (watched during sessions when the jail can write them)", early.join(", ")),
            "nothing to do if the watcher covers them (see `claude-sandbox explain`)",
        ));
    }
    if out.is_empty() {
        out.push(pass(
            "PATH",
            "no relative entries; no writable directory before /usr/bin",
        ));
    }
    out
}

fn check_git(env: &HostEnv) -> Vec<Check> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let ws = crate::host::default_workspace(&cwd);
    let home = env.home();
    let mut found = Vec::new();
    for r in crate::entrypoints::discover_workspace(&ws, home.as_deref()).repos {
        let keys = crate::baseline::exec_keys(&r.common_dir, &r.git_dir, home.as_deref());
        for (file, key, value) in keys {
            if key == "core.hookspath" || key == "core.fsmonitor" {
                found.push(format!("{key}={value} in {}", file.display()));
            }
        }
    }
    if found.is_empty() {
        vec![pass(
            "git repositories",
            format!("no core.hooksPath or core.fsmonitor under {}", ws.display()),
        )]
    } else {
        vec![warn("git repositories", found.join("; "), "make sure you set these yourself (`git config --show-origin --get-regexp 'core\\.(hookspath|fsmonitor)'`)")]
    }
}

fn check_tiocsti(_: &HostEnv) -> Vec<Check> {
    match read_trim("/proc/sys/dev/tty/legacy_tiocsti").as_deref() {
        Some("0") => vec![pass("TIOCSTI", "dev.tty.legacy_tiocsti=0: the kernel refuses terminal injection; the jail's seccomp filter refuses it too")],
        Some(_) => vec![warn("TIOCSTI", "dev.tty.legacy_tiocsti=1: the jail refuses TIOCSTI with seccomp, but other programs outside could use it", "on the host: sysctl -w dev.tty.legacy_tiocsti=0")],
        None => vec![warn("TIOCSTI", "this kernel (< 6.2) always allows TIOCSTI; the jail refuses it with seccomp", "nothing to do inside; a newer kernel can turn it off")],
    }
}

fn check_leftovers(env: &HostEnv) -> Vec<Check> {
    let rt = crate::runtime_dir::locate(env);
    let placeholders = crate::jail::placeholders::list(&rt);
    let sessions = std::fs::read_dir(crate::runtime_dir::RuntimeDir::new(&rt).sessions())
        .map_or(0, std::iter::Iterator::count);
    if placeholders.is_empty() && sessions == 0 {
        return vec![pass(
            "leftovers",
            "no placeholders or session directories left",
        )];
    }
    vec![warn(
        "leftovers",
        format!("{} placeholder(s), {sessions} session directory(ies) (running sessions, or left by a killed one)", placeholders.len()),
        "the next `claude-sandbox run` removes what dead sessions left",
    )]
}

fn check_alerts(env: &HostEnv) -> Vec<Check> {
    let rt = crate::runtime_dir::locate(env);
    let contents = crate::alerts::Store::new(&rt).read();
    let n = contents.unacked().count();
    let mut out = vec![if n == 0 {
        pass("alerts", "no unacknowledged alerts")
    } else {
        warn(
            "alerts",
            format!("{n} unacknowledged alert(s)"),
            "claude-sandbox alerts",
        )
    }];
    if !contents.bad_lines.is_empty() {
        out.push(warn(
            "alerts",
            format!(
                "{} unreadable line(s) in alerts.jsonl (skipped)",
                contents.bad_lines.len()
            ),
            "nothing to do; they are ignored",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::agents::installer_command_for;

    #[test]
    fn the_installer_is_named_where_it_is() {
        let root = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(root.path()).unwrap();
        let mk = |rel: &str| {
            let p = r.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "").unwrap();
            p
        };
        // An install: PREFIX/bin and PREFIX/share/claude-sandbox.
        let bin = mk("usr/local/bin/claude-sandbox");
        let sh = mk("usr/local/share/claude-sandbox/install.sh");
        assert_eq!(
            installer_command_for(&bin, "--wrap claude"),
            format!("sudo bash {} --wrap claude", sh.display())
        );
        // npm, nested and hoisted.
        let nested = mk("g/claude-sandbox/node_modules/@claude-sandbox/linux-x64/claude-sandbox");
        let npm_sh = mk("g/claude-sandbox/install.sh");
        let hoisted = mk("g/@claude-sandbox/linux-arm64/claude-sandbox");
        for exe in [&nested, &hoisted] {
            assert_eq!(
                installer_command_for(exe, ""),
                format!("sudo bash {}", npm_sh.display())
            );
        }
        // A bare binary: the source's path, said to be the source's.
        let bare = mk("elsewhere/claude-sandbox");
        assert!(installer_command_for(&bare, "").contains("from the claude-sandbox source"));
    }
}
