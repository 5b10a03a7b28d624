//! The attack battery: real escape attempts run through the real launcher and watcher, judged by
//! their outcome.
//!
//! Guards against a guard that only looks right: each case (a TOML file in `battery/`) plants
//! something from inside the jail, then the runner acts as the human outside (commits, opens a shell,
//! runs the shadowed command by name) and checks whether the payload ran — a marker file only the
//! attack would write. Verdicts: `blocked` (the write failed or never reached the human's files),
//! `neutralised` (written, then quarantined before the human acted), `alerted` (it worked, but an
//! alert was raised), `MISSED`. `--unguarded` runs the same cases with no jail and no watcher: every
//! case must then be `MISSED`, which proves the case can fail.

use crate::error::{Error, Result};
use crate::host::{self, HostEnv};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod child;
mod interrupt;
mod scene;
mod tty;
use scene::{requirement_missing, scene, sh, Scene, PLANTED, PRELUDE};

/// One case file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    pub class: String,
    // The next three describe the case for the human reading its file (deny_unknown_fields makes
    // every case carry them); the runner itself does not need them.
    #[allow(dead_code)]
    pub entry_point: String,
    #[allow(dead_code)]
    pub tier: u8,
    /// What a successful attack looks like.
    #[allow(dead_code)]
    pub success: String,
    /// Shell run outside before the session (sets the scene).
    #[serde(default)]
    pub setup: String,
    /// Shell run inside the jail.
    pub payload: String,
    /// Shell run outside after the session: the human's ordinary action.
    #[serde(default)]
    pub trigger: String,
    /// Shell run outside at the end, whatever happened.
    #[serde(default)]
    pub cleanup: String,
    /// Commands that must exist for the case to mean anything (else it is skipped, with the reason).
    #[serde(default)]
    pub requires: Vec<String>,
    /// Run the session in a real terminal (tmux) with an outer shell that reads what follows it.
    #[serde(default)]
    pub tty: bool,
    /// PATH for everything the case runs instead of the scene's (`~/` is the scene's home, `$WS/`
    /// its workspace): a human whose current PATH lacks a directory their next login shell will
    /// have, or has one of the workspace's.
    #[serde(default)]
    pub path: Option<String>,
    /// Variables of the human's environment for everything the case runs (a token they exported):
    /// what the launcher is started with (`~/` is the scene's home).
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// Seconds the payload may run before its whole process group is killed (default 60).
    #[serde(default = "default_payload_timeout")]
    pub timeout: u64,
    #[serde(skip)]
    pub file: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Blocked,
    Neutralised,
    Alerted,
    Missed,
    Skipped,
    /// Kept aside for the human's review (`crate::held`): it reached nothing of theirs.
    Held,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Blocked => "blocked",
            Verdict::Neutralised => "neutralised",
            Verdict::Alerted => "alerted",
            Verdict::Missed => "MISSED",
            Verdict::Skipped => "skipped",
            Verdict::Held => "held",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub name: String,
    pub class: String,
    pub verdict: Verdict,
    pub latency_ms: Option<f64>,
    pub detail: String,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub dir: Option<PathBuf>,
    pub case: Option<String>,
    pub json: bool,
    pub keep: bool,
    pub unguarded: bool,
}

fn default_payload_timeout() -> u64 {
    60
}

/// Where the cases are: `--dir`, `$CLAUDE_SANDBOX_BATTERY`, `PREFIX/share/claude-sandbox/battery`
/// next to an installed binary, or this checkout's `battery/`.
pub fn cases_dir(opt: Option<&Path>, env: &HostEnv) -> PathBuf {
    if let Some(d) = opt {
        return d.to_path_buf();
    }
    if let Some(d) = env.get(host::BATTERY) {
        return PathBuf::from(d);
    }
    if let Some(prefix) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
    {
        let d = prefix.join("share/claude-sandbox/battery");
        if d.is_dir() {
            return d;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("battery")
}

pub fn load(dir: &Path) -> Result<Vec<Case>> {
    let mut cases = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| {
        Error::named_path(
            e,
            || format!("battery directory {}: not found; pass --dir", dir.display()),
            || format!("reading the battery directory {}", dir.display()),
        )
    })?;
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| Error::io(format!("reading {}", f.display()), e))?;
        let mut case: Case = toml::from_str(&text).map_err(|e| Error::Config {
            path: f.clone(),
            line: text[..e.span().map_or(0, |s| s.start).min(text.len())]
                .lines()
                .count()
                .max(1),
            message: e.message().trim().to_string(),
        })?;
        case.file = f;
        cases.push(case);
    }
    Ok(cases)
}

/// `*` matches any run of characters.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| tail.is_char_boundary(i) && glob_match(rest, &tail[i..]))
        }
    }
}

fn alerts(rt: &Path) -> Vec<crate::alerts::Alert> {
    crate::alerts::Store::new(rt).read().alerts
}

