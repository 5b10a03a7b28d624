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
        let tree_from = Instant::now() + self.cfg.tree_delay;
        let mut lazy_read: Option<Instant> = None;
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
            if !self.tree_queue.is_empty() {
                wait = wait.min(tree_from.saturating_duration_since(Instant::now()));
            }
            // The lazy instance is looked at once per `LAZY_TICK` at most: between two looks its
            // events queue up in the kernel and are read together.
            let since_lazy = lazy_read.map_or(LAZY_TICK, |t| t.elapsed());
            let lazy_due = since_lazy >= LAZY_TICK;
            if self.table.has_lazy() && !lazy_due {
                wait = wait.min(LAZY_TICK.saturating_sub(since_lazy));
            }
            let (ino_ready, lazy_ready, stop_ready) = self.table.wait(stop, wait, lazy_due);
            if stop_ready {
                break;
            }
            if ino_ready {
                let (dirty, overflow) = self.table.read_events();
                let any = !dirty.is_empty() || overflow;
                self.dispatch(dirty, overflow);
                // Not while the tree's watches are being added: the loop does not sleep on inotify
                // then (its wait is zero), so no writer pays for a wake-up.
                if any && self.tree_queue.is_empty() {
                    std::thread::sleep(EVENT_REST);
                }
            }
            if lazy_ready {
                let (dirty, overflow) = self.table.read_lazy_events();
                self.dispatch(dirty, overflow);
                lazy_read = Some(Instant::now());
            }
            // The workspace tree's watches, a batch between two looks at the queue (`tree`).
            if Instant::now() >= tree_from {
                self.add_tree_batch(tree::TREE_BATCH);
            }
            if last_sweep.elapsed() >= TICK {
                self.alert_created_names();
                self.sweep_polled();
                self.retry_failed();
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

    /// Watch what is left of the workspace tree, then read every queued event, of both instances,
    /// and act on it.
    pub(super) fn drain(&mut self) {
        self.add_tree_batch(usize::MAX);
        let (dirty, overflow) = self.table.read_events();
        self.dispatch(dirty, overflow);
        let (dirty, overflow) = self.table.read_lazy_events();
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
                Some("commondir") => self.commondir_appeared(repo),
                _ => {}
            },
            Role::Tree => {
                if let Some(n) = name.as_deref() {
                    self.check_created_name(idx, n);
                    if !mask.contains(EventMask::ISDIR) {
                        let path = self.table[idx].path.join(n);
                        self.check_socket(&path);
                    }
                }
                // A file that is no repository marker: only a configured `hidden` glob could make
                // it news (a build writes thousands of these).
                let file = !mask.contains(EventMask::ISDIR)
                    && name.as_deref().is_some_and(|n| n != ".git" && n != "HEAD");
                if file && self.cfg.hidden_globs.is_empty() {
                    return;
                }
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
                        // cargo makes `target/` first) is not walked, as at launch (`walk`), if
                        // declared before the session. One declared since is walked (the agent may
                        // have tagged it), lazily: a build's thousands of files do not wake the
                        // watcher each (`table::Table::lazy`).
                        let before = crate::walk::Trust::Before(self.since.declared_before());
                        let declared = |p: &Path| crate::walk::skips(p, crate::walk::Trust::Any);
                        let in_declared = dir != self.cfg.workspace && declared(&dir);
                        let sub_declared = declared(&sub);
                        if (in_declared && crate::walk::skips(&dir, before))
                            || (sub_declared && crate::walk::skips(&sub, before))
                        {
                            return;
                        }
                        let lazy = self.table[idx].lazy || in_declared || sub_declared;
                        self.add_tree_in(&sub, lazy);
                        // What was made in it before its watch (`mkdir -p pkg && echo > pkg/.npmrc`).
                        self.check_created_names_in(&sub);
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
