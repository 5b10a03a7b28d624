//! Entry points in the agents' state directories: the catalogued ones (`runtimes`), every existing
//! entry that a measured runtime's writable allowlist does not name, and the scripts its settings
//! name as commands (`statusLine.command`, a hook's script, `notify`, an MCP server's command).
//!
//! Guards against agent state that is code or instructions: a script the sealed settings run
//! (rewritten in place, the settings unchanged), the user's `CLAUDE.md`, `~/.codex/.env`, a skill, or
//! anything a runtime reads that nobody catalogued yet — an existing entry is read-only unless the
//! runtime was measured writing it.

use super::Finding;
use crate::catalogue::Stub;
use crate::runtimes::{self, Access, StateDir};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Settings keys whose string value (or each string of whose array value) is a command line.
const COMMAND_KEYS: &[&str] = &[
    "command",
    "apiKeyHelper",
    "awsCredentialExport",
    "awsAuthRefresh",
    "otelHeadersHelper",
    "discoveryCommand",
    "callCommand",
    "notify",
];

/// Findings in every state directory that is one of the jail's writable holes (`holes`).
pub(super) fn discover(home: &Path, holes: &[PathBuf]) -> Vec<Finding> {
    let mut out = Vec::new();
    for rt in runtimes::ALL {
        for sd in rt.state {
            let dir = home.join(sd.path);
            if !holes.iter().any(|h| dir.starts_with(h)) {
                continue;
            }
            let scripts = sd
                .entry_points
                .iter()
                .filter(|e| matches!(e.stub, Stub::File(_)))
                .flat_map(|e| named_scripts(rt.name, &home.join(e.rel), home));
            if sd.own_top_level() {
                // The jail's own top level (`jail::statedir`) holds the entry points, what the
                // allowlist does not give and the scripts at its top: only scripts elsewhere, or
                // below an allowlisted directory, are sealed one by one.
                let at_top = |p: &Path| {
                    p.strip_prefix(&dir).is_ok_and(|r| {
                        let mut c = r.components();
                        let first = c.next().map(|c| c.as_os_str().to_string_lossy());
                        c.next().is_none()
                            || first.is_some_and(|f| {
                                sd.allowed(&f) != Some(crate::runtimes::Allowed::Dir)
                            })
                    })
                };
                out.extend(scripts.filter(|f| !at_top(&f.path)));
                continue;
            }
            for e in sd.entry_points {
                out.push(Finding {
                    path: home.join(e.rel),
                    stub: e.stub,
                    runs: e.runs.to_string(),
                });
            }
            out.extend(not_allowed(rt.name, sd, &dir));
            out.extend(scripts);
        }
    }
    out
}

/// The paths the command lines of `sd`'s settings files name (`jail::statedir` seals those at its top).
pub(crate) fn state_scripts(home: &Path, sd: &StateDir) -> Vec<PathBuf> {
    sd.entry_points
        .iter()
        .filter(|e| matches!(e.stub, Stub::File(_)))
        .flat_map(|e| named_scripts("", &home.join(e.rel), home))
        .map(|f| f.path)
        .collect()
}

/// Existing top-level entries of a measured state directory that its allowlist does not name.
fn not_allowed(runtime: &str, sd: &StateDir, dir: &Path) -> Vec<Finding> {
    let Some(version) = sd.measured() else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name();
        let readonly = match name.to_str() {
            Some(n) => sd.access(n) == Access::ReadOnly, // views are sealed by being views
            None => true, // no runtime writes a name that is not UTF-8
        };
        if readonly {
            out.push(Finding {
                path: e.path(),
                stub: Stub::Dir,
                runs: format!(
                    "{runtime}: state not on the writable allowlist measured with {version} (docs/runtimes.md)"
                ),
            });
        }
    }
    out
}

