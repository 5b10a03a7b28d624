//! The jails own top level of each measured agent state directory (`~/.claude`, `~/.codex`,
//! `~/.gemini`): default deny in the one hole the agents need most.
//!
//! Guards against three things a writable top level let through. A seal on a settings file
//! detached when the human's own agent (an IDE extension, a terminal outside the wrapper) saved it
//! by writing a temporary file and renaming it over: the bind stayed on the old inode and the new
//! file was writable in the jail. A new name the agent made there (`~/.claude/.config.json`, which
//! Claude Code takes as its whole configuration) was readable by an unjailed agent until the
//! session's end. And what steers later sessions lay in writable places: Claude Code's auto memory
//! (`projects/<project>/memory/`), Codex's `memories_1.sqlite`.
//!
//! So in the jail the state directory is a directory of the session's own (in the private `$HOME`):
//! the human's directories on the allowlist are bound into it writable (the agent's transcripts and
//! sessions stay yours), everything else of yours read-only, missing entry points are read-only
//! stubs of the jail's own, and the allowlisted *files* (credentials, caches) are copies carried
//! back when the session ends — only if yours did not change meanwhile; a history (`*.jsonl`,
//! appended in place, never saved by rename) is yours, bound writable. A rename in your directory touches no dentry the jail has a mount
//! on. New names are the session's: allowlisted directories the agent made are copied out at the end,
//! anything else is moved to the quarantine with an alert (restorable). Claude Code's `projects/`
//! holds only this session's projects (yours, bound writable; their `memory/` read-only); Codex's
//! `SQLite` stores live in a directory of the jail's own (`CODEX_SQLITE_HOME`), never read outside.

use crate::catalogue::Stub;
use crate::jail::policy::{How, StateBind};
use crate::runtimes::{Access, Allowed, StateDir};
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod finish;
mod prepare;
#[cfg(test)]
mod tests;

pub(crate) use finish::finish;
pub(crate) use prepare::prepare;

/// The largest allowlisted file copied in (larger ones are bound writable: saved in place only).
const MAX_COPY: u64 = 64 << 20;

/// What the human's directory holds under one name (read without following links).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File { size: u64 },
    Symlink(PathBuf),
    Other,
}

