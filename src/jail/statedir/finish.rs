//! The end of a session for the jail's own state directories: what the agent wrote there that is
//! agent state is carried to yours; anything else goes to the quarantine, with an alert.
//!
//! Everything here is read from a directory the agent shaped: nothing is followed (a symlink is
//! carried as a symlink, never read through), files are regular and of sane size, and a file of
//! yours that changed during the session is never overwritten by the jail's copy.

use super::{Copied, DirRecord, Record, Stamp, MAX_COPY};
use crate::alerts::{Alert, AlertKind, Severity};
use crate::runtimes::{self, Allowed, StateDir};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most entries and bytes carried out of the new directories of one session, all together (a
/// session's transcripts are far below; more is the agent filling your disk: a sparse file costs it
/// nothing in the jail and is written out in full). What is over is not carried out, with a note.
const MAX_TREE_ENTRIES: usize = 20_000;
const MAX_TREE_BYTES: u64 = 512 << 20;

/// Carry the jail's agent state out, quarantine the rest, remove the directories made for the
/// session if left empty. Returns notes for the human.
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
    let mut budget = Budget::default();
    for d in &record.dirs {
        let Some(sd) = runtimes::state_dirs().find(|s| s.path == d.rel) else {
            continue;
        };
        let own = session.home().join(&d.rel);
        finish_one(session_dir, sd, d, &own, &mut budget, &mut notes);
        for c in d.created.iter().rev() {
            let _ = std::fs::remove_dir(c); // only if left empty
        }
    }
    notes
}

fn finish_one(
    session_dir: &Path,
    sd: &StateDir,
    d: &DirRecord,
    own: &Path,
    budget: &mut Budget,
    notes: &mut Vec<String>,
) {
    match std::fs::symlink_metadata(own) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            notes.push(format!(
                "the jail replaced its {} by something else: nothing carried out",
                d.real.display()
            ));
            return;
        }
        Err(_) => return,
    }
    let Ok(rd) = std::fs::read_dir(own) else {
        return;
    };
    let mut names: Vec<OsString> = rd.flatten().map(|e| e.file_name()).collect();
    names.sort();
    let scripts = named_scripts(sd, d);
    for name in names {
        let copied = d.copied.iter().find(|c| c.name == name);
        if let Some((pname, slugs)) = d.projects.as_ref().filter(|(p, _)| *p == name) {
            finish_projects(session_dir, sd, d, &own.join(pname), slugs, budget, notes);
            continue;
        }
        if copied.is_none() && d.made.contains(&name) {
            continue;
        }
        if super::is_scratch(sd, &name) {
            continue;
        }
        let (from, to) = (own.join(&name), d.real.join(&name));
        let allowed = name.to_str().and_then(|n| sd.allowed(n));
        let meta = std::fs::symlink_metadata(&from).ok();
        match (allowed, meta) {
            (_, None) => {}
            (Some(Allowed::File), Some(m)) if m.is_file() => {
                if let Err(e) = carry_file(&from, &to, copied) {
                    notes.push(format!(
                        "{}: the jail's copy was not carried back: {e}",
                        to.display()
                    ));
                }
            }
            (Some(Allowed::Dir), Some(m)) if m.is_dir() && d.made.contains(&name) => {}
            (Some(Allowed::Dir), Some(m)) if m.is_dir() => {
                quarantine_named(session_dir, &from, &to, &scripts, notes);
                if let Err(e) = copy_tree(&from, &to, budget) {
                    notes.push(format!("{}: not all carried out: {e}", to.display()));
                }
            }
            _ => quarantine(session_dir, own, &name, &to, notes),
        }
    }
}

