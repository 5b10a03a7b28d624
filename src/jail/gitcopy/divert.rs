//! The human's `.git/config` while sessions run: a symlink to `claude-sandbox/config` beside it, so
//! that the human's git renames inside a directory the jail has sealed whole (a rename over a
//! file-level mount detaches it; one inside a bound directory detaches nothing).
//!
//! Guards against losing the human's config or a change to it: the swap is one rename of a symlink
//! over the file, with git's own `config.lock` held so that a concurrent `git config` fails loudly
//! instead of being lost; the last session renames the file back under the diverted file's lock;
//! a diversion something outside replaced is never deleted (the file is kept aside, and said so).
//! And against a directory planted in `.git/` by an earlier session: every file here is opened
//! without following a symlink or blocking on a FIFO, and a `claude-sandbox/` found beside a
//! config that is not diverted is a leftover, removed before use.

use crate::jail::placeholders::SessionId;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The directory beside the config that holds the human's config while sessions run.
const DIVERTED: &str = "claude-sandbox";
const LOCK: &str = "lock";
/// How long to wait for a `config.lock` the human's git holds (it holds one for microseconds).
const LOCK_WAIT: Duration = Duration::from_millis(200);

/// What a diverted `.git/config` points at (relative: the same from inside and outside).
fn link() -> PathBuf {
    Path::new(DIVERTED).join("config")
}

/// `<git dir>/claude-sandbox`: sealed read-only (as a directory) in the jail.
pub(crate) fn dir(config: &Path) -> PathBuf {
    config.with_file_name(DIVERTED)
}

fn is_real_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

pub(crate) fn is_diverted(config: &Path) -> bool {
    std::fs::read_link(config).is_ok_and(|t| t == link())
        && std::fs::symlink_metadata(dir(config).join("config"))
            .is_ok_and(|m| m.file_type().is_file())
        && is_real_dir(&dir(config))
}

/// The human's config file itself (the diverted one while sessions run).
pub(crate) fn human_file(config: &Path) -> PathBuf {
    if is_diverted(config) {
        dir(config).join("config")
    } else {
        config.to_path_buf()
    }
}

fn other(msg: String) -> std::io::Error {
    std::io::Error::other(msg)
}

/// An exclusive `flock` on `dir/lock`: a regular file, never through a symlink, never a FIFO.
fn registry_lock(dir: &Path) -> std::io::Result<std::fs::File> {
    let path = dir.join(LOCK);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)?;
    if !f.metadata()?.is_file() {
        return Err(other(format!("{} is not a regular file", path.display())));
    }
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(f)
}

/// git's own lock file for `file` (`<file>.lock`, made exclusively), held while it lives: the
/// human's git, which takes the same lock to save, fails loudly meanwhile instead of losing a change.
struct GitLock(PathBuf);

impl GitLock {
    fn take(file: &Path) -> std::io::Result<GitLock> {
        let mut name = file.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let t0 = Instant::now();
        loop {
            let made = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path);
            match made {
                Ok(_) => return Ok(GitLock(path)),
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && t0.elapsed() < LOCK_WAIT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => {
                    return Err(other(format!(
                        "{}: {e} (git is writing it)",
                        path.display()
                    )))
                }
            }
        }
    }
}

impl Drop for GitLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The sessions registered in `sessions` that still run.
fn live_sessions(sessions: &Path) -> Vec<String> {
    if !is_real_dir(sessions) {
        return Vec::new();
    }
    let Ok(rd) = std::fs::read_dir(sessions) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            crate::jail::home::read_regular(&e.path())
                .ok()
                .and_then(|(b, _)| serde_json::from_slice::<SessionId>(&b).ok())
                .is_some_and(|s| s.alive())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn make_dir(p: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(p)
}

/// Divert `config` (unless it is already, for another live session) and register `session`.
pub(crate) fn divert(config: &Path, session: &SessionId) -> std::io::Result<()> {
    let dir = dir(config);
    if !is_diverted(config) {
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                if !live_sessions(&dir.join("sessions")).is_empty() {
                    // A live session's diversion, replaced since from outside: its pin is gone
                    // already; this session keeps the read-only seal and leaves the rest alone.
                    return Err(other(format!(
                        "{} is registered to a live session but not diverted any more",
                        dir.display()
                    )));
                }
                std::fs::remove_dir_all(&dir)?; // a leftover, or planted: never followed
            }
            Ok(_) => std::fs::remove_file(&dir)?,
            Err(_) => {}
        }
        make_dir(&dir)?;
        make_dir(&dir.join("sessions"))?;
        let _registry = registry_lock(&dir)?;
        let _git = GitLock::take(config)?;
        std::fs::hard_link(config, dir.join("config"))?;
        let tmp = config.with_file_name(format!("config.claude-sandbox.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(link(), &tmp)?;
        if let Err(e) = std::fs::rename(&tmp, config) {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        return register(&dir, session);
    }
    let _registry = registry_lock(&dir)?;
    register(&dir, session)
}

fn register(dir: &Path, session: &SessionId) -> std::io::Result<()> {
    let sessions = dir.join("sessions");
    if !is_real_dir(&sessions) {
        return Err(other(format!("{} is not a directory", sessions.display())));
    }
    let record = serde_json::to_vec(session).map_err(std::io::Error::other)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(sessions.join(&session.id))
        .and_then(|mut f| std::io::Write::write_all(&mut f, &record))
}

/// Unregister `session`; the last session puts the human's file back at `config` and removes the
/// directory. `Err` says what the human must know (the diversion was replaced from outside: the
/// diverted file is kept aside, never deleted).
pub(crate) fn release(config: &Path, session: &str) -> Result<(), super::GitCopyError> {
    let dir = dir(config);
    if !is_real_dir(&dir) {
        return Ok(());
    }
    let show = |source: std::io::Error| super::GitCopyError::Io {
        path: dir.clone(),
        source,
    };
    let registry = registry_lock(&dir).map_err(show)?;
    let _ = std::fs::remove_file(dir.join("sessions").join(session));
    if !live_sessions(&dir.join("sessions")).is_empty() {
        return Ok(());
    }
    let diverted = dir.join("config");
    let mut kept_aside = None;
    if is_diverted(config) {
        let _git = GitLock::take(&diverted).map_err(show)?;
        std::fs::rename(&diverted, config).map_err(show)?;
    } else if std::fs::symlink_metadata(&diverted).is_ok_and(|m| m.is_file()) {
        let aside = config.with_file_name("config.claude-sandbox-saved");
        std::fs::rename(&diverted, &aside).map_err(show)?;
        kept_aside = Some(aside);
    }
    drop(registry);
    std::fs::remove_dir_all(&dir).map_err(show)?;
    match kept_aside {
        None => Ok(()),
        Some(aside) => Err(super::GitCopyError::ReplacedOutside {
            config: config.to_path_buf(),
            aside,
        }),
    }
}
