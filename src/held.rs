//! Items held for the human's review: what a session would have handed back that is more than
//! data (`crate::handback`). Each is kept in the runtime directory (hidden from the jail) with
//! everything needed to apply it later byte for byte, or to leave it out for good.
//!
//! Guards against two losses. A held item is never lost: the payload is written (and synced)
//! before the item's record, and the record by rename, so a crash leaves either no item or a whole
//! one — never a half-applied change and never a gone one; a decision is a file of its own beside
//! the record, so the record is never rewritten. And an accepted item never overwrites something
//! the human changed meanwhile: each item carries what the target held when it was held, and
//! applying checks it (a conflict is refused, naming what to do).

use crate::error::{Error, Result};
use crate::handback::{claude_json, Consequence};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Bytes that may not be UTF-8, as hex in the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&crate::baseline::hex(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd hex"));
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map(Bytes)
            .map_err(serde::de::Error::custom)
    }
}

/// What accepting an item does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum Change {
    /// Give a git config key exactly these values (none: remove it), with git itself.
    GitKey {
        name: String,
        values: Vec<Option<Bytes>>,
        /// The key's values in the human's file when it was held.
        before: Vec<Option<Bytes>>,
    },
    /// Give a key of `~/.claude.json` this value (none: remove it).
    JsonKey {
        /// `[key]` or `["projects", project, key]`.
        path: Vec<String>,
        value: Option<serde_json::Value>,
        before: Option<serde_json::Value>,
    },
    /// Write the payload (`<id>.payload` beside the record) as the target file.
    File {
        sha256: String,
        mode: u32,
        /// The target's sha256 when it was held (none: it did not exist).
        before: Option<String>,
    },
}

/// One held item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Item {
    /// `h…`: the one id of this item (its alert has the same).
    pub id: String,
    pub time: String,
    pub session: String,
    pub consequence: Consequence,
    /// Why it was held: what the human's tool would do with it.
    pub why: String,
    /// The file it changes.
    pub target: PathBuf,
    /// What in it: a key's name, or the file's name.
    pub what: String,
    pub change: Change,
}

impl Item {
    /// A file to write as `target` (`bytes`, `mode`), where `before` was there when it was held
    /// (none: nothing); `id`, `time` and `session` are filled in by `hold_at_session_end`.
    pub(crate) fn file(
        target: &Path,
        consequence: Consequence,
        why: String,
        (bytes, mode): (&[u8], u32),
        before: Option<&[u8]>,
    ) -> Item {
        Item {
            id: String::new(),
            time: String::new(),
            session: String::new(),
            consequence,
            why,
            target: target.to_path_buf(),
            what: target
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            change: Change::File {
                sha256: crate::quarantine::sha256_bytes(bytes),
                mode: mode & 0o777,
                before: before.map(crate::quarantine::sha256_bytes),
            },
        }
    }
}

/// A decision on an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    Accepted,
    Rejected,
}

/// The held items of one runtime directory.
pub(crate) struct Store {
    dir: PathBuf,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::io(what, e)
}

/// Write `bytes` to `path` through a new temporary file, synced, then renamed over it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let tmp = dir.join(format!(
        ".{}.claude-sandbox.{}",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    write_atomic_via(path, &tmp, bytes, mode)
}

/// `write_atomic` through the temporary name `tmp` (a session's, `crate::tempname`).
pub(crate) fn write_atomic_via(path: &Path, tmp: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let _ = std::fs::remove_file(tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(tmp)
        .map_err(io(format!("creating {}", tmp.display())))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(io(format!("writing {}", tmp.display())))?;
    let _ = std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(mode));
    std::fs::rename(tmp, path).map_err(io(format!("replacing {}", path.display())))?;
    // The temporary name lies in a directory a running jail (another session's) may write: a file
    // renamed over it between our write and our rename would have become yours. What is there now
    // must be the file we wrote.
    if still_ours(path, &f) {
        Ok(())
    } else {
        Err(Error::io(
            format!("replacing {}", path.display()),
            std::io::Error::other(
                "the file was swapped while it was written: look at it before you use it",
            ),
        ))
    }
}

/// Whether `path` is the file open as `f` (not one renamed over it).
fn still_ours(path: &Path, f: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::symlink_metadata(path), f.metadata()) {
        (Ok(m), Ok(ours)) => m.dev() == ours.dev() && m.ino() == ours.ino(),
        _ => false,
    }
}

impl Store {
    pub(crate) fn new(runtime: &Path) -> Store {
        Store {
            dir: crate::runtime_dir::RuntimeDir::new(runtime).held(),
        }
    }

