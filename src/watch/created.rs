//! Catalogued names made in the workspace during the session (`sub/.npmrc`,
//! `pkg/.claude/settings.json`'s `.claude`, a root `opencode.json`), alerted within a tick of being
//! made, while the session still runs: until its end, when `jail::launch::created` holds them, a
//! tool of the human's started in that directory reads them.
//!
//! Guards against such a name staying silent for the whole session, and against a false alarm at
//! every checkout: the name is judged at the next tick (the checkout has written its index by then)
//! and one its repository's index holds is the work, as at the end. The cost on a build's churn is
//! one comparison per catalogued name for each file made in a watched workspace directory
//! (`judge::judge_created_name`); only a match costs more. In sweep mode (no inotify) the same
//! comparison runs on the names of each directory the tick's cheap listing reads afresh
//! (`git_markers`: only those whose stamp moved), so the alert comes within a tick or two there too.
//!
//! Sockets made in the workspace are told of on the same paths (`check_socket`), at once: who
//! listens on one is judged outside the watcher (`jail::sockets::later`). That costs one `lstat`
//! per file made in a watched workspace directory, during a `run` only.

use super::*;
use crate::alerts::Action;
use std::collections::{HashMap, HashSet};

/// A name made before this long ago is judged at this tick; a younger one at the next (a checkout
/// writes its files before its index).
const SETTLE_NS: i64 = 300_000_000;

impl Watcher {
    /// `name` was made in the workspace directory `idx` (an inotify event): kept for the next tick
    /// if it is a catalogued name the launcher did not make.
    pub(super) fn check_created_name(&mut self, idx: DirId, name: &str) {
        if judge::judge_created_name(name).is_none() {
            return;
        }
        let path = self.table[idx].path.join(name);
        if !self.cfg.placeholders.contains(&path) {
            self.created_names.insert(path);
        }
    }

    /// A name made in the workspace tree: told of if it is a socket (`WatchConfig::new_sockets`).
    pub(super) fn check_socket(&self, path: &Path) {
        use std::os::unix::fs::FileTypeExt;
        let Some(tell) = &self.cfg.new_sockets else {
            return;
        };
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
            // The judge is gone only once the jail is: nothing left to keep the socket from.
            let _ = tell.send(path.to_path_buf());
        }
    }

    /// What was made in the new directory `dir` before its watch was in place: its catalogued
    /// names and sockets, at any depth the tree walk takes (`add_tree_in`).
    pub(super) fn check_created_names_in(&mut self, dir: &Path) {
        let mut walker = walkdir::WalkDir::new(dir).follow_links(false).into_iter();
        while let Some(e) = walker.next() {
            let Ok(e) = e else { continue };
            if e.depth() == 0 {
                continue;
            }
            let name = e.file_name();
            if e.file_type().is_dir() && crate::walk::pruned(name) {
                walker.skip_current_dir();
                continue;
            }
            if std::os::unix::fs::FileTypeExt::is_socket(&e.file_type()) {
                self.check_socket(e.path());
                continue;
            }
            let catalogued = name
                .to_str()
                .is_some_and(|n| judge::judge_created_name(n).is_some());
            if catalogued && !self.cfg.placeholders.contains(e.path()) {
                self.created_names.insert(e.path().to_path_buf());
                // Its own content is judged with it at the session's end.
                if e.file_type().is_dir() {
                    walker.skip_current_dir();
                }
            }
        }
    }

    /// Sweep mode: the catalogued names of the workspace directories listed afresh (`git_markers`).
    /// One changed since the session started is kept for the next tick like a name inotify told of;
    /// each is kept once (a directory that has not settled is listed at every tick).
    /// A socket made since is told of each time (the judge keeps each file once).
    pub(super) fn note_listed_names(&mut self, named: Vec<PathBuf>) {
        for path in named {
            if self.created_listed.contains(&path) || self.cfg.placeholders.contains(&path) {
                continue;
            }
            let made = Entry::metadata(&path).filter(|e| e.ctime_ns >= self.since.started);
            if made.as_ref().is_some_and(|e| e.kind == Kind::Other) {
                self.check_socket(&path);
            } else if made.is_some() {
                self.created_listed.insert(path.clone());
                self.created_names.insert(path);
            }
        }
    }

    /// Alert the names kept since the last tick that are still there and not the work.
    pub(super) fn alert_created_names(&mut self) {
        if self.created_names.is_empty() {
            return;
        }
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        let now_ns = now.tv_sec * 1_000_000_000 + now.tv_nsec;
        let mut indexes: HashMap<PathBuf, Option<HashSet<Vec<u8>>>> = HashMap::new();
        for path in std::mem::take(&mut self.created_names) {
            let Some(e) = Entry::metadata(&path) else {
                continue; // gone again
            };
            if now_ns - e.ctime_ns < SETTLE_NS {
                self.created_names.insert(path);
                continue;
            }
            if self.tracked(&path, &mut indexes) {
                continue;
            }
            // Another session's placeholder, as it made it (two sessions started together in one
            // workspace: each sees the other's made at the top): sealed read-only, not the jail's.
            if crate::jail::placeholders::is_held(&self.cfg.runtime, &path) {
                continue;
            }
            let name = path.file_name().and_then(OsStr::to_str).unwrap_or_default();
            let Some(finding) = judge::judge_created_name(name) else {
                continue;
            };
            let alert =
                act::file_alert(&self.cfg.session, finding, &path, Action::Alerted, None, &e);
            self.sink.alert(alert);
        }
    }

    /// Whether `path` is in the index of the innermost known repository whose working tree holds it.
    fn tracked(
        &self,
        path: &Path,
        indexes: &mut HashMap<PathBuf, Option<HashSet<Vec<u8>>>>,
    ) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let repo = self
            .repos
            .ids()
            .into_iter()
            .map(|id| self.repos.get(id))
            .filter(|r| r.worktree.as_deref().is_some_and(|w| path.starts_with(w)))
            .max_by_key(|r| r.worktree.as_ref().map_or(0, |w| w.as_os_str().len()));
        let Some(repo) = repo else { return false };
        let Some(rel) = repo
            .worktree
            .as_deref()
            .and_then(|w| path.strip_prefix(w).ok())
        else {
            return false;
        };
        let paths = indexes
            .entry(repo.git_dir.clone())
            .or_insert_with(|| gitlinks::index_paths(&repo.git_dir, &repo.common_dir));
        // A directory (`sub/.vscode/`) is tracked when a file below it is.
        let rel = rel.as_os_str().as_bytes();
        paths.as_ref().is_some_and(|p| {
            p.contains(rel)
                || p.iter()
                    .any(|q| q.len() > rel.len() && q.starts_with(rel) && q[rel.len()] == b'/')
        })
    }
}
