//! Quarantine of git config keys: exec-capable entries taken out of a config file, the rest of the
//! file kept byte for byte.
//!
//! Guards against `git status` in a repository made during the session running a planted
//! `core.fsmonitor` (or `include.path`, `core.hooksPath`, ...) before the human reads the alert.
//! The file is read once through a no-follow fd and parsed by `gitconfig` (git's grammar: the
//! entry spans are exact even with a BOM or non-UTF-8 bytes); the new content is written to a
//! temporary file in the same directory with the same mode and renamed over the config (atomic: git
//! never sees half a file). The whole original is kept in the quarantine, so `restore` puts it back
//! byte for byte, provided the config is still what we left (else `--force`, which keeps the
//! displaced content as a quarantine record of its own).

use super::{qdir, save, Record};
use crate::error::{Error, Result};
use crate::gitconfig::Key;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The record's `kind` for a config whose keys were taken out.
pub const KIND: &str = "git-config";

fn sha(bytes: &[u8]) -> String {
    use sha2::Digest;
    crate::baseline::hex(&sha2::Sha256::digest(bytes))
}

fn read_nofollow(file: &Path) -> Result<(Vec<u8>, std::fs::Metadata)> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(file)
        .map_err(|e| Error::io(format!("opening {}", file.display()), e))?;
    let meta = f
        .metadata()
        .map_err(|e| Error::io(format!("stat {}", file.display()), e))?;
    if !meta.is_file() {
        return Err(Error::Usage(format!(
            "{} is not a regular file; not touching it",
            file.display()
        )));
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut f, &mut bytes)
        .map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
    Ok((bytes, meta))
}

/// Replace `file` with `bytes` atomically, keeping its mode.
fn write_over(file: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let tmp = file.with_file_name(format!(".{name}.claude-sandbox-tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o7777)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
    f.write_all(bytes)
        .and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777)))
        .and_then(|()| std::fs::rename(&tmp, file))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            Error::io(format!("rewriting {}", file.display()), e)
        })
}

/// An entry's span with the indentation before it, when only blanks precede it on its line (so that
/// no stray indentation is left behind).
fn whole_line(bytes: &[u8], span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let mut start = span.start;
    while start > 0 && matches!(bytes[start - 1], b' ' | b'\t') {
        start -= 1;
    }
    if start == 0 || bytes[start - 1] == b'\n' {
        start..span.end
    } else {
        span
    }
}

/// Take every entry `remove` selects out of `file`. `Ok(None)` if none is there (any more).
pub(crate) fn neutralise_keys(
    runtime: &Path,
    file: &Path,
    remove: &dyn Fn(&Key) -> bool,
    reason: &str,
) -> Result<Option<Record>> {
    let (before, meta) = read_nofollow(file)?;
    let keys = crate::gitconfig::parse(&before)
        .map_err(|e| Error::Usage(format!("{}: {e}; not rewriting it", file.display())))?;
    let spans: Vec<std::ops::Range<usize>> = keys
        .iter()
        .filter(|k| remove(k))
        .map(|k| whole_line(&before, k.span.clone()))
        .collect();
    if spans.is_empty() {
        return Ok(None);
    }
    let mut after = Vec::with_capacity(before.len());
    let mut at = 0;
    for s in &spans {
        after.extend_from_slice(&before[at..s.start]);
        at = s.end;
    }
    after.extend_from_slice(&before[at..]);
    let id = crate::alerts::new_id("q");
    std::fs::create_dir_all(qdir(runtime))
        .map_err(|e| Error::io("creating the quarantine directory", e))?;
    let stored_at = qdir(runtime).join(format!("{id}.data"));
    std::fs::write(&stored_at, &before)
        .map_err(|e| Error::io(format!("writing {}", stored_at.display()), e))?;
    write_over(file, &after, meta.mode())?;
    let record = Record {
        id,
        time: crate::alerts::now_rfc3339(),
        original: file.to_path_buf(),
        kind: KIND.into(),
        mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.len(),
        mtime: meta.mtime(),
        mtime_nsec: meta.mtime_nsec(),
        dev: meta.dev(),
        ino: meta.ino(),
        nlink: meta.nlink(),
        sha256: Some(sha(&before)),
        link_target: None,
        method: super::Method::KeysRemoved,
        stored_at,
        reason: reason.into(),
        restored: false,
        after_sha256: Some(sha(&after)),
    };
    save(runtime, &record)?;
    Ok(Some(record))
}