    fn ensure(&self) -> Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io(format!("creating {}", self.dir.display())))
    }

    fn record(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn payload_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.payload"))
    }

    fn decision_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.decision"))
    }

    /// Keep `item` (and `payload`, for a file) until the human decides.
    pub(crate) fn hold(&self, item: &Item, payload: Option<&[u8]>) -> Result<()> {
        self.ensure()?;
        let runtime = self.dir.parent().unwrap_or(&self.dir);
        let keep = |path: &Path, bytes: &[u8]| {
            crate::runtime_dir::reserve::write_with_reserve(runtime, || {
                write_atomic(path, bytes, 0o600)
            })
        };
        if let Some(p) = payload {
            keep(&self.payload_path(&item.id), p)?;
        }
        let text = serde_json::to_vec_pretty(item).expect("an item serialises");
        keep(&self.record(&item.id), &text)
    }

    /// Every item, with its decision (none: it waits), oldest first; items held in the same
    /// millisecond (one file's keys at one session's end) by file and key, so the listing reads in
    /// the file's order rather than the ids' (which are unique, not ordered). Unreadable records
    /// are skipped.
    pub(crate) fn list(&self) -> Vec<(Item, Option<Decision>)> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<(Item, Option<Decision>)> = rd
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
            .filter_map(|e| {
                let item: Item = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
                let decision = self.decision(&item.id);
                Some((item, decision))
            })
            .collect();
        out.sort_by(|(a, _), (b, _)| {
            (&a.time, &a.target, &a.what, &a.id).cmp(&(&b.time, &b.target, &b.what, &b.id))
        });
        out
    }

    /// The items that wait for a decision.
    pub(crate) fn waiting(&self) -> Vec<Item> {
        self.list()
            .into_iter()
            .filter(|(_, d)| d.is_none())
            .map(|(i, _)| i)
            .collect()
    }

    pub(crate) fn get(&self, id: &str) -> Option<(Item, Option<Decision>)> {
        if !valid_id(id) {
            return None;
        }
        let item: Item = serde_json::from_slice(&std::fs::read(self.record(id)).ok()?).ok()?;
        let decision = self.decision(id);
        Some((item, decision))
    }

    fn decision(&self, id: &str) -> Option<Decision> {
        let text = std::fs::read(self.decision_path(id)).ok()?;
        serde_json::from_slice::<serde_json::Value>(&text)
            .ok()?
            .get("decision")
            .and_then(|d| serde_json::from_value(d.clone()).ok())
    }

    /// The payload of a file item.
    pub(crate) fn payload(&self, id: &str) -> Result<Vec<u8>> {
        std::fs::read(self.payload_path(id)).map_err(io(format!("reading the held copy of {id}")))
    }

    fn decide(&self, id: &str, d: Decision) -> Result<()> {
        let text = serde_json::json!({"decision": d, "time": crate::alerts::now_rfc3339()});
        write_atomic(&self.decision_path(id), text.to_string().as_bytes(), 0o600)
    }

    /// Apply the item to the human's file and record the decision. Refused, changing nothing, when
    /// the target changed since the item was held.
    pub(crate) fn accept(&self, id: &str) -> Result<Item> {
        let (item, _) = self.get(id).ok_or_else(|| Error::NotHeld(id.to_string()))?;
        match &item.change {
            Change::GitKey {
                name,
                values,
                before,
            } => {
                let now = git_values(&item.target, name)?;
                let before: Vec<Option<Vec<u8>>> = before
                    .iter()
                    .map(|b| b.as_ref().map(|b| b.0.clone()))
                    .collect();
                if now != before {
                    return Err(conflict(&item));
                }
                let values: Vec<Option<Vec<u8>>> = values
                    .iter()
                    .map(|v| v.as_ref().map(|v| v.0.clone()))
                    .collect();
                crate::jail::gitcopy::apply_key(&item.target, name, &values)
                    .map_err(|e| Error::HeldApply(item.id.clone(), e.to_string()))?;
            }
            Change::JsonKey {
                path,
                value,
                before,
            } => {
                let key = json_key(path).ok_or_else(|| {
                    Error::HeldApply(item.id.clone(), "a key of an unknown shape".into())
                })?;
                let (mut file, mode) = match std::fs::read(&item.target) {
                    Ok(b) => {
                        let mode = std::fs::metadata(&item.target).map_or(0o600, |m| {
                            std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777
                        });
                        (
                            serde_json::from_slice(&b).map_err(|e| {
                                Error::HeldApply(
                                    item.id.clone(),
                                    format!("{} is not JSON: {e}", item.target.display()),
                                )
                            })?,
                            mode,
                        )
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        (serde_json::Value::Object(serde_json::Map::new()), 0o600)
                    }
                    Err(e) => {
                        return Err(Error::io(format!("reading {}", item.target.display()), e))
                    }
                };
                if claude_json::get(&file, &key) != before.as_ref() {
                    return Err(conflict(&item));
                }
                claude_json::apply(&mut file, &key, value.as_ref());
                let text = serde_json::to_vec_pretty(&file).expect("JSON serialises");
                write_atomic(&item.target, &text, mode)?;
            }
            Change::File {
                sha256,
                mode,
                before,
            } => {
                let payload = self.payload(id)?;
                if crate::quarantine::sha256_bytes(&payload) != *sha256 {
                    return Err(Error::HeldApply(
                        item.id.clone(),
                        "the held copy does not match its record".into(),
                    ));
                }
                let now = match std::fs::symlink_metadata(&item.target) {
                    Ok(m) if m.is_file() => crate::quarantine::sha256_path(&item.target),
                    Ok(_) => Some("not a regular file".into()),
                    Err(_) => None,
                };
                if now != *before {
                    return Err(conflict(&item));
                }
                write_atomic(&item.target, &payload, *mode & 0o7777)?;
            }
        }
        self.decide(id, Decision::Accepted)?;
        Ok(item)
    }

    /// Leave the item out of the human's world for good (its record and payload are kept).
    pub(crate) fn reject(&self, id: &str) -> Result<Item> {
        let (item, _) = self.get(id).ok_or_else(|| Error::NotHeld(id.to_string()))?;
        self.decide(id, Decision::Rejected)?;
        Ok(item)
    }
}

