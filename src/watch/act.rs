//! The action sink: carrying out the judge's verdicts — quarantine a file, take keys out of a config,
//! record an alert — behind a small trait, so the decisions and their order can be tested with a
//! recording fake while the real store is exercised by the integration tests.
//!
//! Guards against a verdict half carried out: a quarantine that failed is still alerted (critical,
//! "FAILED" in the detail) and said to the watcher, which tries again (`Outcome::Failed`); an alert
//! the store refused is kept and written again (`Sink::flush`); a quarantine is always followed by
//! its alert naming the record to restore, and a name that left the directory is forgotten so it
//! is not judged again.

use super::judge::{Finding, Verdict};
use crate::alerts::{self, Action, Alert, Severity};
use crate::baseline::Entry;
use crate::gitconfig::Key;
use crate::quarantine::{self, Method};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A file taken out of reach: its record's id, how, and how many names it had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) id: String,
    pub(crate) method: Method,
    pub(crate) nlink: u64,
}

/// Where verdicts go.
pub(crate) trait Sink: Send {
    /// Quarantine `dir/name` (restorable); `None` if it was gone or swapped meanwhile.
    fn quarantine(&mut self, dir: &Path, name: &str, reason: &str) -> crate::Result<Option<Taken>>;
    /// Take the keys `remove` picks out of a config file (restorable); the record's id, `None` if
    /// there was nothing to take.
    fn neutralise_keys(
        &mut self,
        file: &Path,
        remove: &dyn Fn(&Key) -> bool,
        reason: &str,
    ) -> crate::Result<Option<String>>;
    /// Record an alert (deduplicated by its fingerprint); one the store refuses is kept for `flush`.
    fn alert(&mut self, alert: Alert);
    /// Write the alerts kept since they were refused; what still cannot be written, said in a line
    /// each.
    fn flush(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The real sink: the quarantine and the alert store in the runtime directory.
pub(crate) struct Store {
    runtime: PathBuf,
    alerts: alerts::Store,
    /// Alerts the store refused (descriptors spent, a lock that failed): written again on `flush`.
    unsent: Vec<Alert>,
}

impl Store {
    pub(crate) fn new(runtime: &Path) -> Store {
        Store {
            runtime: runtime.to_path_buf(),
            alerts: alerts::Store::new(runtime),
            unsent: Vec::new(),
        }
    }
}

impl Sink for Store {
    fn quarantine(&mut self, dir: &Path, name: &str, reason: &str) -> crate::Result<Option<Taken>> {
        Ok(
            quarantine::quarantine(&self.runtime, dir, OsStr::new(name), reason)?.map(|r| Taken {
                id: r.id,
                method: r.method,
                nlink: r.nlink,
            }),
        )
    }

    fn neutralise_keys(
        &mut self,
        file: &Path,
        remove: &dyn Fn(&Key) -> bool,
        reason: &str,
    ) -> crate::Result<Option<String>> {
        Ok(quarantine::config::neutralise_keys(&self.runtime, file, remove, reason)?.map(|r| r.id))
    }

    fn alert(&mut self, alert: Alert) {
        match self.alerts.add(&alert) {
            Ok(true) => tracing::warn!(
                "{}: {} {}",
                alert.severity.as_str(),
                alert.path.display(),
                alert.detail
            ),
            Ok(false) => {}
            Err(err) => {
                tracing::error!(
                    "cannot record an alert for {} (kept, to be written again): {err}",
                    alert.path.display()
                );
                self.unsent.push(alert);
            }
        }
    }

    fn flush(&mut self) -> Vec<String> {
        let mut still = Vec::new();
        for alert in std::mem::take(&mut self.unsent) {
            match self.alerts.add(&alert) {
                Ok(_) => {}
                Err(err) => {
                    still.push(format!(
                        "{}: {} {} (the alert could not be recorded: {err})",
                        alert.severity.as_str(),
                        alert.path.display(),
                        alert.detail
                    ));
                    self.unsent.push(alert);
                }
            }
        }
        still
    }
}

/// What became of a name after its verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Still there, as judged (quiet, or alerted).
    Kept,
    /// Gone from the directory (quarantined, or gone meanwhile): the watcher forgets it.
    Left,
    /// Its quarantine failed (the reason): the watcher looks at it again.
    Failed(String),
}

#[cfg(test)]
impl Outcome {
    pub(crate) fn left(&self) -> bool {
        *self == Outcome::Left
    }
}

/// The alert for a file; its fingerprint (kind, path, inode, ctime) keeps one change from being
/// reported twice.
pub(crate) fn file_alert(
    session: &str,
    finding: Finding,
    path: &Path,
    action: Action,
    quarantine_id: Option<String>,
    e: &Entry,
) -> Alert {
    let fingerprint = format!(
        "{}:{}:{}:{}:{}",
        finding.kind,
        path.display(),
        e.dev,
        e.ino,
        e.ctime_ns
    );
    let mut alert = Alert::new(
        finding.kind,
        finding.severity,
        path,
        finding.detail,
        session,
    )
    .action(action)
    .fingerprint(fingerprint)
    .taken_as(quarantine_id);
    alert.sha256 = e.sha256.map(|s| s.hex());
    alert
}

/// Carry out the verdict on `dir/name` (`entry`: what was judged).
pub(crate) fn carry_out(
    sink: &mut dyn Sink,
    session: &str,
    dir: &Path,
    name: &str,
    verdict: Verdict,
    entry: &Entry,
) -> Outcome {
    let path = dir.join(name);
    match verdict {
        Verdict::Quiet => Outcome::Kept,
        // `Neutralise` is a verdict on config keys (`judge_key`, carried out by `check_keys`), never
        // on a file: should one come here, it is reported, and nothing is touched.
        Verdict::Alert(f) | Verdict::Neutralise(f) => {
            sink.alert(file_alert(session, f, &path, Action::Alerted, None, entry));
            Outcome::Kept
        }
        Verdict::Quarantine(f) => match sink.quarantine(dir, name, &f.detail) {
            Ok(Some(taken)) => {
                let action = match taken.method {
                    Method::Moved => Action::Quarantined,
                    Method::Neutralised | Method::KeysRemoved => Action::Neutralised,
                };
                let detail = if taken.nlink > 1 {
                    format!("{}; its other hard links keep their mode", f.detail)
                } else {
                    f.detail
                };
                let f = Finding { detail, ..f };
                sink.alert(file_alert(session, f, &path, action, Some(taken.id), entry));
                Outcome::Left
            }
            Ok(None) => Outcome::Left,
            Err(e @ crate::Error::QuarantineUnrecorded { .. }) => {
                let f = Finding {
                    severity: Severity::Critical,
                    detail: format!("{}; {e}", f.detail),
                    ..f
                };
                sink.alert(file_alert(
                    session,
                    f,
                    &path,
                    Action::Quarantined,
                    None,
                    entry,
                ));
                Outcome::Left
            }
            Err(e) => {
                let f = Finding {
                    severity: Severity::Critical,
                    detail: format!(
                        "{}; quarantine FAILED: {e} (tried again each second and at the end)",
                        f.detail
                    ),
                    ..f
                };
                let mut alert = file_alert(session, f, &path, Action::Failed, None, entry);
                // Its own fingerprint: the alert of a later attempt that succeeds is not a repeat.
                alert.fingerprint.push_str(":failed");
                sink.alert(alert);
                Outcome::Failed(e.to_string())
            }
        },
    }
}

/// A sink that records what it was asked, for tests that assert the exact actions.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;

