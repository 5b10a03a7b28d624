//! The event loop: waiting on inotify and the stop pipe, reading events, and what each event means
//! for the directory it names.

use super::*;

impl Watcher {
    /// Run until `stop` becomes readable (or its write end is closed), then do the final sweep.
    pub fn run(&mut self, stop: &OwnedFd) {
        let started = Instant::now();
        let mut last_sweep = started;
        let resolve_from = Instant::now() + self.cfg.resolve_delay;
        let hash_from = Instant::now() + HASH_DELAY;
        loop {
            self.take_login_path(false, started);
            let mut wait = TICK.saturating_sub(last_sweep.elapsed());
            if let Some(login) = self.login_wait(started) {
                wait = wait.min(login);
            }
            if self.any_deferred() {
                wait = wait.min(resolve_from.saturating_duration_since(Instant::now()));
            }
            if !self.deferred.unhashed.is_empty() {
                wait = wait.min(hash_from.saturating_duration_since(Instant::now()));
            }
            let (ino_ready, stop_ready) = self.table.wait(stop, wait);
            if stop_ready {
                break;
            }
            if ino_ready {
                self.drain();
            }
            if last_sweep.elapsed() >= TICK {
                self.sweep_polled();
                last_sweep = Instant::now();
            }
            if self.any_deferred() && Instant::now() >= resolve_from {
                self.resolve_batch(RESOLVE_BATCH);
            } else if Instant::now() >= hash_from {
                self.hash_origins(HASH_BATCH);
            }
        }
        self.final_sweep();
    }

    /// Read every queued event and act on it.
    pub(super) fn drain(&mut self) {
        let (dirty, overflow) = self.table.read_events();
        self.dispatch(dirty, overflow);
    }

    pub(super) fn dispatch(&mut self, dirty: Vec<table::Event>, overflow: bool) {
        if overflow {
            self.lost_events = true;
            tracing::warn!("inotify queue overflowed: rescanning everything");
            self.rescan_all();
            self.walk_tree_for_repos();
        }
        for (idx, name, mask) in dirty {
            self.handle(idx, name, mask);
        }
    }

    pub(super) fn handle(&mut self, idx: DirId, name: Option<String>, mask: EventMask) {
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED) {
            if self.table[idx].role.is_own() {
                self.root_changed(idx);
            }
            return;
        }
        match self.table[idx].role.clone() {
            r if r.judges_entries() => {
                if let Some(n) = name {
                    self.resolve(idx, &n, Resolve::Event);
                    self.reconcile(idx, &n);
                }
            }
            Role::Pending { pos } => self.pending_changed(idx, pos),
            Role::GitDir { repo } => match name.as_deref() {
                Some("config" | "config.worktree") => self.check_keys(repo),
                Some("index") => self.follow_gitlinks(),
                Some("hooks") => self.hooks_appeared(repo),
                _ => {}
            },
            Role::Tree => {
                let dir = self.table[idx].path.clone();
                if name
                    .as_deref()
                    .is_some_and(|n| self.cfg.placeholders.contains(&dir.join(n)))
                {
                    return; // the launcher's own, made while the watcher starts; sealed read-only
                }
                if let Some(n) = name.as_deref() {
                    self.check_hidden_glob(&dir.join(n));
                }
                match name.as_deref() {
                    Some(".git" | "HEAD") => self.discover_repos(&dir),
                    Some(n) if crate::walk::pruned(OsStr::new(n)) => {}
                    Some(n) if mask.contains(EventMask::ISDIR) => {
                        let sub = dir.join(n);
                        // A cache or a virtual environment (its tag may come after the directory:
                        // cargo makes `target/` first) is not walked, as at launch (`walk`: not
                        // for a tag made during the session).
                        let trust = crate::walk::Trust::Before(self.since.declared_before());
                        if (dir != self.cfg.workspace && crate::walk::skips(&dir, trust))
                            || crate::walk::skips(&sub, trust)
                        {
                            return;
                        }
                        self.add_tree(&sub);
                        self.discover_repos(&sub);
                    }
                    _ => {}
                }
            }
            // A retired directory's events mean nothing (the first arm took every kind whose
            // entries are judged).
            _ => {}
        }
    }

    /// A watched directory was moved or deleted: re-resolve it and rescan.
    pub(super) fn root_changed(&mut self, idx: DirId) {
        self.table.unwatch(idx);
        // Not the directory whose names were listed: whatever is there now under those names is
        // not the baseline's.
        self.resolve_all(idx, Resolve::Event);
        let (path, role) = (self.table[idx].path.clone(), self.table[idx].role.clone());
        tracing::warn!(dir = %path.display(), "watched directory replaced or removed; re-watching");
        if let Role::PathDir { pos } = role {
            if !path.is_dir() {
                self.table.retire(idx);
                self.add_pending(pos);
                return;
            }
        }
        if path.is_dir() {
            self.table.rewatch(idx);
            self.rescan(idx);
        }
    }

    pub(super) fn pending_changed(&mut self, idx: DirId, pos: PathPos) {
        if self.table[idx].role != (Role::Pending { pos }) {
            return;
        }
        let target = self.path_dir(pos).to_path_buf();
        if target.is_dir() {
            tracing::info!(dir = %target.display(), "PATH directory appeared");
            self.table.retire(idx);
            let new = self
                .table
                .add(target, Role::PathDir { pos }, BTreeMap::new());
            self.rescan(new);
        } else {
            let deeper = target
                .ancestors()
                .skip(1)
                .find(|a| a.is_dir())
                .map(Path::to_path_buf);
            if deeper.as_ref() != Some(&self.table[idx].path) {
                self.table.retire(idx);
                self.add_pending(pos);
            }
        }
    }
}
