//! What a walk of the workspace remembers between launches, in one place for both walks that do
//! (the hard-link scan, `jail::hardlinks::scan`, and the entry-point walk, `entrypoints::memory`):
//! a directory's stamp, the rule for when a stamp can be trusted, and when a memory is worth
//! writing again.
//!
//! Guards against a directory taken from memory after it changed. Adding, removing or renaming an
//! entry changes the directory's modification and change times (and the change time cannot be set
//! from user space), so while the stamp (device, inode, both times) is the same, the entries are
//! the same. Only a directory whose times are settled is remembered (`Stamp::racy`).

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// A directory's identity and times (ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Stamp([u64; 4]);

impl Stamp {
    /// What `statx` (`MASK`) says of a directory.
    pub(crate) fn of(st: &rustix::fs::Statx) -> Stamp {
        let ns = |t: rustix::fs::StatxTimestamp| time(t.tv_sec, t.tv_nsec);
        Stamp([
            rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
            st.stx_ino,
            ns(st.stx_mtime),
            ns(st.stx_ctime),
        ])
    }

    /// The stamp of the directory at `dir` now (one `statx` by name, no symlink followed at the
    /// end); `None` if it is not a directory or cannot be looked at.
    pub(crate) fn at(dir: &Path) -> Option<Stamp> {
        use rustix::fs::{AtFlags, FileType, CWD};
        let st = rustix::fs::statx(CWD, dir, AtFlags::SYMLINK_NOFOLLOW, MASK).ok()?;
        (FileType::from_raw_mode(st.stx_mode.into()) == FileType::Directory).then(|| Stamp::of(&st))
    }

    /// The stamp of the directory open at `fd`: taken before its entries are read, so that a
    /// change while they are read moves it.
    pub(crate) fn open(fd: impl rustix::fd::AsFd) -> Option<Stamp> {
        let st = rustix::fs::statx(fd, "", rustix::fs::AtFlags::EMPTY_PATH, MASK).ok()?;
        Some(Stamp::of(&st))
    }

    /// Whether a change after the listing could leave these times as they are: the kernel stamps a
    /// directory with a clock that ticks every few milliseconds (a second or two on some
    /// filesystems), so a second change in the tick of the one before keeps the times, and a
    /// listing read in between would be remembered for good. A directory changed that recently
    /// (or in the future: another clock) is read again next time, as git treats a racy index entry.
    pub(crate) fn racy(self, now: u64) -> bool {
        let settled = now.saturating_sub(time(RACY_SECONDS, 0));
        self.0[2] >= settled || self.0[3] >= settled
    }

    /// The four numbers, for a memory file.
    pub(crate) fn raw(self) -> [u64; 4] {
        self.0
    }

    /// A stamp read back from a memory file.
    pub(crate) fn from_raw(raw: [u64; 4]) -> Stamp {
        Stamp(raw)
    }
}

/// A walk's root held open, so that a directory below it is looked up from there: a `statx` by an
/// absolute path walks every component of the root's path again (the kernel's path walk was a tenth
/// of a large workspace's launch). A path not below the root is looked up as it is.
pub(crate) struct Base {
    fd: rustix::fd::OwnedFd,
    root: Vec<u8>,
}

impl Base {
    /// The directory `root`, open (not following a symlink at its end).
    pub(crate) fn open(root: &Path) -> Option<Base> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(root, flags, Mode::empty()).ok()?;
        Some(Base {
            fd,
            root: root.as_os_str().as_bytes().to_vec(),
        })
    }

    /// `statx` of `path` (no symlink followed at its end), from the root when it lies below it.
    pub(crate) fn statx(
        &self,
        path: &Path,
        mask: rustix::fs::StatxFlags,
    ) -> rustix::io::Result<rustix::fs::Statx> {
        use rustix::fs::{AtFlags, CWD};
        let b = path.as_os_str().as_bytes();
        let flags = AtFlags::SYMLINK_NOFOLLOW;
        match b.strip_prefix(self.root.as_slice()) {
            Some([b'/', rel @ ..]) if !rel.is_empty() => {
                rustix::fs::statx(&self.fd, std::ffi::OsStr::from_bytes(rel), flags, mask)
            }
            Some([]) => rustix::fs::statx(&self.fd, "", flags | AtFlags::EMPTY_PATH, mask),
            _ => rustix::fs::statx(CWD, path, flags, mask),
        }
    }

    /// `Stamp::at`, looked up from the root.
    pub(crate) fn stamp(&self, dir: &Path) -> Option<Stamp> {
        use rustix::fs::FileType;
        let st = self.statx(dir, MASK).ok()?;
        (FileType::from_raw_mode(st.stx_mode.into()) == FileType::Directory).then(|| Stamp::of(&st))
    }
}

