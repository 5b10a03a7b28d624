//! The human's `.git/config` while sessions run: a symlink to `claude-sandbox/config` beside it, so
//! that the human's git renames inside a directory the jail has sealed whole (a rename over a
//! file-level mount detaches it; one inside a bound directory detaches nothing).
//!
//! Guards against losing the human's config or a change to it: the swap is one rename of a symlink
//! over the file, with git's own `config.lock` held so that a concurrent `git config` fails loudly
//! instead of being lost; the last session renames the file back under the diverted file's lock;
//! a diversion something outside replaced is never deleted (the file is kept aside, and said so).
//! The sessions using a diversion are a log in its lock file (`+record` when one comes, `-id` when
//! it goes), appended under the lock: no inode per session (making and freeing inodes is most of
//! a launch's cost on some disks), and a launcher killed mid-write leaves a torn last line that
//! names no live session.
//! And against a directory planted in `.git/` by an earlier session: every file here is opened
//! without following a symlink or blocking on a FIFO, and a `claude-sandbox/` found beside a
//! config that is not diverted is a leftover, removed before use.

use crate::jail::placeholders::SessionId;
use crate::jail::policy::{diverted_dir as dir, DIVERTED};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The diversion's lock, and its registry of sessions.
const LOCK: &str = "lock";
/// How long to wait for a `config.lock` the human's git holds (it holds one for microseconds).
const LOCK_WAIT: Duration = Duration::from_millis(200);

