//! The verdict on one name and what follows from it: reconcile with the baseline, judge a PATH
//! entry, quarantine, alert, record.

use super::*;

impl Watcher {
    /// One entry of one directory: compare, decide, act.
    pub(super) fn reconcile(&mut self, idx: DirId, name: &str) {
        if name.contains(NEUTRALISED_MARK) {
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
        let role = self.table[idx].role.clone();
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
        if !cur.is_executable() {
            return;
        }
        let newly = previous.as_ref().is_none_or(|p| !p.is_executable());
        let changed = !newly && previous.as_ref().is_some_and(|p| p.exec_changed(&cur));
        if !newly && !changed {
            return;
        }
        let link = describe_links(&cur);
        match role {
            Role::PathDir { pos } => self.judge_path_entry(idx, pos, name, &cur, newly, &link),
            Role::Hooks { repo } if !name.ends_with(".sample") => {
                let detail = format!(
                    "git hook `{name}` of {}{link}",
                    self.repo(repo).git_dir.display()
                );
                self.quarantine(idx, name, Severity::Critical, "git-hook", detail, &cur);
            }
            _ => {}
        }
    }

    /// A new or changed executable in a writable PATH directory.
    pub(super) fn judge_path_entry(
        &mut self,
        idx: DirId,
        pos: PathPos,
        name: &str,
        cur: &Entry,
        newly: bool,
        link: &str,
    ) {
        let origin = self.table[idx]
            .origin
            .get(name)
            .filter(|o| o.is_executable())
            .cloned();
        if let Some(o) = origin {
            // An executable that was there at the baseline: any difference is tampering.
            if o.exec_changed(cur) {
                let detail =
                    format!("an executable on PATH changed since the session started{link}");
                self.quarantine(idx, name, Severity::High, "path-changed", detail, cur);
            }
            return;
        }
        if !newly {
            // New this session and still being written: it was judged when it appeared (one that
            // shadows a command is gone already; a harmless one was reported).
            return;
        }
        let shadows = baseline::shadowed(&self.path, pos.0, name)
            .or_else(|| shellpath::shadowed_in(&self.future.order, &self.table[idx].path, name));
        if let Some(target) = shadows {
            let detail = format!("shadows {}{link}", target.display());
            self.quarantine(idx, name, Severity::Critical, "path-shadow", detail, cur);
        } else if self.cfg.quarantine_new {
            let detail = format!("new executable on PATH{link}");
            self.quarantine(idx, name, Severity::Info, "path-new", detail, cur);
        } else {
            let path = self.table[idx].path.join(name);
            let detail = format!("new executable on PATH, shadows nothing{link}");
            self.alert(
                Severity::Info,
                "path-new",
                &path,
                detail,
                "alerted",
                None,
                cur,
            );
        }
    }

    pub(super) fn quarantine(
        &mut self,
        idx: DirId,
        name: &str,
        sev: Severity,
        kind: &str,
        detail: String,
        entry: &Entry,
    ) {
        let dir = self.table[idx].path.clone();
        let path = dir.join(name);
        match quarantine::quarantine(&self.cfg.runtime, &dir, OsStr::new(name), &detail) {
            Ok(Some(rec)) => {
                self.table[idx].state.remove(name);
                let action = if rec.method == "moved" {
                    "quarantined"
                } else {
                    "neutralised"
                };
                let detail = if rec.nlink > 1 {
                    format!("{detail}; its other hard links keep their mode")
                } else {
                    detail
                };
                self.alert(
                    sev,
                    kind,
                    &path,
                    detail,
                    action,
                    Some(rec.id.clone()),
                    entry,
                );
            }
            Ok(None) => {
                self.table[idx].state.remove(name);
            }
            Err(e) => {
                let detail = format!("{detail}; quarantine FAILED: {e}");
                self.alert(
                    Severity::Critical,
                    kind,
                    &path,
                    detail,
                    "failed",
                    None,
                    entry,
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn alert(
        &mut self,
        sev: Severity,
        kind: &str,
        path: &Path,
        detail: String,
        action: &str,
        qid: Option<String>,
        e: &Entry,
    ) {
        let alert = Alert {
            id: alerts::new_id("a"),
            time: alerts::now_rfc3339(),
            severity: sev,
            kind: kind.into(),
            path: path.to_path_buf(),
            detail,
            action: action.into(),
            quarantine_id: qid,
            sha256: e.sha256.map(|s| s.hex()),
            session: self.cfg.session.clone(),
            fingerprint: format!(
                "{kind}:{}:{}:{}:{}",
                path.display(),
                e.dev,
                e.ino,
                e.ctime_ns
            ),
        };
        self.record(alert);
    }

    pub(super) fn record(&mut self, alert: Alert) {
        match self.store.add(&alert) {
            Ok(true) => tracing::warn!(
                "{}: {} {}",
                alert.severity.as_str(),
                alert.path.display(),
                alert.detail
            ),
            Ok(false) => {}
            Err(err) => {
                tracing::error!("cannot record an alert for {}: {err}", alert.path.display())
            }
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
            .cloned()
        else {
            return;
        };
        let Some(e) = Entry::metadata(path) else {
            return;
        };
        let detail = format!("matches hidden = \"{glob}\" but appeared during the session: the jail can read it until the next session");
        self.alert(
            Severity::High,
            "secret-visible",
            path,
            detail,
            "alerted",
            None,
            &e,
        );
    }
}
