//! The sealer's overlays (`mounts::Mount::Layer`, where the layer is an overlay), made early and
//! attached in order.
//!
//! Guards against the launch waiting on each overlay in turn: making one waits ~1.5–2.5 ms in the
//! kernel (overlayfs sets up its work directory on the disk), mostly off a CPU, and a layer inside
//! another (`~/.cargo/registry` in `~/.cargo`) used to wait for its parent's mount first. Making a
//! detached overlay (`fsopen` … `fsmount`) needs neither its mount point nor any other mount, so
//! every overlay is made on a thread of its own as soon as the sealer is in the jail, while the
//! sealer binds `$HOME` and its entries; each is attached (`move_mount`) where the ops put it, parents
//! first, exactly as before. Nothing is attached early, and a failure fails the seal as before.
//!
//! Paths are given relative to the staging tree (the sealer's working directory while any overlay is
//! being made), so the jail's mount table does not name the staging tree, which is gone before the
//! command runs. `layers::overlay_possible` kept `,` `:` `\` and newlines out of them.

use super::SealError;
use crate::jail::mounts::Mount;
use crate::jail::policy::LayerMount;
use rustix::fd::OwnedFd;
use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::thread::JoinHandle;

/// The overlays being made, by their op's position.
#[derive(Default)]
pub(crate) struct Making(HashMap<usize, JoinHandle<rustix::io::Result<OwnedFd>>>);

fn fail(dst: &Path, what: &'static str, err: std::io::Error) -> SealError {
    SealError::Mount {
        path: dst.to_path_buf(),
        what,
        err,
    }
}

/// A session beside another sees the shared upper directory `under` above its lower one. Where
/// `under` lies inside that lower directory (the default store, `~/.local/state/…`, in the
/// `~/.local` layer), overlayfs refuses the two as lower layers ("overlapping lowerdir path",
/// ELOOP), so `under` is given through a read-only overlay of its own, mounted at a scratch path
/// whose ancestors are no layer's: the path to put in `lowerdir` (absolute), or `under` as it is.
/// The session's overlay keeps its own clone of it; `Making::done` unmounts the scratch one.
fn above(under: String, lower: &str, i: usize) -> rustix::io::Result<String> {
    use rustix::mount::{
        fsconfig_create, fsconfig_set_flag, fsconfig_set_string, fsmount, fsopen, move_mount,
        FsMountFlags, FsOpenFlags, MountAttrFlags, MoveMountFlags,
    };
    if !Path::new(&under).starts_with(lower) {
        return Ok(under);
    }
    let dir = format!("{}/{i}", crate::jail::layout::UNDER_SCRATCH);
    let empty = format!("{dir}.empty");
    for d in [&dir, &empty] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO))?;
    }
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    // Two lower layers are the least a read-only overlay takes: the second is empty.
    fsconfig_set_string(&fs, "lowerdir", format!("{under}:{empty}"))?;
    fsconfig_set_flag(&fs, "userxattr")?;
    fsconfig_create(&fs)?;
    let tree = fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV,
    )?;
    move_mount(
        &tree,
        "",
        rustix::fs::CWD,
        &dir,
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
    )?;
    Ok(dir)
}

/// Make one overlay, detached: the host's `lower` read-only beneath the jail's `upper` (paths
/// relative to the working directory), nosuid and nodev.
fn make(lower: String, upper: String, work: String) -> rustix::io::Result<OwnedFd> {
    use rustix::mount::{
        fsconfig_create, fsconfig_set_flag, fsconfig_set_string, fsmount, fsopen, FsMountFlags,
        FsOpenFlags, MountAttrFlags,
    };
    let fs = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    fsconfig_set_string(&fs, "lowerdir", lower)?;
    fsconfig_set_string(&fs, "upperdir", upper)?;
    fsconfig_set_string(&fs, "workdir", work)?;
    fsconfig_set_flag(&fs, "userxattr")?;
    fsconfig_create(&fs)?;
    fsmount(
        &fs,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
}

impl Making {
    /// Start making every overlay of `ops`; the working directory becomes `stage` until `done`.
    pub(crate) fn start(ops: &[Mount], stage: &str) -> Result<Making, SealError> {
        let mut making = Making::default();
        let rel = |p: &Path| p.strip_prefix("/").unwrap_or(p).display().to_string();
        for (i, op) in ops.iter().enumerate() {
            let Mount::Layer(l) = op else {
                continue;
            };
            if l.mount() != LayerMount::Overlay {
                continue;
            }
            if making.0.is_empty() {
                std::env::set_current_dir(stage)
                    .map_err(|e| fail(Path::new(stage), "entering the host's tree", e))?;
            }
            // A session beside another: the shared upper directory above yours, read-only.
            let under = l.under.as_ref().map(|u| rel(u));
            let (lower, upper, work) = (rel(&l.lower), rel(&l.upper), rel(&l.work));
            let thread = std::thread::Builder::new()
                .spawn(move || {
                    let lower = match under {
                        Some(under) => format!("{}:{lower}", above(under, &lower, i)?),
                        None => lower,
                    };
                    make(lower, upper, work)
                })
                .map_err(|e| fail(Path::new(stage), "starting a thread for an overlay", e))?;
            making.0.insert(i, thread);
        }
        Ok(making)
    }

    /// Attach the overlay of op `i` at `dst` (its mount point made when missing).
    pub(crate) fn attach(&mut self, i: usize, dst: &Path) -> Result<(), SealError> {
        use rustix::mount::{move_mount, MoveMountFlags};
        let Some(thread) = self.0.remove(&i) else {
            return Err(fail(
                dst,
                "mounting the layer's overlay",
                std::io::ErrorKind::NotFound.into(),
            ));
        };
        if std::fs::symlink_metadata(dst).is_err() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dst)
                .map_err(|e| fail(dst, "making the mount point", e))?;
        }
        let tree = thread
            .join()
            .unwrap_or(Err(rustix::io::Errno::IO))
            .map_err(|e| fail(dst, "mounting the layer's overlay", e.into()))?;
        move_mount(
            &tree,
            "",
            rustix::fs::CWD,
            dst,
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .map_err(|e| fail(dst, "attaching the layer's overlay (move_mount)", e.into()))?;
        if self.0.is_empty() {
            let _ = std::env::set_current_dir("/");
        }
        Ok(())
    }

    /// Wait for any overlay not attached (there is none when the ops are well formed) and leave
    /// the staging tree: called before it is unmounted.
    pub(crate) fn done(&mut self) {
        for (_, t) in self.0.drain() {
            let _ = t.join();
        }
        let _ = std::env::set_current_dir("/");
        // The overlays `above` made hold their own clones: the scratch mounts go before the
        // command runs (nothing of them is left in the jail's `/tmp`).
        let scratch = Path::new(crate::jail::layout::UNDER_SCRATCH);
        if let Ok(entries) = std::fs::read_dir(scratch) {
            for e in entries.flatten() {
                let _ = rustix::mount::unmount(e.path(), rustix::mount::UnmountFlags::DETACH);
                let _ = std::fs::remove_dir(e.path());
            }
            let _ = std::fs::remove_dir(scratch);
        }
    }
}
