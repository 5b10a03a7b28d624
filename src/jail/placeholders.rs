//! Placeholders: the stubs the launcher creates on the host so that a missing entry point can be
//! sealed (bwrap can only bind over something that exists), and state directories it creates.
//!
//! Guards against two failures peers' users hit: ghost files left behind (every placeholder is
//! recorded with its inode before bwrap starts, removed when the last session that needs it ends, and
//! one left by a `SIGKILLed` launcher is removed by the next `run`), and a placeholder pulled away under
//! a running session (removing a mount point on the host detaches the bind in the jail, so removal
//! waits until no live session holds it). A placeholder is only removed while it is still exactly what
//! we made: the same inode, an empty directory or our content. Anything else now belongs to the human.
//!
//! The registry is one JSON file in the runtime directory, changed only under an exclusive `flock`.

use super::plan::Placeholder;
use crate::catalogue::Stub;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use super::liveness::SessionId;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    path: PathBuf,
    /// `None` for a directory, else the file's content.
    content: Option<String>,
    dev: u64,
    ino: u64,
    holders: Vec<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Registry {
    sessions: Vec<SessionId>,
    entries: Vec<Entry>,
}

/// Run `f` on the registry under an exclusive lock, then save it atomically.
fn with_registry<T>(runtime: &Path, f: impl FnOnce(&mut Registry) -> Result<T>) -> Result<T> {
    let layout = crate::runtime_dir::RuntimeDir::new(runtime);
    let _lock = layout.lock(crate::runtime_dir::Lock::Placeholders)?;
    let path = layout.placeholders();
    let read = std::fs::read(&path).ok();
    let mut reg: Registry = match &read {
        Some(bytes) => serde_json::from_slice(bytes).unwrap_or_else(|e| {
            tracing::warn!(
                "{}: unreadable ({e}); starting a new registry",
                path.display()
            );
            Registry::default()
        }),
        None => Registry::default(),
    };
    let out = f(&mut reg)?;
    let bytes = serde_json::to_vec_pretty(&reg).expect("registry serialises");
    if read.as_ref() == Some(&bytes) {
        return Ok(out); // unchanged (the common sweep): no new file
    }
    save(&path, &bytes)?;
    Ok(out)
}

