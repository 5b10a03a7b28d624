//! The judge: what a change in a watched directory or a repository's config means — nothing, an
//! alert, a quarantine, or keys taken out — decided from plain facts (the directory's role, the
//! entry at the baseline, before and after, what a new name would shadow). No file is read here:
//! the watcher gathers the facts, the judge decides, the action sink (`act`) carries it out.
//!
//! Guards against a plant judged by accident of how it was seen: inotify, the sweep and the final
//! sweep all come here with the same facts and get the same verdict. Adding a kind of watched
//! directory is a variant of `Role` and its arm in `judge`.

use super::table::{PathPos, RepoId, Role};
use crate::alerts::{AlertKind, Severity};
use crate::baseline::{self, Entry};
use std::path::{Path, PathBuf};

/// What an alert says: how bad, what kind (the alert's `kind`), and the detail for the human.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    pub(crate) severity: Severity,
    pub(crate) kind: AlertKind,
    pub(crate) detail: String,
}

/// A `commondir` in a repository's common directory (the `.git` of a working tree): it would send
/// the human's git to another directory's hooks and config. One there at launch is sealed; one made
/// since is taken out (where the launched agent refuses its placeholder: `jail::plan`).
pub(crate) fn judge_commondir(had_at_launch: bool, exists: bool) -> Verdict {
    if had_at_launch || !exists {
        return Verdict::Quiet;
    }
    Verdict::Quarantine(Finding {
        severity: Severity::Critical,
        kind: AlertKind::GitConfig,
        detail:
            "a `commondir` was made in the repository's own git directory: the human's git would \
                 take hooks and config from the directory it names"
                .into(),
    })
}

/// The decision on one change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing worth saying.
    Quiet,
    /// Reported; the file stays.
    Alert(Finding),
    /// Taken out of reach (restorable), and reported.
    Quarantine(Finding),
    /// Exec-capable keys taken out of a config file (restorable), and reported.
    Neutralise(Finding),
}

/// One entry of a watched directory: at the baseline, as last known, and now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen<'a> {
    pub(crate) name: &'a str,
    /// The entry at the baseline (only these can "change"; anything else is new).
    pub(crate) origin: Option<&'a Entry>,
    /// The entry as the watcher last knew it.
    pub(crate) before: Option<&'a Entry>,
    /// The entry now.
    pub(crate) after: &'a Entry,
}

/// What the judge may ask beyond the entry itself (the watcher answers from the file system; tests
/// answer with plain values).
pub(crate) trait Context {
    /// Whether new executables that shadow nothing are quarantined too (`quarantine_new`).
    fn quarantine_new(&self) -> bool;
    /// The command a new executable `name` in the PATH directory at `pos` would shadow, in the
    /// launcher's PATH or a future shell's.
    fn shadows(&self, pos: PathPos, name: &str) -> Option<PathBuf>;
    /// The git directory of a repository (for the alert's text).
    fn git_dir(&self, repo: RepoId) -> &Path;
}

/// How an entry is linked, for the alert's text.
pub(crate) fn describe_links(e: &Entry) -> String {
    match (&e.link_target, e.nlink) {
        (Some(t), _) => format!(" (symlink to {})", t.display()),
        (None, n) if n > 1 => format!(" (hard link, {n} names)"),
        _ => String::new(),
    }
}

/// The verdict on one entry of a directory watched as `role`. Only executables are judged, and
/// only when they are new (or newly executable) or their content or attributes changed.
pub(crate) fn judge(role: &Role, seen: &Seen, ctx: &dyn Context) -> Verdict {
    let after = seen.after;
    if !after.is_executable() {
        return Verdict::Quiet;
    }
    let newly = seen.before.is_none_or(|p| !p.is_executable());
    let changed = !newly && seen.before.is_some_and(|p| p.exec_changed(after));
    if !newly && !changed {
        return Verdict::Quiet;
    }
    let link = describe_links(after);
    match role {
        Role::PathDir { pos } => judge_path_entry(*pos, seen, newly, &link, ctx),
        Role::Hooks { repo } if !seen.name.ends_with(".sample") => Verdict::Quarantine(Finding {
            severity: Severity::Critical,
            kind: AlertKind::GitHook,
            detail: format!(
                "git hook `{}` of {}{link}",
                seen.name,
                ctx.git_dir(*repo).display()
            ),
        }),
        // A sample hook git never runs; the other roles' entries are not executables that run.
        Role::Hooks { .. }
        | Role::GitDir { .. }
        | Role::Pending { .. }
        | Role::Tree
        | Role::Retired => Verdict::Quiet,
    }
}

