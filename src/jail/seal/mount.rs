//! The mounts themselves, made inside the jail's mount namespace by the sealer (`super`): binds
//! taken from the host's tree through the staging directory, symlinks pinned over files, private
//! and hiding tmpfs, and the attributes (read-only, nosuid, nodev) each mount gets.

use super::overlay::Making;
use super::SealError;
use crate::jail::layout::{LINK_SCRATCH, STAGE};
use crate::jail::mounts::Mount;
use crate::jail::policy::LayerMount;
use std::ffi::CString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

/// Make every mount, in order; stop at the first failure.
pub fn apply(ops: &[Mount]) -> Result<(), SealError> {
    // The staging tree, opened once for all the binds taken from it; closed before it goes.
    let mut stage: Option<OwnedFd> = None;
    // Every overlay is made at once, on threads (each waits ~1.5-2.5 ms in the kernel, mostly not
    // on a CPU), while the mounts before it are made; each is attached in its place.
    let mut overlays = Making::start(ops, STAGE)?;
    for (i, op) in ops.iter().enumerate() {
        match op {
            Mount::Layer(l) if l.mount() == LayerMount::Overlay => overlays.attach(i, &l.path)?,
            Mount::Unstage => {
                overlays.done();
                apply_one(op, &mut stage)?;
            }
            _ => apply_one(op, &mut stage)?,
        }
    }
    overlays.done();
    Ok(())
}

/// The host's tree as bwrap bound it at `STAGE` (see `Mount::Bind`).
fn open_stage() -> Result<OwnedFd, SealError> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(
        STAGE,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| SealError::Mount {
        path: STAGE.into(),
        what: "opening the host's tree",
        err: e.into(),
    })
}

fn apply_one(op: &Mount, stage: &mut Option<OwnedFd>) -> Result<(), SealError> {
    use rustix::mount::{mount, mount_bind, mount_bind_recursive, MountFlags};
    let fail = |path: &Path, what: &'static str| {
        let path = path.to_path_buf();
        move |e: rustix::io::Errno| SealError::Mount {
            path,
            what,
            err: e.into(),
        }
    };
    let gone = |p: &Path| std::fs::symlink_metadata(p).is_err();
    let empty_ro_tmpfs = |p: &Path| {
        mount(
            "tmpfs",
            p,
            "tmpfs",
            MountFlags::RDONLY | MountFlags::NOSUID | MountFlags::NODEV,
            c"mode=0755",
        )
        .map_err(fail(p, "mounting an empty read-only tmpfs"))
    };
    match op {
        Mount::Bind { src, dst, writable } => {
            let stage = match stage {
                Some(fd) => fd,
                None => stage.insert(open_stage()?),
            };
            bind_from_host(stage.as_fd(), src, dst, *writable)
        }
        Mount::Layer(l) => {
            let (src, writable) = match l.mount() {
                LayerMount::Overlay => {
                    return Making::start(std::slice::from_ref(op), STAGE)
                        .and_then(|mut m| m.attach(0, &l.path));
                }
                LayerMount::Own => (l.own_dir(), true),
                LayerMount::Yours => (l.path.as_path(), false),
            };
            let stage = match stage {
                Some(fd) => fd,
                None => stage.insert(open_stage()?),
            };
            bind_from_host(stage.as_fd(), src, &l.path, writable)
        }
        Mount::Symlink { target, dst } => {
            rustix::fs::symlink(target, dst).map_err(fail(dst, "making the symlink"))
        }
        Mount::LinkOver { target, dst } => link_over(target, dst),
        Mount::Tmpfs(p) => {
            make_dirs(p, p, "making the mount point")?;
            mount(
                "tmpfs",
                p,
                "tmpfs",
                MountFlags::NOSUID | MountFlags::NODEV,
                c"mode=0755",
            )
            .map_err(fail(p, "mounting a tmpfs"))
        }
        // One mount, not the ones on top of it (as bwrap's `--remount-ro`).
        Mount::RemountReadOnly(p) => set_path_attrs(p, 0, true),
        Mount::Unstage => {
            *stage = None;
            rustix::mount::unmount(STAGE, rustix::mount::UnmountFlags::DETACH)
                .map_err(fail(Path::new(STAGE), "unmounting the host's tree"))?;
            let _ = std::fs::remove_dir(STAGE);
            Ok(())
        }
        Mount::Anchor(p) => {
            mount_bind_recursive(p, p).map_err(fail(p, "binding over itself"))?;
            restrict(p, false)
        }
        // A copy of the sealed directory's part, made writable (that one mount only: nothing is
        // below it yet but what lies below it on the host, which stays as it was made).
        Mount::Writable(p) => {
            mount_bind_recursive(p, p).map_err(fail(p, "binding over itself"))?;
            restrict(p, false)?;
            clear_read_only(p)
        }
        // Not there in the jail (under a private tmpfs): hidden already.
        Mount::Hide(p) if gone(p) => Ok(()),
        Mount::ReadOnly(p) => {
            mount_bind_recursive(p, p).map_err(fail(p, "binding over itself"))?;
            restrict(p, true)
        }
        Mount::MaskFile(p) if gone(p) => Ok(()),
        Mount::MaskFile(p) => {
            mount_bind("/dev/null", p).map_err(fail(p, "binding /dev/null over it"))?;
            restrict(p, true)
        }
        Mount::MaskDir(p) if gone(p) => Ok(()),
        Mount::Hide(p) | Mount::MaskDir(p) => empty_ro_tmpfs(p),
        // bwrap's, before the sealer's part of the list.
        Mount::Stage => Ok(()),
    }
}