/// The absolute paths in the command lines a settings file names (JSON, or TOML for `.toml`).
fn named_scripts(runtime: &str, file: &Path, home: &Path) -> Vec<Finding> {
    let Ok(text) = std::fs::read_to_string(file) else {
        return Vec::new();
    };
    let value: Option<Value> = if file.extension().is_some_and(|e| e == "toml") {
        toml::from_str::<toml::Value>(&text)
            .ok()
            .and_then(|v| serde_json::to_value(v).ok())
    } else {
        serde_json::from_str(&text).ok()
    };
    let mut lines = Vec::new();
    if let Some(v) = &value {
        command_lines(v, false, &mut lines);
    }
    let runs = format!("{runtime}: a script {} runs", file.display());
    lines
        .iter()
        .flat_map(|l| paths_in(l, home))
        // A script, or a missing path (its first missing component gets a placeholder); not a
        // directory a command line happens to name (`cd /w/sub && make`).
        .filter(|p| std::fs::metadata(p).map_or(true, |m| m.is_file()))
        .map(|path| Finding {
            path,
            stub: Stub::Dir,
            runs: runs.clone(),
        })
        .collect()
}

/// Every string under a `COMMAND_KEYS` key (`statusLine` is an object with `command`).
fn command_lines(v: &Value, under_key: bool, out: &mut Vec<String>) {
    match v {
        Value::String(s) if under_key => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| command_lines(x, under_key, out)),
        Value::Object(o) => {
            for (k, x) in o {
                command_lines(x, COMMAND_KEYS.contains(&k.as_str()), out);
            }
        }
        _ => {}
    }
}

/// The absolute paths a command line names: words that start with `/`, `~/`, `$HOME/` or
/// `${HOME}/` (quotes stripped). Words with another variable are left out (`$CLAUDE_PROJECT_DIR`
/// is the workspace, whose `.claude/` is sealed as a whole).
pub(crate) fn paths_in(line: &str, home: &Path) -> Vec<PathBuf> {
    line.split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|')
        .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
        .filter_map(|w| {
            let rest = ["~/", "$HOME/", "${HOME}/"]
                .iter()
                .find_map(|p| w.strip_prefix(p));
            let p = match rest {
                Some(r) => home.join(r),
                None if w.starts_with('/') => PathBuf::from(w),
                None => return None,
            };
            let s = p.to_string_lossy();
            (!s.contains('$') && !s.contains('`') && p != Path::new("/")).then_some(p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_name_their_scripts() {
        let h = Path::new("/h");
        assert_eq!(
            paths_in("bash ~/.claude/statusline.sh --short", h),
            vec![PathBuf::from("/h/.claude/statusline.sh")]
        );
        assert_eq!(
            paths_in(
                "\"$HOME/.claude/hooks/a.sh\"; /usr/bin/node '${HOME}/x.js'",
                h
            ),
            vec![
                PathBuf::from("/h/.claude/hooks/a.sh"),
                PathBuf::from("/usr/bin/node"),
                PathBuf::from("/h/x.js")
            ]
        );
        assert!(paths_in("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/x.sh", h).is_empty());
        assert!(paths_in(
            "\"${CLAUDE_SANDBOX_HOOK:-/usr/local/bin/claude-sandbox}\" hook pre-tool-use",
            h
        )
        .iter()
        .all(|p| !p.to_string_lossy().contains('$')));
    }

    #[test]
    fn named_scripts_are_files_or_missing_never_directories() {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path();
        std::fs::create_dir_all(h.join("sub")).unwrap();
        std::fs::write(h.join("sl.sh"), "echo\n").unwrap();
        let settings = h.join("settings.json");
        let text = r#"{"statusLine":{"command":"cd ~/sub && bash ~/sl.sh ~/gone.sh"}}"#;
        std::fs::write(&settings, text).unwrap();
        let mut found: Vec<PathBuf> = named_scripts("X", &settings, h)
            .into_iter()
            .map(|f| f.path)
            .collect();
        found.sort();
        assert_eq!(found, vec![h.join("gone.sh"), h.join("sl.sh")]);
    }

    #[test]
    fn settings_commands_are_found_where_the_runtimes_put_them() {
        let v: Value = serde_json::json!({
            "statusLine": {"type": "command", "command": "~/.claude/sl.sh"},
            "hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "/h/hook.sh"}]}]},
            "apiKeyHelper": "/h/key.sh",
            "model": "/not/a/command",
            "notify": ["/h/notify.sh", "arg"]
        });
        let mut lines = Vec::new();
        command_lines(&v, false, &mut lines);
        lines.sort();
        assert_eq!(
            lines,
            [
                "/h/hook.sh",
                "/h/key.sh",
                "/h/notify.sh",
                "arg",
                "~/.claude/sl.sh"
            ]
        );
    }
}