/// The human's top level of `dir` (empty when it does not exist).
pub(crate) fn listing(dir: &Path) -> Vec<(OsString, Kind)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(OsString, Kind)> = rd
        .flatten()
        .map(|e| {
            let kind = match e.path().symlink_metadata() {
                Ok(m) if m.is_dir() => Kind::Dir,
                Ok(m) if m.is_file() => Kind::File { size: m.len() },
                Ok(m) if m.file_type().is_symlink() => {
                    Kind::Symlink(std::fs::read_link(e.path()).unwrap_or_default())
                }
                _ => Kind::Other,
            };
            (e.file_name(), kind)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Turn the writable `$HOME` entries that are measured state directories into the jail's own top
/// level (`HomeBind::State`), and name the jail's own stores to their runtimes in `setenv`.
/// `roots`: the working directory and the workspace (their projects are bound).
pub(crate) fn own_top_levels(
    entries: &mut [super::policy::HomeEntry],
    home: &Path,
    roots: &[&Path],
    env: &crate::host::HostEnv,
    setenv: &mut Vec<(String, String)>,
) {
    use super::policy::HomeBind;
    for e in entries {
        if e.bind != HomeBind::Writable {
            continue;
        }
        let Some(sd) = crate::runtimes::state_dirs()
            .find(|s| s.own_top_level() && OsStr::new(s.path) == e.name)
        else {
            continue;
        };
        let real = home.join(sd.path);
        let binds = classify(
            sd,
            &listing(&real),
            &projects(sd, home, roots),
            &named_top_names(home, sd),
            store_path(home, env, sd).as_deref(),
        );
        if let Some(js) = &sd.jail_store {
            setenv.push((js.env.into(), real.join(js.name).to_string_lossy().into()));
        }
        e.bind = HomeBind::State(binds);
    }
}

/// The jail's top level for `sd`, given the human's listing, the projects of this session and the
/// top-level names the sealed settings name as scripts. Pure.
pub(crate) fn classify(
    sd: &StateDir,
    seen: &[(OsString, Kind)],
    projects: &[String],
    named: &[OsString],
    store: Option<&Path>,
) -> Vec<StateBind> {
    let mut out = Vec::new();
    let mut push = |name: &OsStr, how: How| {
        if !out.iter().any(|b: &StateBind| b.name == name) {
            out.push(StateBind {
                name: name.to_owned(),
                how,
            });
        }
    };
    if let (Some(js), Some(dir)) = (&sd.jail_store, store) {
        push(OsStr::new(js.name), How::Store(dir.to_path_buf()));
    }
    if let Some(pp) = &sd.per_project {
        push(OsStr::new(pp.dir), How::Projects(projects.to_vec()));
    }
    for (name, kind) in seen {
        let how = match (name.to_str(), kind) {
            (_, Kind::Other) => continue, // a socket or FIFO: not in the jail
            (_, Kind::Symlink(target)) => How::Symlink(target.clone()),
            (_, _) if named.contains(name) => How::ReadOnly,
            (None, _) => How::ReadOnly, // no runtime writes a name that is not UTF-8
            (Some(n), _) => match (sd.access(n), sd.allowed(n), kind) {
                (Access::Private | Access::View, _, _) => How::MountPoint,
                (Access::ReadOnly, _, _) => How::ReadOnly,
                // A history is appended in place: yours, bound (no copy of megabytes at launch).
                (Access::Writable, Some(Allowed::File), Kind::File { .. }) if is_history(n) => {
                    How::Writable
                }
                (Access::Writable, Some(Allowed::File), Kind::File { size })
                    if *size <= MAX_COPY =>
                {
                    How::Copied
                }
                (Access::Writable, Some(Allowed::Pattern), Kind::File { .. }) => How::Copied,
                (Access::Writable, _, _) => How::Writable,
            },
        };
        push(name, how);
    }
    for rel in sd
        .private
        .iter()
        .copied()
        .chain(sd.views.iter().map(|v| v.name))
    {
        if !rel.contains('/') {
            push(OsStr::new(rel), How::MountPoint);
        }
    }
    for e in sd.entry_points {
        let Some(top) = top_name(sd, e.rel) else {
            continue;
        };
        push(OsStr::new(top), How::Stub(e.stub));
    }
    for n in named {
        push(n, How::Stub(Stub::Dir));
    }
    out
}

/// An append-only history (`history.jsonl`, `prompt-history.jsonl`).
fn is_history(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
}

/// The top-level name of an entry point `rel` (relative to `$HOME`) directly in `sd`.
fn top_name<'a>(sd: &StateDir, rel: &'a str) -> Option<&'a str> {
    let r = rel.strip_prefix(sd.path)?.strip_prefix('/')?;
    (!r.is_empty() && !r.contains('/')).then_some(r)
}

