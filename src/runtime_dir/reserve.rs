//! The runtime directory's reserve: space kept back so that a full filesystem cannot cost a record.
//!
//! Guards against a full disk making the quarantine's record or an alert unwritable at the moment a
//! plant is taken. The jail can fill the filesystem the runtime directory lies on when it falls back
//! to `/var/tmp` (the container's disk, where the home layers are too), and any process can fill a
//! shared `/run`. Without space the plant is moved out of reach but its record is never written (no
//! `restore` knows it) and the human's prompt says nothing. So each launch keeps a file of `SIZE`
//! bytes in the runtime directory where it is missing, and a write there that meets `ENOSPC` or
//! `EDQUOT` releases it and is tried once more: the records of one session's end fit many times.

use crate::error::{Error, Result};
use std::path::Path;

/// Far more than one session's records and alerts (each about 1 KiB), little on a tmpfs.
pub(crate) const SIZE: usize = 256 << 10;

/// Make the reserve where it is missing (at launch). Best effort: on a filesystem already full it is
/// not there, and the writes are tried as they are.
pub(crate) fn keep(runtime: &super::RuntimeDir) {
    use std::os::unix::fs::OpenOptionsExt;
    let path = runtime.reserve();
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file() && m.len() >= SIZE as u64) {
        return;
    }
    // Written, not sparse or fallocated: every filesystem then counts it as used.
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &vec![0u8; SIZE]));
    if let Err(e) = made {
        let _ = std::fs::remove_file(&path);
        tracing::warn!(
            "no reserve of space in {} ({e}): a full disk may cost a quarantine record",
            runtime.root().display()
        );
    }
}

/// Whether `e` is a full filesystem or quota.
pub(crate) fn is_full(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// `write()`, and when it fails because the filesystem is full, the reserve released and `write()`
/// once more.
pub(crate) fn write_with_reserve<T>(
    runtime: &Path,
    mut write: impl FnMut() -> Result<T>,
) -> Result<T> {
    match write() {
        Err(Error::Io { source, .. }) if is_full(&source) && release(runtime) => write(),
        r => r,
    }
}

/// Free the reserve (true: there was one to free).
fn release(runtime: &Path) -> bool {
    let path = super::RuntimeDir::new(runtime).reserve();
    let freed = std::fs::remove_file(&path).is_ok();
    if freed {
        tracing::warn!(
            "{} is full: its reserve was released for the records (free space there)",
            runtime.display()
        );
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_filesystem_releases_the_reserve_once_and_writes_again() {
        let t = tempfile::tempdir().unwrap();
        let rt = super::super::RuntimeDir::new(t.path());
        keep(&rt);
        assert_eq!(std::fs::metadata(rt.reserve()).unwrap().len(), SIZE as u64);
        let full = || Error::io("writing", std::io::Error::from_raw_os_error(libc::ENOSPC));
        let mut tries = 0;
        let r = write_with_reserve(t.path(), || {
            tries += 1;
            if tries == 1 {
                Err(full())
            } else {
                Ok(tries)
            }
        });
        assert_eq!(r.unwrap(), 2);
        assert!(!rt.reserve().exists(), "released");
        // No reserve left: the error is the write's own, tried once.
        let mut tries = 0;
        let r = write_with_reserve(t.path(), || -> Result<()> {
            tries += 1;
            Err(full())
        });
        assert!(r.is_err());
        assert_eq!(tries, 1);
        // Another error never releases it.
        keep(&rt);
        let r = write_with_reserve(t.path(), || -> Result<()> {
            Err(Error::io(
                "x",
                std::io::Error::from_raw_os_error(libc::EACCES),
            ))
        });
        assert!(r.is_err());
        assert!(rt.reserve().exists());
    }
}