fn parse_ms(rfc3339: &str) -> Option<f64> {
    // Seconds within the day are enough for a latency (cases take seconds, not days).
    let t = rfc3339.get(11..23)?;
    let (h, m, s) = (
        t.get(0..2)?.parse::<f64>().ok()?,
        t.get(3..5)?.parse::<f64>().ok()?,
        t.get(6..12)?.parse::<f64>().ok()?,
    );
    Some((h * 3600.0 + m * 60.0 + s) * 1000.0)
}

/// Run one case and judge it.
pub fn run_case(case: &Case, bin: &Path, unguarded: bool, keep: bool, env: &HostEnv) -> Outcome {
    let outcome = |verdict, latency_ms, detail: String| Outcome {
        name: case.name.clone(),
        class: case.class.clone(),
        verdict,
        latency_ms,
        detail,
    };
    for r in &case.requires {
        if let Some(why) = requirement_missing(r) {
            return outcome(Verdict::Skipped, None, why);
        }
    }
    let s = match scene(case, bin, env) {
        Ok(mut s) => {
            if let Some(path) = &case.path {
                let home = format!("{}/", s.root.join("home").display());
                let ws = format!("{}/", s.ws.display());
                let path = path.replace("~/", &home).replace("$WS/", &ws);
                s.env.retain(|(k, _)| k != "PATH");
                s.env.push(("PATH".into(), path));
            }
            s
        }
        Err(e) => {
            interrupt::scene(None);
            return outcome(Verdict::Skipped, None, format!("cannot set up: {e}"));
        }
    };
    let result = judge(case, &s, bin, unguarded);
    if !case.cleanup.is_empty() {
        let _ = sh(&case.cleanup, &s, Duration::from_secs(10));
    }
    if !keep {
        remove_scene(&s.root);
    }
    interrupt::scene(None);
    let (verdict, latency, detail) = result;
    outcome(verdict, latency, detail)
}

fn judge(case: &Case, s: &Scene, bin: &Path, unguarded: bool) -> (Verdict, Option<f64>, String) {
    if !case.setup.is_empty() {
        let (ok, out) = sh(&case.setup, s, Duration::from_secs(30));
        if !ok {
            return (
                Verdict::Skipped,
                None,
                format!("setup failed: {}", out.trim()),
            );
        }
    }
    let script = format!("{PRELUDE}date -u +%H:%M:%S.%N > \"$WS/.battery-planted-at\" 2>/dev/null || true\n{}\necho {PLANTED}", case.payload);
    let launcher = s
        .env
        .iter()
        .find(|(k, _)| k == "CS_BIN")
        .map_or_else(|| bin.to_path_buf(), |(_, v)| PathBuf::from(v));
    let (planted, out) = if case.tty {
        tty::run_tty(&script, s, &launcher, unguarded)
    } else {
        run_payload(&script, s, &launcher, unguarded, case.timeout)
    };
    if !case.trigger.is_empty() {
        let _ = sh(&case.trigger, s, Duration::from_secs(30));
    }
    let worked = s.marker.exists();
    let found = alerts(&s.rt);
    let quarantined: Vec<_> = found.iter().filter(|a| a.quarantine_id.is_some()).collect();
    let latency = quarantined.first().and_then(|a| {
        let planted_at = std::fs::read_to_string(s.ws.join(".battery-planted-at")).ok()?;
        let at = parse_ms(&format!("0000-00-00T{}", planted_at.trim()))?;
        Some(parse_ms(&a.time)? - at).filter(|l| *l >= 0.0)
    });
    let last_line = out
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.contains(PLANTED))
        .unwrap_or("")
        .trim()
        .to_string();
    match (worked, found.is_empty()) {
        (true, false) => (
            Verdict::Alerted,
            latency,
            format!("{} alert(s), but the payload ran", found.len()),
        ),
        (true, true) => (Verdict::Missed, None, "the payload ran outside".into()),
        (false, _) if !planted => (
            Verdict::Blocked,
            None,
            if last_line.is_empty() {
                "the write failed".into()
            } else {
                last_line
            },
        ),
        (false, _) if !quarantined.is_empty() => (
            Verdict::Neutralised,
            latency,
            format!(
                "{} {}",
                quarantined[0].action,
                quarantined[0].path.display()
            ),
        ),
        (false, _) => match found
            .iter()
            .find(|a| a.kind == crate::alerts::AlertKind::Held)
        {
            Some(h) => (
                Verdict::Held,
                None,
                format!("held for review: {}", h.detail),
            ),
            None => (
                Verdict::Blocked,
                None,
                "written where nothing outside reads it".into(),
            ),
        },
    }
}

