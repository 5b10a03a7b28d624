//! The session's private `$HOME` directory and the private copy of `~/.claude.json`.
//!
//! Guards against two things at once. Nothing can be added at the top level of the real `$HOME`
//! (shell startup files such as `~/.bash_profile`, `~/.zshenv`, `~/.inputrc` that do not exist yet):
//! the jail's `$HOME` is a fresh directory under the runtime directory, and only the real entries are
//! bound into it. And `~/.claude.json`, which is both Claude Code's state (saved by writing a temporary
//! file next to it and renaming it over) and a store of MCP server commands, environment, API key and
//! project trust, is a private copy: after the session what the jail changed in it is merged into the
//! human's file key by key (`handback::claude_json`): state comes back, keys that run something,
//! grant running it or are the login are held for the human's review (`crate::held`).

use super::readback::{read_regular, Refused};
use crate::alerts::{at_session_end, AlertKind};
use crate::error::{Error, Result};
use crate::runtime_dir::{RuntimeDir, SessionDir};
use serde_json::Value;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
        .map_err(|e| Error::io(format!("writing {}", session.record().display()), e))?;
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
    #[error("a change could not be kept for your review ({0}); your file is unchanged")]
    Held(String),
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
            let base = original.as_deref().unwrap_or(b"{}");
            match merge_back(session_dir, base, &jail, &home.join(NAME), workspace) {
                Ok(0) => {}
                Ok(n) => notes.push(format!(
                    "~/.claude.json: {n} change(s) from the jail that run something or are your login are held for your review (`claude-sandbox review`)"
                )),
                Err(e) => notes.push(format!("~/.claude.json: the jail's copy was not merged back: {e}")),
            }
        }
    }
    notes.extend(super::statedir::finish(session_dir));
    notes.extend(super::gitcopy::finish(session_dir));
    // Renamed out of the sessions' names first, in one step: a launcher sweeping dead sessions
    // meanwhile sees the whole directory (and its live lock) or nothing, never half of it.
    let gone = session_dir.with_file_name(format!(
        "{GONE}{}",
        session_dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
    ));
    let doomed = match std::fs::rename(session_dir, &gone) {
        Ok(()) => gone,
        Err(_) => session_dir.to_path_buf(),
    };
    match std::fs::remove_dir_all(&doomed) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            notes.push(format!("cannot remove {}: {e}", doomed.display()));
        }
        _ => {}
    }
    notes
}

/// The prefix of a session directory being removed (`finish`): not a session any more.
const GONE: &str = ".gone-";

/// Merge what the jail changed in its copy of `~/.claude.json` since the launch (`base`) into the
/// human's file as it is now: data comes back, the rest is held for review (`session_dir` names the
/// session whose items they are; `None` holds nothing and carries only data, for tests). Returns
/// how many keys were held.
pub(crate) fn merge_back(
    session_dir: &Path,
    base: &[u8],
    jail: &[u8],
    real: &Path,
    workspace: &Path,
) -> std::result::Result<usize, MergeError> {
    use crate::handback::claude_json;
    let jail: Value = serde_json::from_slice(jail).map_err(MergeError::JailNotJson)?;
    let base: Value = serde_json::from_slice(base).unwrap_or(Value::Object(serde_json::Map::new()));
    let (mut human, mode): (Value, u32) = match read_regular(real) {
        Ok((b, mode)) => (
            serde_json::from_slice(&b).map_err(MergeError::YoursNotJson)?,
            mode,
        ),
        Err(Refused::Missing) => (Value::Object(serde_json::Map::default()), 0o600),
        Err(why) => return Err(MergeError::Yours(why)),
    };
    let ws_key = workspace.to_string_lossy().into_owned();
    let mut held = 0;
    for c in claude_json::changes(&base, &jail, &ws_key) {
        if c.verdict.flows() {
            claude_json::apply(&mut human, &c.key, c.value.as_ref());
            continue;
        }
        let before = claude_json::get(&human, &c.key).cloned();
        let shown = c.value.as_ref().map_or("(removed)".into(), |v| {
            let t = v.to_string();
            if t.len() > 120 {
                format!("{}…", t.chars().take(120).collect::<String>())
            } else {
                t
            }
        });
        let item = crate::held::Item {
            id: String::new(),
            time: String::new(),
            session: String::new(),
            consequence: c.verdict.consequence,
            why: c.verdict.why.clone(),
            target: real.to_path_buf(),
            what: format!("{} = {shown}", c.key.display()),
            change: crate::held::Change::JsonKey {
                path: crate::held::json_path(&c.key),
                value: c.value.clone(),
                before,
            },
        };
        crate::held::hold_at_session_end(session_dir, item, None)
            .map_err(|e| MergeError::Held(e.to_string()))?;
        held += 1;
    }
    let text = serde_json::to_vec_pretty(&human).expect("a JSON value serialises");
    let io = |what: &str, path: &Path| {
        let context = format!("{what} {}", path.display());
        move |source| MergeError::Io { context, source }
    };
    let tmp = crate::tempname::beside(real, session_dir);
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
    Ok(held)
}

