//! One name, from what is on disk to what is done about it: re-read it, compare it with what was
//! known, ask the judge (`judge`), hand the verdict to the sink (`act`).

use super::act;
use super::judge::{self, Context, Seen};
use super::*;
use crate::alerts::Action;

/// The judge's questions, answered from the watcher's state and the file system.
impl Context for Watcher {
    fn quarantine_new(&self) -> bool {
        self.cfg.quarantine_new
    }

    fn shadows(&self, pos: PathPos, name: &str) -> Option<PathBuf> {
        baseline::shadowed(&self.path, pos.0, name)
            .or_else(|| shellpath::shadowed_in(&self.future.order, self.path_dir(pos), name))
    }

    fn git_dir(&self, repo: RepoId) -> &Path {
        &self.repo(repo).git_dir
    }
}

impl Watcher {
    /// One entry of one directory: compare, decide, act.
    pub(super) fn reconcile(&mut self, idx: DirId, name: &str) {
        if name.contains(quarantine::NEUTRALISED_MARK) {
            return;
        }
        // Reached without an event for it (a rescan): whether it changed is the ctime's to say.
        self.resolve(idx, name, Resolve::Ctime);
        let path = self.table[idx].path.join(name);
        let meta = Entry::metadata(&path);
        // The sweep's common case: nothing changed. Same attributes (ctime included) means the
        // same content: no hash, no copy.
        if let (Some(m), Some(prev)) = (&meta, self.table[idx].state.get(name)) {
            if prev.same_metadata(m) {
                return;
            }
        }
        let current = meta.map(|mut c| {
            if c.kind == Kind::File && c.is_executable() {
                c.sha256 = match self.table[idx].state.get(name) {
                    Some(prev) if prev.same_metadata(&c) && prev.sha256.is_some() => prev.sha256,
                    _ => Sha256::of_path(&path),
                };
            }
            c
        });
        let previous = match &current {
            Some(c) => self.table[idx].state.insert(name.to_string(), c.clone()),
            None => self.table[idx].state.remove(name),
        };
        let Some(cur) = current else { return };
        let d = &self.table[idx];
        let seen = Seen {
            name,
            origin: d.origin.get(name),
            before: previous.as_ref(),
            after: &cur,
        };
        let verdict = judge::judge(&d.role, &seen, self);
        let dir = d.path.clone();
        if act::carry_out(
            self.sink.as_mut(),
            &self.cfg.session,
            &dir,
            name,
            verdict,
            &cur,
        ) {
            self.table[idx].state.remove(name);
        }
    }

    /// A new file matching a `hidden` glob: visible to the agent until the next session.
    pub(super) fn check_hidden_glob(&mut self, path: &Path) {
        let text = path.to_string_lossy();
        let Some(glob) = self
            .cfg
            .hidden_globs
            .iter()
            .find(|g| crate::secrets::glob_match(g, &text))
        else {
            return;
        };
        let Some(e) = Entry::metadata(path) else {
            return;
        };
        let finding = judge::judge_hidden(glob);
        let alert = act::file_alert(&self.cfg.session, finding, path, Action::Alerted, None, &e);
        self.sink.alert(alert);
    }
}
