//! Quarantine: take a planted executable out of the lookup path without ever losing it.
//!
//! Guards against a planted `~/.local/bin/git` or `.git/hooks/pre-commit` running as the human, and
//! against the quarantine itself doing harm: nothing is deleted (restore is byte-for-byte), nothing is
//! done by path after the first open (the directory and the file are opened without following symlinks
//! and every later step works on those fds; `chmod` by path would follow a symlink to a real binary),
//! and a name swapped between inspection and move is detected by comparing inode numbers.
//!
//! Primary method: `renameat2(RENAME_NOREPLACE)` into the runtime directory (`<runtime>/quarantine/`).
//! Across filesystems (`EXDEV`, the usual case when the runtime directory is on `/run`) the file is
//! neutralised in place: renamed in its own directory to `.<name>.claude-sandbox-q-<id>` (a name
//! nothing looks up) and, for a regular file with a single link, its exec bits dropped through the fd.
//! A hard link's other names keep their mode (changing it would change them too), and running
//! processes are not affected by either method.

// `stat` field types differ between architectures (nlink is u32 on aarch64): keep the casts, which
// convert the kernel's values between their signed and unsigned twins (sizes and times >= 0).
#![allow(
    clippy::unnecessary_cast,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]

use crate::error::{Error, Result};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub(crate) mod config;

/// Files larger than this are moved but not hashed.
pub const HASH_CAP: u64 = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub time: String,
    pub original: PathBuf,
    pub kind: String,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub sha256: Option<String>,
    pub link_target: Option<PathBuf>,
    /// How the bytes were taken out of reach.
    pub method: Method,
    /// Where the bytes are now.
    pub stored_at: PathBuf,
    pub reason: String,
    #[serde(default)]
    pub restored: bool,
    /// A config whose keys were taken out (`config::KIND`): the hash of what was left in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_sha256: Option<String>,
}

/// How a quarantine took effect (stored as `moved`, `neutralised`, `keys-removed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Moved into the runtime directory.
    Moved,
    /// Renamed in place (another filesystem), exec bits dropped.
    Neutralised,
    /// A config's exec-capable keys taken out (`config::KIND`); the original bytes are stored.
    KeysRemoved,
}

/// The mark in the name of a file neutralised in place: `.NAME.claude-sandbox-q-ID`.
pub(crate) const NEUTRALISED_MARK: &str = ".claude-sandbox-q-";

fn qdir(runtime: &Path) -> PathBuf {
    crate::runtime_dir::RuntimeDir::new(runtime).quarantine()
}

fn open_dir(dir: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| Error::io(format!("opening {}", dir.display()), e.into()))
}

/// The directory a file is restored into, made again (0755, each missing component) when it is
/// gone: a PATH directory the session created is removed with its placeholder once the watcher has
/// emptied it, and the undo must still work. Never through a symlink (`open_dir`).
fn open_or_make_dir(dir: &Path) -> Result<OwnedFd> {
    if std::fs::symlink_metadata(dir).is_ok() {
        return open_dir(dir);
    }
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|a| std::fs::symlink_metadata(a).is_err())
        .collect();
    for d in missing.iter().rev() {
        match std::fs::DirBuilder::new().mode(0o755).create(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("making {}", d.display()), e)),
        }
    }
    open_dir(dir)
}

/// Hash a regular file through its fd (capped).
pub fn sha256_fd(fd: &OwnedFd, size: u64) -> Option<String> {
    if size > HASH_CAP {
        return None;
    }
    let mut file = std::fs::File::from(fd.try_clone().ok()?);
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return None,
        }
    }
    let digest = hasher.finalize();
    Some(crate::baseline::hex(&digest))
}

/// Hash a file by path without following a symlink (for baselines and verification).
pub fn sha256_path(path: &Path) -> Option<String> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    sha256_fd(&fd, st.st_size as u64)
}

/// The sha256 of bytes in memory, as the records write it.
pub(crate) fn sha256_bytes(bytes: &[u8]) -> String {
    use sha2::Digest;
    crate::baseline::hex(&sha2::Sha256::digest(bytes))
}

