//! The session's private `$HOME` directory and the private copy of `~/.claude.json`.
//!
//! Guards against two things at once. Nothing can be added at the top level of the real `$HOME`
//! (shell startup files such as `~/.bash_profile`, `~/.zshenv`, `~/.inputrc` that do not exist yet):
//! the jail's `$HOME` is a fresh directory under the runtime directory, and only the real entries are
//! bound into it. And `~/.claude.json`, which is both Claude Code's state (saved by writing a temporary
//! file next to it and renaming it over) and a store of MCP server commands and project trust, is a
//! private copy: after the session it is merged back, except for the keys that make code run or grant
//! trust (`mcpServers`, `allowedTools`, ...), which keep the values the human's file has.

use crate::error::{Error, Result};
use serde_json::Value;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Keys of `~/.claude.json` (top level and per project) that the jail may not change.
pub const GUARDED_KEYS: &[&str] = &[
    "mcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "hasTrustDialogAccepted",
    "allowedTools",
];

const ORIGINAL: &str = "claude.json.orig";
const NAME: &str = ".claude.json";

/// `<runtime>/sessions/<id>`.
pub fn session_dir(runtime: &Path, id: &str) -> PathBuf {
    runtime.join("sessions").join(id)
}

/// Create the session directory and its `home/`, with the private copy of `~/.claude.json`.
pub fn prepare(session_dir: &Path, home: &Path, session_json: &[u8]) -> Result<PathBuf> {
    let session_home = session_dir.join("home");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&session_home)
        .map_err(|e| Error::io(format!("creating {}", session_home.display()), e))?;
    std::fs::write(session_dir.join("session.json"), session_json)
        .map_err(|e| Error::io("writing the session record", e))?;
    let real = home.join(NAME);
    if let Ok(m) = std::fs::symlink_metadata(&real) {
        if m.is_file() {
            let bytes = std::fs::read(&real)
                .map_err(|e| Error::io(format!("reading {}", real.display()), e))?;
            std::fs::write(session_dir.join(ORIGINAL), &bytes)
                .map_err(|e| Error::io("saving a copy", e))?;
            let copy = session_home.join(NAME);
            std::fs::write(&copy, &bytes).map_err(|e| Error::io("copying ~/.claude.json", e))?;
            let _ = std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(m.mode_bits()));
        }
    }
    Ok(session_home)
}

trait ModeBits {
    fn mode_bits(&self) -> u32;
}
impl ModeBits for std::fs::Metadata {
    fn mode_bits(&self) -> u32 {
        std::os::unix::fs::MetadataExt::mode(self) & 0o7777
    }
}

/// Merge the private copy back (if the jail changed it), report discarded top-level files, and remove
/// the session directory. Returns human-readable notes.
pub fn finish(session_dir: &Path, home: &Path, workspace: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let session_home = session_dir.join("home");
    let original = std::fs::read(session_dir.join(ORIGINAL)).ok();
    if let Ok(jail) = std::fs::read(session_home.join(NAME)) {
        if Some(&jail) != original.as_ref() {
            match merge_back(&jail, &home.join(NAME), workspace) {
                Ok(refused) if !refused.is_empty() => notes.push(format!(
                    "~/.claude.json: kept your values of {} (changes from inside the jail to MCP servers, tools and trust are not carried out)",
                    refused.join(", ")
                )),
                Ok(_) => {}
                Err(e) => notes.push(format!("~/.claude.json: the jail's copy was not merged back: {e}")),
            }
        }
    }
    if let Err(e) = std::fs::remove_dir_all(session_dir) {
        notes.push(format!("cannot remove {}: {e}", session_dir.display()));
    }
    notes
}