/// The payload, through the scene's launcher (or bare with `--unguarded`). The launcher's pid is
/// written to `$ROOT/launcher.pid` as soon as it runs, so that a case attacking the watcher signals
/// that one process, never a pattern; unguarded there is no launcher and the file stays empty.
fn run_payload(
    script: &str,
    s: &Scene,
    bin: &Path,
    unguarded: bool,
    timeout: u64,
) -> (bool, String) {
    let mut c = if unguarded {
        let mut c = Command::new("bash");
        c.args(["-c", script]);
        c
    } else {
        let mut c = Command::new(bin);
        c.args(["run", "--", "bash", "-c", script]);
        c
    };
    c.current_dir(&s.ws)
        .env_clear()
        .envs(s.env.iter().cloned())
        .stdin(Stdio::null());
    let pid_file = s.root.join("launcher.pid");
    let r = child::run_contained(c, Duration::from_secs(timeout), |pid| {
        let text = if unguarded {
            String::new()
        } else {
            pid.to_string()
        };
        let tmp = s.root.join(".launcher.pid.tmp");
        if std::fs::write(&tmp, text).is_ok() {
            let _ = std::fs::rename(&tmp, &pid_file);
        }
    });
    (r.output.contains(PLANTED), r.output)
}

/// Run the battery; returns the exit status (1 if anything failed).
pub fn run(opts: &Options, env: &HostEnv) -> Result<i32> {
    let dir = cases_dir(opts.dir.as_deref(), env);
    let mut cases = load(&dir)?;
    if let Some(g) = &opts.case {
        cases.retain(|c| glob_match(g, &c.name));
    }
    if cases.is_empty() {
        return Err(Error::Usage(format!(
            "no battery case matches in {}",
            dir.display()
        )));
    }
    let bin = std::env::current_exe().map_err(|e| Error::io("finding claude-sandbox", e))?;
    child::own_session_keyring();
    interrupt::install().map_err(|e| Error::io("handling the battery's signals", e))?;
    let color = !opts.json && crate::cli::color_on(std::io::stdout());
    let mut out = std::io::stdout().lock();
    if !opts.json {
        let mode = if opts.unguarded {
            " UNGUARDED (no jail, no watcher: every case must be MISSED)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "claude-sandbox battery: {} cases from {}{mode}\n",
            cases.len(),
            dir.display()
        );
        let _ = writeln!(
            out,
            "{:<34} {:<8} {:<12} {:>9}  DETAIL",
            "CASE", "CLASS", "VERDICT", "LATENCY"
        );
    }
    let mut results = Vec::new();
    for case in &cases {
        let r = run_case(case, &bin, opts.unguarded, opts.keep, env);
        if !opts.json {
            let good = passed(r.verdict, opts.unguarded);
            let v = format!("{:<12}", r.verdict.label());
            let v = match (color, r.verdict, good) {
                (false, _, _) => v,
                (true, Verdict::Skipped, _) => format!("\x1b[33m{v}\x1b[0m"),
                (true, _, true) => format!("\x1b[32m{v}\x1b[0m"),
                (true, _, false) => format!("\x1b[1;31m{v}\x1b[0m"),
            };
            let lat = r
                .latency_ms
                .map(|l| format!("{l:.0} ms"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:<34} {:<8} {v} {:>9}  {}",
                r.name, r.class, lat, r.detail
            );
            let _ = out.flush();
        }
        results.push(r);
    }
    let ran: Vec<&Outcome> = results
        .iter()
        .filter(|r| r.verdict != Verdict::Skipped)
        .collect();
    let ok = ran
        .iter()
        .filter(|r| passed(r.verdict, opts.unguarded))
        .count();
    let failed = ran.len() - ok;
    let skipped = results.len() - ran.len();
    if opts.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&results).expect("outcomes serialise")
        );
    } else {
        let _ = writeln!(out, "\n{ok} passed, {failed} failed, {skipped} skipped");
    }
    Ok(i32::from(failed > 0))
}

/// Guarded: blocked or neutralised pass. Unguarded: the attack must have worked.
/// Remove a scene. A session killed mid-way leaves its layers' overlayfs work directories
/// (`work/work`, mode 000), which an ordinary user cannot descend to remove: its directories are
/// opened up first when the plain removal fails (the scene is the battery's own).
fn remove_scene(root: &Path) {
    if std::fs::remove_dir_all(root).is_ok() || !root.exists() {
        return;
    }
    for e in walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        if e.file_type().is_dir() {
            let _ = std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o700));
        }
    }
    let _ = std::fs::remove_dir_all(root);
}

fn passed(v: Verdict, unguarded: bool) -> bool {
    if unguarded {
        v == Verdict::Missed
    } else {
        matches!(v, Verdict::Blocked | Verdict::Neutralised | Verdict::Held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("path-*", "path-cp"));
        assert!(glob_match("*hook*", "git-hook-repo"));
        assert!(!glob_match("git-*", "path-cp"));
        assert!(glob_match("exact", "exact"));
    }

    #[test]
    fn the_shipped_cases_parse_and_are_unique() {
        let cases = load(&cases_dir(None, &HostEnv::default())).unwrap();
        assert!(cases.len() >= 40, "{} cases", cases.len());
        let mut names: Vec<_> = cases.iter().map(|c| c.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cases.len());
        for c in &cases {
            assert_eq!(
                c.file.file_stem().unwrap().to_str().unwrap(),
                c.name,
                "file name = case name"
            );
        }
    }
}
