//! Making the jail's own state directories before the jail starts (`super`), and the record
//! `finish` reads.

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

/// Make the jail's own directory of each state directory in `$HOME` entries `states` (in the
/// session's `$HOME`), the human's directories its binds need, and the record `finish` reads.
pub(crate) fn prepare(
    session_dir: &Path,
    home: &Path,
    states: &[(&'static StateDir, &[StateBind])],
) -> std::io::Result<()> {
    if states.is_empty() {
        return Ok(()); // no record: `finish` has nothing to do
    }
    let session = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let session_home = session.home();
    let t0 = std::time::Instant::now();
    let mut record = Record::default();
    for (sd, binds) in states {
        let real = home.join(sd.path);
        let own = session_home.join(sd.path);
        mkdir(&own)?;
        let mut r = DirRecord {
            rel: sd.path.to_string(),
            real: real.clone(),
            made: Vec::new(),
            copied: Vec::new(),
            created: Vec::new(),
            projects: None,
        };
        for b in *binds {
            make_one(sd, b, &real, &own, &mut r)?;
        }
        record.dirs.push(r);
    }
    let text = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
    std::fs::write(session.state_record(), text)?;
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        n = states.len(),
        "the jail's own state directories made"
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

/// Copy the regular file `from` (not following a link) to `to`, with its permission bits; the
/// stamps of the copy and of the original.
fn copy_in(from: &Path, to: &Path) -> std::io::Result<(Stamp, Stamp)> {
    let (yours, jail) = super::copy_regular(from, to, MAX_COPY)?;
    Ok((Stamp::of(&jail), Stamp::of(&yours)))
}

/// Make one entry of the jail's own directory `own` (and what it needs in yours, `real`).
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
            // Gone or replaced since planning: the session starts without it.
            Err(e) => tracing::info!("{} not copied into the jail: {e}", yours.display()),
        },
        How::Symlink(target) => {
            std::os::unix::fs::symlink(target, &mine)?;
            r.made.push(b.name.clone());
        }
        How::Stub(Stub::File(text)) => {
            std::fs::write(&mine, text)?;
            r.made.push(b.name.clone());
        }
        How::Writable | How::ReadOnly => {
            // The mount point, like its source (a file or a directory).
            if yours.is_dir() {
                mkdir(&mine)?;
            } else {
                std::fs::File::create(&mine)?;
            }
            r.made.push(b.name.clone());
        }
        How::Stub(Stub::Dir) | How::MountPoint => {
            mkdir(&mine)?;
            r.made.push(b.name.clone());
        }
        How::Store(dir) => {
            mkdir(dir)?;
            empty_fresh(sd, dir)?;
            mkdir(&mine)?;
            r.made.push(b.name.clone());
        }
        How::Projects(slugs) => {
            for s in slugs {
                let project = yours.join(s);
                for p in [&yours, &project] {
                    if std::fs::symlink_metadata(p).is_err() {
                        mkdir(p)?;
                        r.created.push(p.clone());
                    }
                }
                mkdir(&mine.join(s))?;
                for (name, _) in sd.per_project.iter().flat_map(|p| p.sealed) {
                    let sealed = project.join(name);
                    if std::fs::symlink_metadata(&sealed).is_err() {
                        mkdir(&sealed)?;
                        r.created.push(sealed);
                    }
                    mkdir(&mine.join(s).join(name))?;
                }
            }
            // Views and private directories of the runtime's inside it: their mount points.
            for rel in sd
                .private
                .iter()
                .copied()
                .chain(sd.views.iter().map(|v| v.name))
            {
                if let Some(n) = rel.strip_prefix(&format!("{}/", b.name.to_string_lossy())) {
                    mkdir(&mine.join(n))?;
                }
            }
            r.made.push(b.name.clone());
            r.projects = Some((b.name.clone(), slugs.clone()));
        }
    }
    Ok(())
}