    /// One call to the sink.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Call {
        Quarantine(PathBuf),
        Neutralise(PathBuf),
        /// (kind, path, action, quarantine id)
        Alert(String, PathBuf, String, Option<String>),
    }

    /// Records every call; quarantines answer with `answer` (moved, by default) and touch nothing.
    pub(crate) struct Recording {
        pub(crate) calls: std::sync::Arc<std::sync::Mutex<Vec<Call>>>,
        pub(crate) answer: fn() -> crate::Result<Option<Taken>>,
        pub(crate) alerts: Vec<Alert>,
    }

    impl Recording {
        pub(crate) fn new() -> Recording {
            Recording {
                calls: std::sync::Arc::default(),
                answer: || {
                    Ok(Some(Taken {
                        id: "q1".into(),
                        method: Method::Moved,
                        nlink: 1,
                    }))
                },
                alerts: Vec::new(),
            }
        }

        pub(crate) fn calls(&self) -> Vec<Call> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl Sink for Recording {
        fn quarantine(
            &mut self,
            dir: &Path,
            name: &str,
            _reason: &str,
        ) -> crate::Result<Option<Taken>> {
            self.calls
                .lock()
                .unwrap()
                .push(Call::Quarantine(dir.join(name)));
            (self.answer)()
        }

        fn neutralise_keys(
            &mut self,
            file: &Path,
            _remove: &dyn Fn(&Key) -> bool,
            _reason: &str,
        ) -> crate::Result<Option<String>> {
            self.calls
                .lock()
                .unwrap()
                .push(Call::Neutralise(file.to_path_buf()));
            Ok(Some("k1".into()))
        }

        fn alert(&mut self, alert: Alert) {
            self.calls.lock().unwrap().push(Call::Alert(
                alert.kind.to_string(),
                alert.path.clone(),
                alert.action.clone(),
                alert.quarantine_id.clone(),
            ));
            self.alerts.push(alert);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::{Call, Recording};
    use super::*;
    use crate::alerts::AlertKind;
    use crate::baseline::Kind;

    fn entry() -> Entry {
        Entry {
            kind: Kind::File,
            mode: 0o755,
            uid: 0,
            gid: 0,
            size: 1,
            mtime_ns: 5,
            ctime_ns: 6,
            dev: 7,
            ino: 8,
            nlink: 1,
            sha256: None,
            link_target: None,
            changed_in_session: false,
        }
    }

    fn finding(kind: AlertKind) -> Finding {
        Finding {
            severity: Severity::High,
            kind,
            detail: "why".into(),
        }
    }

    fn alert(kind: &str, path: &str, action: &str, qid: Option<&str>) -> Call {
        Call::Alert(
            kind.into(),
            path.into(),
            action.into(),
            qid.map(String::from),
        )
    }

    #[test]
    fn a_quarantine_is_followed_by_its_alert_naming_the_record() {
        let mut sink = Recording::new();
        let v = Verdict::Quarantine(finding(AlertKind::PathShadow));
        let gone = carry_out(&mut sink, "s", Path::new("/b"), "ls", v, &entry());
        assert!(gone.left());
        assert_eq!(
            sink.calls(),
            [
                Call::Quarantine("/b/ls".into()),
                alert("path-shadow", "/b/ls", "quarantined", Some("q1")),
            ]
        );
        let a = &sink.alerts[0];
        assert_eq!((a.severity, a.detail.as_str()), (Severity::High, "why"));
        assert_eq!(a.fingerprint, "path-shadow:/b/ls:7:8:6");
        assert_eq!(a.session, "s");
    }

    #[test]
    fn a_quarantine_in_place_says_neutralised_and_other_hard_links() {
        let mut sink = Recording::new();
        sink.answer = || {
            Ok(Some(Taken {
                id: "q2".into(),
                method: Method::Neutralised,
                nlink: 2,
            }))
        };
        let v = Verdict::Quarantine(finding(AlertKind::GitHook));
        assert!(carry_out(&mut sink, "s", Path::new("/h"), "pre-commit", v, &entry()).left());
        assert_eq!(
            sink.calls()[1],
            alert("git-hook", "/h/pre-commit", "neutralised", Some("q2"))
        );
        assert_eq!(
            sink.alerts[0].detail,
            "why; its other hard links keep their mode"
        );
    }

    #[test]
    fn a_failed_quarantine_is_a_critical_alert_and_the_name_is_kept() {
        let mut sink = Recording::new();
        sink.answer = || {
            Err(crate::Error::io(
                "quarantining /b/ls",
                std::io::Error::from_raw_os_error(libc::EPERM),
            ))
        };
        let v = Verdict::Quarantine(finding(AlertKind::PathChanged));
        assert!(!carry_out(&mut sink, "s", Path::new("/b"), "ls", v, &entry()).left());
        assert_eq!(
            sink.calls(),
            [
                Call::Quarantine("/b/ls".into()),
                alert("path-changed", "/b/ls", "failed", None),
            ]
        );
        assert_eq!(sink.alerts[0].severity, Severity::Critical);
        assert_eq!(
            sink.alerts[0].fingerprint,
            "path-changed:/b/ls:7:8:6:failed"
        );
        assert!(
            sink.alerts[0]
                .detail
                .starts_with("why; quarantine FAILED: "),
            "{}",
            sink.alerts[0].detail
        );
    }

    #[test]
    fn an_alert_the_store_refuses_is_kept_and_written_by_flush() {
        let t = tempfile::tempdir().unwrap();
        let runtime = t.path().join("rt");
        // A file where the runtime directory should be: every write to the store fails.
        std::fs::write(&runtime, "").unwrap();
        let mut store = Store::new(&runtime);
        let f = finding(AlertKind::PathShadow);
        store.alert(file_alert(
            "s",
            f,
            Path::new("/b/ls"),
            Action::Quarantined,
            None,
            &entry(),
        ));
        let still = store.flush();
        assert_eq!(still.len(), 1, "{still:?}");
        assert!(still[0].contains("/b/ls") && still[0].contains("could not be recorded"));
        std::fs::remove_file(&runtime).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        assert!(store.flush().is_empty());
        let written = alerts::Store::new(&runtime).read();
        assert_eq!(written.alerts.len(), 1);
        assert_eq!(written.alerts[0].path, Path::new("/b/ls"));
    }

    #[test]
    fn a_name_gone_before_its_quarantine_is_forgotten_silently() {
        let mut sink = Recording::new();
        sink.answer = || Ok(None);
        let v = Verdict::Quarantine(finding(AlertKind::PathShadow));
        assert!(carry_out(&mut sink, "s", Path::new("/b"), "ls", v, &entry()).left());
        assert_eq!(sink.calls(), [Call::Quarantine("/b/ls".into())]);
    }

    #[test]
    fn an_alert_touches_nothing_and_quiet_does_nothing() {
        let mut sink = Recording::new();
        let v = Verdict::Alert(finding(AlertKind::PathNew));
        assert!(!carry_out(&mut sink, "s", Path::new("/b"), "t", v, &entry()).left());
        assert!(!carry_out(
            &mut sink,
            "s",
            Path::new("/b"),
            "t",
            Verdict::Quiet,
            &entry()
        )
        .left());
        assert_eq!(sink.calls(), [alert("path-new", "/b/t", "alerted", None)]);
    }
}
