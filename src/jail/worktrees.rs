//! Worktrees the agent makes during a session (`git worktree add`, `claude -w NAME`). Inside the
//! writable roots (the workspace, `.claude/worktrees/`, which is writable inside the sealed
//! `.claude/`) a worktree is made and kept like any other work. Outside them it is refused by the
//! filesystem (git: "could not create leading directories of '../x': Read-only file system"). One
//! made where only the jail can see it — its private `/tmp`, a layer of its own — is gone with the
//! session: its registration in the repository (`worktrees/<name>`) is removed at the end, its
//! branch and commits are kept, and the end note says where to make worktrees instead.
//!
//! Guards against a registration left pointing at a directory that never existed on the host:
//! `git worktree list` would show it "prunable", `git worktree add` of its branch would refuse,
//! and nothing would say where the work went. Only registrations made during the session are
//! judged; nothing the human had is touched.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A common directory's registered worktrees at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listing {
    pub common: PathBuf,
    pub names: Vec<OsString>,
}

/// The registered worktrees of each repository (common directory) the jail can write, at launch.
pub(crate) fn listings(repos: &[crate::entrypoints::Repo], writable: &[PathBuf]) -> Vec<Listing> {
    let mut out: Vec<Listing> = Vec::new();
    for r in repos {
        let c = &r.common_dir;
        if out.iter().any(|l| l.common == *c) || !writable.iter().any(|w| c.starts_with(w)) {
            continue;
        }
        out.push(Listing {
            common: c.clone(),
            names: names(c),
        });
    }
    out
}

fn names(common: &Path) -> Vec<OsString> {
    let mut v: Vec<OsString> = std::fs::read_dir(common.join("worktrees"))
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// What becomes of a registration made during the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Its working tree is on the host: it is the human's work now.
    Kept,
    /// Its working tree is not on the host (it was the jail's alone): the registration goes.
    Gone {
        /// Where the jail made it.
        path: PathBuf,
    },
}

/// The fate of a new registration whose `gitdir` file names `dot_git` (the worktree's `.git`),
/// as the host shows it now. Pure but for `lstat`.
pub(crate) fn fate(dot_git: Option<&Path>) -> Fate {
    match dot_git {
        Some(p) if std::fs::symlink_metadata(p).is_err() => Fate::Gone {
            path: p.parent().unwrap_or(p).to_path_buf(),
        },
        // Unreadable or odd: left as git made it.
        _ => Fate::Kept,
    }
}

/// After the jail: registrations made during the session whose working tree the host does not
/// have are removed (what git's `worktree prune` would do for them); the notes for the human.
pub(crate) fn finish(listings: &[Listing]) -> Vec<String> {
    let mut notes = Vec::new();
    for l in listings {
        for name in names(&l.common) {
            if l.names.contains(&name) {
                continue;
            }
            let reg = l.common.join("worktrees").join(&name);
            if !std::fs::symlink_metadata(&reg).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let dot_git = super::readback::read_regular(&reg.join("gitdir"))
                .ok()
                .and_then(|(b, _)| String::from_utf8(b).ok())
                .map(|t| PathBuf::from(t.trim()));
            let Fate::Gone { path } = fate(dot_git.as_deref()) else {
                continue;
            };
            let head = super::readback::read_regular(&reg.join("HEAD"))
                .ok()
                .and_then(|(b, _)| String::from_utf8(b).ok())
                .unwrap_or_default();
            let head = head.trim();
            let kept = match head.strip_prefix("ref: refs/heads/") {
                Some(branch) => format!("its branch `{branch}` is kept"),
                None => {
                    format!("its HEAD was {head} (detached): `git branch NAME {head}` keeps it")
                }
            };
            // `remove_dir_all` never follows a symlink in it.
            match std::fs::remove_dir_all(&reg) {
                Ok(()) => notes.push(format!(
                    "the worktree {} was made where only the jail could see it and is gone with \
                     the session; its registration is removed, {kept}; make worktrees inside the \
                     workspace (`git worktree add .claude/worktrees/NAME`, `claude -w NAME`)",
                    crate::escape::visible(&path.to_string_lossy())
                )),
                Err(e) => notes.push(format!(
                    "the worktree {} is gone with the session, but its registration {} could \
                     not be removed: {e}; `git worktree prune` removes it",
                    crate::escape::visible(&path.to_string_lossy()),
                    reg.display()
                )),
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registration_is_gone_only_when_its_working_tree_is_not_on_the_host() {
        let t = tempfile::tempdir().unwrap();
        let here = t.path().join("wt/.git");
        std::fs::create_dir_all(here.parent().unwrap()).unwrap();
        std::fs::write(&here, "gitdir: x\n").unwrap();
        assert_eq!(fate(Some(&here)), Fate::Kept);
        assert_eq!(fate(None), Fate::Kept);
        let gone = Path::new("/tmp/claude-sandbox-surely-not-here/y/.git");
        assert_eq!(
            fate(Some(gone)),
            Fate::Gone {
                path: gone.parent().unwrap().to_path_buf()
            }
        );
    }
}