/// Hold what a session would have handed back, and say so at the human's next prompt: an alert
/// with the item's id. `item.id`, `time` and `session` are filled in here (`session_dir` is
/// `<runtime>/sessions/<id>`). Returns the id; an item that cannot be kept is an error the caller
/// reports (the human's file is then left as it was: nothing is lost).
pub(crate) fn hold_at_session_end(
    session_dir: &Path,
    mut item: Item,
    payload: Option<&[u8]>,
) -> Result<String> {
    let dir = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let (runtime, session) = dir.runtime_and_id().ok_or_else(|| {
        Error::HeldApply(
            "(new)".into(),
            format!("{} is no session directory", session_dir.display()),
        )
    })?;
    let session = session.to_string_lossy().into_owned();
    item.id = crate::alerts::new_id("h");
    item.time = crate::alerts::now_rfc3339();
    item.session.clone_from(&session);
    Store::new(runtime.root()).hold(&item, payload)?;
    let detail = format!(
        "{} ({}): {}",
        item.what,
        item.consequence.as_str(),
        item.why
    );
    let alert = crate::alerts::Alert::new(
        crate::alerts::AlertKind::Held,
        crate::alerts::Severity::High,
        &item.target,
        detail,
        &session,
    )
    .held(&item.id)
    .fingerprint(format!("held:{}", item.id));
    if let Err(e) = crate::alerts::Store::new(runtime.root()).add(&alert) {
        tracing::warn!("recording the alert of a held item: {e}");
    }
    Ok(item.id)
}

fn conflict(item: &Item) -> Error {
    Error::HeldConflict {
        id: item.id.clone(),
        target: item.target.clone(),
    }
}

/// `[key]` or `["projects", project, key]` as a key of `~/.claude.json`.
pub(crate) fn json_key(path: &[String]) -> Option<claude_json::Key> {
    match path {
        [k] => Some(claude_json::Key::Global(k.clone())),
        [p, project, key] if p == "projects" => Some(claude_json::Key::Project {
            project: project.clone(),
            key: key.clone(),
        }),
        _ => None,
    }
}

/// The path form of a key of `~/.claude.json`.
pub(crate) fn json_path(key: &claude_json::Key) -> Vec<String> {
    match key {
        claude_json::Key::Global(k) => vec![k.clone()],
        claude_json::Key::Project { project, key } => {
            vec!["projects".into(), project.clone(), key.clone()]
        }
    }
}

/// The values `name` has in the config file `path`, as our reader gives them.
fn git_values(path: &Path, name: &str) -> Result<Vec<Option<Vec<u8>>>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let keys = crate::gitconfig::parse(&bytes)
        .map_err(|e| Error::HeldApply(name.to_string(), format!("{}: {e:?}", path.display())))?;
    Ok(keys
        .into_iter()
        .filter(|k| k.name == name)
        .map(|k| k.value)
        .collect())
}

/// An id the store made (`h` and hex digits): nothing else is joined to its directory.
fn valid_id(id: &str) -> bool {
    id.len() > 1 && id.starts_with('h') && id[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;
