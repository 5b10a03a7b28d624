//! Deferred attributes: names read at launch whose attributes are read once the session runs, and
//! the background hashing of the baseline's executables.

use super::*;

/// When the session started, as the file system's ctimes tell it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Since {
    /// When the watcher started (ns since the epoch), to tell files made during the session.
    pub(super) started: i64,
    /// Any entry whose ctime is at or after this (ns since the epoch) was changed after the watcher
    /// started: its start, less one tick of the coarse clock the kernel stamps ctime with.
    changed: i64,
}

impl Since {
    /// Now, with `tick` the coarse clock's resolution (ns).
    pub(super) fn now(tick: i64) -> Since {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Since::at(started, tick)
    }

    fn at(started: i64, tick: i64) -> Since {
        Since {
            started,
            changed: started - tick,
        }
    }

    /// ctime moves on every change (content, mode, owner, links, rename) and userland cannot set
    /// it. A filesystem with whole-second timestamps rounds down: then the second counts.
    pub(super) fn changed_by_ctime(&self, e: &Entry) -> bool {
        const SEC: i64 = 1_000_000_000;
        e.ctime_ns >= self.changed
            || (e.ctime_ns % SEC == 0 && e.ctime_ns >= self.changed - self.changed % SEC)
    }

    /// How long ago the watcher started (for logs).
    pub(super) fn elapsed_ms(&self) -> f64 {
        let now = Since::now(0).started;
        #[allow(clippy::cast_precision_loss)]
        let ms = (now - self.started) as f64 / 1e6;
        ms
    }

    /// A cache tag or `pyvenv.cfg` is honoured only if older than this: a second before the session
    /// (ctime is stamped with a coarse clock; one made during the session is never honoured).
    pub(super) fn declared_before(&self) -> i64 {
        self.changed - SETTLE_NS
    }
}

/// What is still to be read of the baseline.
#[derive(Debug, Default)]
pub(super) struct Deferred {
    /// The directories that started with deferred names (PATH directories listed at launch).
    pub(super) dirs: Vec<DirId>,
    /// Baseline executables not hashed yet: (directory, name). Hashed a few at a time between
    /// events (see `hash_origins`).
    pub(super) unhashed: Vec<(DirId, String)>,
}

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
                Resolve::Ctime => self.since.changed_by_ctime(&e),
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
            self.deferred.unhashed.push((idx, name.to_string()));
        }
        d.state.insert(name.to_string(), e.clone());
        d.origin.insert(name.to_string(), e);
    }

    /// Read up to `n` deferred names in the background, then look at the queue: a name with an
    /// event queued by then may have been read after it changed, so it counts as changed. Exact:
    /// inotify queues inside the system call that makes the change, and the watch predates the
    /// session's command. After a lost event, ctime decides.
    pub(super) fn resolve_batch(&mut self, n: usize) {
        let table = &self.table;
        let batch: Vec<(DirId, String, Option<Entry>)> = self
            .deferred
            .dirs
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
                self.since.changed_by_ctime(&e)
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
        self.deferred
            .dirs
            .iter()
            .any(|&idx| !self.table[idx].deferred.is_empty())
    }

    /// Hash up to `n` baseline executables. A hash is kept only if the file's attributes are still
    /// the baseline's afterwards: then it is the content the baseline saw (ctime moves on any
    /// write). Otherwise the entry stays unhashed and is judged by its attributes.
    pub(super) fn hash_origins(&mut self, n: usize) {
        let start = self.deferred.unhashed.len().saturating_sub(n);
        for (idx, name) in self.deferred.unhashed.split_off(start) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn with_ctime(ctime_ns: i64) -> Entry {
        Entry {
            kind: Kind::File,
            mode: 0o755,
            uid: 0,
            gid: 0,
            size: 0,
            mtime_ns: ctime_ns,
            ctime_ns,
            dev: 1,
            ino: 1,
            nlink: 1,
            sha256: None,
            link_target: None,
            changed_in_session: false,
        }
    }

    /// Changed in the session: a ctime from one coarse tick before the start on; on a filesystem
    /// with whole-second timestamps, the start's second counts too. A declaration (cache tag) is
    /// honoured only if a second older than that.
    #[test]
    fn the_session_is_told_by_ctime() {
        const SEC: i64 = 1_000_000_000;
        let since = Since::at(100 * SEC + 500_000_000, 4_000_000);
        let changed = |ns| since.changed_by_ctime(&with_ctime(ns));
        assert!(
            changed(100 * SEC + 496_000_000),
            "one tick before the start"
        );
        assert!(!changed(100 * SEC + 495_999_999));
        assert!(
            changed(100 * SEC),
            "a whole-second timestamp in the start's second"
        );
        assert!(!changed(99 * SEC), "a whole second before");
        assert!(!changed(100 * SEC + 1), "not a whole-second timestamp");
        assert_eq!(since.declared_before(), 99 * SEC + 496_000_000);
    }
}
