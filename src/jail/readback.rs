//! Reading back a file the jail may have written or replaced: the jail's `~/.claude.json` and yours
//! (`home`), a git config and the jail's copy of it (`gitcopy`), a diversion's registry.
//!
//! Guards against the launcher, which runs outside the jail, being led by what the jail planted: a
//! symlink at the last component is never followed (it could name a file of yours elsewhere, which
//! a merge would then write), a FIFO never waited on, and at most `MAX` bytes are read.

use std::path::Path;

/// The largest file read back (a real `~/.claude.json` is well under a megabyte; a huge one is a
/// denial of service on the merge, not state).
pub(crate) const MAX: u64 = 32 << 20;

/// Why a file the launcher copies in or out was not taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error("it does not exist")]
    Missing,
    #[error("it is a symbolic link (never followed)")]
    Symlink,
    #[error("it is not a regular file")]
    NotRegular,
    #[error("it is larger than {} MiB", MAX >> 20)]
    TooLarge,
    #[error("{0}")]
    Io(std::io::Error),
    #[error("it is not a JSON object: {0}")]
    NotJson(String),
}

/// Read a regular file without following a symlink at its last component or blocking on a FIFO,
/// and at most `MAX` bytes of it. Returns the bytes and the permission bits.
pub(crate) fn read_regular(path: &Path) -> std::result::Result<(Vec<u8>, u32), Refused> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => Refused::Missing,
        rustix::io::Errno::LOOP => Refused::Symlink,
        e => Refused::Io(e.into()),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| Refused::Io(e.into()))?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(Refused::NotRegular);
    }
    if u64::try_from(st.st_size).unwrap_or(u64::MAX) > MAX {
        return Err(Refused::TooLarge);
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(Refused::Io)?;
    if bytes.len() as u64 > MAX {
        return Err(Refused::TooLarge);
    }
    Ok((bytes, st.st_mode & 0o7777))
}

/// Open a file the launcher reads as a tool outside reads it (a symlink followed, as git follows
/// one at `.git/index` or an include), but only a regular one, never waiting on a FIFO the jail put
/// there, and read no further than its size when opened (a file that grows while it is read is not
/// read forever).
pub(crate) fn open_as_tools_do(path: &Path) -> std::io::Result<std::io::Take<std::fs::File>> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&fd)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(std::io::Error::other("not a regular file"));
    }
    let size = u64::try_from(st.st_size).unwrap_or(0);
    Ok(std::fs::File::from(fd).take(size))
}

/// `open_as_tools_do`, read whole.
pub(crate) fn read_as_tools_do(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_as_tools_do(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}
