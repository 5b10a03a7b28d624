//! The alert store: what the watcher found, for the human to see at their prompt.
//!
//! Guards against an alert that is lost or never seen: alerts are appended as JSON lines under an
//! exclusive lock (safe with several watchers), read tolerantly (a corrupt line is reported and
//! skipped, never fatal), deduplicated (one planted file is one alert even with concurrent sessions),
//! and a marker file is touched so that the prompt hook can notice new alerts with a shell builtin.
//! Acknowledgements are a separate append-only file, so the alert log itself is never rewritten.

mod kind;
pub(crate) use kind::Action;
pub use kind::AlertKind;

use crate::error::{Error, Result};
use crate::escape::{visible, visible_path};
use crate::runtime_dir::{Lock, RuntimeDir};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    High,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    pub id: String,
    pub time: String,
    pub severity: Severity,
    pub kind: AlertKind,
    pub path: PathBuf,
    pub detail: String,
    /// `quarantined`, `neutralised`, `alerted` (`Action`).
    pub action: String,
    pub quarantine_id: Option<String>,
    pub sha256: Option<String>,
    pub session: String,
    /// What makes two alerts the same event (kind, path, file identity): used to deduplicate.
    #[serde(default)]
    pub fingerprint: String,
}

/// The longest `detail` stored; past it the rest is elided (and counted).
const MAX_DETAIL: usize = 4096;
/// A fingerprint past this is stored as its SHA-256 (still unique, still compared exactly).
const MAX_FINGERPRINT: usize = 512;

impl Alert {
    /// This alert with its jail-chosen text bounded: `detail` cut at `MAX_DETAIL` bytes, a long
    /// fingerprint replaced by its digest.
    pub(crate) fn bounded(&self) -> Alert {
        use sha2::Digest;
        let mut a = self.clone();
        a.detail = crate::audit::bounded_text(&a.detail, MAX_DETAIL);
        if a.fingerprint.len() > MAX_FINGERPRINT {
            a.fingerprint = format!(
                "sha256:{}",
                crate::baseline::hex(&sha2::Sha256::digest(a.fingerprint.as_bytes()))
            );
        }
        a
    }

    /// An alert of `kind` about `path`, found now in `session`: alerted (nothing quarantined), one
    /// per session for that kind and path (`fingerprint`).
    pub(crate) fn new(
        kind: AlertKind,
        severity: Severity,
        path: &Path,
        detail: impl Into<String>,
        session: &str,
    ) -> Alert {
        Alert {
            id: new_id("a"),
            time: now_rfc3339(),
            severity,
            fingerprint: format!("{kind}:{}:{session}", path.display()),
            kind,
            path: path.to_path_buf(),
            detail: detail.into(),
            action: Action::Alerted.as_str().into(),
            quarantine_id: None,
            sha256: None,
            session: session.to_string(),
        }
    }

    pub(crate) fn action(mut self, action: Action) -> Alert {
        self.action = action.as_str().into();
        self
    }

    /// Quarantined as `id`, if it was (else alerted only). The alert then takes the quarantine's
    /// id: one id per item, for `review`, `restore` and `alerts ack` alike.
    pub(crate) fn quarantined(mut self, id: Option<String>) -> Alert {
        if id.is_some() {
            self.action = Action::Quarantined.as_str().into();
        }
        self.taken_as(id)
    }

    /// The file is kept in quarantine as `id` (if it is), whatever the action was called: the
    /// alert takes that id.
    pub(crate) fn taken_as(mut self, id: Option<String>) -> Alert {
        if let Some(q) = &id {
            self.id.clone_from(q);
        }
        self.quarantine_id = id;
        self
    }

    /// The alert of a held item: the item's id, kind and action `held`.
    pub(crate) fn held(mut self, id: &str) -> Alert {
        self.id = id.to_string();
        self.action = Action::Held.as_str().into();
        self
    }

    /// What makes two alerts the same event, when it is not the kind, path and session.
    pub(crate) fn fingerprint(mut self, fingerprint: String) -> Alert {
        self.fingerprint = fingerprint;
        self
    }
}

/// Record an alert found when a session ends, high and alerted only, in the alert store of the
/// runtime directory that `session_dir` (`<runtime>/sessions/<id>`) belongs to.
pub(crate) fn at_session_end(session_dir: &Path, kind: AlertKind, path: &Path, detail: &str) {
    in_session(session_dir, kind, path, detail, Action::Alerted);
}