/// What a diverted `.git/config` points at (relative: the same from inside and outside).
fn link() -> PathBuf {
    Path::new(DIVERTED).join("config")
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

/// `dir/lock` opened for reading and appending (made when `create`): a regular file, never
/// through a symlink, never a FIFO.
fn open_registry(dir: &Path, create: bool) -> std::io::Result<std::fs::File> {
    let path = dir.join(LOCK);
    let f = std::fs::OpenOptions::new()
        .create(create)
        .read(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)?;
    if !f.metadata()?.is_file() {
        return Err(other(format!("{} is not a regular file", path.display())));
    }
    Ok(f)
}

/// An exclusive `flock` on `dir/lock`, the registry (see `open_registry`).
fn registry_lock(dir: &Path) -> std::io::Result<std::fs::File> {
    let f = open_registry(dir, true)?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(f)
}

/// git's own lock file for `file` (`<file>.lock`, made exclusively), held while it lives: the
/// human's git, which takes the same lock to save, fails loudly meanwhile instead of losing a change.
/// It says whose it is (`LOCK_MARK`, the launcher's pid and start time), so that one a killed
/// launcher left is taken for what it is and removed, instead of stopping every later session and
/// the human's own `git config` ("File exists") for good.
struct GitLock(PathBuf);

/// The first bytes of a `GitLock` (git writes a whole config there, which never starts so).
const LOCK_MARK: &str = "\0claude-sandbox lock ";

/// Whether `lock` is a `GitLock` whose launcher is gone.
fn left_by_a_dead_launcher(lock: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(lock) else {
        return false;
    };
    let Some(rest) = text.strip_prefix(LOCK_MARK) else {
        return false;
    };
    let mut fields = rest.split_whitespace().map(str::parse::<u64>);
    match (fields.next(), fields.next()) {
        (Some(Ok(pid)), Some(Ok(start))) => !SessionId {
            id: String::new(),
            pid: u32::try_from(pid).unwrap_or(0),
            start,
            lock: None,
            pidns: None,
        }
        .alive(),
        _ => false,
    }
}

/// The temporary names (`<file>.claude-sandbox.<pid>`: a lock's mark, a diversion's symlink)
/// launchers that died left beside `file`, this one's own pid included (it is about to make it
/// anew). A launcher killed between making one and renaming or removing it left it for good.
fn remove_dead_temps(file: &Path) {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return;
    };
    let prefix = format!("{}.claude-sandbox.", name.to_string_lossy());
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let n = e.file_name();
        let Some(pid) = n.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let mine = pid == std::process::id().to_string();
        if mine || !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The `GitLock` of `file` a killed launcher left, removed (under the git directory's serial
/// lock). Whichever step it died in, the next launcher to touch the diversion clears it: one
/// killed after its rename left the config diverted, and a session joining a diversion takes no
/// lock of the config (`divert`), so only this would find it.
fn remove_dead_lock(file: &Path) {
    let mut name = file.as_os_str().to_owned();
    name.push(".lock");
    let lock = PathBuf::from(name);
    if left_by_a_dead_launcher(&lock) {
        tracing::info!(lock = %lock.display(), "removing a lock a killed launcher left");
        let _ = std::fs::remove_file(&lock);
    }
    remove_dead_temps(&lock);
}

impl GitLock {
    fn take(file: &Path) -> std::io::Result<GitLock> {
        use std::io::Write;
        let mut name = file.as_os_str().to_owned();
        name.push(".lock");
        let path = PathBuf::from(name);
        let t0 = Instant::now();
        let me = SessionId::current();
        // Written whole under a name of its own, then linked into place (a link fails where the
        // lock exists): the lock never exists without its mark, whenever this launcher dies.
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(format!(".claude-sandbox.{}", me.pid));
        let tmp = PathBuf::from(tmp);
        remove_dead_temps(&path);
        {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            writeln!(f, "{LOCK_MARK}{} {}", me.pid, me.start)?;
        }
        let made = loop {
            match std::fs::hard_link(&tmp, &path) {
                Ok(()) => break Ok(GitLock(path)),
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && left_by_a_dead_launcher(&path) =>
                {
                    tracing::info!(lock = %path.display(), "removing a lock a killed launcher left");
                    let _ = std::fs::remove_file(&path);
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::AlreadyExists
                        && t0.elapsed() < LOCK_WAIT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => {
                    break Err(other(format!(
                        "{}: {e} (git is writing it)",
                        path.display()
                    )))
                }
            }
        };
        let _ = std::fs::remove_file(&tmp);
        made
    }
}

impl Drop for GitLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The sessions a registry's log names that have come and not gone: `+` and a session's record
/// when it came, `-` and its id when it went. Anything else (a torn line) names nobody.
fn registered(log: &[u8]) -> Vec<SessionId> {
    let mut ids: Vec<SessionId> = Vec::new();
    for line in log.split(|b| *b == b'\n') {
        match line.split_first() {
            Some((b'+', record)) => ids.extend(serde_json::from_slice::<SessionId>(record).ok()),
            Some((b'-', id)) => ids.retain(|s| s.id.as_bytes() != id),
            _ => {}
        }
    }
    ids
}

/// The most of a registry's log that is read: two lines of ~80 bytes per session, so tens of
/// thousands of sessions that overlapped without a pause. A longer log (something other than the
/// launcher wrote it) counts as held: the diversion is neither taken as a leftover nor released.
const MAX_LOG: u64 = 4 << 20;

/// The sessions registered in `dir`'s `registry` (read from its start) that still run.
fn live_in(registry: &std::fs::File, dir: &Path) -> Vec<String> {
    use std::io::{Read, Seek};
    let mut log = Vec::new();
    let mut file = registry;
    let read = file
        .seek(std::io::SeekFrom::Start(0))
        .and_then(|_| file.take(MAX_LOG + 1).read_to_end(&mut log));
    if log.len() as u64 > MAX_LOG {
        return vec![format!("a registry over {} MiB", MAX_LOG >> 20)];
    }
    let logged = read.map_or_else(|_| Vec::new(), |_| registered(&log));
    logged
        .into_iter()
        .filter(SessionId::alive)
        .map(|s| s.id)
        .chain(legacy_live(dir))
        .collect()
}

/// Live sessions of a launcher from before the registry was a log (a file each in `sessions/`):
/// still honoured, so that a diversion one of them holds is not released under it.
fn legacy_live(dir: &Path) -> Vec<String> {
    let sessions = dir.join("sessions");
    if !is_real_dir(&sessions) {
        return Vec::new();
    }
    let Ok(rd) = std::fs::read_dir(&sessions) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let (bytes, _) = crate::jail::readback::read_regular(&e.path()).ok()?;
            let s = serde_json::from_slice::<SessionId>(&bytes).ok()?;
            s.alive().then_some(s.id)
        })
        .collect()
}

/// The live sessions registered in `dir`'s registry, if it has one.
fn live_sessions(dir: &Path) -> Vec<String> {
    match open_registry(dir, false) {
        Ok(f) => live_in(&f, dir),
        Err(_) => legacy_live(dir),
    }
}

/// Append one line to the registry's log (one write: appended whole, or not at all but torn).
fn log_line(mut registry: &std::fs::File, sign: u8, body: &[u8]) -> std::io::Result<()> {
    let mut line = Vec::with_capacity(body.len() + 2);
    line.push(sign);
    line.extend_from_slice(body);
    line.push(b'\n');
    std::io::Write::write_all(&mut registry, &line)
}

fn make_dir(p: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(p)
}

/// How long to wait for another launcher diverting or releasing the same config (it holds the
/// lock for a rename or two); a lock held longer (something in a jail holding it) gives up.
const DIVERSION_WAIT: Duration = Duration::from_secs(3);

/// An exclusive `flock` on the git directory itself, held while a launcher diverts or releases
/// its config: the diversion's own directory (`claude-sandbox/`, with its registry) is made by the
/// first and removed by the last, so a session starting while another ends could otherwise remove
/// the directory the other is making, or make one the other then removes (a `.git/config` left
/// pointing at nothing). The git directory outlives both. Bounded: a jail can open the directory
/// too, and holding its lock only makes this session keep the read-only seal.
fn git_dir_lock(config: &Path) -> std::io::Result<std::fs::File> {
    let git_dir = config.parent().unwrap_or(Path::new("/"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(git_dir)?;
    let t0 = Instant::now();
    loop {
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(f),
            Err(rustix::io::Errno::WOULDBLOCK) if t0.elapsed() < DIVERSION_WAIT => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => {
                return Err(other(format!(
                    "{}: locked by another launcher for longer than {} s ({e})",
                    git_dir.display(),
                    DIVERSION_WAIT.as_secs()
                )))
            }
        }
    }
}

/// Divert `config` (unless it is already, for another live session) and register `session`.
pub(crate) fn divert(config: &Path, session: &SessionId) -> std::io::Result<()> {
    let _serial = git_dir_lock(config)?;
    remove_dead_lock(config);
    let dir = dir(config);
    if !is_diverted(config) {
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                if !live_sessions(&dir).is_empty() {
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
        let registry = registry_lock(&dir)?;
        let _git = GitLock::take(config)?;
        std::fs::hard_link(config, dir.join("config"))?;
        remove_dead_temps(config);
        let tmp = config.with_file_name(format!("config.claude-sandbox.{}", std::process::id()));
        std::os::unix::fs::symlink(link(), &tmp)?;
        if let Err(e) = std::fs::rename(&tmp, config) {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        return register(&registry, session);
    }
    register(&registry_lock(&dir)?, session)
}

fn register(registry: &std::fs::File, session: &SessionId) -> std::io::Result<()> {
    let record = serde_json::to_vec(session).map_err(std::io::Error::other)?;
    log_line(registry, b'+', &record)
}

/// Unregister `session`; the last session puts the human's file back at `config` and removes the
/// directory. `Err` says what the human must know (the diversion was replaced from outside: the
/// diverted file is kept aside, never deleted).
pub(crate) fn release(config: &Path, session: &str) -> Result<(), super::GitCopyError> {
    let dir = dir(config);
    let show = |source: std::io::Error| super::GitCopyError::Io {
        path: dir.clone(),
        source,
    };
    if !is_real_dir(&dir) {
        return Ok(());
    }
    let _serial = git_dir_lock(config).map_err(show)?;
    remove_dead_lock(config);
    if !is_real_dir(&dir) {
        return Ok(()); // released by another launcher meanwhile
    }
    let registry = registry_lock(&dir).map_err(show)?;
    log_line(&registry, b'-', session.as_bytes()).map_err(show)?;
    if !live_in(&registry, &dir).is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_names_the_sessions_that_came_and_did_not_go() {
        let rec = |id: &str| {
            let s = SessionId {
                id: id.into(),
                pid: 1,
                start: 7,
                lock: None,
                pidns: None,
            };
            format!("+{}\n", serde_json::to_string(&s).unwrap())
        };
        let log = format!("{}{}-a\n{}+{{\"id\":\"torn", rec("a"), rec("b"), rec("c"));
        let ids: Vec<String> = registered(log.as_bytes())
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(ids, ["b", "c"]);
        assert!(registered(b"").is_empty());
        assert!(registered(b"-b\n+not json\n").is_empty());
    }

    #[test]
    fn only_live_sessions_keep_a_diversion() {
        let d = tempfile::tempdir().unwrap();
        let me = SessionId::current();
        let dead = SessionId {
            id: "dead".into(),
            pid: me.pid,
            start: me.start + 1,
            lock: None,
            pidns: None,
        };
        let f = registry_lock(d.path()).unwrap();
        register(&f, &dead).unwrap();
        assert!(
            live_in(&f, d.path()).is_empty(),
            "a dead session keeps nothing"
        );
        register(&f, &me).unwrap();
        assert_eq!(live_sessions(d.path()), std::slice::from_ref(&me.id));
        log_line(&f, b'-', me.id.as_bytes()).unwrap();
        assert!(live_in(&f, d.path()).is_empty());
        // A log too long to be the launcher's counts as held.
        let big = tempfile::tempdir().unwrap();
        let g = registry_lock(big.path()).unwrap();
        g.set_len(MAX_LOG + 1).unwrap();
        assert_eq!(live_sessions(big.path()).len(), 1);
        // A session of an earlier launcher, registered the old way, still counts.
        std::fs::create_dir(d.path().join("sessions")).unwrap();
        let old = serde_json::to_vec(&me).unwrap();
        std::fs::write(d.path().join("sessions").join(&me.id), old).unwrap();
        assert_eq!(live_in(&f, d.path()), std::slice::from_ref(&me.id));
        std::fs::remove_file(d.path().join(LOCK)).unwrap();
        assert_eq!(live_sessions(d.path()), std::slice::from_ref(&me.id));
    }
}
