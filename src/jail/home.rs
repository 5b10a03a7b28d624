//! The session's private `$HOME` directory and the private copy of `~/.claude.json`.
//!
//! Guards against two things at once. Nothing can be added at the top level of the real `$HOME`
//! (shell startup files such as `~/.bash_profile`, `~/.zshenv`, `~/.inputrc` that do not exist yet):
//! the jail's `$HOME` is a fresh directory under the runtime directory, and only the real entries are
//! bound into it. And `~/.claude.json`, which is both Claude Code's state (saved by writing a temporary
//! file next to it and renaming it over) and a store of MCP server commands and project trust, is a
//! private copy: after the session it is merged back, except for the keys that make code run or grant
//! trust (`mcpServers`, `allowedTools`, ...), which keep the values the human's file has.

use super::readback::{read_regular, Refused};
use crate::alerts::{at_session_end, AlertKind};
use crate::error::{Error, Result};
use crate::runtime_dir::{RuntimeDir, SessionDir};
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

const NAME: &str = crate::runtimes::CLAUDE_JSON;

/// `<runtime>/sessions/<id>` (`runtime_dir::SessionDir`).
pub fn session_dir(runtime: &Path, id: &str) -> PathBuf {
    RuntimeDir::new(runtime).session(id).path().to_path_buf()
}

/// Create the session directory and its `home/`, with the private copy of `~/.claude.json`.
pub fn prepare(session_dir: &Path, home: &Path, session_json: &[u8]) -> Result<PathBuf> {
    let session = SessionDir::at(session_dir.to_path_buf());
    let session_home = session.home();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&session_home)
        .map_err(|e| Error::io(format!("creating {}", session_home.display()), e))?;
    std::fs::write(session.record(), session_json)
        .map_err(|e| Error::io("writing the session record", e))?;
    let real = home.join(NAME);
    // Only a regular file is copied in (a symlinked `~/.claude.json` is left alone, in and out).
    match read_regular(&real) {
        Ok((bytes, mode)) => {
            std::fs::write(session.claude_json_copy(), &bytes)
                .map_err(|e| Error::io("saving a copy", e))?;
            let copy = session_home.join(NAME);
            std::fs::write(&copy, &bytes).map_err(|e| Error::io("copying ~/.claude.json", e))?;
            let _ = std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode));
        }
        Err(Refused::Missing) => {}
        Err(why) => tracing::info!("~/.claude.json is not copied into the jail: {why}"),
    }
    Ok(session_home)
}

/// Why the jail's `~/.claude.json` was not merged back (your file is then unchanged).
#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    #[error("not valid JSON: {0}")]
    JailNotJson(serde_json::Error),
    #[error("your file is not valid JSON: {0}")]
    YoursNotJson(serde_json::Error),
    /// Replacing a symlinked or odd `~/.claude.json` with a file would break what it points to.
    #[error("your ~/.claude.json is left as it is: {0}")]
    Yours(Refused),
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

/// A JSON object, parsed strictly, from a file read as `read_regular` reads.
fn read_json_object(path: &Path) -> std::result::Result<Vec<u8>, Refused> {
    let (bytes, _) = read_regular(path)?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(_)) => Ok(bytes),
        Ok(_) => Err(Refused::NotJson("the top level is not an object".into())),
        Err(e) => Err(Refused::NotJson(e.to_string())),
    }
}

