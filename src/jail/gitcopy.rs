//! The jail's own copy of each repository's `.git/config`, merged back without its exec-capable keys.
//!
//! Guards against two failures of a plain read-only seal. Everyday git breaks: `git remote add`,
//! `git config user.email` and `git push -u` save the config by writing `config.lock` and renaming it
//! over `config`, and a rename onto a mount point fails (EBUSY). And anything the agent could write
//! into the human's config is live at once for the human's git outside (VS Code runs `git status` on
//! its own, which runs `core.fsmonitor`): a watcher that neutralises after the fact leaves a window.
//!
//! So inside the jail `.git/config` is a *symlink*, mounted over the file (a mounted symlink cannot
//! be removed or renamed over: EBUSY), pointing at the jail's copy under `layout::GIT_COPIES`. git
//! resolves a symlinked config before it locks (`lockfile.c`), so it writes `<copy>.lock` beside
//! the copy and renames it there: every write succeeds, and none reaches the human's file while the
//! agent runs. When the session ends the copy is merged back key by key (`merge`): ordinary keys
//! the jail changed are carried out with git itself (`git config --file`), keys whose new value
//! makes git run something (`catalogue::git::is_exec_key`, includes) keep the human's values and raise an
//! alert. The window in which an exec-capable key of the agent's is live outside is therefore zero.
//!
//! A mount on a file is detached when something *outside* renames over its path (the kernel allows
//! that from another mount namespace), and the human's own `git config`, `git remote add` or VS Code's
//! "publish branch" save `.git/config` exactly so, during the session. So while a session runs the
//! human's `.git/config` is *diverted* too: it becomes a symlink to `claude-sandbox/config` in the
//! same git directory (a hard link of the same file, swapped in by one rename: no moment without a
//! config), the human's git follows it and renames inside `claude-sandbox/`, a directory sealed
//! read-only in the jail (renames inside a bound directory detach nothing). The jail's pin on
//! `.git/config` therefore holds for the whole session. The last session using the repository
//! renames the file back (`release`); a registry of sessions in `claude-sandbox/lock` says
//! which one is last. An editor that saves `.git/config` itself by rename would still replace the
//! symlink: that is the remaining, documented gap.

mod divert;
mod merge;

/// What went wrong with the jail's own copy of a config, and what to do (shown to the human).
#[derive(Debug, thiserror::Error)]
pub(crate) enum GitCopyError {
    #[error(
        "{} is in use by another session and bwrap alone cannot seal it; end that session or run \
         again once it has ended",
        paths(.0)
    )]
    InUseElsewhere(Vec<PathBuf>),
    #[error(
        "{} is in use by a session sealed from outside, and bwrap alone cannot seal it; end that \
         session, or run without CLAUDE_SANDBOX_SEAL=bwrap",
        paths(.0)
    )]
    HeldBySealedSession(Vec<PathBuf>),
    #[error(
        "{config} was replaced during the session by something other than git; your config as it \
         was is kept in {}", .aside.display(), config = .config.display()
    )]
    ReplacedOutside { config: PathBuf, aside: PathBuf },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("running git: {0}")]
    Git(std::io::Error),
    #[error("git config: {0}")]
    GitRefused(String),
    #[error("{}: {what}", .config.display())]
    NotMerged { config: PathBuf, what: String },
}

fn paths(p: &[PathBuf]) -> String {
    p.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

use crate::alerts::{at_session_end, AlertKind};
use crate::jail::policy::GitCopy;
pub(crate) use divert::is_diverted;
use divert::{divert, human_file, release};
pub(crate) use merge::apply as apply_key;

use crate::gitconfig::{self, Key};
use crate::jail::policy::copy_name;
use crate::runtime_dir::SessionDir;
use serde::Serialize;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The session's copies, bound writable at `layout::GIT_COPIES` (`session_home`'s session directory).
pub(crate) fn copies_dir(session_home: &Path) -> PathBuf {
    SessionDir::of_home(session_home).git_copies()
}

/// The configs as they were at launch and which copy is whose (`Base`, one file): never in the jail.
fn base_file(session_dir: &Path) -> PathBuf {
    SessionDir::at(session_dir.to_path_buf()).git_base()
}

