//! Sweeps: looking again at a directory (after an overflow, in poll mode, at the end of the
//! session), and the checks that ride on them.

use super::*;

impl Watcher {
    /// Compare every entry of one directory with its known state.
    pub(super) fn rescan(&mut self, idx: DirId) {
        match self.table[idx].role.clone() {
            r if r.judges_entries() => {
                if !self.table[idx].deferred.is_empty()
                    && table::dir_id(&self.table[idx].path) != self.table[idx].dir_id
                {
                    // Replaced, its events perhaps lost: see `root_changed`.
                    self.resolve_all(idx, Resolve::Event);
                }
                let current = baseline::list_names(&self.table[idx].path);
                for n in &current {
                    self.reconcile(idx, n);
                }
                // Names that went away: forget them (nothing to judge in an absence).
                let listed: std::collections::HashSet<&String> = current.iter().collect();
                self.table[idx].state.retain(|k, _| listed.contains(k));
            }
            Role::Pending { pos } => self.pending_changed(idx, pos),
            Role::GitDir { repo } => {
                self.check_keys(repo);
                self.hooks_appeared(repo);
                self.commondir_appeared(repo);
            }
            // The workspace tree is walked by `walk_tree_for_repos`; a retired directory is not
            // looked at (the first arm took every kind whose entries are judged).
            _ => {}
        }
    }

    pub(super) fn rescan_all(&mut self) {
        // Directories added on the way (a PATH directory that appeared) are rescanned too.
        let mut n = 0;
        while let Some(idx) = self.table.id_at(n) {
            self.rescan(idx);
            n += 1;
        }
    }

    /// Look once more at every PATH directory still awaited (the final sweep's cheap check).
    pub(super) fn check_pending(&mut self) {
        let mut n = 0;
        while let Some(idx) = self.table.id_at(n) {
            if let Role::Pending { pos } = self.table[idx].role {
                self.pending_changed(idx, pos);
            }
            n += 1;
        }
    }

    pub(super) fn sweep_polled(&mut self) {
        for idx in self.table.ids().collect::<Vec<_>>() {
            let d = &self.table[idx];
            if matches!(d.mode, Mode::Poll(_)) && d.role.is_own() {
                self.sweep_dir(idx);
            }
        }
        if !self.table.has_inotify() {
            // A cheap listing first (names only, no stat): the full discovery walk runs only when a
            // `.git` or `HEAD` appeared, moved or went away.
            let before = self.since.declared_before();
            let mut named = Vec::new();
            let markers = git_markers(
                &self.cfg.workspace,
                &mut self.tree_cache,
                before,
                &mut named,
            );
            self.note_listed_names(named);
            if markers != self.last_markers {
                self.last_markers = markers;
                self.walk_tree_for_repos();
            }
        }
    }

    /// One tick for one swept directory. Names are listed again only when the directory changed
    /// (or has not settled); otherwise its entries are re-read: every one that is not an
    /// executable (it could become one), and a `ROLL`th of the baseline's executables in turn.
    /// Executables new this session were judged when they appeared and are not re-read.
    pub(super) fn sweep_dir(&mut self, idx: DirId) {
        if !self.table[idx].role.judges_entries() {
            self.rescan(idx);
            return;
        }
        if !self.table[idx].deferred.is_empty() {
            // Swept from now on (re-watching failed): the sweep needs every attribute.
            self.resolve_all(idx, Resolve::Ctime);
        }
        let stamp = settled_stamp(&self.table[idx].path);
        let d = &mut self.table[idx];
        d.turn += 1;
        if stamp.is_none() || stamp != d.listed_at {
            d.listed_at = stamp;
            self.rescan(idx);
            return;
        }
        let turn = d.turn % ROLL;
        // One open directory, one `fstatat` per entry, compared in place: no path, no allocation
        // unless something differs (then the ordinary reconcile judges it).
        let Ok(dirfd) = rustix::fs::open(
            &d.path,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            self.rescan(idx);
            return;
        };
        // Every tick: what could become an executable. In turn: the baseline's executables.
        let could_become = d.state.iter().filter(|(_, e)| !e.is_executable());
        let in_turn = d
            .origin
            .iter()
            .filter(|(_, o)| o.is_executable())
            .enumerate()
            .filter(|(i, _)| i % ROLL == turn)
            .filter_map(|(_, (name, _))| d.state.get_key_value(name));
        let differs: Vec<String> = could_become
            .chain(in_turn)
            .filter(|(name, e)| !unchanged_at(&dirfd, name, e))
            .map(|(name, _)| name.clone())
            .collect();
        for name in differs {
            self.reconcile(idx, &name);
        }
    }

    pub(super) fn walk_tree_for_repos(&mut self) {
        let ws = self.cfg.workspace.clone();
        self.discover_repos(&ws);
        self.discover_in_fresh_caches();
        self.follow_gitlinks();
    }

    /// The session is over. Every process of the jail is gone, so every event it caused is queued
    /// (inotify queues synchronously, inside the system call): when no event can have been lost,
    /// reading the queue, sweeping the swept directories and re-reading the repositories' configs
    /// is complete. Otherwise: everything once more, repositories found afresh.
    ///
    /// A quarantine or an alert that failed during the session makes it the full walk: whatever made
    /// it fail (descriptors spent, a store that refused) may have cost other looks too. What still
    /// fails after it is said on stderr (`report_undone`).
    pub fn final_sweep(&mut self) {
        self.take_login_path(true, Instant::now());
        if !self.failed.is_empty() || !self.unsent.is_empty() {
            self.lost_events = true;
        }
        // Over before every tree directory was watched (`tree`).
        self.finish_tree_queue();
        self.final_walk();
        self.retry_failed();
        self.report_undone();
    }

    fn final_walk(&mut self) {
        if self.is_live_complete() {
            self.drain();
            if !self.lost_events {
                self.sweep_polled();
                self.check_pending();
                self.follow_gitlinks();
                for repo in self.repos.ids() {
                    self.check_keys(repo);
                }
                // A file made in a directory that was new and not watched yet is seen only here.
                self.check_new_secrets();
                return;
            }
        }
        self.rescan_all();
        self.check_new_secrets();
        self.walk_tree_for_repos();
        for repo in self.repos.ids() {
            self.check_keys(repo);
        }
    }

    /// Secrets matching a configured hidden glob that appeared during the session (resolved at
    /// launch, so visible in the jail). Walks only the globs' roots; nothing when none is set.
    pub(super) fn check_new_secrets(&mut self) {
        let started = self.since.started;
        for path in crate::secrets::glob_matches(&self.cfg.hidden_globs) {
            if Entry::metadata(&path).is_some_and(|e| e.ctime_ns >= started) {
                self.check_hidden_glob(&path);
            }
        }
    }

    /// Whether inotify has seen everything so far: no overflow, and every tree directory watched.
    pub(super) fn is_live_complete(&self) -> bool {
        self.table.tree_all_live() && !self.lost_events
    }
}
