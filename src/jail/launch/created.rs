//! Entry points made during the session where no seal stood: a catalogued name below the workspace
//! root (`pkg/.npmrc`, `sub/.claude/settings.json`: only existing ones are sealed there), and the
//! root names that get no placeholder (`catalogue::Catalogued::held`, names nothing installed
//! reads). Guards against one that the human's tool runs after the session.
//!
//! What the human reviews anyway is the work: a file in its repository's index (staged or
//! committed by the session: `git diff --cached`, `git log`) is noted, not held. Everything else
//! (untracked, ignored, outside any repository) is held for the review, each regular file as one
//! item, moved out of the workspace (accepting puts it back byte for byte); what is not a regular
//! file is alerted and left. The walk is the launch's (`entrypoints::discover_workspace`, the same
//! skip rule), done once more at the end.

use crate::alerts::{at_session_end, AlertKind};
use crate::jail::plan::Plan;
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// At most this many files of one new catalogued directory are held; the rest are alerted.
const MAX_FILES_PER_DIR: usize = 200;

/// Hold, note or alert what the session made (see the module's doc).
pub(super) fn finish(plan: &Plan, session_dir: &Path) {
    if plan.policy.read_only_workspace {
        return;
    }
    let ws = &plan.policy.workspace;
    let home = Some(plan.policy.home.as_path());
    // The launch's memory of the walk (`entrypoints::memory`): what the session changed is read
    // again.
    let session = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf());
    let runtime = session.runtime_and_id().map(|(rt, _)| rt);
    // A cache tag or `pyvenv.cfg` made during the session (a second's margin: its ctime is
    // stamped with a coarse clock) does not hide what lies below it.
    let trust = crate::walk::Trust::Before(plan.planned_ns - 1_000_000_000);
    let now = crate::entrypoints::discover_trusting(
        ws,
        home,
        runtime.as_ref().map(crate::runtime_dir::RuntimeDir::root),
        trust,
    );
    let placeheld: HashSet<&Path> = plan.placeholders.iter().map(|p| p.path.as_path()).collect();
    let before = &plan.existing_entry_points;
    let mut index = Indexes::new(&now.repos);
    for f in &now.findings {
        let name_catalogued = f.path.file_name().is_some_and(|n| {
            crate::entrypoints::per_directory().any(|c| std::ffi::OsStr::new(c.name) == n)
        });
        let was_there = f
            .path
            .ancestors()
            .any(|a| before.contains(a) || placeheld.contains(a));
        if !name_catalogued || was_there || std::fs::symlink_metadata(&f.path).is_err() {
            continue;
        }
        for file in files_of(&f.path, session_dir, &f.runs) {
            if index.tracked(&file) {
                crate::logfile::note(&crate::escape::visible(&format!(
                    "{} was made during the session and is in its repository's index: review it \
                     with the work ({})",
                    file.display(),
                    f.runs
                )));
            } else {
                hold(&file, &f.runs, session_dir);
            }
        }
    }
}

/// The regular files of a new entry point (itself, or those inside a new directory); what is not
/// one, or is past the bound, is alerted here.
fn files_of(path: &Path, session_dir: &Path, runs: &str) -> Vec<PathBuf> {
    let alert = |p: &Path, why: &str| {
        let detail = format!(
            "{} was created during the session ({runs}); {why}: review it",
            p.display()
        );
        at_session_end(session_dir, AlertKind::EntryPointCreated, p, &detail);
    };
    let mut out = Vec::new();
    for e in walkdir::WalkDir::new(path)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        let t = e.file_type();
        if t.is_dir() {
            continue;
        }
        if !t.is_file() {
            alert(e.path(), "not a regular file, so not held");
        } else if out.len() >= MAX_FILES_PER_DIR {
            alert(e.path(), "one of too many files to hold");
        } else {
            out.push(e.path().to_path_buf());
        }
    }
    out
}

/// Hold one file for the review and move it out of the workspace.
fn hold(path: &Path, runs: &str, session_dir: &Path) {
    let shown = crate::escape::visible(&path.display().to_string()).into_owned();
    let read = std::fs::symlink_metadata(path).and_then(|m| std::fs::read(path).map(|b| (m, b)));
    let (meta, bytes) = match read {
        Ok(r) => r,
        Err(e) => {
            let detail = format!("{shown} was created during the session ({runs}) and could not be read ({e}): review it");
            at_session_end(session_dir, AlertKind::EntryPointCreated, path, &detail);
            return;
        }
    };
    let item = crate::held::Item::file(
        path,
        crate::handback::Consequence::Program,
        format!("made during the session; {runs}"),
        (&bytes, meta.mode()),
        None,
    );
    match crate::held::hold_at_session_end(session_dir, item, Some(&bytes)) {
        Ok(id) => match std::fs::remove_file(path) {
            Ok(()) => crate::logfile::note(&format!(
                "{shown} was made during the session: held for `claude-sandbox review` ({id})"
            )),
            Err(e) => crate::logfile::note(&format!(
                "{shown}: held ({id}) but not moved out of the workspace: {e}"
            )),
        },
        Err(e) => {
            let detail = format!("{shown} was created during the session ({runs}) and could not be held ({e}): review it");
            at_session_end(session_dir, AlertKind::EntryPointCreated, path, &detail);
        }
    }
}

/// The index of each repository, read once: whether a path is staged or committed there.
pub(super) struct Indexes<'a> {
    repos: &'a [crate::entrypoints::Repo],
    read: HashMap<PathBuf, Option<HashSet<Vec<u8>>>>,
}

impl<'a> Indexes<'a> {
    pub(super) fn new(repos: &'a [crate::entrypoints::Repo]) -> Self {
        Indexes {
            repos,
            read: HashMap::new(),
        }
    }

    pub(super) fn tracked(&mut self, file: &Path) -> bool {
        let Some(repo) = self
            .repos
            .iter()
            .filter(|r| r.worktree.as_deref().is_some_and(|w| file.starts_with(w)))
            .max_by_key(|r| r.worktree.as_ref().map_or(0, |w| w.as_os_str().len()))
        else {
            return false;
        };
        let Some(rel) = repo
            .worktree
            .as_deref()
            .and_then(|w| file.strip_prefix(w).ok())
        else {
            return false;
        };
        let paths = self.read.entry(repo.git_dir.clone()).or_insert_with(|| {
            crate::watch::gitlinks::index_paths(&repo.git_dir, &repo.common_dir)
        });
        paths
            .as_ref()
            .is_some_and(|p| p.contains(rel.as_os_str().as_bytes()))
    }
}
