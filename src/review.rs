//! `claude-sandbox review`: the one place where the human sees and decides what the sessions left —
//! items held back (`crate::held`), files quarantined by the watcher (`crate::quarantine`), and the
//! alerts that are neither. One id per item: a held item's id (`h…`), a quarantined file's (`q…`),
//! an alert's (`a…`) for the rest.
//!
//! Guards against a decision taken on something the human could not see properly: everything shown
//! that came from the jail (paths, key names, contents) goes through `crate::escape`, a binary file
//! is shown as hex, a long one is cut and says so; accepting applies exactly the bytes shown.

mod preview;
mod tui;

use crate::alerts::Alert;
use crate::error::{Error, Result};
use crate::escape::{visible, visible_path};
use crate::held::{self, Item};
use crate::quarantine::Record;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) use preview::preview;

/// What an entry of the review is.
#[derive(Debug, Clone)]
pub(crate) enum Subject {
    Held(Item),
    /// A quarantined file, and the alerts that report it.
    Quarantined(Record, Vec<String>),
    Alert(Alert),
}

/// One entry of the review.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub id: String,
    pub time: String,
    pub subject: Subject,
}

/// An entry as `review --json` prints it.
#[derive(Debug, Serialize)]
pub(crate) struct EntryJson {
    pub id: String,
    pub time: String,
    /// `held`, `quarantined`, `alert`.
    pub kind: &'static str,
    pub target: PathBuf,
    pub what: String,
    /// The consequence (held), or the alert's severity.
    pub class: String,
    pub why: String,
}

impl Entry {
    pub(crate) fn kind(&self) -> &'static str {
        match self.subject {
            Subject::Held(_) => "held",
            Subject::Quarantined(..) => "quarantined",
            Subject::Alert(_) => "alert",
        }
    }

    pub(crate) fn target(&self) -> &Path {
        match &self.subject {
            Subject::Held(i) => &i.target,
            Subject::Quarantined(r, _) => &r.original,
            Subject::Alert(a) => &a.path,
        }
    }

    pub(crate) fn json(&self) -> EntryJson {
        let (what, class, why) = match &self.subject {
            Subject::Held(i) => (
                i.what.clone(),
                i.consequence.as_str().to_string(),
                i.why.clone(),
            ),
            Subject::Quarantined(r, _) => (
                r.original
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                "quarantined".into(),
                r.reason.clone(),
            ),
            Subject::Alert(a) => (
                a.kind.to_string(),
                a.severity.as_str().to_string(),
                a.detail.clone(),
            ),
        };
        EntryJson {
            id: self.id.clone(),
            time: self.time.clone(),
            kind: self.kind(),
            target: self.target().to_path_buf(),
            what,
            class,
            why,
        }
    }

    /// One line for a listing, every part from the jail escaped.
    pub(crate) fn line(&self, home: &str) -> String {
        let j = self.json();
        let mut target = visible_path(&j.target);
        if !home.is_empty() && target.starts_with(&format!("{home}/")) {
            target = format!("~{}", &target[home.len()..]);
        }
        let what = match &self.subject {
            Subject::Held(i) => format!("{target}: {}", visible(&i.what)),
            _ => target,
        };
        format!(
            "{:<20} {:<11} {:<19} {} — {}",
            j.id,
            j.kind,
            j.class,
            what,
            visible(&j.why)
        )
    }
}

/// Everything that waits for the human, oldest first.
pub(crate) fn collect(runtime: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    for item in held::Store::new(runtime).waiting() {
        out.push(Entry {
            id: item.id.clone(),
            time: item.time.clone(),
            subject: Subject::Held(item),
        });
    }
    let contents = crate::alerts::Store::new(runtime).read();
    let unacked: Vec<&Alert> = contents.unacked().collect();
    for r in crate::quarantine::list(runtime) {
        if r.restored {
            continue;
        }
        let alerts: Vec<String> = contents
            .alerts
            .iter()
            .filter(|a| a.quarantine_id.as_deref() == Some(&r.id))
            .map(|a| a.id.clone())
            .collect();
        // Decided already: every alert that reported it was acknowledged.
        if !alerts.is_empty() && alerts.iter().all(|a| contents.acked.contains(a)) {
            continue;
        }
        out.push(Entry {
            id: r.id.clone(),
            time: r.time.clone(),
            subject: Subject::Quarantined(r, alerts),
        });
    }
    let held_ids: Vec<&str> = out.iter().map(|e| e.id.as_str()).collect();
    let waiting: Vec<&Item> = out
        .iter()
        .filter_map(|e| match &e.subject {
            Subject::Held(i) => Some(i),
            _ => None,
        })
        .collect();
    let rest: Vec<Entry> = unacked
        .into_iter()
        .filter(|a| {
            !held_ids.contains(&a.id.as_str())
                && a.quarantine_id
                    .as_deref()
                    .is_none_or(|q| !held_ids.contains(&q))
                && !waiting.iter().any(|i| told_of(a, i))
        })
        .map(|a| Entry {
            id: a.id.clone(),
            time: a.time.clone(),
            subject: Subject::Alert(a.clone()),
        })
        .collect();
    out.extend(rest);
    out.sort_by(|a, b| a.time.cmp(&b.time));
    out
}

/// Whether `alert` is the watcher's word, while the session ran, on the file the session's end then
/// held as `item` (a catalogued name made below the root: `entry-point-created` on it or on the new
/// directory it is in). The held item says it all and deciding it decides the alert, so that what
/// an agent made as its work is taken in one step, not an item and an alert.
fn told_of(alert: &Alert, item: &Item) -> bool {
    alert.kind == crate::alerts::AlertKind::EntryPointCreated
        && alert.session == item.session
        && item.target.starts_with(&alert.path)
}