/// One config as it was at launch: whose it is, its copy's number (`GitCopy::index`: a copy that
/// failed leaves a gap), whether it is diverted, its bytes (the merge's base), and the jail's
/// writable roots (a local repository under one of them is one whose hooks the agent could write;
/// a record without them, from an older version, counts every local path as such).
#[derive(Serialize, serde::Deserialize)]
struct Base {
    real: PathBuf,
    index: usize,
    divert: bool,
    bytes: Vec<u8>,
    #[serde(default)]
    writable: Vec<PathBuf>,
}

/// The configs that get a copy: each repository's (common directory's) sealed `config`, and the
/// global `~/.gitconfig` when it is bound read-only into the session's `$HOME` — each only when it
/// is a regular file (a symlinked or odd one keeps the read-only seal).
pub(crate) fn choose(
    policy: &crate::jail::policy::Policy,
    repos: &[crate::entrypoints::Repo],
) -> Vec<GitCopy> {
    let sealed = &policy.sealed;
    let mut out = Vec::new();
    let global = policy.home.join(".gitconfig");
    let bound = policy
        .home_entries
        .iter()
        .any(|e| e.name == ".gitconfig" && e.bind == crate::jail::policy::HomeBind::ReadOnly);
    if bound && std::fs::symlink_metadata(&global).is_ok_and(|m| m.file_type().is_file()) {
        out.push(GitCopy {
            real: global,
            index: 0,
            divert: false,
        });
    }
    // A real git directory only: a `gitdir:` pointer may name any directory with a `config` in it.
    let is_git_dir = |d: &Path| d.join("HEAD").exists() && d.join("objects").is_dir();
    for r in repos
        .iter()
        .filter(|r| r.git_dir == r.common_dir && is_git_dir(&r.git_dir))
    {
        let real = r.common_dir.join("config");
        // Diverted by another session, the seal is still the config's own name (`plan::seals`).
        let file = human_file(&real);
        let is_sealed = sealed.iter().any(|s| s.path == real && !s.placeholder);
        let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file());
        if is_sealed && regular && !out.iter().any(|c: &GitCopy| c.real == real) {
            out.push(GitCopy {
                real,
                index: out.len(),
                divert: true,
            });
        }
    }
    out
}

/// Make the copies (and keep the launch-time bytes for the merge). A config that cannot be read
/// as a regular file is dropped from `copies`: it keeps its read-only seal. Returns a warning for
/// each, shown by the caller if the launch goes on (the copies are made beside other set-up that
/// may stop it, whose one-line error then stands alone).
#[must_use]
pub(crate) fn prepare(
    session_dir: &Path,
    session_home: &Path,
    session: &super::placeholders::SessionId,
    writable: &[PathBuf],
    copies: &mut Vec<GitCopy>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let dirs = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(copies_dir(session_home));
    if let Err(e) = dirs {
        warnings.push(format!("git configs keep their read-only seal: {e}"));
        copies.clear();
        return warnings;
    }
    // Side by side: each copy and diversion mostly waits on the disk (new inodes, ~0.3 ms each
    // here), each repository's under its own locks; 100 repositories took 31-39 ms one by one.
    let made = made_in_parallel(copies, |c| {
        copy_one(session_home, c).and_then(|bytes| {
            if c.divert {
                divert(&c.real, session)?;
            }
            Ok(bytes)
        })
    });
    let mut made = made.into_iter();
    let mut bases = Vec::new();
    copies.retain(|c| {
        match made
            .next()
            .unwrap_or_else(|| Err(std::io::Error::other("not made")))
        {
            Ok(bytes) => {
                bases.push(Base {
                    real: c.real.clone(),
                    index: c.index,
                    divert: c.divert,
                    bytes,
                    writable: writable.to_vec(),
                });
                true
            }
            Err(e) => {
                warnings.push(format!(
                    "{}: keeps its read-only seal: {e}",
                    c.real.display()
                ));
                false
            }
        }
    });
    let written = serde_json::to_vec(&bases)
        .map_err(std::io::Error::other)
        .and_then(|b| std::fs::write(base_file(session_dir), b));
    if let Err(e) = written {
        warnings.push(format!("git configs keep their read-only seal: {e}"));
        copies.clear();
    }
    warnings
}

