//! The jail's own top level of each measured agent state directory (`~/.claude`, `~/.codex`,
//! `~/.gemini`): the jail's world is the jail's.
//!
//! Guards against what the agent's state hands the human's unjailed agent: a transcript that `claude
//! --continue` resumes as its context, a memory it loads, a plugin or a helper directory
//! (`~/.codex/tmp/arg0-linux/`, `~/.codex/packages/`) it runs, credentials of another account — and
//! against the opposite failure, a list of names measured once that flags every new name a newer
//! agent writes. So in the jail the state directory is a directory of the jail's own, **kept across
//! sessions** beside the layer store and never read outside: everything the agent writes there
//! works inside and is there for its next session, whatever its name, and none of it is yours.
//! Of yours it sees what it needs to read — your settings, instructions, commands, scripts (read-only
//! binds; a missing entry point is a read-only stub) — and your prompt history (bound writable: it
//! is appended in place, and you see the jail's prompts in your up-arrow). The files on the
//! measured allowlist (credentials, installation ids) are copied in from yours at each launch and
//! come back at the end, judged by `crate::handback`: a credentials file naming another account is
//! held for your review. A rename in your directory touches no dentry the jail has a mount on.
//! Codex's `SQLite` stores live in a store of the jail's own (`CODEX_SQLITE_HOME`) as before.

use crate::catalogue::Stub;
use crate::jail::policy::{How, StateBind};
use crate::runtimes::{Access, Allowed, StateDir};
use serde::{Deserialize, Serialize};
use std::ffi::{OsStr, OsString};
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
pub(crate) fn own_top_levels(
    entries: &mut [super::policy::HomeEntry],
    home: &Path,
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
            &named_top_names(home, sd),
            store_path(home, env, sd).as_deref(),
            &super::layers::store_dir(home, env),
        );
        if let Some(js) = &sd.jail_store {
            setenv.push((js.env.into(), real.join(js.name).to_string_lossy().into()));
        }
        e.bind = HomeBind::State {
            own: own_dir(home, env, sd),
            binds,
        };
    }
}

/// The jail's top level for `sd`, given the human's listing and the top-level names the sealed
/// settings name as scripts (`store`: its jail store; `layers`: the layer store). Pure. What is
/// not listed here is the jail's own directory's.
pub(crate) fn classify(
    sd: &StateDir,
    seen: &[(OsString, Kind)],
    named: &[OsString],
    store: Option<&Path>,
    layers: &Path,
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
    // The entry points the agent saves its choices in: the jail's own copies, whatever yours is.
    for e in sd.entry_points.iter().filter(|e| e.jails_own) {
        if let Some(top) = top_name(sd, e.rel) {
            push(OsStr::new(top), How::Own(layers.to_path_buf()));
        }
    }
    if let (Some(js), Some(dir)) = (&sd.jail_store, store) {
        push(OsStr::new(js.name), How::Store(dir.to_path_buf()));
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
    for (name, kind) in seen {
        let how = match (name.to_str(), kind) {
            (_, Kind::Other) => continue, // a socket or FIFO: not in the jail
            (_, Kind::Symlink(target)) => How::Symlink(target.clone()),
            (_, _) if named.contains(name) => How::ReadOnly,
            (None, _) => How::ReadOnly, // no runtime writes a name that is not UTF-8
            (Some(n), _) => match (sd.access(n), sd.allowed(n), kind) {
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
                // Views and private directories (pushed above); agent state directories, locks
                // and temporary files, large files: the jail's own.
                (Access::Private | Access::View | Access::Writable, _, _) => continue,
            },
        };
        push(name, how);
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

/// The jail's own directory for `sd`, kept across sessions beside the layer store (never read
/// outside; mounted at `sd`'s path in the jail).
pub(crate) fn own_dir(home: &Path, env: &crate::host::HostEnv, sd: &StateDir) -> PathBuf {
    let layers = super::layers::store_dir(home, env);
    let base = layers.parent().unwrap_or(&layers).join("state");
    base.join(sd.path.trim_start_matches('.'))
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
        if b.how == How::Writable {
            out.push(dir.join(&b.name));
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
    /// The jail's own directory (a record without it, from an older version, kept the jail's
    /// top level in the session's `$HOME`).
    #[serde(default)]
    pub own: Option<PathBuf>,
    /// Names the launcher put in the jail's directory (mount points, stubs, links, the store):
    /// never carried out.
    pub made: Vec<OsString>,
    /// The files copied in: their stamp in the jail's copy and in yours, at launch.
    pub copied: Vec<Copied>,
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

/// The state directories `policy` gives the jail its own top level of, with where it is kept and
/// their binds.
pub(crate) fn of_policy(
    policy: &super::policy::Policy,
) -> Vec<(&'static StateDir, &Path, &[StateBind])> {
    policy
        .home_entries
        .iter()
        .filter_map(|e| match &e.bind {
            super::policy::HomeBind::State { own, binds } => crate::runtimes::state_dirs()
                .find(|s| OsStr::new(s.path) == e.name)
                .map(|sd| (sd, own.as_path(), binds.as_slice())),
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