/// The alerts that `item` decides with it: its own, and those `told_of` it.
fn decided_with(runtime: &Path, item: &Item) -> Vec<String> {
    let contents = crate::alerts::Store::new(runtime).read();
    std::iter::once(item.id.clone())
        .chain(
            contents
                .unacked()
                .filter(|a| told_of(a, item))
                .map(|a| a.id.clone()),
        )
        .collect()
}

/// Find an entry by its id, or by the id of an alert that reports it.
fn find(runtime: &Path, id: &str) -> Result<Entry> {
    let all = collect(runtime);
    if let Some(e) = all.iter().find(|e| {
        e.id == id || matches!(&e.subject, Subject::Quarantined(_, alerts) if alerts.iter().any(|a| a == id))
    }) {
        return Ok(e.clone());
    }
    // Decided already: a held item can still be taken (or left) again.
    if let Some((item, _)) = held::Store::new(runtime).get(id) {
        return Ok(Entry {
            id: item.id.clone(),
            time: item.time.clone(),
            subject: Subject::Held(item),
        });
    }
    Err(Error::NotHeld(id.to_string()))
}

/// Accept: apply a held item, restore a quarantined file, acknowledge an alert. A line for the
/// human.
pub(crate) fn accept(runtime: &Path, id: &str) -> Result<String> {
    let e = find(runtime, id)?;
    crate::audit::record(decision("review-accept", &e));
    let alerts = crate::alerts::Store::new(runtime);
    match &e.subject {
        Subject::Held(item) => {
            held::Store::new(runtime).accept(&item.id)?;
            let _ = alerts.ack(Some(&decided_with(runtime, item)));
            Ok(format!(
                "applied {} to {}",
                visible(&item.what),
                visible_path(&item.target)
            ))
        }
        Subject::Quarantined(r, ids) => {
            let r = crate::quarantine::restore(runtime, &r.id, false)?;
            let _ = alerts.ack(Some(ids));
            Ok(format!("restored {}", visible_path(&r.original)))
        }
        Subject::Alert(a) => {
            alerts.ack(Some(std::slice::from_ref(&a.id)))?;
            Ok(format!("acknowledged {}", a.id))
        }
    }
}

/// Reject: a held item stays out of your world (kept in the store), a quarantined file stays in
/// the quarantine, an alert is acknowledged.
pub(crate) fn reject(runtime: &Path, id: &str) -> Result<String> {
    let e = find(runtime, id)?;
    crate::audit::record(decision("review-reject", &e));
    let alerts = crate::alerts::Store::new(runtime);
    match &e.subject {
        Subject::Held(item) => {
            held::Store::new(runtime).reject(&item.id)?;
            let _ = alerts.ack(Some(&decided_with(runtime, item)));
            Ok(format!(
                "left out {} (kept: `claude-sandbox review accept {}` takes it after all)",
                visible(&item.what),
                item.id
            ))
        }
        Subject::Quarantined(r, ids) => {
            alerts.ack(Some(ids))?;
            Ok(format!(
                "{} stays in the quarantine",
                visible_path(&r.original)
            ))
        }
        Subject::Alert(a) => {
            alerts.ack(Some(std::slice::from_ref(&a.id)))?;
            Ok(format!("acknowledged {}", a.id))
        }
    }
}

/// The human's decision on `e`, for the audit trail (recorded before it is carried out: a failure
/// to apply it is an error the human sees; the decision was still taken).
fn decision<'a>(name: &'a str, e: &Entry) -> crate::audit::Event<'a> {
    crate::audit::Event::new(name, None)
        .with("id", e.id.clone())
        .with("item", e.kind())
        .with("target", e.target().to_string_lossy().into_owned())
}

/// The preview of one entry, for `review show ID`.
pub(crate) fn show(runtime: &Path, id: &str, home: &str, out: &mut dyn Write) -> Result<()> {
    let e = find(runtime, id)?;
    let _ = writeln!(out, "{}", e.line(home));
    for l in preview(runtime, &e, usize::MAX) {
        let _ = writeln!(out, "  {l}");
    }
    Ok(())
}

/// The listing for a pipe: one line per entry, then how to decide.
pub(crate) fn print_list(entries: &[Entry], home: &str, out: &mut dyn Write) {
    if entries.is_empty() {
        let _ = writeln!(out, "nothing waits for your review");
        return;
    }
    let _ = writeln!(out, "{} item(s) wait for your review:", entries.len());
    for e in entries {
        let _ = writeln!(out, "{}", e.line(home));
    }
    let _ = writeln!(
        out,
        "decide with `claude-sandbox review accept ID` or `claude-sandbox review reject ID`; `claude-sandbox review show ID` shows one"
    );
}

/// How the review is shown: the human's `$HOME` (written `~`), `$TERM`, colour.
pub(crate) struct Looks<'a> {
    pub home: &'a str,
    pub term: Option<&'a str>,
    pub color: bool,
}

/// `review` with no verb: the interactive view on a terminal, the listing otherwise. Exit 1 while
/// something waits.
pub(crate) fn interactive_or_list(runtime: &Path, json: bool, looks: &Looks) -> Result<i32> {
    let entries = collect(runtime);
    let mut out = std::io::stdout().lock();
    if json {
        let list: Vec<EntryJson> = entries.iter().map(Entry::json).collect();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&list).expect("entries serialise")
        );
        return Ok(i32::from(!entries.is_empty()));
    }
    if tui::usable(looks.term) && !entries.is_empty() {
        drop(out);
        tui::run(runtime, entries, looks)?;
        return Ok(i32::from(!collect(runtime).is_empty()));
    }
    print_list(&entries, looks.home, &mut out);
    Ok(i32::from(!entries.is_empty()))
}

#[cfg(test)]
mod tests;