/// A new or changed executable in a writable PATH directory.
fn judge_path_entry(
    pos: PathPos,
    seen: &Seen,
    newly: bool,
    link: &str,
    ctx: &dyn Context,
) -> Verdict {
    if let Some(o) = seen.origin.filter(|o| o.is_executable()) {
        // An executable that was there at the baseline: any difference is tampering.
        if !o.exec_changed(seen.after) {
            return Verdict::Quiet;
        }
        return Verdict::Quarantine(Finding {
            severity: Severity::High,
            kind: AlertKind::PathChanged,
            detail: format!("an executable on PATH changed since the session started{link}"),
        });
    }
    if !newly {
        // New this session and still being written: it was judged when it appeared (one that
        // shadows a command is gone already; a harmless one was reported).
        return Verdict::Quiet;
    }
    if let Some(target) = ctx.shadows(pos, seen.name) {
        Verdict::Quarantine(Finding {
            severity: Severity::Critical,
            kind: AlertKind::PathShadow,
            detail: format!("shadows {}{link}", target.display()),
        })
    } else if ctx.quarantine_new() {
        Verdict::Quarantine(Finding {
            severity: Severity::Info,
            kind: AlertKind::PathNew,
            detail: format!("new executable on PATH{link}"),
        })
    } else {
        Verdict::Alert(Finding {
            severity: Severity::Info,
            kind: AlertKind::PathNew,
            detail: format!("new executable on PATH, shadows nothing{link}"),
        })
    }
}

/// The verdict on an exec-capable key that appeared in a repository's config: taken out when the
/// repository was made in the session and the key is in one of its own config files (an included
/// file may be the human's: the `include.path` naming it is taken out instead), unless git refuses
/// the file (it runs nothing from it) or the value runs nothing of the repository's.
pub(crate) fn judge_key(key: &str, value: &str, new_repo: bool, own_file: bool) -> Verdict {
    let detail = match key {
        baseline::REFUSED_KEY => format!("git config that git refuses to read: {value}"),
        _ => format!("exec-capable git config: {key} = {value}"),
    };
    let finding = Finding {
        severity: Severity::Critical,
        kind: AlertKind::GitConfig,
        detail,
    };
    let take_out = new_repo
        && own_file
        && key != baseline::REFUSED_KEY
        && !crate::catalogue::git::runs_nothing_of_the_repository(key, value);
    if take_out {
        Verdict::Neutralise(finding)
    } else {
        Verdict::Alert(finding)
    }
}

/// A catalogued per-directory name (`entrypoints::per_directory`) made in a workspace directory
/// during the session, where no seal stood (below the root, or a root name with no placeholder):
/// alerted at once, so the human hears of it while a tool of theirs started there would read it;
/// the session's end holds it unless it is the work (`jail::launch::created`). By name only, as
/// the end's walk decides it: every file a build writes in a watched directory comes here, and
/// costs a comparison with each catalogued name.
pub(crate) fn judge_created_name(name: &str) -> Option<Finding> {
    let c = crate::entrypoints::per_directory().find(|c| c.name == name)?;
    Some(Finding {
        severity: Severity::High,
        kind: AlertKind::EntryPointCreated,
        detail: format!(
            "made or replaced during the session ({}): a tool of yours started in this directory reads it; \
             the session's end holds it for `claude-sandbox review` unless it is the work",
            c.runs
        ),
    })
}

/// A new file matching a configured `hidden` glob: visible in the jail until the next session.
pub(crate) fn judge_hidden(glob: &str) -> Finding {
    Finding {
        severity: Severity::High,
        kind: AlertKind::SecretVisible,
        detail: format!("matches hidden = \"{glob}\" but appeared during the session: the jail can read it until the next session"),
    }
}

#[cfg(test)]
mod tests;
