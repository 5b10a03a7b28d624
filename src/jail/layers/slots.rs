//! Upper directories for sessions at once: the kernel only warns when two overlays share an upper
//! directory (and files then change under each other), so each session that runs beside another
//! takes a slot of its own (`upper.N`, `work.N`, locked by `.overlay.N`), with the shared upper
//! directory (slot 0) read-only beneath it, above yours. What it writes is folded into the shared
//! upper directory when no overlay uses that as its upper: at its own end if slot 0 is free then,
//! else by the next session that takes slot 0, before its overlay is made.
//!
//! Guards against the second session's installs failing (`~/.local` read-only when it could not
//! share the first's overlay) and against what it wrote being lost or never seen again. The fold
//! keeps overlayfs's own marks: a whiteout (a character device 0/0) and an opaque directory
//! (`user.overlay.opaque`) replace what the shared upper directory has there; a plain directory is
//! merged into it, entry by entry. A session that reads the shared upper directory while another's
//! fold writes it may see the change late (overlayfs does not promise more for a lower layer).

use std::path::{Path, PathBuf};

/// Slots besides the shared one: sessions beyond this many at once get no overlay (a cache the
/// jail's separate directory, your data read-only), as every session did before slots.
pub(super) const SLOTS: usize = 8;

/// The lock file of slot `n` in the store.
fn lock_name(n: usize) -> String {
    if n == 0 {
        ".overlay".into()
    } else {
        format!(".overlay.{n}")
    }
}

/// A layer's upper and work directories in slot `n` (`dir` is the layer's directory in the store).
pub(super) fn dirs(dir: &Path, n: usize) -> (PathBuf, PathBuf) {
    if n == 0 {
        (dir.join("upper"), dir.join("work"))
    } else {
        (
            dir.join(format!("upper.{n}")),
            dir.join(format!("work.{n}")),
        )
    }
}

/// Lock slot `n` without waiting: `None` when another session holds it.
pub(super) fn try_lock(store: &Path, n: usize) -> std::io::Result<Option<std::fs::File>> {
    let f = super::open_lock(&store.join(lock_name(n)))?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(f)),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The first free slot and its lock.
pub(super) fn take(store: &Path) -> std::io::Result<Option<(usize, std::fs::File)>> {
    for n in 0..SLOTS {
        if let Some(f) = try_lock(store, n)? {
            return Ok(Some((n, f)));
        }
    }
    Ok(None)
}

/// With slot 0 held: fold every free slot's upper directories into the shared ones (`dirs`: the
/// layers' directories in the store). A slot some session holds is left for later.
pub(super) fn fold_free(store: &Path, dirs_of_layers: &[PathBuf]) {
    for n in 1..SLOTS {
        let any = dirs_of_layers
            .iter()
            .any(|d| std::fs::symlink_metadata(dirs(d, n).0).is_ok());
        if !any {
            continue;
        }
        if let Ok(Some(_held)) = try_lock(store, n) {
            for d in dirs_of_layers {
                fold_slot(d, n);
            }
        }
    }
}

/// Fold slot `n` of one layer into its shared upper directory (both locks held by the caller).
pub(super) fn fold_slot(dir: &Path, n: usize) {
    let (src, _) = dirs(dir, n);
    let (dst, _) = dirs(dir, 0);
    if std::fs::symlink_metadata(&src).is_err() {
        return;
    }
    if let Err(e) = std::fs::create_dir_all(&dst).and_then(|()| fold(&src, &dst)) {
        // Kept in its slot: the next fold tries again; nothing is lost.
        tracing::info!(
            "{}: not folded into {} yet: {e}",
            src.display(),
            dst.display()
        );
    }
}

/// Whether `p` is a directory overlayfs marked opaque (it hides what lies beneath).
fn opaque(p: &Path) -> bool {
    let mut buf = [0u8; 4];
    rustix::fs::lgetxattr(p, "user.overlay.opaque", &mut buf).is_ok_and(|n| buf[..n] == *b"y")
}