/// The names at the top of `sd` that the command lines of its sealed settings name as scripts
/// (deeper ones lie in a read-only entry or a view, or are sealed one by one: `entrypoints`).
pub(crate) fn named_top_names(home: &Path, sd: &StateDir) -> Vec<OsString> {
    let dir = home.join(sd.path);
    let mut out: Vec<OsString> = crate::entrypoints::state_scripts(home, sd)
        .into_iter()
        .filter(|p| p.parent() == Some(dir.as_path()))
        .filter_map(|p| p.file_name().map(OsStr::to_owned))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The jail's own persistent store for `sd`, if it has one (beside the layer store, hidden like it
/// is not needed: nothing outside reads it).
pub(crate) fn store_path(
    home: &Path,
    env: &crate::host::HostEnv,
    sd: &StateDir,
) -> Option<PathBuf> {
    let js = sd.jail_store.as_ref()?;
    let layers = super::layers::store_dir(home, env);
    let base = layers.parent().unwrap_or(&layers).join("state");
    Some(base.join(format!("{}{}", sd.path.trim_start_matches('.'), js.name)))
}

/// The projects this session's agent keeps transcripts under: the working directory's and the
/// workspace's.
pub(crate) fn projects(sd: &StateDir, home: &Path, roots: &[&Path]) -> Vec<String> {
    let Some(pp) = &sd.per_project else {
        return Vec::new();
    };
    let state = home.join(sd.path);
    let mut out: Vec<String> = roots
        .iter()
        .filter_map(|p| (pp.slug)(&p.to_string_lossy(), &state))
        .filter(|s| !in_project_dir(sd, s))
        .collect();
    out.dedup();
    out
}

/// Whether `name` in the per-project directory is a view or private directory of the runtime's,
/// not a project (Gemini CLI's `tmp/bin`).
pub(crate) fn in_project_dir(sd: &StateDir, name: &str) -> bool {
    let Some(pp) = &sd.per_project else {
        return false;
    };
    let rel = format!("{}/{name}", pp.dir);
    sd.private.contains(&rel.as_str()) || sd.views.iter().any(|v| v.name == rel)
}

/// The names in the directory `dir`, sorted (none when it is missing): what a view keeps of it.
pub(crate) fn names_in(dir: &Path) -> Vec<OsString> {
    let mut out: Vec<OsString> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Host paths the jail can write through `binds` of the state directory `dir`.
pub(crate) fn writable_paths(dir: &Path, binds: &[StateBind]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for b in binds {
        match &b.how {
            How::Writable => out.push(dir.join(&b.name)),
            How::Projects(slugs) => out.extend(slugs.iter().map(|s| dir.join(&b.name).join(s))),
            _ => {}
        }
    }
    out
}

/// What `prepare` did, kept in the session directory for `finish` (also after a launcher died).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Record {
    pub dirs: Vec<DirRecord>,
}

/// One state directory's record.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct DirRecord {
    /// Relative to `$HOME` (the runtime's `StateDir::path`).
    pub rel: String,
    /// The human's directory.
    pub real: PathBuf,
    /// Names the launcher put in the jail's directory (mount points, stubs, links, the store):
    /// never carried out.
    pub made: Vec<OsString>,
    /// The files copied in: their stamp in the jail's copy and in yours, at launch.
    pub copied: Vec<Copied>,
    /// Directories the launcher made in yours, removed again if left empty.
    pub created: Vec<PathBuf>,
    /// The per-project directory's name and the projects bound in it.
    pub projects: Option<(OsString, Vec<String>)>,
}

/// A file copied into the jail.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Copied {
    pub name: OsString,
    pub jail: Stamp,
    pub yours: Stamp,
}

/// Enough of a file's `stat` to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: i64,
    pub ctime: i64,
    pub ctime_nsec: i64,
}

impl Stamp {
    pub(crate) fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            ino: m.ino(),
            size: m.size(),
            mtime: m.mtime(),
            mtime_nsec: m.mtime_nsec(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
        }
    }
}

/// The state directories `policy` gives the jail its own top level of, with their binds.
pub(crate) fn of_policy(policy: &super::policy::Policy) -> Vec<(&'static StateDir, &[StateBind])> {
    policy
        .home_entries
        .iter()
        .filter_map(|e| match &e.bind {
            super::policy::HomeBind::State(b) => crate::runtimes::state_dirs()
                .find(|s| OsStr::new(s.path) == e.name)
                .map(|sd| (sd, b.as_slice())),
            _ => None,
        })
        .collect()
}

/// Copy the file `from` (opened without following a link or blocking on a FIFO) to a new file `to`
/// with its permission bits, at most `max` bytes, if it is a regular file of at most `max` bytes.
/// Returns the metadata of both.
pub(crate) fn copy_regular(
    from: &Path,
    to: &Path,
    max: u64,
) -> std::io::Result<(std::fs::Metadata, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt;
    let src = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(from)?;
    let meta = src.metadata()?;
    if !meta.is_file() || meta.len() > max {
        return Err(std::io::Error::other("not a regular file of sane size"));
    }
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(meta.mode() & 0o777)
        .open(to)?;
    std::io::copy(&mut std::io::Read::take(&src, max), &mut dst)?;
    Ok((meta, dst.metadata()?))
}

/// Whether `name` is a lock or temporary name of the allowlist (never carried out, never alerted).
pub(crate) fn is_scratch(sd: &StateDir, name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| sd.allowed(n) == Some(Allowed::Pattern))
}

/// For `agent_hooks`: whether `rel` (relative to a state directory) is a per-project entry the jail keeps
/// read-only, and why.
pub(crate) fn sealed_in_project(sd: &StateDir, rel: &Path) -> Option<&'static str> {
    let pp = sd.per_project.as_ref()?;
    let mut c = rel.components().map(|c| c.as_os_str().as_bytes());
    if c.next()? != pp.dir.as_bytes() {
        return None;
    }
    let _project = c.next()?;
    let entry = c.next()?;
    pp.sealed
        .iter()
        .find(|(n, _)| n.as_bytes() == entry)
        .map(|(_, why)| *why)
}