/// Put the config back as it was, byte for byte.
pub(crate) fn restore(runtime: &Path, mut r: Record, force: bool) -> Result<Record> {
    let stored = std::fs::read(&r.stored_at)
        .map_err(|e| Error::io(format!("reading {}", r.stored_at.display()), e))?;
    if r.sha256.as_deref() != Some(sha(&stored).as_str()) {
        return Err(Error::Usage(format!(
            "{} is no longer the quarantined content; not restoring",
            r.stored_at.display()
        )));
    }
    let (current, meta) = read_nofollow(&r.original)?;
    if r.after_sha256.as_deref() != Some(sha(&current).as_str()) {
        if !force {
            return Err(Error::Usage(format!(
                "{} changed since its keys were taken out; `claude-sandbox restore {} --force` puts the old content back (the current one is kept in the quarantine)",
                r.original.display(),
                r.id
            )));
        }
        let mut displaced = r.clone();
        displaced.id = crate::alerts::new_id("q");
        displaced.reason = format!("displaced by `restore --force {}`", r.id);
        displaced.stored_at = qdir(runtime).join(format!("{}.data", displaced.id));
        displaced.sha256 = Some(sha(&current));
        displaced.after_sha256 = Some(sha(&stored));
        std::fs::write(&displaced.stored_at, &current)
            .map_err(|e| Error::io("keeping the displaced config", e))?;
        save(runtime, &displaced)?;
    }
    write_over(&r.original, &stored, meta.mode())?;
    r.restored = true;
    save(runtime, &r)?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key's entry leaves, nothing else moves, and restore gives back the exact bytes (a BOM and
    /// a non-UTF-8 value included).
    #[test]
    fn a_key_is_taken_out_and_put_back_byte_for_byte() {
        let t = tempfile::tempdir().unwrap();
        let (rt, cfg) = (t.path().join("rt"), t.path().join("config"));
        let before =
            b"\xef\xbb\xbf[core]\r\n\tx = \xff\n\tfsmonitor = \"touch /m\" ; c\n\tbare = false\n";
        std::fs::write(&cfg, before).unwrap();
        std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o640)).unwrap();
        let r = neutralise_keys(&rt, &cfg, &|k| k.name == "core.fsmonitor", "t")
            .unwrap()
            .unwrap();
        assert_eq!(
            std::fs::read(&cfg).unwrap(),
            b"\xef\xbb\xbf[core]\r\n\tx = \xff\n\tbare = false\n"
        );
        assert_eq!(std::fs::metadata(&cfg).unwrap().mode() & 0o777, 0o640);
        assert!(
            neutralise_keys(&rt, &cfg, &|k| k.name == "core.fsmonitor", "t")
                .unwrap()
                .is_none(),
            "nothing left to take out"
        );
        crate::quarantine::restore(&rt, &r.id, false).unwrap();
        assert_eq!(std::fs::read(&cfg).unwrap(), before);
        assert!(crate::quarantine::restore(&rt, &r.id, false).is_err());
    }

    #[test]
    fn restore_refuses_a_config_changed_since_unless_forced() {
        let t = tempfile::tempdir().unwrap();
        let (rt, cfg) = (t.path().join("rt"), t.path().join("config"));
        let before = b"[core]\n\tfsmonitor = x\n";
        std::fs::write(&cfg, before).unwrap();
        let r = neutralise_keys(&rt, &cfg, &|_| true, "t").unwrap().unwrap();
        std::fs::write(&cfg, b"[user]\n\tname = n\n").unwrap();
        assert!(crate::quarantine::restore(&rt, &r.id, false).is_err());
        crate::quarantine::restore(&rt, &r.id, true).unwrap();
        assert_eq!(std::fs::read(&cfg).unwrap(), before);
        assert_eq!(
            crate::quarantine::list(&rt).len(),
            2,
            "the displaced content is kept"
        );
    }
}