/// Move everything in `src` into `dst` as an overlay above `dst` would show it.
pub(super) fn fold(src: &Path, dst: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let (s, d) = (e.path(), dst.join(e.file_name()));
        let s_dir = e.file_type()?.is_dir();
        let d_meta = std::fs::symlink_metadata(&d).ok();
        let d_dir = d_meta.as_ref().is_some_and(std::fs::Metadata::is_dir);
        if s_dir && d_dir && !opaque(&s) {
            fold(&s, &d)?;
            let _ = std::fs::remove_dir(&s);
            continue;
        }
        if d_dir {
            super::remove_tree(&d)?;
        } else if d_meta.is_some() {
            std::fs::remove_file(&d)?;
        }
        std::fs::rename(&s, &d)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn a_fold_merges_plain_directories_and_replaces_the_rest() {
        let root = tempfile::tempdir().unwrap();
        let (src, dst) = (root.path().join("src"), root.path().join("dst"));
        for d in [&src, &dst] {
            std::fs::create_dir_all(d.join("lib/a")).unwrap();
            std::fs::create_dir_all(d.join("opaque")).unwrap();
        }
        std::fs::write(dst.join("lib/a/old"), "0").unwrap();
        std::fs::write(dst.join("lib/a/same"), "0").unwrap();
        std::fs::write(dst.join("opaque/hidden"), "0").unwrap();
        std::fs::write(src.join("lib/a/same"), "1").unwrap();
        std::fs::write(src.join("lib/a/new"), "1").unwrap();
        std::fs::write(src.join("opaque/seen"), "1").unwrap();
        std::fs::create_dir(dst.join("was-a-dir")).unwrap();
        std::fs::write(dst.join("was-a-dir/f"), "0").unwrap();
        std::fs::write(src.join("was-a-dir"), "now a file").unwrap();
        let opaque_set = rustix::fs::lsetxattr(
            src.join("opaque"),
            "user.overlay.opaque",
            b"y",
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok();
        fold(&src, &dst).unwrap();
        let read = |p: &str| std::fs::read_to_string(dst.join(p)).ok();
        assert_eq!(read("lib/a/old").as_deref(), Some("0"));
        assert_eq!(read("lib/a/same").as_deref(), Some("1"));
        assert_eq!(read("lib/a/new").as_deref(), Some("1"));
        assert_eq!(read("opaque/seen").as_deref(), Some("1"));
        assert_eq!(read("was-a-dir").as_deref(), Some("now a file"));
        if opaque_set {
            assert_eq!(read("opaque/hidden"), None, "an opaque directory replaces");
            assert!(opaque(&dst.join("opaque")));
        }
        assert_eq!(
            std::fs::read_dir(&src).unwrap().count(),
            0,
            "everything moved"
        );
    }

    #[test]
    fn a_fold_carries_a_whiteout_over_what_it_hides() {
        let root = tempfile::tempdir().unwrap();
        let (src, dst) = (root.path().join("src"), root.path().join("dst"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::create_dir_all(dst.join("gone")).unwrap();
        std::fs::write(dst.join("gone/f"), "0").unwrap();
        let made = rustix::fs::mknodat(
            rustix::fs::CWD,
            src.join("gone"),
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            0,
        );
        if made.is_err() {
            // An ordinary user outside a user namespace cannot make one (overlayfs in the jail can).
            eprintln!("\n*** a_fold_carries_a_whiteout…: NOT RUN here — mknod of a whiteout refused ***\n");
            return;
        }
        fold(&src, &dst).unwrap();
        let m = std::fs::symlink_metadata(dst.join("gone")).unwrap();
        assert!(m.file_type().is_char_device());
    }

    #[test]
    fn slots_are_taken_in_order_and_freed_with_their_lock() {
        let root = tempfile::tempdir().unwrap();
        let (n0, l0) = take(root.path()).unwrap().unwrap();
        let (n1, l1) = take(root.path()).unwrap().unwrap();
        assert_eq!((n0, n1), (0, 1));
        drop(l0);
        // Another test's child between its fork and its exec holds a copy of every descriptor
        // for that moment (CLOEXEC acts at exec): freed means free within it, not at once.
        let t0 = std::time::Instant::now();
        let again = loop {
            let (n, l) = take(root.path()).unwrap().unwrap();
            if n == 0 || t0.elapsed() > std::time::Duration::from_secs(2) {
                break n;
            }
            drop(l);
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(again, 0);
        drop(l1);
        assert_eq!(
            dirs(Path::new("/s/cache"), 2).0,
            Path::new("/s/cache/upper.2")
        );
    }
}
