//! The end of a session for the jail's own state directories: the files of the measured allowlist
//! the jail changed come back to yours, judged by what they are (`crate::handback`): data comes
//! back by itself, a credentials file that names another account (or a new one) is held for your
//! review. Everything else the agent wrote stays the jail's own, for its next session: no
//! quarantine, no alert, whatever its name.
//!
//! Everything here is read from a directory the agent shaped: nothing is followed (a symlink is
//! never read through), files are regular and of sane size, and a file of yours that changed
//! during the session is never overwritten by the jail's copy.

use super::{Copied, DirRecord, Record, Stamp, MAX_COPY};
use crate::handback::identity;
use crate::runtimes::{self, Allowed, StateDir};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Carry the allowlisted files the jail changed back to yours, or hold them. Returns notes for the
/// human.
pub(crate) fn finish(session_dir: &Path) -> Vec<String> {
    let session = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let Ok(text) = std::fs::read(session.state_record()) else {
        return Vec::new();
    };
    let record: Record = match serde_json::from_slice(&text) {
        Ok(r) => r,
        Err(e) => return vec![format!("the state directories' record is unreadable: {e}")],
    };
    let mut notes = Vec::new();
    for d in &record.dirs {
        let Some(sd) = runtimes::state_dirs().find(|s| s.path == d.rel) else {
            continue;
        };
        let own = d.own.clone().unwrap_or_else(|| session.home().join(&d.rel));
        finish_one(session_dir, sd, d, &own, &mut notes);
    }
    notes
}

fn finish_one(
    session_dir: &Path,
    sd: &StateDir,
    d: &DirRecord,
    own: &Path,
    notes: &mut Vec<String>,
) {
    if !std::fs::symlink_metadata(own).is_ok_and(|m| m.is_dir()) {
        notes.push(format!(
            "the jail's own {} is not a directory any more: nothing carried back",
            d.real.display()
        ));
        return;
    }
    let Ok(rd) = std::fs::read_dir(own) else {
        return;
    };
    let mut names: Vec<std::ffi::OsString> = rd.flatten().map(|e| e.file_name()).collect();
    names.sort();
    for name in names {
        let copied = d.copied.iter().find(|c| c.name == name);
        if copied.is_none() && d.made.contains(&name) {
            continue;
        }
        let Some(n) = name.to_str() else { continue };
        // Your history is bound (`made`: written in place); a new one comes back like a file.
        if sd.allowed(n) != Some(Allowed::File) {
            continue; // the jail's own
        }
        let (from, to) = (own.join(&name), d.real.join(&name));
        if let Err(e) = hand_back(session_dir, sd, n, &from, &to, copied) {
            notes.push(format!(
                "{}: the jail's copy was not carried back: {e}",
                to.display()
            ));
        }
    }
}

/// Why a file was not carried back.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotCarried {
    #[error("the jail's file is not a regular file of at most {} MiB", MAX_COPY >> 20)]
    NotRegular,
    #[error("yours changed during the session: yours is kept")]
    ChangedOutside,
    #[error("yours is not a regular file: left alone")]
    YoursNotRegular,
    #[error("it could not be kept for your review: {0}")]
    NotHeld(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Read a regular file without following a link or blocking, at most `MAX_COPY` bytes.
fn read_regular(p: &Path) -> Result<Option<(Vec<u8>, std::fs::Metadata)>, NotCarried> {
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(p)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err(NotCarried::NotRegular),
    };
    let meta = f.metadata()?;
    if !meta.is_file() || meta.len() > MAX_COPY {
        return Err(NotCarried::NotRegular);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&f, MAX_COPY), &mut bytes)?;
    Ok(Some((bytes, meta)))
}

/// The jail's `from` back to your `to` when it is data, or when it names the same account as
/// yours; held for review when it is a login of another (or a new) account. Never over a file of
/// yours that changed since the launch.
fn hand_back(
    session_dir: &Path,
    sd: &StateDir,
    name: &str,
    from: &Path,
    to: &Path,
    copied: Option<&Copied>,
) -> Result<(), NotCarried> {
    let Some((jail, meta)) = read_regular(from)? else {
        return Ok(());
    };
    if copied.is_some_and(|c| Stamp::of(&meta) == c.jail) {
        return Ok(()); // unchanged in the jail
    }
    let yours = std::fs::symlink_metadata(to).ok();
    if yours.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(NotCarried::YoursNotRegular);
    }
    let as_at_launch = match (&yours, copied) {
        (None, None) => true,
        (Some(m), Some(c)) => Stamp::of(m) == c.yours,
        _ => false,
    };
    if !as_at_launch {
        return Err(NotCarried::ChangedOutside);
    }
    let human = match yours {
        Some(_) => read_regular(to).ok().flatten().map(|(b, _)| b),
        None => None,
    };
    if human.as_deref() == Some(jail.as_slice()) {
        return Ok(());
    }
    if let Some(format) = sd.identity_of(name) {
        if let identity::Same::No(why) = identity::same(format, human.as_deref(), &jail) {
            let mut item = crate::held::Item::file(
                to,
                crate::handback::Consequence::Identity,
                why,
                (&jail, meta.mode()),
                human.as_deref(),
            );
            item.what = name.to_string();
            return crate::held::hold_at_session_end(session_dir, item, Some(&jail))
                .map(|_| ())
                .map_err(|e| NotCarried::NotHeld(e.to_string()));
        }
    }
    replace(session_dir, to, &jail, meta.mode() & 0o777)
}

/// Write `bytes` over `to` by a temporary file beside it and a rename.
fn replace(session_dir: &Path, to: &Path, bytes: &[u8], mode: u32) -> Result<(), NotCarried> {
    use std::io::Write;
    let tmp = crate::tempname::beside(to, session_dir);
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, to).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(())
}
