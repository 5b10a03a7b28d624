//! Whether a session's launcher still runs: a lock only the launcher holds.
//!
//! Guards against a dead session taken for a live one, so that what it left (placeholders, the
//! `.git/config` diversion, its home, its layers) outlives it: a launcher killed by SIGKILL, an OOM
//! kill or a closed VS Code window is a zombie until its parent reaps it, and its pid and start
//! time still answer for it meanwhile (a restart 0.3 s after the kill found it "alive" in every one
//! of 10 rounds). The launcher holds an exclusive `flock` on `locks/<id>.lock` in the runtime
//! directory from its start to its last step; the kernel drops it when the launcher's files are
//! closed, which is the moment it dies, whoever reaps it and whatever its jail is still doing. The
//! fd is close-on-exec and the forked sealer closes it (`seal`): no child keeps it. A session
//! record without a lock (a launcher of an earlier release) is judged by pid and start time, a
//! zombie counting as dead.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A session: who runs it, and the lock that says whether it still does.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SessionId {
    pub id: String,
    pub pid: u32,
    /// Process start time (clock ticks since boot), so a reused pid is not taken for a live session.
    pub start: u64,
    /// The launcher's lock (`SessionLock`): held while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<PathBuf>,
    /// The launcher's PID namespace (the inode of `/proc/self/ns/pid`): where `pid` means it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pidns: Option<u64>,
}

impl SessionId {
    /// The current process as a session (its lock is added when taken: `SessionLock::take`).
    pub fn current() -> Self {
        let pid = std::process::id();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        SessionId {
            id: format!("{pid}-{nanos:x}"),
            pid,
            start: start_time(pid).unwrap_or(0),
            lock: None,
            pidns: pid_namespace(),
        }
    }

    /// Whether its launcher still runs: its lock is held — and, where its pid can be read (our PID
    /// namespace), that pid is still the launcher. A lock alone is not enough: a child of the
    /// launcher caught between its fork and its exec holds a copy of every descriptor (`CLOEXEC`
    /// acts at the exec), so a launcher killed then looked alive to the next one for that moment,
    /// which left the dead session's placeholders in the workspace (faults.rs, under load).
    pub fn alive(&self) -> bool {
        let by_pid = || {
            let (start, state) = stat(self.pid).unzip();
            start == Some(self.start) && state != Some('Z')
        };
        match &self.lock {
            Some(lock) => {
                held(lock) && (self.pidns.is_none() || self.pidns != pid_namespace() || by_pid())
            }
            None => by_pid(),
        }
    }
}

/// This process's PID namespace (`/proc/self/ns/pid`'s inode).
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// Fields 3 (state) and 22 (start time) of `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_comm.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((fields.nth(18)?.parse().ok()?, state))
}

fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|(s, _)| s)
}

/// Whether someone holds `lock` exclusively: a shared lock is refused while the launcher lives.
/// A missing file is a launcher that finished (it removes its lock last) or never was.
pub(crate) fn held(lock: &Path) -> bool {
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(lock)
    else {
        return false;
    };
    matches!(
        rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockShared),
        Err(rustix::io::Errno::WOULDBLOCK)
    )
}

/// The launcher's hold on its session: the lock file, locked from before it appears under its
/// name (made under a temporary name, locked, then renamed) to the end; removed when dropped.
#[derive(Debug)]
pub struct SessionLock {
    path: PathBuf,
    _file: std::fs::File,
}

/// `<runtime>/locks/`.
/// Whether the launcher of session `id` holds its lock: what a session directory whose record is
/// not written yet (or not whole) is judged by, since every launcher takes its lock first.
pub(crate) fn held_by_id(runtime: &Path, id: &str) -> bool {
    held(&locks_dir(runtime).join(format!("{id}.lock")))
}

fn locks_dir(runtime: &Path) -> PathBuf {
    crate::runtime_dir::RuntimeDir::new(runtime).locks()
}