/// Merge the private copy back (if the jail changed it), report discarded top-level files, and remove
/// the session directory. Returns human-readable notes.
pub fn finish(session_dir: &Path, home: &Path, workspace: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    let session = SessionDir::at(session_dir.to_path_buf());
    let session_home = session.home();
    let original = std::fs::read(session.claude_json_copy()).ok();
    // The jail's copy is the agent's to shape: a symlink to a secret, a FIFO, a huge file. Anything
    // but a regular JSON object of sane size leaves your file untouched, and says so in an alert.
    let jail = match read_json_object(&session_home.join(NAME)) {
        Ok(bytes) => Some(bytes),
        Err(Refused::Missing) => None,
        Err(why) => {
            let detail = format!(
                "the jail's ~/.claude.json was not merged back: {why}; your file is unchanged"
            );
            at_session_end(
                session_dir,
                AlertKind::MergeRefused,
                &home.join(NAME),
                &detail,
            );
            notes.push(detail);
            None
        }
    };
    if let Some(jail) = jail {
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
    notes.extend(super::statedir::finish(session_dir));
    notes.extend(super::gitcopy::finish(session_dir));
    if let Err(e) = std::fs::remove_dir_all(session_dir) {
        notes.push(format!("cannot remove {}: {e}", session_dir.display()));
    }
    notes
}

/// Write the jail's `~/.claude.json` over the real one, guarded keys taken from the real one.
/// Returns the guarded keys the jail tried to change.
pub(crate) fn merge_back(
    jail: &[u8],
    real: &Path,
    workspace: &Path,
) -> std::result::Result<Vec<String>, MergeError> {
    let mut merged: Value = serde_json::from_slice(jail).map_err(MergeError::JailNotJson)?;
    let (host, mode): (Value, u32) = match read_regular(real) {
        Ok((b, mode)) => (
            serde_json::from_slice(&b).map_err(MergeError::YoursNotJson)?,
            mode,
        ),
        Err(Refused::Missing) => (Value::Object(serde_json::Map::default()), 0o600),
        Err(why) => return Err(MergeError::Yours(why)),
    };
    let mut refused = Vec::new();
    guard(&mut merged, &host, "", &mut refused);
    let ws_key = workspace.to_string_lossy().into_owned();
    let empty = Value::Object(serde_json::Map::default());
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
    let text = serde_json::to_vec_pretty(&merged).expect("a JSON value serialises");
    let dir = real.parent().unwrap_or(Path::new("/"));
    let io = |what: &str, path: &Path| {
        let context = format!("{what} {}", path.display());
        move |source| MergeError::Io { context, source }
    };
    let tmp = dir.join(format!(
        ".claude.json.claude-sandbox.{}",
        std::process::id()
    ));
    {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(io("creating", &tmp))?;
        f.write_all(&text).map_err(io("writing", &tmp))?;
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode));
    }
    std::fs::rename(&tmp, real).map_err(io("replacing", real))?;
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
    let Ok(rd) = std::fs::read_dir(RuntimeDir::new(runtime).sessions()) else {
        return;
    };
    for e in rd.flatten() {
        let dir = e.path();
        let record = std::fs::read(SessionDir::at(dir.clone()).record()).unwrap_or_default();
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

    #[test]
    fn the_jails_copy_is_merged_only_as_a_regular_json_object() {
        type Make<'a> = Box<dyn Fn(&Path) + 'a>;
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let real = home.join(NAME);
        let mine = br#"{"numStartups":1}"#;
        let secret = home.join("secret.json");
        std::fs::write(&secret, br#"{"auths":{"x":"SECRET"}}"#).unwrap();
        let cases: Vec<(&str, Make)> = vec![
            (
                "symbolic link",
                Box::new(|p: &Path| std::os::unix::fs::symlink(&secret, p).unwrap()),
            ),
            (
                "not a regular file",
                Box::new(|p: &Path| {
                    rustix::fs::mknodat(
                        rustix::fs::CWD,
                        p,
                        rustix::fs::FileType::Fifo,
                        rustix::fs::Mode::from_raw_mode(0o600),
                        0,
                    )
                    .unwrap();
                }),
            ),
            (
                "not a regular file",
                Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
            ),
            (
                "larger than",
                Box::new(|p: &Path| {
                    let f = std::fs::File::create(p).unwrap();
                    f.set_len(crate::jail::readback::MAX + 1).unwrap();
                }),
            ),
            (
                "not a JSON object",
                Box::new(|p: &Path| std::fs::write(p, b"[1,2]").unwrap()),
            ),
            (
                "not a JSON object",
                Box::new(|p: &Path| std::fs::write(p, b"{\"a\":").unwrap()),
            ),
        ];
        for (i, (why, make)) in cases.iter().enumerate() {
            std::fs::write(&real, mine).unwrap();
            let runtime = root.path().join(format!("rt{i}"));
            let session = session_dir(&runtime, "s1");
            prepare(&session, &home, b"{}").unwrap();
            let copy = session.join("home").join(NAME);
            std::fs::remove_file(&copy).unwrap();
            make(&copy);
            let notes = finish(&session, &home, Path::new("/w"));
            assert_eq!(
                std::fs::read(&real).unwrap(),
                mine,
                "case {i}: your file changed"
            );
            assert!(notes.iter().any(|n| n.contains(why)), "case {i}: {notes:?}");
            let alerts = crate::alerts::Store::new(&runtime).read().alerts;
            assert_eq!(alerts.len(), 1, "case {i}");
            assert_eq!(alerts[0].kind, AlertKind::MergeRefused);
            assert!(!session.exists());
        }
        // A symlinked ~/.claude.json of yours is neither read nor replaced.
        std::fs::remove_file(&real).unwrap();
        std::os::unix::fs::symlink(&secret, &real).unwrap();
        assert!(merge_back(br#"{"a":1}"#, &real, Path::new("/w")).is_err());
        assert!(std::fs::symlink_metadata(&real)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