/// Record a high alert of the session whose directory is `session_dir`, at once, with what was done.
pub(crate) fn in_session(
    session_dir: &Path,
    kind: AlertKind,
    path: &Path,
    detail: &str,
    action: Action,
) {
    let dir = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let Some((runtime, session)) = dir.runtime_and_id() else {
        return;
    };
    let alert = Alert::new(
        kind,
        Severity::High,
        path,
        detail,
        &session.to_string_lossy(),
    )
    .action(action);
    if let Err(e) = Store::new(runtime.root()).add(&alert) {
        tracing::warn!("recording an alert: {e}");
    }
}

pub struct Store {
    dir: RuntimeDir,
}

/// What reading the store found.
#[derive(Debug, Default)]
pub struct Contents {
    pub alerts: Vec<Alert>,
    pub acked: BTreeSet<String>,
    /// Lines that could not be parsed: (line number, reason).
    pub bad_lines: Vec<(usize, String)>,
}

impl Contents {
    pub fn unacked(&self) -> impl Iterator<Item = &Alert> {
        self.alerts.iter().filter(|a| !self.acked.contains(&a.id))
    }
}

impl Store {
    pub fn new(runtime: &Path) -> Self {
        Store {
            dir: RuntimeDir::new(runtime),
        }
    }

    fn locked(&self) -> Result<std::fs::File> {
        self.dir.lock(Lock::Alerts)
    }

    fn append_line(file: &Path, line: &str) -> Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(file)
            .map_err(|e| Error::io(format!("opening {}", file.display()), e))?;
        // A line cut short by a full disk is taken back: the next one must not be glued to it.
        let len = f.metadata().map(|m| m.len());
        f.write_all(format!("{line}\n").as_bytes()).map_err(|e| {
            if let Ok(len) = len {
                let _ = f.set_len(len);
            }
            Error::io(format!("writing {}", file.display()), e)
        })
    }

    /// Append an alert unless one with the same fingerprint exists. Returns whether it was added.
    pub fn add(&self, alert: &Alert) -> Result<bool> {
        // A value the jail chose (a planted config's value) is bounded before it is stored,
        // compared or recorded: a 300 KB fingerprint once cut the audit chain.
        let alert = &alert.bounded();
        let _lock = self.locked()?;
        let existing = self.read_unlocked();
        if existing
            .alerts
            .iter()
            .any(|a| a.fingerprint == alert.fingerprint && !alert.fingerprint.is_empty())
        {
            return Ok(false);
        }
        // The store's line is the trail's record of the alert (its extra fields are ignored when
        // read back as an `Alert`); only where the trail cannot be written, the alert alone.
        let line = crate::audit::record(crate::audit::alert_event(alert))
            .unwrap_or_else(|| serde_json::to_string(alert).expect("alert serialises"));
        let marker = self.dir.alerts_pending();
        crate::runtime_dir::reserve::write_with_reserve(self.dir.root(), || {
            Self::append_line(&self.dir.alerts_log(), &line)
        })?;
        crate::runtime_dir::reserve::write_with_reserve(self.dir.root(), || {
            std::fs::write(&marker, alert.id.as_bytes())
                .map_err(|e| Error::io("touching the alert marker", e))
        })?;
        Ok(true)
    }

    pub fn read(&self) -> Contents {
        self.read_unlocked()
    }

    fn read_unlocked(&self) -> Contents {
        let mut c = Contents::default();
        if let Ok(text) = std::fs::read_to_string(self.dir.alerts_log()) {
            for (i, line) in text
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                match serde_json::from_str::<Alert>(line) {
                    Ok(a) => c.alerts.push(a),
                    Err(e) => c.bad_lines.push((i + 1, e.to_string())),
                }
            }
        }
        if let Ok(text) = std::fs::read_to_string(self.dir.alerts_acks()) {
            for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                if l.starts_with('{') {
                    // An `ack` record of the trail: its `ids`.
                    let ids = serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v.get("ids").cloned())
                        .and_then(|v| serde_json::from_value::<Vec<String>>(v).ok())
                        .unwrap_or_default();
                    c.acked.extend(ids);
                } else {
                    c.acked.insert(l.to_string());
                }
            }
        }
        c
    }

    /// Acknowledge alerts by id (all unacknowledged when `ids` is `None`). Returns how many.
    pub fn ack(&self, ids: Option<&[String]>) -> Result<usize> {
        let _lock = self.locked()?;
        let c = self.read_unlocked();
        let targets: Vec<String> = match ids {
            None => c.unacked().map(|a| a.id.clone()).collect(),
            Some(ids) => {
                for id in ids {
                    if !c.alerts.iter().any(|a| &a.id == id) {
                        return Err(Error::Usage(format!(
                            "no alert with id {id}; see `claude-sandbox alerts --all`"
                        )));
                    }
                }
                ids.iter()
                    .filter(|id| !c.acked.contains(*id))
                    .cloned()
                    .collect()
            }
        };
        if !targets.is_empty() {
            // As for alerts: the trail's `ack` record is the line; plain ids where it cannot be
            // written (and in stores from before).
            let event = crate::audit::Event::new("ack", None).with("ids", targets.clone());
            match crate::audit::record(event) {
                Some(line) => Self::append_line(&self.dir.alerts_acks(), &line)?,
                None => {
                    for id in &targets {
                        Self::append_line(&self.dir.alerts_acks(), id)?;
                    }
                }
            }
        }
        Ok(targets.len())
    }
}

