//! The jail's own copies of entry points an agent saves its choices in: Claude Code's
//! `.claude/settings.local.json` in the project, and in `$HOME` Gemini CLI's
//! `~/.gemini/settings.json` and Codex's `~/.codex/config.toml` (`runtimes::StateEntry::jails_own`).
//!
//! Guards against two things. Each file is read by your unjailed agent and can run code as you:
//! hooks, `env`, `statusLine`, MCP server commands, Codex's `notify`, and "don't ask again" rules
//! or a folder's trust that let your session run a command unasked. Written through, a jailed agent
//! would plant them there. Sealed read-only (as before), every save fails: Claude Code asks again
//! every time, Gemini CLI cannot keep the auth method chosen, Codex asks to trust the folder at
//! every start. So the jail has its own copy, kept across sessions where nothing outside reads it:
//! the jailed sessions remember what they saved, and your file is never written.
//!
//! **Yours changed since.** The copy is yours as it was when it was made, plus what the jail saved
//! since. When your file is no longer what the copy was made from (you edited it outside, or made
//! or removed it), the copy is made anew from yours: your current settings apply in the jail, and
//! what the jail saved is dropped (the agent asks once more). Kept instead, the copy would go on
//! running in the jail a hook or MCP server you have since removed, and ignore a key you changed;
//! merged key by key, it would be a file neither you nor the agent wrote, in three formats. Losing
//! a saved choice costs one question. What the copy was made from is recorded by its hash in the
//! layer store (hidden in the jail: the jail cannot make its copy look current). A copy older than
//! the record (made by a version that kept none) is taken as made from yours as it is now.
//!
//! How each is saved, and so where the copy lives. Claude Code (2.1.197, measured in its
//! `writeFileSyncAndFlush`) refuses a symlink there (`allowSymlink` is false for local settings),
//! writes `settings.local.json.tmp.<pid>.<hex>` beside it and renames; when the rename fails with
//! `EBUSY` (among `EXDEV`, `EPERM`, `EEXIST`) it writes the file in place. So `.claude` is a view
//! for the session (`runtimes::Runtime::project_views`: a tmpfs with your entries bound read-only,
//! where the temporary file can be made and is discarded), and the jail's copy (in the layer store)
//! is bound writable over the name: the rename meets a mount point (`EBUSY`), the in-place write
//! lands in the copy. In `$HOME` the state directory is already the jail's own (`jail::statedir`),
//! so the copy is simply a file in it, and both ways of saving work: Gemini CLI 0.61.0 writes it in
//! place (`O_WRONLY|O_CREAT|O_TRUNC`), Codex 0.171.0 writes `.tmpXXXXXX` beside it and renames.

use std::path::{Path, PathBuf};

/// The jail's own files in the project, relative to the workspace, and the view directory each
/// lies in.
pub(crate) const FILES: &[(&str, &str)] = &[(".claude/settings.local.json", ".claude")];

/// The largest file of yours a copy is made from (settings files are kilobytes).
const MAX: u64 = 16 << 20;

/// Where the jail's copy of `rel` for workspace `ws` lives in the layer store.
pub(crate) fn copy_of(store: &Path, ws: &Path, rel: &str) -> PathBuf {
    let name = Path::new(rel)
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    store.join("project-files").join(key(ws)).join(name)
}

/// A short name for `p` (a path of the host).
fn key(p: &Path) -> String {
    use sha2::Digest;
    crate::baseline::hex(&sha2::Sha256::digest(p.as_os_str().as_encoded_bytes())[..8])
}

/// The record of what the copy at `copy` was made from: in the layer store, out of the jail's reach.
fn record_of(store: &Path, copy: &Path) -> PathBuf {
    store.join("own-files").join(key(copy))
}

/// The jail's own files of this launch: `(copy, path in the workspace)`, for the views made.
pub(crate) fn plan(store: &Path, ws: &Path, views: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    FILES
        .iter()
        .filter(|(_, view)| views.contains(&ws.join(view)))
        .map(|(rel, _)| (copy_of(store, ws, rel), ws.join(rel)))
        .collect()
}

/// One of the jail's own files.
#[derive(Debug)]
pub(crate) struct OwnFile<'a> {
    /// The jail's copy.
    pub copy: &'a Path,
    /// Yours, which it is made from.
    pub yours: &'a Path,
    /// What it starts as when you have none.
    pub empty: &'a [u8],
    /// Whether yours is read through a symbolic link: in `$HOME` a link is yours (dotfiles); in
    /// the workspace the jail could have made it (pointing at a secret), so it is not taken.
    pub follow: bool,
}

/// Before bwrap starts: each project copy exists (0600, yours), made from your file (or `{}` when
/// you have none) the first time and whenever yours changed since. Fails closed: a copy that
/// cannot be made stops the launch.
pub(crate) fn prepare(store: &Path, files: &[(PathBuf, PathBuf)]) -> crate::error::Result<()> {
    for (copy, yours) in files {
        let f = OwnFile {
            copy,
            yours,
            empty: b"{}\n",
            follow: false,
        };
        make(store, &f).map_err(|e| {
            crate::error::Error::io(
                format!(
                    "making the jail's own {} at {} (remove it, or set {})",
                    yours.display(),
                    copy.display(),
                    crate::host::LAYERS_DIR
                ),
                e,
            )
        })?;
    }
    Ok(())
}

/// Yours as it is now, or `None` when you have none (or it is no regular file of sane size).
fn read_yours(f: &OwnFile) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = if f.follow { 0 } else { libc::O_NOFOLLOW };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow | libc::O_NONBLOCK)
        .open(f.yours)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX {
        return None;
    }
    let mut v = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&file, MAX), &mut v).ok()?;
    Some(v)
}