/// Quarantine `dir/name`. `Ok(None)` if it vanished first (another watcher, or the agent, moved it).
// One no-follow, no-replace move and its fallback: split, the fds' invariants would cross functions.
#[allow(clippy::too_many_lines)]
pub fn quarantine(
    runtime: &Path,
    dir: &Path,
    name: &OsStr,
    reason: &str,
) -> Result<Option<Record>> {
    let dirfd = open_dir(dir)?;
    let original = dir.join(name);
    // Open without following: a symlink gives ELOOP and is handled by name only.
    let file = rustix::fs::openat(
        &dirfd,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    );
    let (st, fd) = match file {
        Ok(fd) => match rustix::fs::fstat(&fd) {
            Ok(st) => (st, Some(fd)),
            Err(e) => return Err(Error::io(format!("stat {}", original.display()), e.into())),
        },
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NXIO | rustix::io::Errno::ACCESS) => {
            match rustix::fs::statat(&dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => (st, None),
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(e) => return Err(Error::io(format!("stat {}", original.display()), e.into())),
            }
        }
        Err(e) => {
            return Err(Error::io(
                format!("opening {}", original.display()),
                e.into(),
            ))
        }
    };
    let ftype = rustix::fs::FileType::from_raw_mode(st.st_mode);
    let regular = ftype == rustix::fs::FileType::RegularFile;
    let kind = match ftype {
        rustix::fs::FileType::RegularFile => "file",
        rustix::fs::FileType::Symlink => "symlink",
        rustix::fs::FileType::Directory => "directory",
        _ => "other",
    };
    let link_target = if ftype == rustix::fs::FileType::Symlink {
        rustix::fs::readlinkat(&dirfd, name, Vec::new())
            .ok()
            .map(|t| PathBuf::from(OsStr::from_bytes(t.as_bytes())))
    } else {
        None
    };
    let sha256 = match (&fd, regular) {
        (Some(fd), true) => sha256_fd(fd, st.st_size as u64),
        _ => None,
    };
    let id = crate::alerts::new_id("q");
    let store = qdir(runtime);
    std::fs::create_dir_all(&store)
        .map_err(|e| Error::io("creating the quarantine directory", e))?;
    let store_fd = open_dir(&store)?;
    let data_name = format!("{id}.data");
    let mut record = Record {
        id: id.clone(),
        time: crate::alerts::now_rfc3339(),
        original: original.clone(),
        kind: kind.into(),
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        size: st.st_size as u64,
        mtime: st.st_mtime as i64,
        mtime_nsec: st.st_mtime_nsec as i64,
        dev: st.st_dev as u64,
        ino: st.st_ino as u64,
        nlink: st.st_nlink as u64,
        sha256,
        link_target,
        method: Method::Moved,
        stored_at: store.join(&data_name),
        reason: reason.into(),
        restored: false,
        after_sha256: None,
    };
    match rename_noreplace(&dirfd, name, &store_fd, OsStr::new(&data_name)) {
        Ok(()) => {
            if !same_inode(&store_fd, OsStr::new(&data_name), &record) {
                // Swapped between our open and the rename: put it back and let the caller re-check.
                let _ = rename_noreplace(&store_fd, OsStr::new(&data_name), &dirfd, name);
                return Ok(None);
            }
        }
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(rustix::io::Errno::XDEV) => {
            let mut hidden = b".".to_vec();
            hidden.extend_from_slice(name.as_bytes());
            hidden.extend_from_slice(format!("{NEUTRALISED_MARK}{id}").as_bytes());
            let hidden = OsStr::from_bytes(&hidden);
            match rename_noreplace(&dirfd, name, &dirfd, hidden) {
                Ok(()) => {}
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(e) => {
                    return Err(Error::io(
                        format!("neutralising {}", original.display()),
                        e.into(),
                    ))
                }
            }
            if !same_inode(&dirfd, hidden, &record) {
                let _ = rename_noreplace(&dirfd, hidden, &dirfd, name);
                return Ok(None);
            }
            if let (Some(fd), true, 1) = (&fd, regular, record.nlink) {
                rustix::fs::fchmod(fd, Mode::from_raw_mode(record.mode & !0o111)).map_err(|e| {
                    Error::io(
                        format!("dropping exec bits of {}", original.display()),
                        e.into(),
                    )
                })?;
            }
            record.method = Method::Neutralised;
            record.stored_at = dir.join(hidden);
        }
        Err(e) => {
            return Err(Error::io(
                format!("quarantining {}", original.display()),
                e.into(),
            ))
        }
    }
    // Past this point the bytes are out of reach: a record that cannot be written must not read as
    // "still there" (the watcher would look again, find nothing, and no one would know where it is).
    if let Err(e) = save(runtime, &record) {
        return Err(Error::QuarantineUnrecorded {
            original: record.original,
            stored_at: record.stored_at,
            mode: record.mode,
            cause: e.to_string(),
        });
    }
    Ok(Some(record))
}

fn rename_noreplace(
    from_dir: &OwnedFd,
    from: &OsStr,
    to_dir: &OwnedFd,
    to: &OsStr,
) -> rustix::io::Result<()> {
    match rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE) {
        // Filesystems without RENAME_NOREPLACE: the target is a fresh unique name, so check and rename.
        Err(rustix::io::Errno::INVAL) => {
            match rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(_) => Err(rustix::io::Errno::EXIST),
                Err(_) => rustix::fs::renameat(from_dir, from, to_dir, to),
            }
        }
        other => other,
    }
}