/// Write the registry by a temporary file and a rename (a reader sees the old or the new one).
fn save(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(format!(".{}", std::process::id()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| Error::io("saving the placeholder registry", e))
}

/// Register the session, clean what dead sessions left, and create the placeholders it needs.
/// Fails closed: if one cannot be created, the ones made so far are removed and the launch stops.
///
/// Written ahead: the session and every placeholder it is about to make are in the registry on
/// disk (as made-to-be, no inode yet) before the first is made, so a launcher killed among them
/// leaves nothing the next `run` does not know of (`still_ours` takes a made-to-be one for ours
/// while it is exactly what we make: an empty directory, or a file of our content).
///
/// `sealed`: the paths this session seals. One that is another session's placeholder (made after
/// this session read the registry, before its walk found it as if it were yours) is held by this
/// session too, so that the other's end does not pull it away from under this one's seal.
pub fn acquire(
    runtime: &Path,
    session: &SessionId,
    wanted: &[Placeholder],
    sealed: &[PathBuf],
) -> Result<()> {
    let path = crate::runtime_dir::RuntimeDir::new(runtime).placeholders();
    with_registry(runtime, |reg| {
        prune(reg);
        reg.sessions.push(session.clone());
        let mut to_make = Vec::new();
        for p in wanted {
            if let Some(e) = reg.entries.iter_mut().find(|e| e.path == p.path) {
                if still_ours(e) {
                    e.holders.push(session.id.clone());
                    continue;
                }
            }
            reg.entries.retain(|e| e.path != p.path);
            reg.entries.push(Entry {
                path: p.path.clone(),
                content: match p.stub {
                    Stub::Dir => None,
                    Stub::File(c) => Some(c.to_string()),
                },
                dev: 0,
                ino: 0,
                holders: vec![session.id.clone()],
            });
            to_make.push(p);
        }
        let sealed: std::collections::HashSet<&PathBuf> = sealed.iter().collect();
        for e in &mut reg.entries {
            if sealed.contains(&e.path) && !e.holders.contains(&session.id) && still_ours(e) {
                e.holders.push(session.id.clone());
            }
        }
        if !to_make.is_empty() {
            save(
                &path,
                &serde_json::to_vec_pretty(&*reg).expect("registry serialises"),
            )?;
        }
        for p in to_make {
            match create(p) {
                Ok((dev, ino)) => {
                    if let Some(e) = reg.entries.iter_mut().find(|e| e.path == p.path) {
                        (e.dev, e.ino) = (dev, ino);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Appeared since planning (another session, or the human): sealed as it is.
                    reg.entries.retain(|e| e.path != p.path);
                }
                Err(e) => {
                    let msg = format!("cannot create placeholder {}: {e}", p.path.display());
                    reg.entries.retain(|e| !(e.path == p.path && e.ino == 0));
                    release_in(reg, &session.id);
                    return Err(Error::Jail(msg));
                }
            }
        }
        Ok(())
    })
}

/// The session is over: drop its hold and remove every placeholder no live session holds.
pub fn release(runtime: &Path, session: &SessionId) -> Result<()> {
    with_registry(runtime, |reg| {
        release_in(reg, &session.id);
        Ok(())
    })
}

/// Remove what sessions that died left behind (used by `run` before starting, and by doctor).
pub fn sweep(runtime: &Path) -> Result<()> {
    with_registry(runtime, |reg| {
        prune(reg);
        Ok(())
    })
}

/// Paths of placeholders currently on disk and registered.
pub fn list(runtime: &Path) -> Vec<PathBuf> {
    std::fs::read(crate::runtime_dir::RuntimeDir::new(runtime).placeholders())
        .ok()
        .and_then(|b| serde_json::from_slice::<Registry>(&b).ok())
        .map(|r| r.entries.into_iter().map(|e| e.path).collect())
        .unwrap_or_default()
}

/// The placeholders some session holds now, as they were made (under the lock: a session makes
/// and registers its placeholders in one step). Empty when there is no registry.
pub fn held(runtime: &Path) -> std::collections::HashSet<PathBuf> {
    if !crate::runtime_dir::RuntimeDir::new(runtime)
        .placeholders()
        .exists()
    {
        return std::collections::HashSet::new();
    }
    with_registry(runtime, |reg| {
        Ok(reg
            .entries
            .iter()
            .filter(|e| !e.holders.is_empty() && still_ours(e))
            .map(|e| e.path.clone())
            .collect())
    })
    .unwrap_or_default()
}

/// Whether `path` is a placeholder some session made and holds, as it was made. Under the lock: a
/// session makes its placeholders and registers them in one step, so the watcher of another one,
/// woken by the new name, waits for the registry to say whose it is.
pub(crate) fn is_held(runtime: &Path, path: &Path) -> bool {
    with_registry(runtime, |reg| {
        Ok(reg
            .entries
            .iter()
            .any(|e| e.path == path && !e.holders.is_empty() && still_ours(e)))
    })
    .unwrap_or(false)
}

fn release_in(reg: &mut Registry, id: &str) {
    reg.sessions.retain(|s| s.id != id);
    for e in &mut reg.entries {
        e.holders.retain(|h| h != id);
    }
    remove_unheld(reg);
}

fn prune(reg: &mut Registry) {
    let dead: Vec<String> = reg
        .sessions
        .iter()
        .filter(|s| !s.alive())
        .map(|s| s.id.clone())
        .collect();
    for id in dead {
        tracing::info!(session = %id, "cleaning up after a session that did not end normally");
        release_in(reg, &id);
    }
}

fn remove_unheld(reg: &mut Registry) {
    // Deepest first, so a created parent is empty by the time it is checked.
    reg.entries
        .sort_by_key(|e| std::cmp::Reverse(e.path.as_os_str().len()));
    reg.entries.retain(|e| {
        if !e.holders.is_empty() {
            return true;
        }
        if still_ours(e) {
            let res = match e.content {
                // `rmdir` itself refuses a directory that is not empty any more.
                None => std::fs::remove_dir(&e.path),
                Some(_) => std::fs::remove_file(&e.path),
            };
            match res {
                Ok(()) => {}
                Err(err) if err.raw_os_error() == Some(libc::ENOTEMPTY) => {
                    tracing::info!("{} has content now; left in place", e.path.display());
                }
                Err(err) => {
                    tracing::warn!("cannot remove placeholder {}: {err}", e.path.display());
                }
            }
        } else {
            tracing::info!(
                "{} changed since it was made; left in place",
                e.path.display()
            );
        }
        false
    });
}

/// Same inode, and still a directory (whose emptiness `rmdir` checks) or holding exactly our
/// content.
fn still_ours(e: &Entry) -> bool {
    let Ok(m) = std::fs::symlink_metadata(&e.path) else {
        return false;
    };
    // Made-to-be (`acquire` was stopped between writing it down and making it): ours while it is
    // exactly what we make.
    let made_to_be = e.dev == 0 && e.ino == 0;
    if !made_to_be && (m.dev() != e.dev || m.ino() != e.ino) {
        return false;
    }
    match &e.content {
        None => m.is_dir(),
        // Made-to-be, it may have been stopped between making the file and writing all of it.
        Some(c) if made_to_be => {
            m.is_file()
                && m.len() <= c.len() as u64
                && std::fs::read(&e.path).is_ok_and(|b| c.as_bytes().starts_with(&b))
        }
        Some(c) => {
            m.is_file()
                && m.len() == c.len() as u64
                && (c.is_empty() || std::fs::read(&e.path).is_ok_and(|b| b == c.as_bytes()))
        }
    }
}

/// Create one placeholder exclusively; returns its (dev, ino).
fn create(p: &Placeholder) -> std::io::Result<(u64, u64)> {
    match p.stub {
        Stub::Dir => {
            // Agent state may hold credentials; other directories get the usual mode.
            let agent_state =
                p.state_dir && crate::runtimes::state_dirs().any(|s| p.path.ends_with(s.path));
            let mode = if agent_state { 0o700 } else { 0o755 };
            std::fs::DirBuilder::new().mode(mode).create(&p.path)?;
            let m = std::fs::symlink_metadata(&p.path)?;
            if m.mode() & 0o7777 != mode {
                // A umask narrower than 022.
                std::fs::set_permissions(&p.path, std::fs::Permissions::from_mode(mode))?;
            }
            return Ok((m.dev(), m.ino()));
        }
        Stub::File(content) => {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o444)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&p.path)?;
            f.write_all(content.as_bytes())?;
        }
    }
    let m = std::fs::symlink_metadata(&p.path)?;
    Ok((m.dev(), m.ino()))
}