impl Store {
    /// For the prompt hook: the alerts not shown yet, marked shown.
    pub fn take_unshown(&self) -> Result<Vec<Alert>> {
        let _lock = self.locked()?;
        let c = self.read_unlocked();
        let shown = std::fs::read_to_string(self.dir.alerts_shown()).unwrap_or_default();
        let shown = shown.trim();
        let fresh: Vec<Alert> = match c.alerts.iter().position(|a| a.id == shown) {
            Some(i) => c.alerts[i + 1..].to_vec(),
            None => c.unacked().cloned().collect(),
        };
        if let Some(last) = c.alerts.last() {
            let mut tmp = self.dir.alerts_shown().into_os_string();
            tmp.push(".tmp");
            std::fs::write(&tmp, format!("{}\n", last.id))
                .and_then(|()| std::fs::rename(&tmp, self.dir.alerts_shown()))
                .map_err(|e| Error::io("writing the shown marker", e))?;
        }
        match std::fs::remove_file(self.dir.alerts_pending()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io("removing the alert marker", e))
            }
            _ => {}
        }
        Ok(fresh
            .into_iter()
            .filter(|a| !c.acked.contains(&a.id))
            .collect())
    }
}

/// The short form for the prompt: one line per alert (a path in `home` shown from `~`), then how
/// to review and restore.
/// The short form for the prompt: one line per alert not shown yet, then how many items wait for
/// the human's review (`waiting`) and the command. Every byte the jail chose is escaped.
pub fn print_prompt(
    alerts: &[Alert],
    waiting: usize,
    home: Option<&Path>,
    out: &mut dyn Write,
    color: bool,
) {
    if alerts.is_empty() {
        return;
    }
    let home = home.and_then(Path::to_str).unwrap_or_default();
    for a in alerts {
        let sev = a.severity.as_str().to_uppercase();
        let sev = if color {
            let code = if a.severity == Severity::Info {
                "33"
            } else {
                "1;31"
            };
            format!("\x1b[{code}m{sev}\x1b[0m")
        } else {
            sev
        };
        let mut path = visible_path(&a.path);
        if !home.is_empty() && path.starts_with(&format!("{home}/")) {
            path = format!("~{}", &path[home.len()..]);
        }
        // What undoes or decides it, by the item's one id.
        let next = match (&a.quarantine_id, &a.kind) {
            (Some(q), _) => format!(" (undo: claude-sandbox restore {})", visible(q)),
            (None, AlertKind::Held) => {
                format!(" (decide: claude-sandbox review show {})", visible(&a.id))
            }
            (None, _) => String::new(),
        };
        let _ = writeln!(
            out,
            "claude-sandbox: {sev} {} {path}: {}{next}",
            visible(&a.action),
            visible(&a.detail),
        );
    }
    if waiting > 0 {
        let _ = writeln!(
            out,
            "claude-sandbox: {waiting} item(s) wait for your review: `claude-sandbox review`"
        );
    } else {
        let _ = writeln!(out, "claude-sandbox: see them with `claude-sandbox review`");
    }
}