/// Finish sessions whose launcher died (merge back, remove their directories).
pub fn sweep_dead(runtime: &Path, alive: impl Fn(&[u8]) -> bool, home: &Path) {
    let Ok(rd) = std::fs::read_dir(RuntimeDir::new(runtime).sessions()) else {
        return;
    };
    for e in rd.flatten() {
        let dir = e.path();
        if e.file_name().to_string_lossy().starts_with(GONE) {
            // Left by a launcher killed while removing it: removed silently (one being removed by
            // its live launcher now is left to it).
            let record = std::fs::read(SessionDir::at(dir.clone()).record()).unwrap_or_default();
            if !alive(&record) {
                let _ = std::fs::remove_dir_all(&dir);
            }
            continue;
        }
        let record = match std::fs::read(SessionDir::at(dir.clone()).record()) {
            Ok(r) => r,
            // Finished by its own launcher since it was listed.
            Err(_) if std::fs::symlink_metadata(&dir).is_err() => continue,
            Err(_) => Vec::new(),
        };
        // A launcher makes its directory, then writes its record: between the two (or while the
        // record is half-written) the record says nothing, and the directory's name is the
        // session's id, whose lock was taken before either. Without this, a launch starting then
        // removed a live session's directory under it (ten sessions at once: 1 launch in ~3).
        let unrecorded = serde_json::from_slice::<Value>(&record).is_err();
        let by_name =
            || unrecorded && super::liveness::held_by_id(runtime, &e.file_name().to_string_lossy());
        if !alive(&record) && !by_name() {
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

    /// A launcher killed between writing the merged `~/.claude.json` and its rename left the
    /// temporary file; finishing that session again (the next launcher does, from another process)
    /// writes under the same name and renames it away.
    #[test]
    fn finishing_a_killed_merge_again_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let session = session_dir(&dir.path().join("rt"), "4194303-ab");
        std::fs::create_dir_all(&session).unwrap();
        let real = dir.path().join(".claude.json");
        std::fs::write(&real, b"{\"numStartups\":1}").unwrap();
        let left = crate::tempname::beside(&real, &session);
        std::fs::write(&left, b"{\"numStart").unwrap();
        merge_back(
            &session,
            b"{\"numStartups\":1}",
            b"{\"numStartups\":2}",
            &real,
            Path::new("/w"),
        )
        .unwrap();
        assert!(!left.exists(), "{} left", left.display());
        let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
        assert_eq!(v["numStartups"], 2);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}"); // rt/ and .claude.json
    }

    /// What the jail changed since the launch comes back over your file as it is now (another
    /// session's keys kept); what runs something or grants it is held, your value kept meanwhile.
    #[test]
    fn a_live_session_whose_record_is_not_written_yet_is_not_swept() {
        let rt = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let mut id = crate::jail::placeholders::SessionId::current();
        let lock = crate::jail::liveness::SessionLock::take(rt.path(), &mut id).unwrap();
        let dir = session_dir(rt.path(), &id.id);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        sweep_dead(rt.path(), |_| false, home.path());
        assert!(
            dir.join("home").is_dir(),
            "a live session's directory was removed"
        );
        // Half a record: still judged by its lock.
        std::fs::write(SessionDir::at(dir.clone()).record(), b"{\"id\": ").unwrap();
        sweep_dead(rt.path(), |_| false, home.path());
        assert!(
            dir.join("home").is_dir(),
            "removed on a half-written record"
        );
        drop(lock);
        sweep_dead(rt.path(), |_| false, home.path());
        assert!(!dir.exists(), "a dead session's directory was kept");
    }

    #[test]
    fn state_comes_back_three_ways_and_what_runs_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = dir.path().join("rt");
        let session = session_dir(&runtime, "s1");
        std::fs::create_dir_all(&session).unwrap();
        let real = dir.path().join(".claude.json");
        let base = br#"{"numStartups":1,"mcpServers":{},"projects":{"/w":{"hasTrustDialogAccepted":false},"/o":{"allowedTools":[]}}}"#;
        // Meanwhile another session of yours counted a start and added a tip.
        std::fs::write(
            &real,
            r#"{"numStartups":1,"tips":{"x":1},"mcpServers":{},"projects":{"/w":{"hasTrustDialogAccepted":false},"/o":{"allowedTools":[]}}}"#,
        )
        .unwrap();
        let jail = br#"{"numStartups":2,"mcpServers":{"x":{"command":"evil"}},"env":{"NODE_OPTIONS":"--require /w/x.js"},
            "projects":{"/w":{"hasTrustDialogAccepted":true},"/o":{"allowedTools":["Bash"],"hasTrustDialogAccepted":true},
            "/new":{"mcpServers":{},"allowedTools":[]}}}"#;
        let held = merge_back(&session, base, jail, &real, Path::new("/w")).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
        assert_eq!(v["numStartups"], 2);
        assert_eq!(v["tips"]["x"], 1, "another session's key was lost");
        assert_eq!(v["mcpServers"], serde_json::json!({}));
        assert!(v.get("env").is_none());
        assert_eq!(v["projects"]["/w"]["hasTrustDialogAccepted"], true);
        assert_eq!(v["projects"]["/o"]["allowedTools"], serde_json::json!([]));
        assert!(v["projects"]["/o"].get("hasTrustDialogAccepted").is_none());
        assert_eq!(v["projects"]["/new"]["allowedTools"], serde_json::json!([]));
        assert_eq!(held, 4);
        let store = crate::held::Store::new(&runtime);
        let mut what: Vec<String> = store
            .waiting()
            .iter()
            .map(|i| i.what.split(" = ").next().unwrap().to_string())
            .collect();
        what.sort();
        assert_eq!(
            what,
            [
                "env",
                "mcpServers",
                "projects[/o].allowedTools",
                "projects[/o].hasTrustDialogAccepted"
            ]
        );
        // Each one alerted once, with its own id; accepted, it lands as it was held.
        let alerts = crate::alerts::Store::new(&runtime).read().alerts;
        assert_eq!(alerts.len(), 4);
        let env = store
            .waiting()
            .into_iter()
            .find(|i| i.what.starts_with("env"))
            .unwrap();
        assert!(alerts.iter().any(|a| a.id == env.id));
        store.accept(&env.id).unwrap();
        let v: Value = serde_json::from_slice(&std::fs::read(&real).unwrap()).unwrap();
        assert_eq!(v["env"]["NODE_OPTIONS"], "--require /w/x.js");
        assert_eq!(v["numStartups"], 2);
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
        assert!(merge_back(
            &root.path().join("rt9/sessions/s1"),
            b"{}",
            br#"{"a":1}"#,
            &real,
            Path::new("/w")
        )
        .is_err());
        assert!(std::fs::symlink_metadata(&real)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