fn same_inode(dir: &OwnedFd, name: &OsStr, r: &Record) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|st| st.st_dev as u64 == r.dev && st.st_ino as u64 == r.ino)
}

fn save(runtime: &Path, r: &Record) -> Result<()> {
    let path = qdir(runtime).join(format!("{}.json", r.id));
    let tmp = path.with_extension("json.tmp");
    crate::runtime_dir::reserve::write_with_reserve(runtime, || {
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(r).expect("record serialises"),
        )
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io("saving the quarantine record", e)
        })
    })
}

pub fn load(runtime: &Path, id: &str) -> Result<Record> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(Error::Usage(format!(
            "{id:?} is not a quarantine id; see `claude-sandbox alerts --all`"
        )));
    }
    let path = qdir(runtime).join(format!("{id}.json"));
    let bytes = std::fs::read(&path).map_err(|e| {
        Error::named_path(
            e,
            || format!("no quarantine record {id}; see `claude-sandbox alerts --all`"),
            || format!("reading the quarantine record {}", path.display()),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| corrupt(&path, e))
}

/// A record that cannot be used: the file it describes is not touched; its bytes are still in the
/// quarantine directory.
fn corrupt(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::io(
        format!(
            "the quarantine record {} is corrupt; nothing was restored (the stored bytes are beside it in {})",
            path.display(),
            path.parent().unwrap_or(Path::new("/")).display()
        ),
        std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string()),
    )
}

/// Put a quarantined file back where it was, byte for byte. Refuses if something now occupies the
/// path, unless `force`, which swaps the two atomically (the occupant is quarantined in its place).
pub fn restore(runtime: &Path, id: &str, force: bool) -> Result<Record> {
    let mut r = load(runtime, id)?;
    if r.restored {
        return Err(Error::Usage(format!(
            "{id} was already restored to {}",
            r.original.display()
        )));
    }
    if r.kind == config::KIND {
        return config::restore(runtime, r, force);
    }
    let record = qdir(runtime).join(format!("{id}.json"));
    let dir = r
        .original
        .parent()
        .ok_or_else(|| corrupt(&record, "its original path has no directory"))?;
    let name = r
        .original
        .file_name()
        .ok_or_else(|| corrupt(&record, "its original path has no name"))?;
    let dirfd = open_or_make_dir(dir)?;
    let stored_dir = open_dir(r.stored_at.parent().unwrap_or(Path::new("/")))?;
    let stored_name = r.stored_at.file_name().unwrap_or_default().to_owned();
    if !same_inode(&stored_dir, &stored_name, &r) {
        return Err(Error::Usage(format!(
            "{} is no longer the quarantined file; not restoring",
            r.stored_at.display()
        )));
    }
    // A writer that was still writing when the file was quarantined finished into the same inode,
    // so what is compared is the stored content before and after the move.
    let stored_hash = if r.kind == "file" {
        sha256_path(&r.stored_at)
    } else {
        None
    };
    match rename_noreplace(&stored_dir, &stored_name, &dirfd, name) {
        Ok(()) => {}
        Err(rustix::io::Errno::EXIST) if force => {
            rustix::fs::renameat_with(&stored_dir, &stored_name, &dirfd, name, RenameFlags::EXCHANGE)
                .map_err(|e| Error::io(format!("swapping {}", r.original.display()), e.into()))?;
            // The occupant now sits where the quarantined file was; record it so it is not lost.
            let mut displaced = r.clone();
            displaced.id = crate::alerts::new_id("q");
            displaced.reason = format!("displaced by `restore --force {id}`");
            if let Ok(st) = rustix::fs::statat(&stored_dir, &stored_name, AtFlags::SYMLINK_NOFOLLOW) {
                displaced.dev = st.st_dev as u64;
                displaced.ino = st.st_ino as u64;
                displaced.mode = st.st_mode & 0o7777;
                displaced.size = st.st_size as u64;
                displaced.sha256 = sha256_path(&r.stored_at);
            }
            displaced.method = Method::Moved;
            save(runtime, &displaced)?;
        }
        Err(rustix::io::Errno::EXIST) => {
            return Err(Error::Usage(format!(
                "{} exists now; move it away first, or `claude-sandbox restore {id} --force` to swap them",
                r.original.display()
            )))
        }
        Err(e) => return Err(Error::io(format!("restoring {}", r.original.display()), e.into())),
    }
    if r.kind == "file" && r.method == Method::Neutralised && r.nlink == 1 {
        let fd = rustix::fs::openat(
            &dirfd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::io(format!("reopening {}", r.original.display()), e.into()))?;
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(r.mode))
            .map_err(|e| Error::io("restoring the mode", e.into()))?;
    }
    if stored_hash.is_some() && sha256_path(&r.original) != stored_hash {
        return Err(Error::Jail(format!(
            "{} was restored but its content changed on the way",
            r.original.display()
        )));
    }
    r.sha256 = stored_hash.or(r.sha256);
    r.restored = true;
    save(runtime, &r)?;
    crate::audit::record(
        crate::audit::Event::new("restore", None)
            .with("id", r.id.clone())
            .with("path", r.original.to_string_lossy().into_owned())
            .with("sha256", r.sha256.clone()),
    );
    Ok(r)
}