/// `Mount::Bind`: clone the host's `src` (resolved inside `STAGE` as if it were `/`), give the copy
/// bwrap's flags, and attach it at `dst`.
fn bind_from_host(
    stage: std::os::fd::BorrowedFd<'_>,
    src: &Path,
    dst: &Path,
    writable: bool,
) -> Result<(), SealError> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::mount::OpenTreeFlags;
    let fail = |what: &'static str| {
        move |e: rustix::io::Errno| SealError::Mount {
            path: dst.to_path_buf(),
            what,
            err: e.into(),
        }
    };
    let rel = src.strip_prefix("/").unwrap_or(src);
    let source = rustix::fs::openat2(
        stage,
        rel,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(fail("finding the source on the host"))?;
    let tree = rustix::mount::open_tree(
        &source,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_RECURSIVE
            | OpenTreeFlags::AT_EMPTY_PATH,
    )
    .map_err(fail("copying the source's mounts (open_tree)"))?;
    let flags = libc::AT_EMPTY_PATH | libc::AT_RECURSIVE;
    set_attrs(tree.as_fd(), c"", flags, !writable).map_err(|err| SealError::Mount {
        path: dst.to_path_buf(),
        what: "setting nosuid, nodev and read-only (mount_setattr)",
        err,
    })?;
    if std::fs::symlink_metadata(dst).is_err() {
        // Missing parents too, as bwrap makes them (a workspace under /dev/shm: the jail's /dev is
        // a fresh tmpfs).
        if let Some(parent) = dst.parent() {
            make_dirs(parent, dst, "making the mount point's parents")?;
        }
        let is_dir = rustix::fs::fstat(&source)
            .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir())
            .map_err(fail("reading the source"))?;
        if is_dir {
            rustix::fs::mkdir(dst, Mode::from_raw_mode(0o755))
                .map_err(fail("making the mount point"))?;
        } else {
            rustix::fs::open(
                dst,
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .map_err(fail("making the mount point"))?;
        }
    }
    attach(&tree, dst).map_err(fail("attaching the copy (move_mount)"))
}