/// `make` of every copy, in order, on a few threads. Each result is kept as soon as it is made, so
/// a worker that panics loses only the one it was making (that copy keeps its read-only seal).
fn made_in_parallel(
    copies: &[GitCopy],
    make: impl Fn(&GitCopy) -> std::io::Result<Vec<u8>> + Sync,
) -> Vec<std::io::Result<Vec<u8>>> {
    use std::sync::{atomic::AtomicUsize, atomic::Ordering::Relaxed, Mutex};
    const THREADS: usize = 4;
    if copies.len() < 2 * THREADS {
        return copies.iter().map(&make).collect();
    }
    let slots: Vec<Mutex<Option<std::io::Result<Vec<u8>>>>> =
        copies.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Relaxed);
                    let Some(c) = copies.get(i) else { break };
                    let result = make(c);
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(result);
                    }
                })
            })
            .collect();
        // Joined here, so that a panic stays in its worker (the scope would repeat it).
        for w in workers {
            let _ = w.join();
        }
    });
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .ok()
                .flatten()
                .unwrap_or_else(|| Err(std::io::Error::other("copying panicked")))
        })
        .collect()
}

/// Make the jail's copy of one config; returns its bytes (the merge's base).
fn copy_one(session_home: &Path, c: &GitCopy) -> std::io::Result<Vec<u8>> {
    let (bytes, mode) =
        super::readback::read_regular(&human_file(&c.real)).map_err(std::io::Error::other)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .open(copies_dir(session_home).join(copy_name(c.index)))?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))?;
    Ok(bytes)
}

/// The sealer failed and bwrap will make the mounts: it cannot pin a symlink, so the diversions of
/// this session are released (the configs get the read-only seal). Fails when a config stays
/// diverted for another live session: its symlink could not be pinned in this jail.
pub(crate) fn withdraw(session_dir: &Path, copies: &mut Vec<GitCopy>) -> Result<(), GitCopyError> {
    let name = session_name(session_dir);
    let _ = std::fs::remove_file(base_file(session_dir));
    let mut still = Vec::new();
    for c in copies.iter().filter(|c| !c.divert) {
        // The sealer's symlink in the session's `$HOME` (`~/.gitconfig`): bwrap binds the file there.
        if let Some(name) = c.real.file_name() {
            let link = SessionDir::at(session_dir.to_path_buf()).home().join(name);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
                let _ = std::fs::remove_file(link);
            }
        }
    }
    for c in copies.drain(..).filter(|c| c.divert) {
        let _ = release(&c.real, &name);
        if is_diverted(&c.real) {
            still.push(c.real.clone());
        }
    }
    if still.is_empty() {
        Ok(())
    } else {
        Err(GitCopyError::InUseElsewhere(still))
    }
}

/// bwrap makes every mount (`CLAUDE_SANDBOX_SEAL=bwrap`): a config another session keeps diverted
/// is a symlink bwrap cannot pin, which the agent could replace with a file the human's git then
/// reads. Refused, with the way out.
pub(crate) fn refuse_unpinnable(repos: &[crate::entrypoints::Repo]) -> Result<(), GitCopyError> {
    let held: Vec<PathBuf> = repos
        .iter()
        .map(|r| r.common_dir.join("config"))
        .filter(|c| is_diverted(c))
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    Err(GitCopyError::HeldBySealedSession(held))
}