/// New projects the agent wrote under the per-project directory: carried out but for their sealed
/// entries (auto memory), which are quarantined; what it wrote under a project of yours that this
/// session was not given is quarantined whole.
fn finish_projects(
    session_dir: &Path,
    sd: &StateDir,
    d: &DirRecord,
    own: &Path,
    slugs: &[String],
    budget: &mut Budget,
    notes: &mut Vec<String>,
) {
    let Some(pp) = &sd.per_project else { return };
    let real = d.real.join(pp.dir);
    let scripts = named_scripts(sd, d);
    let Ok(rd) = std::fs::read_dir(own) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        if slugs.iter().any(|s| OsStr::new(s) == name) {
            continue; // yours, bound: written in place
        }
        if super::in_project_dir(sd, &name.to_string_lossy()) {
            continue; // a view or a private directory: the session's
        }
        let project = own.join(&name);
        // Not a directory, or a project of yours this session was not given (your `claude --continue`
        // there resumes its newest transcript): it stays out whole.
        if !project.symlink_metadata().is_ok_and(|m| m.is_dir())
            || real.join(&name).symlink_metadata().is_ok()
        {
            let shown = real.join(&name);
            let runs = scripts.iter().any(|s| s.starts_with(&shown));
            quarantine_why(session_dir, own, &name, &shown, runs, notes);
            continue;
        }
        for (sealed, _) in pp.sealed {
            if project.join(sealed).symlink_metadata().is_ok() {
                quarantine(
                    session_dir,
                    &project,
                    OsStr::new(sealed),
                    &real.join(&name).join(sealed),
                    notes,
                );
            }
        }
        quarantine_named(session_dir, &project, &real.join(&name), &scripts, notes);
        let copied = std::fs::create_dir_all(&real)
            .and_then(|()| copy_tree(&project, &real.join(&name), budget));
        if let Err(e) = copied {
            notes.push(format!(
                "{}: not all carried out: {e}",
                real.join(&name).display()
            ));
        }
    }
}

/// The scripts your settings of `sd` name as commands now (host paths), as `entrypoints` finds
/// them: the end of the session must never create one.
fn named_scripts(sd: &StateDir, d: &DirRecord) -> Vec<PathBuf> {
    let depth = Path::new(&d.rel).components().count();
    match d.real.ancestors().nth(depth) {
        Some(home) => crate::entrypoints::state_scripts(home, sd),
        None => Vec::new(),
    }
}

/// Quarantine what the jail's new tree `from` (bound for your `to`) holds on the way to a script
/// your settings run (`named`): carried out, your agent would run it outside the jail. A file or a
/// link in the stead of a directory on the way counts too (your agent would follow the link).
fn quarantine_named(
    session_dir: &Path,
    from: &Path,
    to: &Path,
    named: &[PathBuf],
    notes: &mut Vec<String>,
) {
    use std::path::Component;
    for script in named {
        let Ok(rel) = script.strip_prefix(to) else {
            continue;
        };
        let parts: Vec<Component> = rel.components().collect();
        if parts.is_empty() || parts.iter().any(|c| !matches!(c, Component::Normal(_))) {
            // The tree itself, or a path with `..` (not followed lexically: a link on the way
            // changes where it leads): the whole top entry on the way stays out.
            let (Some(dir), Some(name)) = (from.parent(), from.file_name()) else {
                continue;
            };
            let first = parts.first().filter(|c| matches!(c, Component::Normal(_)));
            match first {
                Some(c) if from.join(c).symlink_metadata().is_ok() => {
                    quarantine_why(session_dir, from, c.as_os_str(), &to.join(c), true, notes);
                }
                Some(_) => {}
                None => quarantine_why(session_dir, dir, name, to, true, notes),
            }
            continue;
        }
        let (mut dir, mut shown) = (from.to_path_buf(), to.to_path_buf());
        for (i, c) in parts.iter().enumerate() {
            let next = dir.join(c);
            match next.symlink_metadata() {
                Err(_) => break,
                Ok(m) if m.is_dir() && i + 1 < parts.len() => {
                    dir = next;
                    shown.push(c);
                }
                Ok(_) => {
                    let shown = shown.join(c);
                    quarantine_why(session_dir, &dir, c.as_os_str(), &shown, true, notes);
                    break;
                }
            }
        }
    }
}

/// Move `dir/name` to the quarantine, recorded as `shown` (where `restore` puts it), and alert.
fn quarantine(session_dir: &Path, dir: &Path, name: &OsStr, shown: &Path, notes: &mut Vec<String>) {
    quarantine_why(session_dir, dir, name, shown, false, notes);
}