/// Every quarantine record, oldest first.
pub fn list(runtime: &Path) -> Vec<Record> {
    let mut out: Vec<Record> = std::fs::read_dir(qdir(runtime))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect();
    out.sort_by(|a: &Record, b| a.time.cmp(&b.time));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn move_and_restore_byte_for_byte_including_mode_and_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let (bin, rt) = (dir.path().join("bin"), dir.path().join("rt"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&rt).unwrap();
        let f = bin.join("git");
        std::fs::write(&f, b"#!/bin/sh\necho evil\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o751)).unwrap();
        let before = std::fs::metadata(&f).unwrap();
        let r = quarantine(&rt, &bin, OsStr::new("git"), "test")
            .unwrap()
            .unwrap();
        assert!(!f.exists());
        assert_eq!(r.method, Method::Moved);
        assert_eq!(
            std::fs::read(&r.stored_at).unwrap(),
            b"#!/bin/sh\necho evil\n"
        );
        let again = quarantine(&rt, &bin, OsStr::new("git"), "test").unwrap();
        assert!(again.is_none(), "a vanished file is not an error");
        std::fs::write(&f, b"occupant").unwrap();
        assert!(restore(&rt, &r.id, false).is_err(), "refuses to overwrite");
        restore(&rt, &r.id, true).unwrap();
        let after = std::fs::metadata(&f).unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"#!/bin/sh\necho evil\n");
        assert_eq!(after.permissions().mode() & 0o7777, 0o751);
        assert_eq!(
            std::os::unix::fs::MetadataExt::mtime(&after),
            std::os::unix::fs::MetadataExt::mtime(&before)
        );
        assert_eq!(
            std::os::unix::fs::MetadataExt::mtime_nsec(&after),
            std::os::unix::fs::MetadataExt::mtime_nsec(&before)
        );
        assert_eq!(
            list(&rt).len(),
            2,
            "the displaced occupant has a record too"
        );
        assert!(restore(&rt, &r.id, false).is_err(), "already restored");
    }

    #[test]
    fn a_symlink_is_moved_as_a_link_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let (bin, rt) = (dir.path().join("bin"), dir.path().join("rt"));
        std::fs::create_dir_all(&bin).unwrap();
        let target = dir.path().join("real");
        std::fs::write(&target, b"real").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink(&target, bin.join("python3")).unwrap();
        let r = quarantine(&rt, &bin, OsStr::new("python3"), "t")
            .unwrap()
            .unwrap();
        assert_eq!(r.kind, "symlink");
        assert_eq!(r.link_target.as_deref(), Some(target.as_path()));
        assert_eq!(
            std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
            0o755,
            "target untouched"
        );
        restore(&rt, &r.id, false).unwrap();
        assert_eq!(std::fs::read_link(bin.join("python3")).unwrap(), target);
    }
}

#[cfg(test)]
mod exdev_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The runtime directory on another filesystem (tmpfs /dev/shm vs the disk): neutralise in place.
    #[test]
    fn across_filesystems_the_file_is_neutralised_in_place_and_restored() {
        let disk = tempfile::tempdir_in("/var/tmp").unwrap();
        let shm =
            tempfile::tempdir_in("/dev/shm").expect("/dev/shm (tmpfs) is needed for this test");
        let bin = disk.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let f = bin.join("ls");
        std::fs::write(&f, b"evil").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = quarantine(shm.path(), &bin, OsStr::new("ls"), "t")
            .unwrap()
            .unwrap();
        assert_eq!(r.method, Method::Neutralised);
        assert!(!f.exists());
        assert!(r
            .stored_at
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".ls.claude-sandbox-q-"));
        assert_eq!(
            std::fs::metadata(&r.stored_at)
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o644
        );
        restore(shm.path(), &r.id, false).unwrap();
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o755
        );
        assert_eq!(std::fs::read(&f).unwrap(), b"evil");
    }
}