/// Write the jail's `~/.claude.json` over the real one, guarded keys taken from the real one.
/// Returns the guarded keys the jail tried to change.
pub fn merge_back(
    jail: &[u8],
    real: &Path,
    workspace: &Path,
) -> std::result::Result<Vec<String>, String> {
    let mut merged: Value =
        serde_json::from_slice(jail).map_err(|e| format!("not valid JSON: {e}"))?;
    let host: Value = match std::fs::read(real) {
        Ok(b) => {
            serde_json::from_slice(&b).map_err(|e| format!("your file is not valid JSON: {e}"))?
        }
        Err(_) => Value::Object(Default::default()),
    };
    let mut refused = Vec::new();
    guard(&mut merged, &host, "", &mut refused);
    let ws_key = workspace.to_string_lossy().into_owned();
    let empty = Value::Object(Default::default());
    if let Some(projects) = merged.get_mut("projects").and_then(Value::as_object_mut) {
        for (name, project) in projects.iter_mut() {
            let host_project = host
                .get("projects")
                .and_then(|p| p.get(name))
                .unwrap_or(&empty);
            let mut changed = Vec::new();
            guard(
                project,
                host_project,
                &format!("projects[{name}]."),
                &mut changed,
            );
            // Accepting the trust dialog for this workspace in the jail's TUI is the human's act.
            let trust = format!("projects[{name}].hasTrustDialogAccepted");
            if *name == ws_key && changed.contains(&trust) {
                if let Some(v) = serde_json::from_slice::<Value>(jail).ok().and_then(|j| {
                    j.get("projects")?
                        .get(name)?
                        .get("hasTrustDialogAccepted")
                        .cloned()
                }) {
                    project["hasTrustDialogAccepted"] = v;
                }
                changed.retain(|c| c != &trust);
            }
            refused.extend(changed);
        }
    }
    let text = serde_json::to_vec_pretty(&merged).map_err(|e| e.to_string())?;
    let dir = real.parent().ok_or("no parent directory")?;
    let tmp = dir.join(format!(
        ".claude.json.claude-sandbox.{}",
        std::process::id()
    ));
    std::fs::write(&tmp, text).map_err(|e| e.to_string())?;
    if let Ok(m) = std::fs::metadata(real) {
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(m.mode_bits()));
    }
    std::fs::rename(&tmp, real).map_err(|e| e.to_string())?;
    Ok(refused)
}

/// Replace the guarded keys of `obj` by the host's values (or remove them if the host has none).
fn guard(obj: &mut Value, host: &Value, prefix: &str, changed: &mut Vec<String>) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    for key in GUARDED_KEYS {
        let mine = map.get(*key).cloned();
        let theirs = host.get(*key).cloned();
        // A new empty default (`{}`, `[]`, `false`) grants nothing: let it through quietly.
        if theirs.is_none() && mine.as_ref().is_none_or(is_empty_default) {
            continue;
        }
        if mine != theirs {
            changed.push(format!("{prefix}{key}"));
            match theirs {
                Some(v) => {
                    map.insert((*key).to_string(), v);
                }
                None => {
                    map.remove(*key);
                }
            }
        }
    }
}

fn is_empty_default(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Finish sessions whose launcher died (merge back, remove their directories).
pub fn sweep_dead(runtime: &Path, alive: impl Fn(&[u8]) -> bool, home: &Path) {
    let Ok(rd) = std::fs::read_dir(runtime.join("sessions")) else {
        return;
    };
    for e in rd.flatten() {
        let dir = e.path();
        let record = std::fs::read(dir.join("session.json")).unwrap_or_default();
        if !alive(&record) {
            let ws = serde_json::from_slice::<Value>(&record)
                .ok()
                .and_then(|v| v.get("workspace")?.as_str().map(PathBuf::from))
                .unwrap_or_default();
            for note in finish(&dir, home, &ws) {
                tracing::warn!("{note}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_guarded_keys_and_carries_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join(".claude.json");
        std::fs::write(
            &real,
            r#"{"numStartups":1,"mcpServers":{},"projects":{"/w":{"hasTrustDialogAccepted":false},"/o":{"allowedTools":[]}}}"#,
        )
        .unwrap();
        let jail = br#"{"numStartups":2,"mcpServers":{"x":{"command":"evil"}},
            "projects":{"/w":{"hasTrustDialogAccepted":true},"/o":{"allowedTools":["Bash"],"hasTrustDialogAccepted":true},
            "/new":{"mcpServers":{},"allowedTools":[]}}}"#;
        let refused = merge_back(jail, &real, Path::new("/w")).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
        assert_eq!(v["numStartups"], 2);
        assert_eq!(v["mcpServers"], serde_json::json!({}));
        assert_eq!(v["projects"]["/w"]["hasTrustDialogAccepted"], true);
        assert_eq!(v["projects"]["/o"]["allowedTools"], serde_json::json!([]));
        assert!(v["projects"]["/o"].get("hasTrustDialogAccepted").is_none());
        assert_eq!(v["projects"]["/new"]["allowedTools"], serde_json::json!([]));
        assert_eq!(
            refused,
            vec![
                "mcpServers",
                "projects[/o].hasTrustDialogAccepted",
                "projects[/o].allowedTools"
            ]
        );
    }
}