/// `quarantine`, for a path your settings run (`script`) or for a name not on the allowlist.
fn quarantine_why(
    session_dir: &Path,
    dir: &Path,
    name: &OsStr,
    shown: &Path,
    script: bool,
    notes: &mut Vec<String>,
) {
    let session = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let Some((runtime, id)) = session.runtime_and_id() else {
        return;
    };
    let (kind, reason) = if script {
        (
            AlertKind::AgentStateScript,
            "written by the agent in the jail where your settings name a command (a hook, \
             statusLine, notify): carried out, your agent would run it outside the jail; it never \
             reached yours"
                .to_string(),
        )
    } else {
        (
            AlertKind::AgentStateNotAllowed,
            format!(
                "written by the agent in the jail's own {}, not agent state on the writable \
                 allowlist (docs/runtimes.md): it never reached yours; restore it if you want it \
                 there",
                shown.parent().unwrap_or(shown).display()
            ),
        )
    };
    let qid = match crate::quarantine::quarantine_as(runtime.root(), dir, name, shown, &reason) {
        Ok(Some(rec)) => Some(rec.id),
        Ok(None) => return,
        Err(e) => {
            notes.push(format!("{}: quarantine failed: {e}", shown.display()));
            None
        }
    };
    let session = id.to_string_lossy();
    let alert = Alert::new(kind, Severity::High, shown, reason, &session).quarantined(qid);
    if let Err(e) = crate::alerts::Store::new(runtime.root()).add(&alert) {
        notes.push(format!("recording an alert for {}: {e}", shown.display()));
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
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Carry the jail's `from` to your `to`: replace yours when it is as it was at launch (or still
/// missing); else keep yours.
pub(super) fn carry_file(
    from: &Path,
    to: &Path,
    copied: Option<&Copied>,
) -> Result<(), NotCarried> {
    let src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)
        .map_err(|_| NotCarried::NotRegular)?;
    let meta = src.metadata()?;
    if !meta.is_file() || meta.len() > MAX_COPY {
        return Err(NotCarried::NotRegular);
    }
    if let Some(c) = copied {
        if Stamp::of(&meta) == c.jail {
            return Ok(()); // unchanged in the jail
        }
    }
    let yours = std::fs::symlink_metadata(to).ok();
    let as_at_launch = match (&yours, copied) {
        (None, None) => true,
        (Some(m), Some(c)) => m.is_file() && Stamp::of(m) == c.yours,
        _ => false,
    };
    if yours.as_ref().is_some_and(|m| !m.is_file()) {
        return Err(NotCarried::YoursNotRegular);
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&src, MAX_COPY), &mut bytes)?;
    if !as_at_launch {
        return Err(NotCarried::ChangedOutside);
    }
    replace(to, &bytes, meta.mode() & 0o777)
}

/// Write `bytes` over `to` by a temporary file beside it and a rename.
fn replace(to: &Path, bytes: &[u8], mode: u32) -> Result<(), NotCarried> {
    use std::io::Write;
    let dir = to.parent().unwrap_or(Path::new("/"));
    let mut tmp_name = b".".to_vec();
    tmp_name.extend_from_slice(to.file_name().unwrap_or_default().as_bytes());
    tmp_name.extend_from_slice(format!(".claude-sandbox.{}", std::process::id()).as_bytes());
    let tmp = dir.join(OsStr::from_bytes(&tmp_name));
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

#[derive(Default)]
struct Budget {
    entries: usize,
    bytes: u64,
}

/// Copy the tree `from` (never following a link) into `to`, adding what `to` lacks; files `to`
/// already has are left as they are.
fn copy_tree(from: &Path, to: &Path, budget: &mut Budget) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    budget.entries += 1;
    if budget.entries > MAX_TREE_ENTRIES || budget.bytes > MAX_TREE_BYTES {
        return Err(std::io::Error::other(format!(
            "more than {MAX_TREE_ENTRIES} entries or {} MiB",
            MAX_TREE_BYTES >> 20
        )));
    }
    let exists = std::fs::symlink_metadata(to).ok();
    if meta.is_dir() {
        match exists {
            Some(m) if m.is_dir() => {}
            Some(_) => return Ok(()),
            None => {
                std::fs::DirBuilder::new().create(to)?;
                let _ = std::fs::set_permissions(
                    to,
                    std::os::unix::fs::PermissionsExt::from_mode(meta.mode() & 0o777),
                );
            }
        }
        let mut names: Vec<PathBuf> = std::fs::read_dir(from)?
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        for p in names {
            let name = p.file_name().unwrap_or_default().to_owned();
            copy_tree(&p, &to.join(name), budget)?;
        }
        return Ok(());
    }
    if exists.is_some() {
        return Ok(());
    }
    if meta.file_type().is_symlink() {
        return std::os::unix::fs::symlink(std::fs::read_link(from)?, to);
    }
    if meta.is_file() {
        // Checked before the copy: a file over what is left is not carried out at all (never a
        // truncated copy of it).
        if meta.len() > MAX_TREE_BYTES.saturating_sub(budget.bytes) {
            return Err(std::io::Error::other(format!(
                "more than {} MiB in all",
                MAX_TREE_BYTES >> 20
            )));
        }
        budget.bytes += meta.len();
        super::copy_regular(from, to, meta.len())?;
    }
    // Sockets, FIFOs, devices: not state.
    Ok(())
}
