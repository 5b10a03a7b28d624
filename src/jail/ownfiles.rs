//! Files in the project that are the jail's own: Claude Code's `.claude/settings.local.json`.
//!
//! Guards against two things. "Don't ask again" in a jailed Claude Code saves a permission rule
//! there, and the file can also hold hooks, `env` and `statusLine`: written through to your
//! workspace, it would be read by your unjailed Claude Code — a rule the agent gave itself letting
//! your session run a command unasked, a hook running as you. Sealed read-only (as before), the
//! save fails and the jailed session asks again every time. So the jail has its own copy, one per
//! workspace, kept in the layer store (hidden in the jail): the jailed sessions remember their
//! rules, and your file is never written. The copy starts as yours (your rules apply in the jail
//! as they did) and is the jail's from then on.
//!
//! How Claude Code saves it (2.1.197, measured in its `writeFileSyncAndFlush`): it refuses a
//! symlink there (`allowSymlink` is false for local settings), writes
//! `settings.local.json.tmp.<pid>.<hex>` beside it and renames; when the rename fails with
//! `EBUSY` (among `EXDEV`, `EPERM`, `EEXIST`) it writes the file in place. So `.claude` is a view
//! for the session (`runtimes::Runtime::project_views`: a tmpfs with your entries bound read-only,
//! where the temporary file can be made and is discarded), and the jail's copy is bound writable
//! over the name: the rename meets a mount point (`EBUSY`), the in-place write lands in the copy.

use std::path::{Path, PathBuf};

/// The jail's own files, relative to the workspace, and the view directory each lies in.
pub(crate) const FILES: &[(&str, &str)] = &[(".claude/settings.local.json", ".claude")];

/// Where the jail's copy of `rel` for workspace `ws` lives in the layer store.
pub(crate) fn copy_of(store: &Path, ws: &Path, rel: &str) -> PathBuf {
    use sha2::Digest;
    let key = crate::baseline::hex(&sha2::Sha256::digest(ws.as_os_str().as_encoded_bytes())[..8]);
    let name = Path::new(rel)
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    store.join("project-files").join(key).join(name)
}

/// The jail's own files of this launch: `(copy, path in the workspace)`, for the views made.
pub(crate) fn plan(store: &Path, ws: &Path, views: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    FILES
        .iter()
        .filter(|(_, view)| views.contains(&ws.join(view)))
        .map(|(rel, _)| (copy_of(store, ws, rel), ws.join(rel)))
        .collect()
}

/// Before bwrap starts: each copy exists (0600, yours), made from your file the first time (or
/// `{}` when you have none). Fails closed: a copy that cannot be made stops the launch.
pub(crate) fn prepare(files: &[(PathBuf, PathBuf)]) -> crate::error::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    for (copy, yours) in files {
        let err = |e: std::io::Error| {
            crate::error::Error::io(
                format!(
                    "making the jail's own {} at {} (remove it, or set {})",
                    yours.display(),
                    copy.display(),
                    crate::host::LAYERS_DIR
                ),
                e,
            )
        };
        if let Some(dir) = copy.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(err)?;
        }
        match std::fs::symlink_metadata(copy) {
            Ok(m) if m.is_file() => continue,
            Ok(_) => {
                return Err(err(std::io::Error::other("not a regular file")));
            }
            Err(_) => {}
        }
        // Yours as it is now, read without following a link (a link there is not taken).
        let start = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(yours)
            .and_then(|mut f| {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut v).map(|_| v)
            })
            .unwrap_or_else(|_| b"{}\n".to_vec());
        // Made whole under a temporary name and linked in: a second session starting at the same
        // moment either finds the finished copy or loses the link race (`EEXIST`) and takes the
        // winner's; neither binds a half-written file.
        let tmp = copy.with_file_name(format!(
            ".{}.new.{}.{}",
            copy.file_name()
                .map_or_else(|| "file".into(), |n| n.to_string_lossy()),
            std::process::id(),
            SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&tmp);
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &start))
            .and_then(|()| match std::fs::hard_link(&tmp, copy) {
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
                r => r,
            });
        let _ = std::fs::remove_file(&tmp);
        made.map_err(err)?;
        match std::fs::symlink_metadata(copy) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(err(std::io::Error::other("not a regular file"))),
            Err(e) => return Err(err(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_starts_as_yours_then_is_the_jails_and_is_per_workspace() {
        let t = tempfile::tempdir().unwrap();
        let (store, ws) = (t.path().join("store"), t.path().join("ws"));
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(ws.join(".claude/settings.local.json"), "{\"yours\":1}\n").unwrap();
        let files = plan(&store, &ws, &[ws.join(".claude")]);
        assert_eq!(files.len(), 1);
        assert!(plan(&store, &ws, &[]).is_empty(), "no view, no copy");
        prepare(&files).unwrap();
        let copy = &files[0].0;
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"yours\":1}\n");
        std::fs::write(copy, "{\"jail\":1}\n").unwrap();
        std::fs::write(ws.join(".claude/settings.local.json"), "{\"yours\":2}\n").unwrap();
        prepare(&files).unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"jail\":1}\n");
        let other = copy_of(
            &store,
            &t.path().join("other"),
            ".claude/settings.local.json",
        );
        assert_ne!(&other, copy);
    }

    /// Two sessions of one workspace starting at the same moment (CI's twice-at-once Claude Code
    /// test as an ordinary user met `EEXIST` here): every launcher ends with the one whole copy.
    #[test]
    fn sessions_making_the_copy_at_once_all_get_the_one_copy() {
        for _ in 0..20 {
            let t = tempfile::tempdir().unwrap();
            let (store, ws) = (t.path().join("store"), t.path().join("ws"));
            std::fs::create_dir_all(ws.join(".claude")).unwrap();
            std::fs::write(ws.join(".claude/settings.local.json"), "{\"yours\":1}\n").unwrap();
            let files = plan(&store, &ws, &[ws.join(".claude")]);
            let results: Vec<_> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4).map(|_| s.spawn(|| prepare(&files))).collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(results.iter().all(Result::is_ok), "{results:?}");
            assert_eq!(
                std::fs::read_to_string(&files[0].0).unwrap(),
                "{\"yours\":1}\n"
            );
            let left: Vec<_> = std::fs::read_dir(files[0].0.parent().unwrap())
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert_eq!(left.len(), 1, "{left:?}");
        }
    }
}
