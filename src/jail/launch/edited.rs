//! Files the jail edits freely that are held when the session changed them: the `.env` files an
//! allowed `.envrc` exports (`dotenv`, `dotenv_if_exists`), and the catalogued names whose edits
//! are held (`catalogue::Catalogued::edits_held`: `.pre-commit-config.yaml`) unless they are the
//! work.
//!
//! Guards against data made code, without breaking the work that writes it. direnv exports every
//! line of such a `.env` into the human's shell at the next prompt, and
//! `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_0=core.fsmonitor`, `BASH_ENV`, `LD_PRELOAD` or `PATH` make
//! the next `git status` or `bash` run what the agent chose — before any review, so a changed
//! `.env` is held whether or not git tracks it. pre-commit runs its config at the human's next commit, after
//! `git diff` showed a tracked one: that is the work; an untracked or ignored one is held. Not
//! sealed, because both are written every day by tools and agents (`cp .env.example .env`, a key
//! for the task, a hook the task adds), and a read-only file or a placeholder there breaks that
//! work inside the jail. At the session's end a held one goes to `claude-sandbox review` with the
//! session's bytes and the human's bytes as of launch are put back (a new `.env` is moved out;
//! a new catalogued name is `launch::created`'s). Accepting puts the session's version in place
//! byte for byte. Until the session ends the human's tool there reads the jail's version (the
//! window this kind accepts, as `launch::created` does for new names).

use crate::alerts::{at_session_end, AlertKind};
use crate::jail::plan::Plan;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Larger `.env` files are not snapshot: they are alerted when changed, not restored.
const MAX_BYTES: u64 = 1 << 20;

/// One file as it was at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Before {
    pub path: PathBuf,
    /// The regular file there (`None`: there was none).
    pub file: Option<Snapshot>,
    pub kind: Edited,
}

/// Why a file's edits are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Edited {
    /// Exported by an allowed `.envrc`: held even when tracked (direnv loads it before a review).
    Dotenv,
    /// A catalogued name (`Catalogued::edits_held`): a tracked one is the work.
    Catalogued,
}

impl Edited {
    fn why(self) -> &'static str {
        match self {
            Edited::Dotenv => {
                "exported into your shell by an allowed .envrc (dotenv) or a mise.toml (_.file): \
                 variables such as GIT_CONFIG_*, BASH_ENV, LD_PRELOAD or PATH run programs"
            }
            Edited::Catalogued => "its commands run at your next commit (pre-commit)",
        }
    }
}

/// A regular file's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Its bytes (`None`: larger than `MAX_BYTES`, judged by its change time).
    bytes: Option<Vec<u8>>,
    mode: u32,
    ctime_ns: i64,
}

/// The launch's snapshot of the `.env` files `.envrc` files export and of the existing catalogued
/// names held when changed, where the jail can write.
pub(crate) fn at_launch(
    dotenv: &[PathBuf],
    catalogued: &[PathBuf],
    roots: &[PathBuf],
) -> Vec<Before> {
    let mut out = before(dotenv, roots, Edited::Dotenv);
    out.extend(before(catalogued, roots, Edited::Catalogued));
    out
}

fn before(paths: &[PathBuf], roots: &[PathBuf], kind: Edited) -> Vec<Before> {
    paths
        .iter()
        .filter(|p| roots.iter().any(|r| p.starts_with(r)))
        .map(|p| Before {
            path: p.clone(),
            file: snapshot(p),
            kind,
        })
        .collect()
}

/// The regular file at `path`, if there is one (a symlink is none: direnv would follow it, and
/// it is judged as "not a regular file" at the end).
fn snapshot(path: &Path) -> Option<Snapshot> {
    let m = std::fs::symlink_metadata(path)
        .ok()
        .filter(std::fs::Metadata::is_file)?;
    let bytes = (m.len() <= MAX_BYTES)
        .then(|| std::fs::read(path).ok())
        .flatten();
    Some(Snapshot {
        bytes,
        mode: m.mode() & 0o7777,
        ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
    })
}

/// Whether the file changed: by bytes, or by change time where either side was too large.
fn changed(was: Option<&Snapshot>, is: Option<&Snapshot>) -> bool {
    match (was, is) {
        (None, None) => false,
        (Some(w), Some(i)) => match (&w.bytes, &i.bytes) {
            (Some(a), Some(b)) => a != b,
            _ => w.ctime_ns != i.ctime_ns,
        },
        _ => true,
    }
}

