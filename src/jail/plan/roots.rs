//! The roots the jail writes and what is found in them: the workspace (unless it is read-only to
//! you: then nothing in it needs a seal), its repository's git directories where they lie outside,
//! and the directories you made writable, each sealed as the workspace is.

use super::{Plan, PlanInput};
use crate::entrypoints;
use std::path::{Path, PathBuf};

/// The entry points of the workspace, of its repository's git directories where they lie outside,
/// and of the directories you made writable (`writable`, `--writable`): what is there is sealed
/// as in the workspace, and their repositories' files (a bare repository you push to runs its
/// hooks at every push, yours too), without placeholders for project names. Also those
/// directories.
pub(super) fn discover(
    plan: &Plan,
    input: &PlanInput,
    ws: &Path,
    feed: Option<crate::jail::hardlinks::Feed>,
) -> (entrypoints::Discovery, Vec<PathBuf>) {
    let git_home = input.host.home();
    let runtime = Some(input.runtime_dir.as_path());
    let mut discovery = match feed {
        // The hard-link scan's share of the workspace, in the same walk.
        Some(mut feed) if feed.root == ws => {
            let d = entrypoints::discover_linking(ws, git_home.as_deref(), runtime, &mut feed);
            feed.done();
            d
        }
        _ => entrypoints::discover_workspace_in(ws, git_home.as_deref(), runtime),
    };
    if let Some(own) = &plan.own_repo {
        let dirs = vec![own.common_dir.clone(), own.git_dir.clone()];
        discovery.add_git_dirs(dirs, git_home.as_deref());
    }
    let extras: Vec<PathBuf> = (input.config.writable.iter())
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| p.is_dir() && !p.starts_with(ws))
        .collect();
    for extra in &extras {
        // Not a project directory (`~/.m2`, a shared `~/.local/bin`, a bare repository): what is
        // there is sealed, and its repositories' files, but no project name is made there.
        let mut found = entrypoints::discover_workspace_in(
            extra,
            git_home.as_deref(),
            Some(&input.runtime_dir),
        );
        found.findings.retain(|f| {
            let project_name = f.path.parent() == Some(extra.as_path())
                && f.path.file_name().is_some_and(|n| {
                    entrypoints::per_directory().any(|c| std::ffi::OsStr::new(c.name) == n)
                });
            !project_name || std::fs::symlink_metadata(&f.path).is_ok()
        });
        discovery.merge(found);
    }
    (discovery, extras)
}

/// Whether this user may create files in `dir` (its mode, owner and filesystem, as the kernel
/// decides it: `access(2)` with the real ids, which are the launcher's).
pub(super) fn writable_to_us(dir: &Path) -> bool {
    rustix::fs::access(dir, rustix::fs::Access::WRITE_OK).is_ok()
}