/// Write `bytes` as `to` (0600) by a temporary name beside it and a rename.
fn replace(to: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let tmp = to.with_file_name(format!(
        ".{}.new.{}.{}",
        to.file_name()
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
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .and_then(|()| std::fs::rename(&tmp, to));
    if made.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    made
}

/// Make the jail's copy `f.copy` ready: kept while yours is what it was made from, made anew from
/// yours otherwise. Under a lock in the layer store: two sessions starting at once both end with
/// the one whole copy (neither binds a half-written file, nor one the other replaced).
pub(crate) fn make(store: &Path, f: &OwnFile) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let mkdir = |d: &Path| {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
    };
    if let Some(dir) = f.copy.parent() {
        mkdir(dir)?;
    }
    let record = record_of(store, f.copy);
    let records = record.parent().unwrap_or(store);
    mkdir(records)?;
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(records.join(".lock"))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)?;
    let yours = read_yours(f);
    let made_from = {
        use sha2::Digest;
        yours.as_deref().map_or_else(
            || "none".to_string(),
            |b| crate::baseline::hex(&sha2::Sha256::digest(b)),
        )
    };
    let have = match std::fs::symlink_metadata(f.copy) {
        Ok(m) if m.is_file() => true,
        Ok(_) => return Err(std::io::Error::other("the copy is not a regular file")),
        Err(_) => false,
    };
    let recorded = std::fs::read_to_string(&record).ok();
    let current = match &recorded {
        Some(r) => r.trim() == made_from,
        None => have, // a copy from before records: taken as made from yours as it is now
    };
    if !(have && current) {
        replace(f.copy, yours.as_deref().unwrap_or(f.empty))?;
    }
    if recorded.as_deref().map(str::trim) != Some(made_from.as_str()) {
        replace(&record, format!("{made_from}\n").as_bytes())?;
    }
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_starts_as_yours_keeps_the_jails_saves_and_is_per_workspace() {
        let t = tempfile::tempdir().unwrap();
        let (store, ws) = (t.path().join("store"), t.path().join("ws"));
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        let yours = ws.join(".claude/settings.local.json");
        std::fs::write(&yours, "{\"yours\":1}\n").unwrap();
        let files = plan(&store, &ws, &[ws.join(".claude")]);
        assert_eq!(files.len(), 1);
        assert!(plan(&store, &ws, &[]).is_empty(), "no view, no copy");
        prepare(&store, &files).unwrap();
        let copy = &files[0].0;
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"yours\":1}\n");
        std::fs::write(copy, "{\"jail\":1}\n").unwrap();
        prepare(&store, &files).unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"jail\":1}\n");
        assert_eq!(std::fs::read_to_string(&yours).unwrap(), "{\"yours\":1}\n");
        let other = copy_of(
            &store,
            &t.path().join("other"),
            ".claude/settings.local.json",
        );
        assert_ne!(&other, copy);
    }

    /// You change your file outside: the jail's copy is yours again (what the jail saved is
    /// dropped), and from then on keeps what the jail saves. The same when you remove it.
    #[test]
    fn the_copy_is_made_anew_when_yours_changed_since() {
        let t = tempfile::tempdir().unwrap();
        let (store, ws) = (t.path().join("store"), t.path().join("ws"));
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        let yours = ws.join(".claude/settings.local.json");
        std::fs::write(&yours, "{\"yours\":1}\n").unwrap();
        let files = plan(&store, &ws, &[ws.join(".claude")]);
        let copy = &files[0].0;
        prepare(&store, &files).unwrap();
        std::fs::write(copy, "{\"jail\":1}\n").unwrap();
        std::fs::write(&yours, "{\"yours\":2}\n").unwrap();
        prepare(&store, &files).unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"yours\":2}\n");
        std::fs::write(copy, "{\"jail\":2}\n").unwrap();
        prepare(&store, &files).unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{\"jail\":2}\n");
        std::fs::remove_file(&yours).unwrap();
        prepare(&store, &files).unwrap();
        assert_eq!(std::fs::read_to_string(copy).unwrap(), "{}\n");
    }

    /// A copy made before records were kept keeps what the jail saved in it.
    #[test]
    fn a_copy_without_a_record_is_kept() {
        let t = tempfile::tempdir().unwrap();
        let (store, ws) = (t.path().join("store"), t.path().join("ws"));
        std::fs::create_dir_all(ws.join(".claude")).unwrap();
        std::fs::write(ws.join(".claude/settings.local.json"), "{}\n").unwrap();
        let files = plan(&store, &ws, &[ws.join(".claude")]);
        std::fs::create_dir_all(files[0].0.parent().unwrap()).unwrap();
        std::fs::write(&files[0].0, "{\"old\":1}\n").unwrap();
        prepare(&store, &files).unwrap();
        assert_eq!(
            std::fs::read_to_string(&files[0].0).unwrap(),
            "{\"old\":1}\n"
        );
    }

    /// In the workspace a link is not taken (the jail could have made it); in `$HOME` it is yours.
    #[test]
    fn a_link_is_followed_only_where_it_is_yours() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        std::fs::write(t.path().join("secret"), "s\n").unwrap();
        std::os::unix::fs::symlink(t.path().join("secret"), t.path().join("yours")).unwrap();
        for (follow, want) in [(false, "{}\n"), (true, "s\n")] {
            let copy = t.path().join(format!("copy-{follow}"));
            let f = OwnFile {
                copy: &copy,
                yours: &t.path().join("yours"),
                empty: b"{}\n",
                follow,
            };
            make(&store, &f).unwrap();
            assert_eq!(std::fs::read_to_string(&copy).unwrap(), want);
        }
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
                let hs: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| prepare(&store, &files)))
                    .collect();
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