/// `Mount::LinkOver`: make the link in the jail's private `/tmp`, take it as a mount of its own
/// (not following it), and attach that over `dst` (not following `dst` either).
fn link_over(target: &Path, dst: &Path) -> Result<(), SealError> {
    use rustix::mount::OpenTreeFlags;
    let fail = |what: &'static str| {
        move |e: rustix::io::Errno| SealError::Mount {
            path: dst.to_path_buf(),
            what,
            err: e.into(),
        }
    };
    let link = Path::new(LINK_SCRATCH);
    let _ = std::fs::remove_file(link);
    rustix::fs::symlink(target, link).map_err(fail("making the link"))?;
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        link,
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_SYMLINK_NOFOLLOW,
    )
    .map_err(fail("taking the link as a mount (open_tree)"))?;
    set_attrs(tree.as_fd(), c"", libc::AT_EMPTY_PATH, true).map_err(|err| SealError::Mount {
        path: dst.to_path_buf(),
        what: "setting nosuid, nodev and read-only (mount_setattr)",
        err,
    })?;
    attach(&tree, dst).map_err(fail("attaching the link (move_mount)"))?;
    // Only now: a mount whose root was unlinked cannot be attached (ENOENT).
    let _ = std::fs::remove_file(link);
    Ok(())
}

/// `mkdir -p` with bwrap's mode (0755), a failure reported against `for_mount`.
fn make_dirs(dir: &Path, for_mount: &Path, what: &'static str) -> Result<(), SealError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|err| SealError::Mount {
            path: for_mount.to_path_buf(),
            what,
            err,
        })
}

/// `struct mount_attr` from linux/mount.h.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// Give the mount at `p` and every mount below it the flags bwrap gives its binds (`mount_setattr(2)`,
/// Linux 5.12+): always nosuid and nodev (so `/dev/null` bound over a file cannot even be opened,
/// exactly as with bwrap's `--ro-bind`), and read-only when asked. Other flags stay as inherited.
fn restrict(p: &Path, read_only: bool) -> Result<(), SealError> {
    set_path_attrs(p, libc::AT_RECURSIVE, read_only)
}

/// `set_attrs` on a path (never following a final symlink); `flags` adds `AT_RECURSIVE` or not.
fn set_path_attrs(p: &Path, flags: libc::c_int, read_only: bool) -> Result<(), SealError> {
    let fail = |err| SealError::Mount {
        path: p.to_path_buf(),
        what: "setting nosuid, nodev and read-only (mount_setattr)",
        err,
    };
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| fail(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    set_attrs(
        rustix::fs::CWD,
        &c,
        libc::AT_SYMLINK_NOFOLLOW | flags,
        read_only,
    )
    .map_err(fail)
}

/// The mount at `p` (not those below it) writable: a mount this namespace made, so its read-only
/// flag is not locked.
fn clear_read_only(p: &Path) -> Result<(), SealError> {
    let fail = |err| SealError::Mount {
        path: p.to_path_buf(),
        what: "making it writable (mount_setattr)",
        err,
    };
    let c = CString::new(p.as_os_str().as_bytes())
        .map_err(|_| fail(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    let attr = MountAttr {
        attr_set: 0,
        attr_clr: MOUNT_ATTR_RDONLY,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid NUL-terminated path and a correctly sized, initialised mount_attr.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            rustix::fs::CWD.as_raw_fd(),
            c.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW.unsigned_abs(),
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(fail(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// `mount_setattr(2)` on `path` relative to `dir` (`flags`: `AT_RECURSIVE` and the like): nosuid and
/// nodev, and read-only when asked. Nothing is cleared: a writable bind copies a writable source.
fn set_attrs(
    dir: std::os::fd::BorrowedFd<'_>,
    path: &std::ffi::CStr,
    flags: libc::c_int,
    read_only: bool,
) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_NOSUID
            | MOUNT_ATTR_NODEV
            | if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a valid NUL-terminated path and a correctly sized, initialised mount_attr.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dir.as_raw_fd(),
            path.as_ptr(),
            flags.unsigned_abs(), // AT_* bits, non-negative
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Attach the detached mount `tree` (from `open_tree`) at `dst`.
fn attach(tree: &OwnedFd, dst: &Path) -> rustix::io::Result<()> {
    rustix::mount::move_mount(
        tree,
        "",
        rustix::fs::CWD,
        dst,
        rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )
}