/// A new unique id: time, pid and a counter.
pub fn new_id(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{prefix}{:x}{:05x}{:x}",
        now.as_secs(),
        now.subsec_micros() ^ std::process::id() & 0xfffff,
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Now as RFC 3339 UTC (`2026-11-29T22:25:00.123Z`).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}

/// Print alerts as a table (colours on a terminal unless `NO_COLOR`).
/// `restored`: quarantine ids already put back (their alerts no longer offer the restore command).
pub fn print_table(
    alerts: &[&Alert],
    acked: &BTreeSet<String>,
    restored: &BTreeSet<String>,
    out: &mut dyn Write,
    color: bool,
) {
    if alerts.is_empty() {
        let _ = writeln!(out, "no alerts");
        return;
    }
    let paint = |sev: Severity, s: &str| -> String {
        if !color {
            return s.to_string();
        }
        let code = match sev {
            Severity::Critical => "1;31",
            Severity::High => "31",
            Severity::Info => "33",
        };
        format!("\x1b[{code}m{s}\x1b[0m")
    };
    let _ = writeln!(
        out,
        "{:<22} {:<20} {:<9} {:<12} PATH — DETAIL",
        "ID", "TIME", "SEVERITY", "ACTION"
    );
    for a in alerts {
        let ack = if acked.contains(&a.id) {
            " (acknowledged)"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{:<22} {:<20} {} {:<12} {} — {}{ack}",
            a.id,
            a.time.get(..19).unwrap_or(&a.time),
            paint(a.severity, &format!("{:<9}", a.severity.as_str())),
            visible(&a.action),
            visible_path(&a.path),
            visible(&a.detail)
        );
        match &a.quarantine_id {
            Some(q) if restored.contains(q) => {
                let _ = writeln!(out, "{:<22} restored ({q})", "");
            }
            Some(q) => {
                let _ = writeln!(out, "{:<22} restore with: claude-sandbox restore {q}", "");
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(fp: &str) -> Alert {
        Alert {
            id: new_id("a"),
            time: now_rfc3339(),
            severity: Severity::Critical,
            kind: AlertKind::PathShadow,
            path: "/h/.local/bin/git".into(),
            detail: "d".into(),
            action: "quarantined".into(),
            quarantine_id: None,
            sha256: None,
            session: "s".into(),
            fingerprint: fp.into(),
        }
    }

    #[test]
    fn dedup_ack_and_corrupt_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        assert!(store.add(&alert("x")).unwrap());
        assert!(
            !store.add(&alert("x")).unwrap(),
            "same fingerprint: one alert"
        );
        assert!(store.add(&alert("y")).unwrap());
        std::fs::OpenOptions::new()
            .append(true)
            .open(RuntimeDir::new(dir.path()).alerts_log())
            .unwrap()
            .write_all(b"{not json\n")
            .unwrap();
        let c = store.read();
        assert_eq!(c.alerts.len(), 2);
        assert_eq!(c.bad_lines.len(), 1);
        assert_eq!(c.bad_lines[0].0, 3);
        assert_eq!(store.ack(Some(&[c.alerts[0].id.clone()])).unwrap(), 1);
        assert_eq!(store.read().unacked().count(), 1);
        assert_eq!(store.ack(None).unwrap(), 1);
        assert_eq!(store.read().unacked().count(), 0);
        assert!(store.ack(Some(&["nope".into()])).is_err());
    }

    /// Each kind has a name of its own, read back as the same kind; one this version does not know
    /// is kept as written.
    #[test]
    fn kinds_keep_their_names() {
        for (i, k) in AlertKind::ALL.iter().enumerate() {
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(serde_json::from_str::<AlertKind>(&json).unwrap(), *k);
            assert!(!AlertKind::ALL[i + 1..]
                .iter()
                .any(|o| o.as_str() == k.as_str()));
        }
        let other: AlertKind = serde_json::from_str("\"from-a-later-version\"").unwrap();
        assert_eq!(other, AlertKind::Other("from-a-later-version".into()));
        assert_eq!(
            serde_json::to_string(&other).unwrap(),
            "\"from-a-later-version\""
        );
    }

    #[test]
    fn time_format() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'));
    }
}