/// What `statx` must fill for a stamp.
pub(crate) const MASK: rustix::fs::StatxFlags = rustix::fs::StatxFlags::TYPE
    .union(rustix::fs::StatxFlags::INO)
    .union(rustix::fs::StatxFlags::MTIME)
    .union(rustix::fs::StatxFlags::CTIME);

/// How long a directory's times must be in the past for its listing to be remembered.
const RACY_SECONDS: i64 = 2;

/// A time as the stamp holds it: seconds and nanoseconds in one number that sorts as they do.
pub(crate) fn time(sec: i64, nsec: u32) -> u64 {
    u64::from_ne_bytes(sec.to_ne_bytes()) << 30 | u64::from(nsec)
}

/// Now, as `time` holds it.
pub(crate) fn now() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    time(
        i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
        t.subsec_nanos(),
    )
}

/// How a memory differs from the last launch's (`worth_saving`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Changes {
    /// A directory new to the memory, gone from it, or remembered with other contents.
    pub reshaped: bool,
    /// Directories read again whose remembered contents are the same (only their times moved).
    pub restamped: usize,
}

/// Whether the memory changed enough to be written again (a new file costs ~1 ms on a disk
/// mounted with `discard`). Every launch changes a few directories (its placeholders come and go
/// in the workspace's top and in `.git`): re-reading those is cheaper than writing.
pub(crate) fn worth_saving(changes: Changes) -> bool {
    const RESTAMPED: usize = 16;
    changes.reshaped || changes.restamped > RESTAMPED
}

/// Whether a directory's times under `root` are the kernel's own, so that a stamp moves with every
/// change: not on a network or FUSE filesystem (`watch::poll_only_fs`: virtiofs, gRPC FUSE, 9p,
/// NFS, SMB), where a change made on the other side reaches this kernel's view of the times when
/// and as that side sends it. There nothing is remembered: every launch reads everything.
pub(crate) fn exact_times(root: &Path) -> bool {
    crate::watch::poll_only_fs(root).is_none()
}

/// A name for a memory file of one root: its path and its device and inode (a directory made
/// again at the same path is another one). `None` where nothing may be remembered (`exact_times`).
pub(crate) fn key(root: &Path) -> Option<String> {
    use std::hash::{Hash, Hasher};
    if !exact_times(root) {
        return None;
    }
    let stamp = Stamp::at(root)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    root.as_os_str().as_bytes().hash(&mut h);
    stamp.0[..2].hash(&mut h);
    Some(format!("{:016x}", h.finish()))
}

/// Write a memory file: a new file renamed over the old, so a reader (another session's launch)
/// never sees half of one, and two writers leave one whole file.
pub(crate) fn write_whole(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = file.parent().ok_or(std::io::ErrorKind::InvalidInput)?;
    std::fs::create_dir_all(dir)?;
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A memory file's bytes read in order (little-endian numbers, length-prefixed byte strings);
/// `None` from any reader once the bytes run out: the file is not whole, and is not used.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn byte(&mut self) -> Option<u8> {
        let (head, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*head)
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_at_checked(8)?;
        self.0 = rest;
        Some(u64::from_le_bytes(head.try_into().ok()?))
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_changed_in_the_last_seconds_or_ahead_is_racy() {
        let t = now();
        let at = |mtime: u64, ctime: u64| Stamp([1, 2, mtime, ctime]);
        assert!(!at(t - time(3, 0), t - time(3, 0)).racy(t));
        assert!(at(t - time(1, 0), t - time(3, 0)).racy(t));
        assert!(at(t - time(3, 0), t - time(1, 0)).racy(t));
        assert!(at(t + time(60, 0), t - time(3, 0)).racy(t));
    }

    #[test]
    fn a_directory_made_again_at_the_same_path_has_another_key() {
        let d = tempfile::tempdir().unwrap();
        let ws = d.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        // Something in it keeps the inode from being reused at once.
        let first = key(&ws).unwrap();
        assert_eq!(key(&ws), Some(first.clone()));
        std::fs::rename(&ws, d.path().join("old")).unwrap();
        std::fs::create_dir(&ws).unwrap();
        assert_ne!(key(&ws).unwrap(), first);
        assert_eq!(key(&d.path().join("missing")), None);
    }
}
