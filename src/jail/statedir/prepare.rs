//! Making the jail's own state directories ready before the jail starts (`super`): their mount
//! points, stubs and copies of the allowlisted files, and the record `finish` reads.
//!
//! The directories are kept across sessions and two sessions may start at once: everything here
//! makes what is missing and replaces what it writes by rename (never a half-written file, never
//! an `EEXIST` between two launches), and a mount point whose kind changed (your `commands` was a
//! file, is now a directory) is moved aside, not deleted.

use super::{Copied, DirRecord, Record, Stamp, MAX_COPY};
use crate::catalogue::Stub;
use crate::jail::policy::{How, StateBind};
use crate::runtimes::StateDir;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

fn mkdir(p: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(p)
}

/// Make the jail's own directory of each state directory in `states` ready (`own`: where it is
/// kept), and the record `finish` reads.
pub(crate) fn prepare(
    session_dir: &Path,
    home: &Path,
    states: &[(&'static StateDir, &Path, &[StateBind])],
) -> std::io::Result<()> {
    if states.is_empty() {
        return Ok(()); // no record: `finish` has nothing to do
    }
    let session = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let t0 = std::time::Instant::now();
    let mut record = Record::default();
    for (sd, own, binds) in states {
        let real = home.join(sd.path);
        mkdir(own)?;
        let mut r = DirRecord {
            rel: sd.path.to_string(),
            real: real.clone(),
            own: Some(own.to_path_buf()),
            made: Vec::new(),
            copied: Vec::new(),
        };
        for b in *binds {
            make_one(sd, b, &real, own, &mut r)?;
        }
        // The mount points of the private directories and views below the top (`tmp/bin`).
        for rel in sd
            .private
            .iter()
            .copied()
            .chain(sd.views.iter().map(|v| v.name))
        {
            if rel.contains('/') {
                dir_at(&own.join(rel))?;
            }
        }
        record.dirs.push(r);
    }
    let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    std::fs::write(session.state_record(), text)?;
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        n = states.len(),
        "the jail's own state directories made ready"
    );
    Ok(())
}

/// Remove the jail store's stores that last one session (`runtimes::JailStore::fresh`).
fn empty_fresh(sd: &StateDir, dir: &Path) -> std::io::Result<()> {
    let Some(js) = &sd.jail_store else {
        return Ok(());
    };
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if js
            .fresh
            .iter()
            .any(|p| crate::secrets::glob_match(p, &name))
        {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

/// A temporary name beside `path`, of this process.
fn beside(path: &Path, what: &str) -> std::path::PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".claude-sandbox-{what}.{}", std::process::id()));
    path.with_file_name(name)
}

/// Copy the regular file `from` (not following a link) over `to` by a rename, with its permission
/// bits; the stamps of the copy and of the original.
fn copy_in(from: &Path, to: &Path) -> std::io::Result<(Stamp, Stamp)> {
    let tmp = beside(to, "copy");
    let _ = std::fs::remove_file(&tmp);
    let (yours, _) = super::copy_regular(from, &tmp, MAX_COPY)?;
    set_aside_unless(to, std::fs::Metadata::is_file)?;
    std::fs::rename(&tmp, to).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    let jail = std::fs::symlink_metadata(to)?;
    Ok((Stamp::of(&jail), Stamp::of(&yours)))
}

/// Write `text` as the file `to` by a rename.
fn write_file(to: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read(to).is_ok_and(|b| b == text.as_bytes()) {
        return Ok(());
    }
    let tmp = beside(to, "stub");
    std::fs::write(&tmp, text)?;
    set_aside_unless(to, std::fs::Metadata::is_file)?;
    std::fs::rename(&tmp, to).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Move `p` aside (within the jail's own directory) unless it is missing or `keep` says it may
/// stay: what a session left under a name whose kind changed is kept, not lost.
fn set_aside_unless(p: &Path, keep: impl Fn(&std::fs::Metadata) -> bool) -> std::io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Err(_) => Ok(()),
        Ok(m) if keep(&m) => Ok(()),
        Ok(_) => {
            let aside = p.with_file_name(".claude-sandbox-set-aside");
            mkdir(&aside)?;
            let to = aside.join(format!(
                "{}.{}",
                p.file_name().unwrap_or_default().to_string_lossy(),
                crate::alerts::new_id("")
            ));
            std::fs::rename(p, to)
        }
    }
}

/// A directory at `p` (moving aside what is not one).
fn dir_at(p: &Path) -> std::io::Result<()> {
    set_aside_unless(p, std::fs::Metadata::is_dir)?;
    mkdir(p)
}

/// Make one entry of the jail's own directory `own` ready.
fn make_one(
    sd: &StateDir,
    b: &StateBind,
    real: &Path,
    own: &Path,
    r: &mut DirRecord,
) -> std::io::Result<()> {
    let (yours, mine) = (real.join(&b.name), own.join(&b.name));
    match &b.how {
        How::Copied => match copy_in(&yours, &mine) {
            Ok(c) => r.copied.push(Copied {
                name: b.name.clone(),
                jail: c.0,
                yours: c.1,
            }),
            // Gone or replaced since planning: the jail keeps its own.
            Err(e) => tracing::info!("{} not copied into the jail: {e}", yours.display()),
        },
        How::Symlink(target) => {
            if std::fs::read_link(&mine).ok().as_deref() != Some(target.as_path()) {
                let tmp = beside(&mine, "link");
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(target, &tmp)?;
                set_aside_unless(&mine, |m| m.file_type().is_symlink())?;
                std::fs::rename(&tmp, &mine)?;
            }
            r.made.push(b.name.clone());
        }
        How::Stub(Stub::File(text)) => {
            write_file(&mine, text)?;
            r.made.push(b.name.clone());
        }
        How::Writable | How::ReadOnly => {
            // The mount point, like its source (a file or a directory).
            if yours.is_dir() {
                dir_at(&mine)?;
            } else {
                set_aside_unless(&mine, std::fs::Metadata::is_file)?;
                if !mine.exists() {
                    std::fs::File::create(&mine)?;
                }
            }
            r.made.push(b.name.clone());
        }
        How::Stub(Stub::Dir) | How::MountPoint => {
            dir_at(&mine)?;
            r.made.push(b.name.clone());
        }
        How::Own(layers) => {
            // What the jail left under a kind that is no file is kept aside, not lost, and the
            // copy made anew: a launch never fails on what a session made there.
            set_aside_unless(&mine, std::fs::Metadata::is_file)?;
            let empty = sd
                .entry_points
                .iter()
                .find(|e| e.jails_own && super::top_name(sd, e.rel) == b.name.to_str())
                .map_or("", |e| match e.stub {
                    Stub::File(text) => text,
                    Stub::Dir => "",
                });
            crate::jail::ownfiles::make(
                layers,
                &crate::jail::ownfiles::OwnFile {
                    copy: &mine,
                    yours: &yours,
                    empty: empty.as_bytes(),
                    follow: true,
                },
            )?;
            r.made.push(b.name.clone());
        }
        How::Store(dir) => {
            mkdir(dir)?;
            empty_fresh(sd, dir)?;
            dir_at(&mine)?;
            r.made.push(b.name.clone());
        }
    }
    Ok(())
}
