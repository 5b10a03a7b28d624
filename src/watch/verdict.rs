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
        let key = (idx, name.to_string());
        match act::carry_out(
            self.sink.as_mut(),
            &self.cfg.session,
            &dir,
            name,
            verdict,
            &cur,
        ) {
            act::Outcome::Left => {
                self.table[idx].state.remove(name);
                self.failed.remove(&key);
            }
            act::Outcome::Kept => {
                self.failed.remove(&key);
            }
            act::Outcome::Failed(why) => {
                // As if not seen yet: the next look judges the same change again.
                match previous {
                    Some(p) => self.table[idx].state.insert(name.to_string(), p),
                    None => self.table[idx].state.remove(name),
                };
                self.failed.insert(key, why);
            }
        }
    }

    /// Try again what failed: each quarantine (the name judged afresh), then the alerts the store
    /// refused. Every tick, and in the final sweep.
    pub(super) fn retry_failed(&mut self) {
        let names: Vec<(DirId, String)> = self.failed.keys().cloned().collect();
        for (idx, name) in names {
            self.reconcile(idx, &name);
            if !self.failed.contains_key(&(idx, name.clone())) {
                tracing::info!(
                    "{}: carried out on a later attempt",
                    self.table[idx].path.join(&name).display()
                );
            }
        }
        self.unsent = self.sink.flush();
    }

    /// What is still undone at the session's end, said on stderr (the log file and the alert store
    /// may be what failed): the human must not run the name before looking.
    pub(super) fn report_undone(&self) {
        for ((idx, name), why) in &self.failed {
            eprintln!(
                "claude-sandbox: CRITICAL: {} was judged a plant but could not be quarantined \
                 ({why}); it is still there: remove it before running anything in that directory",
                crate::escape::visible(&self.table[*idx].path.join(name).to_string_lossy())
            );
        }
        for line in &self.unsent {
            eprintln!("claude-sandbox: CRITICAL: {}", crate::escape::visible(line));
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
