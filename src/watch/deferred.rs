//! Deferred attributes: names read at launch whose attributes are read once the session runs, and
//! the background hashing of the baseline's executables.

use super::*;

impl Watcher {
    /// Read a deferred name: its attributes become its baseline, or, when it was changed in the
    /// session by then, a baseline that counts as changed whatever comes next.
    pub(super) fn resolve(&mut self, idx: DirId, name: &str, how: Resolve) {
        if !self.table[idx].deferred.remove(name) {
            return;
        }
        if let Some(e) = Entry::metadata(&self.table[idx].path.join(name)) {
            let changed = match how {
                Resolve::Quiet => false,
                Resolve::Event => true,
                Resolve::Ctime => self.changed_by_ctime(&e),
            };
            self.settle(idx, name, e, changed);
        }
    }

    pub(super) fn resolve_all(&mut self, idx: DirId, how: Resolve) {
        let names: Vec<String> = self.table[idx].deferred.iter().cloned().collect();
        for name in names {
            self.resolve(idx, &name, how);
        }
    }

    pub(super) fn settle(&mut self, idx: DirId, name: &str, mut e: Entry, changed: bool) {
        let d = &mut self.table[idx];
        if changed {
            // Left out of `state`: the next look at it judges it against this origin.
            e.changed_in_session = true;
            d.origin.insert(name.to_string(), e);
            return;
        }
        if e.kind == Kind::File && e.is_executable() {
            self.unhashed.push((idx, name.to_string()));
        }
        d.state.insert(name.to_string(), e.clone());
        d.origin.insert(name.to_string(), e);
    }

    /// ctime moves on every change (content, mode, owner, links, rename) and userland cannot set
    /// it. A filesystem with whole-second timestamps rounds down: then the second counts.
    pub(super) fn changed_by_ctime(&self, e: &Entry) -> bool {
        const SEC: i64 = 1_000_000_000;
        e.ctime_ns >= self.changed_since
            || (e.ctime_ns % SEC == 0
                && e.ctime_ns >= self.changed_since - self.changed_since % SEC)
    }

    /// Read up to `n` deferred names in the background, then look at the queue: a name with an
    /// event queued by then may have been read after it changed, so it counts as changed. Exact:
    /// inotify queues inside the system call that makes the change, and the watch predates the
    /// session's command. After a lost event, ctime decides.
    pub(super) fn resolve_batch(&mut self, n: usize) {
        let table = &self.table;
        let batch: Vec<(DirId, String, Option<Entry>)> = self
            .deferring
            .iter()
            .flat_map(|&idx| {
                table[idx]
                    .deferred
                    .iter()
                    .map(move |name| (idx, name.clone()))
            })
            .take(n)
            .map(|(idx, name)| {
                let e = Entry::metadata(&table[idx].path.join(&name));
                (idx, name, e)
            })
            .collect();
        let (dirty, overflow) = self.table.read_events();
        let evented: std::collections::HashSet<(DirId, &str)> = dirty
            .iter()
            .filter_map(|(idx, name, _)| name.as_deref().map(|n| (*idx, n)))
            .collect();
        let mut settled = Vec::with_capacity(batch.len());
        for (idx, name, e) in batch {
            let Some(e) = e else {
                // Gone since it was listed: nothing to settle, and not to be read again.
                self.table[idx].deferred.remove(&name);
                continue;
            };
            let changed = if overflow {
                self.changed_by_ctime(&e)
            } else {
                evented.contains(&(idx, name.as_str()))
            };
            settled.push((idx, name, e, changed));
        }
        drop(evented);
        for (idx, name, e, changed) in settled {
            if self.table[idx].deferred.remove(&name) {
                self.settle(idx, &name, e, changed);
            }
        }
        self.dispatch(dirty, overflow);
    }

    /// Whether names are still deferred (see `resolve_batch`).
    pub(super) fn any_deferred(&self) -> bool {
        self.deferring
            .iter()
            .any(|&idx| !self.table[idx].deferred.is_empty())
    }

    /// Hash up to `n` baseline executables. A hash is kept only if the file's attributes are still
    /// the baseline's afterwards: then it is the content the baseline saw (ctime moves on any
    /// write). Otherwise the entry stays unhashed and is judged by its attributes.
    pub(super) fn hash_origins(&mut self, n: usize) {
        let start = self.unhashed.len().saturating_sub(n);
        for (idx, name) in self.unhashed.split_off(start) {
            let path = self.table[idx].path.join(&name);
            let Some(sha) = Sha256::of_path(&path) else {
                continue;
            };
            let Some(after) = Entry::metadata(&path) else {
                continue;
            };
            let dir = &mut self.table[idx];
            for map in [&mut dir.origin, &mut dir.state] {
                if let Some(e) = map.get_mut(&name).filter(|e| e.same_metadata(&after)) {
                    e.sha256 = Some(sha);
                }
            }
        }
    }
}
