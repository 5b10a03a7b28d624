//! New names in an agent's state directory that its writable allowlist does not give, quarantined
//! when the session ends.
//!
//! Guards against the one write the allowlist cannot refuse: the top level of `~/.claude` and
//! `~/.codex` stays writable (the agents lock by `mkdir`, save by temporary file and rename, and keep
//! `SQLite` journals beside their stores), so a *new* name there is possible. A catalogued entry point
//! is sealed even when missing; a name nobody catalogued that a runtime still reads (Claude Code takes
//! `~/.claude/.config.json`, if it exists, as its whole global configuration instead of
//! `~/.claude.json`) would otherwise wait there for the next unjailed session. At the end of the
//! session every name that was not there at launch, is not on the allowlist and is not one of the
//! launcher's placeholders is moved to the quarantine (restorable byte for byte) with an alert.
//! Between its creation and the end of the session an unjailed agent running beside the jail could
//! read it (docs/threat-model.md).

use crate::alerts::{self, Alert, AlertKind, Severity};
use crate::runtimes::{self, Access};
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A measured state directory's top level at launch.
#[derive(Debug, Clone)]
pub struct Listing {
    pub dir: PathBuf,
    pub names: BTreeSet<OsString>,
}

/// The listings of the measured state directories among `holes` (missing ones list as empty).
pub(crate) fn listings(home: &Path, holes: &[PathBuf]) -> Vec<Listing> {
    runtimes::state_dirs()
        .filter(|sd| sd.measured().is_some() && !sd.own_top_level())
        .map(|sd| home.join(sd.path))
        .filter(|dir| holes.contains(dir))
        .map(|dir| Listing {
            names: names(&dir),
            dir,
        })
        .collect()
}

fn names(dir: &Path) -> BTreeSet<OsString> {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// The names of `now` that are new since `before` and that the allowlist of the state directory
/// `rel` (relative to `$HOME`) does not give. Pure.
pub(crate) fn newcomers(
    rel: &str,
    before: &BTreeSet<OsString>,
    now: &BTreeSet<OsString>,
) -> Vec<OsString> {
    let Some(sd) = runtimes::state_dirs().find(|s| s.path == rel) else {
        return Vec::new();
    };
    now.difference(before)
        .filter(|n| match n.to_str() {
            Some(name) => sd.access(name) == Access::ReadOnly,
            None => true,
        })
        .cloned()
        .collect()
}

/// Quarantine the newcomers of each listing (`placeholders`: paths the launcher made, left alone).
/// Returns one note per problem for the human.
pub(crate) fn sweep(
    runtime: &Path,
    session: &str,
    home: &Path,
    listings: &[Listing],
    placeholders: &[PathBuf],
) -> Vec<String> {
    let mut notes = Vec::new();
    for l in listings {
        let Some(rel) = l.dir.strip_prefix(home).ok().and_then(Path::to_str) else {
            continue;
        };
        for name in newcomers(rel, &l.names, &names(&l.dir)) {
            let path = l.dir.join(&name);
            if placeholders.contains(&path) {
                continue;
            }
            let reason = format!(
                "made during the session in {}, not agent state on the writable allowlist (docs/runtimes.md): \
                 the agent's next session outside the jail could read it",
                l.dir.display()
            );
            let (qid, detail) = match crate::quarantine::quarantine(runtime, &l.dir, &name, &reason)
            {
                Ok(Some(rec)) => (Some(rec.id), reason),
                Ok(None) => continue,
                Err(e) => {
                    notes.push(format!("{}: quarantine failed: {e}", path.display()));
                    (None, format!("{reason}; quarantine FAILED: {e}"))
                }
            };
            let kind = AlertKind::AgentStateNotAllowed;
            let alert = Alert::new(kind, Severity::High, &path, detail, session).quarantined(qid);
            if let Err(e) = alerts::Store::new(runtime).add(&alert) {
                notes.push(format!("recording an alert for {}: {e}", path.display()));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<OsString> {
        names.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_new_names_off_the_allowlist_are_swept() {
        let before = set(&["projects", "CLAUDE.md"]);
        let now = set(&[
            "projects",
            "CLAUDE.md",
            ".config.json",
            "sessions",
            ".credentials.json.tmp.0a1b",
            "workflows",
        ]);
        assert_eq!(
            newcomers(".claude", &before, &now),
            vec![OsString::from(".config.json"), OsString::from("workflows")]
        );
        assert!(
            newcomers(".cursor", &before, &now).is_empty(),
            "not measured"
        );
    }
}