fn session_name(session_dir: &Path) -> String {
    session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Merge every copy back into the human's config; returns notes for the end of the session.
pub(crate) fn finish(session_dir: &Path) -> Vec<String> {
    let Ok(map) = std::fs::read(base_file(session_dir)) else {
        return Vec::new();
    };
    let bases: Vec<Base> = serde_json::from_slice(&map).unwrap_or_default();
    let copies = SessionDir::at(session_dir.to_path_buf()).git_copies();
    let mut notes = Vec::new();
    for base in &bases {
        let (real, copy) = (&base.real, copies.join(copy_name(base.index)));
        let file = human_file(real);
        if let Err(e) = finish_one(session_dir, base, &copy, &file, real) {
            notes.push(e.to_string());
        }
        if !base.divert {
            continue;
        }
        if let Err(e) = release(real, &session_name(session_dir)) {
            let e = e.to_string();
            at_session_end(session_dir, AlertKind::GitConfigDiversion, real, &e);
            notes.push(e);
        }
    }
    notes
}

/// `real`: the human's config as git reads it now (the diverted file while sessions run);
/// `target`: its path once no session holds it, where a held key is applied.
fn finish_one(
    session_dir: &Path,
    launch: &Base,
    copy: &Path,
    real: &Path,
    target: &Path,
) -> Result<(), GitCopyError> {
    let not_merged = |what: String| GitCopyError::NotMerged {
        config: real.to_path_buf(),
        what,
    };
    let refuse = |detail: String| {
        let detail = format!("{detail}; your config is unchanged");
        let e = not_merged(detail);
        at_session_end(
            session_dir,
            AlertKind::GitConfigRefused,
            real,
            &e.to_string(),
        );
        e
    };
    let jail = super::readback::read_regular(copy).map(|(bytes, _)| bytes);
    if jail.as_deref().is_ok_and(|j| j == launch.bytes) {
        return Ok(()); // the jail changed nothing: nothing to merge
    }
    let base = gitconfig::parse(&launch.bytes)
        .map_err(|e| not_merged(format!("no launch-time copy: {e}")))?;
    let jail = match jail
        .map_err(|e| e.to_string())
        .and_then(|b| gitconfig::parse(&b).map_err(|e| e.to_string()))
    {
        Ok(k) => k,
        Err(e) => return Err(refuse(format!("the jail's copy was not merged back: {e}"))),
    };
    let parse = |p: &Path| -> Result<Vec<Key>, String> {
        let (bytes, _) = super::readback::read_regular(p).map_err(|e| e.to_string())?;
        gitconfig::parse(&bytes).map_err(|e| e.to_string())
    };
    let human = parse(real).map_err(|e| {
        not_merged(format!(
            "the jail's changes were not merged: your config: {e}"
        ))
    })?;
    let local_writable = |path: &[u8]| merge::local_repo_writable(path, real, &launch.writable);
    let ctx = crate::handback::git::Ctx {
        local_writable: &local_writable,
    };
    let m = merge::merge(&base, &jail, &human, &ctx);
    if m.too_many {
        let detail = format!(
            "{}: the jail changed more than {} keys; none was carried out or kept for review",
            real.display(),
            merge::MAX_CARRIED
        );
        at_session_end(session_dir, AlertKind::GitConfigKept, real, &detail);
    }
    let mut problems: Vec<String> = m
        .conflicts
        .iter()
        .map(|k| format!("{k} (changed on both sides: yours kept)"))
        .collect();
    for h in m.held {
        let bytes = |v: &[Option<Vec<u8>>]| -> Vec<Option<crate::held::Bytes>> {
            v.iter()
                .map(|x| x.clone().map(crate::held::Bytes))
                .collect()
        };
        let item = crate::held::Item {
            id: String::new(),
            time: String::new(),
            session: String::new(),
            consequence: h.verdict.consequence,
            why: h.verdict.why,
            target: target.to_path_buf(),
            what: format!("{} = {}", h.name, merge::shown(&h.values)),
            change: crate::held::Change::GitKey {
                name: h.name.clone(),
                values: bytes(&h.values),
                before: bytes(&h.human),
            },
        };
        if let Err(e) = crate::held::hold_at_session_end(session_dir, item, None) {
            problems.push(format!("{}: not kept for review: {e}", h.name));
        }
    }
    for (name, vals) in &m.set {
        if let Err(e) = merge::apply(real, name, vals) {
            problems.push(format!("{name}: {e}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(not_merged(format!(
            "not carried out from the jail: {}",
            problems.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In order, each its own; a panic in one loses that one alone (it keeps its seal).
    #[test]
    fn copies_made_side_by_side_come_back_in_order_and_a_panic_loses_one() {
        let copies: Vec<GitCopy> = (0..40)
            .map(|index| GitCopy {
                real: format!("/r/{index}/config").into(),
                index,
                divert: true,
            })
            .collect();
        let made = made_in_parallel(&copies, |c| {
            assert!(c.index != 13, "copy 13 panics");
            Ok(c.index.to_string().into_bytes())
        });
        assert_eq!(made.len(), 40);
        for (i, m) in made.iter().enumerate() {
            match m {
                Ok(b) => assert_eq!(b, i.to_string().as_bytes()),
                Err(_) => assert_eq!(i, 13, "only the one that panicked is lost"),
            }
        }
        assert!(made[13].is_err());
    }
}