/// At the session's end: hold what changed, put the launch's bytes back.
pub(super) fn finish(plan: &Plan, session_dir: &Path) {
    let mut index = super::created::Indexes::new(&plan.repos);
    for b in &plan.edited {
        let now = snapshot(&b.path);
        let other = now.is_none() && std::fs::symlink_metadata(&b.path).is_ok();
        if !changed(b.file.as_ref(), now.as_ref()) && !other {
            continue;
        }
        let shown = crate::escape::visible_path(&b.path);
        // A directory on the way replaced by a symlink: the name now leads elsewhere, where
        // nothing is written in your name.
        let moved = b
            .path
            .parent()
            .is_some_and(|d| std::fs::canonicalize(d).map_or(true, |c| c != d));
        if moved {
            let detail = format!(
                "{shown} ({}): a directory on its way was replaced during the session, so it was \
                 neither held nor put back: review it",
                b.kind.why()
            );
            at_session_end(session_dir, AlertKind::EntryPointCreated, &b.path, &detail);
            continue;
        }
        if b.kind == Edited::Catalogued && index.tracked(&b.path) {
            crate::logfile::note(&format!(
                "{shown} was changed during the session and its repository tracks it: review it \
                 with the work (`git diff`) before your next commit runs it"
            ));
            continue;
        }
        let alert = |why: &str| {
            let detail = format!("{shown} ({}) {why}: review it", b.kind.why());
            at_session_end(session_dir, AlertKind::EntryPointCreated, &b.path, &detail);
        };
        match (now, &b.file) {
            // Removed: nothing of the session's is left to load.
            (None, _) if !other => {}
            (
                Some(Snapshot {
                    bytes: Some(bytes),
                    mode,
                    ..
                }),
                None,
            ) => {
                hold(b, &bytes, mode, None, session_dir);
            }
            (
                Some(Snapshot {
                    bytes: Some(bytes),
                    mode,
                    ..
                }),
                Some(Snapshot {
                    bytes: Some(old),
                    mode: old_mode,
                    ..
                }),
            ) => hold(b, &bytes, mode, Some((old, *old_mode)), session_dir),
            _ => alert("was changed during the session and is not a small regular file"),
        }
    }
}

/// Hold the session's bytes and put the launch's back (none: move the file out).
fn hold(b: &Before, bytes: &[u8], mode: u32, old: Option<(&Vec<u8>, u32)>, session_dir: &Path) {
    let path = b.path.as_path();
    let shown = crate::escape::visible_path(path);
    let item = crate::held::Item::file(
        path,
        crate::handback::Consequence::Program,
        b.kind.why().into(),
        (bytes, mode),
        old.map(|(b, _)| b.as_slice()),
    );
    let id = match crate::held::hold_at_session_end(session_dir, item, Some(bytes)) {
        Ok(id) => id,
        Err(e) => {
            let detail = format!(
                "{shown} ({}) was changed during the session and could not be held ({e}): \
                 review it",
                b.kind.why()
            );
            at_session_end(session_dir, AlertKind::EntryPointCreated, path, &detail);
            return;
        }
    };
    // A new file renamed over the name, never a write through it: the session may have made the
    // name a hard link to a file of yours.
    let put_back = match old {
        Some((b, m)) => {
            crate::held::write_atomic_via(path, &crate::tempname::beside(path, session_dir), b, m)
                .map_err(|e| e.to_string())
        }
        None => std::fs::remove_file(path).map_err(|e| e.to_string()),
    };
    match put_back {
        Ok(()) => crate::logfile::note(&format!(
            "{shown} was changed during the session: held for `claude-sandbox review` ({id}); \
             yours is back as it was"
        )),
        Err(e) => crate::logfile::note(&format!(
            "{shown}: held ({id}) but yours could not be put back: {e}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(bytes: Option<&[u8]>, ctime_ns: i64) -> Snapshot {
        Snapshot {
            bytes: bytes.map(<[u8]>::to_vec),
            mode: 0o644,
            ctime_ns,
        }
    }

    #[test]
    fn a_change_is_told_by_bytes_and_by_ctime_only_where_a_side_was_too_large() {
        let a = snap(Some(b"A=1\n"), 1);
        assert!(!changed(None, None));
        assert!(changed(None, Some(&a)), "made in the session");
        assert!(changed(Some(&a), None), "removed");
        assert!(
            !changed(Some(&a), Some(&snap(Some(b"A=1\n"), 2))),
            "touched only"
        );
        assert!(
            changed(Some(&a), Some(&snap(Some(b"A=2\n"), 1))),
            "same ctime, new bytes"
        );
        assert!(!changed(Some(&snap(None, 5)), Some(&snap(None, 5))));
        assert!(changed(Some(&snap(None, 5)), Some(&snap(Some(b"x"), 6))));
    }
}