impl SessionLock {
    /// Take the lock of session `id` in `runtime`, and name it in `session`.
    pub fn take(runtime: &Path, session: &mut SessionId) -> std::io::Result<SessionLock> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = locks_dir(runtime);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        let path = dir.join(format!("{}.lock", session.id));
        let tmp = dir.join(format!(".{}.tmp", session.id));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
        std::fs::rename(&tmp, &path)?;
        session.lock = Some(path.clone());
        Ok(SessionLock { path, _file: file })
    }
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Removed while still held: whoever opens it from now on finds the session over.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// How old a lock's temporary name must be before a sweep may take it for a dead launcher's.
const TMP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Remove the locks no launcher holds any more (their sessions are over: whatever they left was
/// finished before this runs, or is judged dead without the file). Whether one was removed: a
/// launcher died since the last sweep.
pub(crate) fn sweep(runtime: &Path) -> bool {
    let mut dead = false;
    let Ok(rd) = std::fs::read_dir(locks_dir(runtime)) else {
        return dead;
    };
    for e in rd.flatten() {
        let path = e.path();
        let Ok(f) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
        else {
            continue;
        };
        // A temporary name is made, then locked, then renamed (`take`): one just made may not be
        // locked yet, and removing it then fails its launcher's rename (seen with ten sessions
        // started at once). Left until it is older than any launch takes to lock it.
        let young = e.file_name().as_encoded_bytes().starts_with(b".")
            && f.metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().unwrap_or_default() < TMP_GRACE);
        if young {
            continue;
        }
        // Locked before it is renamed: unlocked, its launcher died in between.
        if rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok() {
            dead |= std::fs::remove_file(&path).is_ok();
        }
    }
    dead
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock's temporary name just made (its launcher has not locked it yet) is left by a sweep;
    /// one older than the grace, unlocked, is a dead launcher's and removed.
    #[test]
    fn a_sweep_leaves_a_lock_being_taken_and_removes_a_dead_launchers() {
        let rt = tempfile::tempdir().unwrap();
        let dir = locks_dir(rt.path());
        std::fs::create_dir_all(&dir).unwrap();
        let young = dir.join(".young.tmp");
        let old = dir.join(".old.tmp");
        std::fs::write(&young, "").unwrap();
        let f = std::fs::File::create(&old).unwrap();
        f.set_modified(std::time::SystemTime::now() - TMP_GRACE * 2)
            .unwrap();
        drop(f);
        sweep(rt.path());
        assert!(young.exists(), "a lock being taken was removed");
        assert!(!old.exists(), "a dead launcher's was kept");
    }

    /// A session whose lock is held is alive; one whose lock is free or gone is dead, whatever its
    /// pid says; a record without a lock is judged by pid and start time.
    #[test]
    fn a_session_is_alive_while_its_lock_is_held_and_dead_at_once_after() {
        let rt = tempfile::tempdir().unwrap();
        let mut me = SessionId::current();
        let lock = SessionLock::take(rt.path(), &mut me).unwrap();
        assert!(me.alive());
        let record = serde_json::to_vec(&me).unwrap();
        let back: SessionId = serde_json::from_slice(&record).unwrap();
        assert!(back.alive());
        drop(lock);
        assert!(!me.alive(), "a dropped lock is a finished session");
        // A lock file nobody holds (its launcher died): dead, and swept.
        let stale = locks_dir(rt.path()).join("dead.lock");
        std::fs::write(&stale, "").unwrap();
        let dead = SessionId {
            lock: Some(stale.clone()),
            ..SessionId::current()
        };
        assert!(!dead.alive());
        let mut other = SessionId::current();
        other.id.push_str("-other");
        let live = SessionLock::take(rt.path(), &mut other).unwrap();
        sweep(rt.path());
        assert!(!stale.exists());
        assert!(other.alive(), "a held lock is not swept");
        drop(live);
        // Without a lock: this process is alive, a wrong start time is not.
        let mut old = SessionId::current();
        assert!(old.alive());
        old.start += 1;
        assert!(!old.alive());
    }

    /// A lock still held by someone else (a child between fork and exec holds a copy) does not
    /// keep a launcher alive whose pid, in our namespace, is gone; in another namespace the lock
    /// decides.
    #[test]
    fn a_held_lock_of_a_launcher_whose_pid_is_gone_is_dead() {
        let rt = tempfile::tempdir().unwrap();
        let mut me = SessionId::current();
        let _lock = SessionLock::take(rt.path(), &mut me).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let dead = SessionId {
            pid: gone,
            ..me.clone()
        };
        assert!(me.alive());
        assert!(
            !dead.alive(),
            "its pid is gone: dead, whoever holds the lock"
        );
        let elsewhere = SessionId {
            pidns: Some(1),
            ..dead.clone()
        };
        assert!(elsewhere.alive(), "another namespace: the lock decides");
        let old = SessionId {
            pidns: None,
            ..dead
        };
        assert!(old.alive(), "a record from before pidns: the lock decides");
    }

    /// A zombie (killed, not reaped yet) is dead by pid too.
    #[test]
    fn a_zombie_launcher_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Wait for it to exit without reaping it.
        let t0 = std::time::Instant::now();
        while stat(pid).is_some_and(|(_, s)| s != 'Z') {
            assert!(t0.elapsed().as_secs() < 10);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let s = SessionId {
            id: "z".into(),
            pid,
            start: start_time(pid).unwrap(),
            lock: None,
            pidns: None,
        };
        assert!(!s.alive());
        child.wait().unwrap();
    }
}
