//! The event loop: waiting on inotify and the stop pipe, reading events, and what each event means
//! for the directory it names.

use super::*;

impl Watcher {
    /// Run until `stop` becomes readable (or its write end is closed), then do the final sweep.
    pub fn run(&mut self, stop: OwnedFd) {
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
            if !self.unhashed.is_empty() {
                wait = wait.min(hash_from.saturating_duration_since(Instant::now()));
            }
            let (ino_ready, stop_ready) = self.wait(&stop, wait);
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

    pub(super) fn wait(&self, stop: &OwnedFd, timeout: Duration) -> (bool, bool) {
        use rustix::event::{PollFd, PollFlags};
        let ts = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        match &self.inotify {
            Some(ino) => {
                let fd = ino.as_fd();
                let mut fds = [
                    PollFd::new(&fd, PollFlags::IN),
                    PollFd::new(stop, PollFlags::IN),
                ];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
            }
            None => {
                let mut fds = [PollFd::new(stop, PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                (false, !fds[0].revents().is_empty())
            }
        }
    }

    /// Read every queued event and act on it.
    pub(super) fn drain(&mut self) {
        let (dirty, overflow) = self.read_events();
        self.dispatch(dirty, overflow);
    }

    /// Read every queued event (one read returns one buffer's worth: loop until it would block):
    /// (directory index, name, mask) for each, and whether the queue overflowed.
    #[allow(clippy::type_complexity)]
    pub(super) fn read_events(&mut self) -> (Vec<(usize, Option<String>, EventMask)>, bool) {
        let mut dirty: Vec<(usize, Option<String>, EventMask)> = Vec::new();
        let mut overflow = false;
        let mut buf = std::mem::take(&mut self.event_buf);
        if buf.is_empty() {
            buf = vec![0u8; 64 * 1024];
        }
        while let Some(ino) = self.inotify.as_mut() {
            let events = match ino.read_events(&mut buf) {
                Ok(ev) => ev,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!("reading inotify events: {e}; rescanning");
                    overflow = true;
                    break;
                }
            };
            let mut any = false;
            for ev in events {
                any = true;
                if ev.mask.contains(EventMask::Q_OVERFLOW) {
                    overflow = true;
                    continue;
                }
                let name = ev.name.and_then(|n| n.to_str()).map(String::from);
                for idx in self.by_wd.get(&ev.wd).cloned().unwrap_or_default() {
                    dirty.push((idx, name.clone(), ev.mask));
                }
            }
            if !any {
                break;
            }
        }
        self.event_buf = buf;
        (dirty, overflow)
    }

    pub(super) fn dispatch(
        &mut self,
        dirty: Vec<(usize, Option<String>, EventMask)>,
        overflow: bool,
    ) {
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

    pub(super) fn handle(&mut self, idx: usize, name: Option<String>, mask: EventMask) {
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED) {
            if self.dirs[idx].role != Role::Tree {
                self.root_changed(idx);
            }
            return;
        }
        match self.dirs[idx].role.clone() {
            Role::PathDir { .. } | Role::Hooks { .. } => {
                if let Some(n) = name {
                    self.resolve(idx, &n, Resolve::Event);
                    self.reconcile(idx, &n);
                }
            }
            Role::Pending { index } => self.pending_changed(idx, index),
            Role::GitDir { repo } => match name.as_deref() {
                Some("config" | "config.worktree") => self.check_keys(repo),
                Some("index") => self.follow_gitlinks(),
                Some("hooks") => self.hooks_appeared(repo),
                _ => {}
            },
            Role::Tree => {
                let dir = self.dirs[idx].path.clone();
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
                    Some(".git") | Some("HEAD") => self.discover_repos(&dir),
                    Some("node_modules") => {}
                    Some(n) if mask.contains(EventMask::ISDIR) => {
                        let sub = dir.join(n);
                        // A cache or a virtual environment (its tag may come after the directory:
                        // cargo makes `target/` first) is not walked, as at launch
                        // (entrypoints::walk_skips: not for a tag made during the session).
                        if (dir != self.cfg.workspace
                            && entrypoints::walk_skips(&dir, self.declared_before()))
                            || entrypoints::walk_skips(&sub, self.declared_before())
                        {
                            return;
                        }
                        self.add_tree(&sub);
                        self.discover_repos(&sub);
                    }
                    _ => {}
                }
            }
        }
    }

    /// A watched directory was moved or deleted: re-resolve it and rescan.
    pub(super) fn root_changed(&mut self, idx: usize) {
        self.unwatch(idx);
        // Not the directory whose names were listed: whatever is there now under those names is
        // not the baseline's.
        self.resolve_all(idx, Resolve::Event);
        let (path, role) = (self.dirs[idx].path.clone(), self.dirs[idx].role.clone());
        tracing::warn!(dir = %path.display(), "watched directory replaced or removed; re-watching");
        if let Role::PathDir { index } = role {
            if !path.is_dir() {
                self.dirs[idx].state.clear();
                self.dirs[idx].role = Role::Tree; // retired
                self.add_pending(index);
                return;
            }
        }
        if path.is_dir() {
            let (mode, wd) = self.watch(&path, &role);
            if let Some(wd) = &wd {
                self.by_wd.entry(wd.clone()).or_default().push(idx);
            }
            self.dirs[idx].mode = mode;
            self.dirs[idx].wd = wd;
            self.rescan(idx);
        }
    }

    pub(super) fn pending_changed(&mut self, idx: usize, index: usize) {
        if self.dirs[idx].role != (Role::Pending { index }) {
            return;
        }
        let target = self.path_dirs[index].clone();
        if target.is_dir() {
            tracing::info!(dir = %target.display(), "PATH directory appeared");
            self.unwatch(idx);
            self.dirs[idx].role = Role::Tree; // retired
            let new = self.add(target, Role::PathDir { index }, BTreeMap::new());
            self.rescan(new);
        } else {
            let deeper = target
                .ancestors()
                .skip(1)
                .find(|a| a.is_dir())
                .map(Path::to_path_buf);
            if deeper.as_ref() != Some(&self.dirs[idx].path) {
                self.unwatch(idx);
                self.dirs[idx].role = Role::Tree;
                self.add_pending(index);
            }
        }
    }

    pub(super) fn hooks_appeared(&mut self, repo: usize) {
        let dir = self.repos[repo].hooks_dir.clone();
        if dir.is_dir() && !self.dirs.iter().any(|d| d.role == (Role::Hooks { repo })) {
            let idx = self.add(dir, Role::Hooks { repo }, BTreeMap::new());
            self.rescan(idx);
        }
    }
}
