//! The discovery of the catalogue's entry points (`catalogue`) in a workspace and a home directory.
//!
//! Guards against deferred execution: a file the agent writes inside the jail that a program *outside*
//! the jail later runs as the human (a git hook, `core.fsmonitor`, an `.envrc`, a VS Code task, an agent
//! settings file with hooks). Discovery is pure reading: it lists every such path (existing or not) under
//! the workspace and the writable parts of `$HOME`, with who would run it; the jail planner decides how
//! to seal each one (a read-only bind of an existing path, a read-only placeholder for a missing one).
//!
//! What is found:
//! - per-directory names (`.envrc`, `.vscode/`, `.claude/`, `mise.toml`, ...) at the workspace root
//!   (missing or not), and wherever they already exist in the tree (nested repositories included);
//! - every git directory under the workspace: `.git` dirs, `.git` pointer files (worktrees,
//!   submodules), bare repositories, `modules/*` of submodules, `worktrees/*`, with the files git
//!   reads there (`catalogue::git::FILES`), the `core.hooksPath` target and `include` targets;
//! - the workspace's own repository where its git directory lies outside the workspace (a linked
//!   worktree, a submodule, a workspace below a repository's root: `own`), sealed the same way;
//! - the agent-state directories' own entry points (`~/.claude/settings.json`, `~/.codex/config.toml`...),
//!   every existing entry of a measured runtime's state directory that is not on its writable
//!   allowlist, and the scripts its settings name (`state`);
//! - what each `.envrc` and `mise.toml` includes (`includes`): files it sources (sealed), `.env`
//!   files it exports and directories it puts on PATH (named for the session's end and the
//!   watcher).

use crate::catalogue::{git, Catalogued, Stub, TOOLS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every per-directory name: the tools' and the agent runtimes' (`runtimes`).
pub fn per_directory() -> impl Iterator<Item = &'static Catalogued> {
    TOOLS.iter().chain(crate::runtimes::project_entry_points())
}

/// A path to seal, found by discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: PathBuf,
    pub stub: Stub,
    pub runs: String,
}

/// A git repository found under the workspace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Repo {
    /// The working tree root (`None` for a bare repository or a submodule's module dir).
    pub worktree: Option<PathBuf>,
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
}

/// Everything discovery found.
#[derive(Debug, Default, Clone)]
pub struct Discovery {
    pub findings: Vec<Finding>,
    pub repos: Vec<Repo>,
    /// Problems that did not stop discovery but are worth telling (unreadable metadata...).
    pub warnings: Vec<String>,
    /// Every directory walked (not `.git`, not `node_modules`): the watcher watches these for new
    /// repositories without walking the workspace again.
    pub dirs: Vec<PathBuf>,
    /// The `.env` files an `.envrc` exports (`dotenv`), existing or not (`includes`).
    pub dotenv: Vec<PathBuf>,
    /// The directories an `.envrc` puts on PATH (`PATH_add`), existing or not (`includes`).
    pub path_adds: Vec<PathBuf>,
}

impl Discovery {
    fn seal(&mut self, path: PathBuf, stub: Stub, runs: impl Into<String>) {
        self.findings.push(Finding {
            path,
            stub,
            runs: runs.into(),
        });
    }
}

/// What the workspace walk reports about one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Dir,
    File,
    Other,
}

/// Walk the workspace and collect entry points and repositories (`home`: `$HOME` as git expands
/// `~/` in an include). Every directory is read.
pub fn discover_workspace(ws: &Path, home: Option<&Path>) -> Discovery {
    discover_workspace_in(ws, home, None)
}

/// `discover_workspace`, with the walk's memory of `ws` kept in the runtime directory `runtime`
/// (`memory`): an unchanged directory is not read again.
pub(crate) fn discover_workspace_in(
    ws: &Path,
    home: Option<&Path>,
    runtime: Option<&Path>,
) -> Discovery {
    discover_trusting(ws, home, runtime, crate::walk::Trust::Any)
}

/// `discover_workspace_in` doing the hard-link scan's work in the directories it reads (`Links`;
/// the launch's walk of the workspace, `jail::hardlinks::feed`).
pub(crate) fn discover_linking(
    ws: &Path,
    home: Option<&Path>,
    runtime: Option<&Path>,
    links: &mut dyn Links,
) -> Discovery {
    let now = crate::walk::memo::now();
    discover_with(
        ws,
        home,
        runtime,
        (crate::walk::Trust::Any, now),
        Some(links),
    )
}

/// `discover_workspace_in`, honouring only the declarations `trust` counts (`walk::Trust`): the
/// launch honours any (a cache tagged before the session is not walked), the watcher and the
/// session's end only those older than the session, since the agent may have made the tag to hide
/// a repository or an entry point below it.
pub(crate) fn discover_trusting(
    ws: &Path,
    home: Option<&Path>,
    runtime: Option<&Path>,
    trust: crate::walk::Trust,
) -> Discovery {
    discover_with(ws, home, runtime, (trust, crate::walk::memo::now()), None)
}

/// The walk with its memory in `runtime`, and `links` looked for (a walk whose memory is kept
/// looks, whether or not a scan takes what it finds: `tree::Links`).
fn discover_with(
    ws: &Path,
    home: Option<&Path>,
    runtime: Option<&Path>,
    (trust, started): (crate::walk::Trust, u64),
    links: Option<&mut dyn Links>,
) -> Discovery {
    let file = runtime.and_then(|rt| memory::file(rt, ws));
    let mut check = crate::jail::hardlinks::Check::default();
    let links: Option<&mut dyn Links> = match links {
        Some(l) => Some(l),
        None if file.is_some() => Some(&mut check),
        None => None,
    };
    let (memory, other_build) = (file.as_deref())
        .map(|f| memory::load(f, ws))
        .unwrap_or_default();
    let mut recall = memory::Recall {
        memory,
        other_build,
        started,
        ..memory::Recall::default()
    };
    let d = discover_recalling(ws, home, trust, &mut recall, links);
    tracing::debug!(
        root = %ws.display(),
        listed = recall.listed,
        remembered = recall.reused,
        "entry-point walk"
    );
    if let Some(file) = &file {
        memory::save(file, ws, &recall);
    }
    d
}

/// `discover_trusting` as if it started at `started` (`walk::memo::now`'s units), with `links`.
#[cfg(test)]
pub(crate) fn discover_at(
    ws: &Path,
    runtime: &Path,
    (trust, started): (crate::walk::Trust, u64),
    links: Option<&mut dyn Links>,
) -> Discovery {
    discover_with(ws, None, Some(runtime), (trust, started), links)
}

/// `discover_workspace` with this memory (`recall.memory`, made the next launch's as the walk goes).
fn discover_recalling(
    ws: &Path,
    home: Option<&Path>,
    trust: crate::walk::Trust,
    recall: &mut memory::Recall,
    links: Option<&mut dyn Links>,
) -> Discovery {
    let mut d = Discovery::default();
    let mut git_dirs: Vec<PathBuf> = Vec::new();
    add_per_directory(&mut d, ws);
    d.dirs.push(ws.to_path_buf());
    let mut warnings = Vec::new();
    let generated = walk_tree(
        ws,
        trust,
        recall,
        links,
        &mut |dir, name, kind| {
            if name == ".git" {
                let path = dir.join(name);
                return match kind {
                    // Not descended into: its files are added by `add_git_dirs`.
                    Seen::Dir => {
                        git_dirs.push(path);
                        false
                    }
                    Seen::File => {
                        d.seal(path.clone(), git::POINTER.0, git::POINTER.1);
                        match read_gitdir_pointer(&path) {
                            Some(target) => git_dirs.push(target),
                            None => d
                                .warnings
                                .push(format!("{}: unreadable `gitdir:` pointer", path.display())),
                        }
                        true
                    }
                    // A symlink: git follows it, to a git directory or a `gitdir:` file, as it
                    // follows a pointer file's target (wherever it is, as for those).
                    Seen::Other => {
                        match std::fs::canonicalize(&path).map(|t| (std::fs::metadata(&t), t)) {
                            Ok((Ok(m), t)) if m.is_dir() && t.join("HEAD").exists() => {
                                git_dirs.push(t);
                            }
                            Ok((Ok(m), _)) if m.is_file() => {
                                if let Some(target) = read_gitdir_pointer(&path) {
                                    git_dirs.push(target);
                                }
                            }
                            _ => {}
                        }
                        // Counts: its target is looked at again at each launch.
                        true
                    }
                };
            }
            if kind == Seen::Dir {
                if crate::walk::pruned(name) {
                    return false;
                }
                d.dirs.push(dir.join(name));
            }
            // A symlink `HEAD` too: git still takes one (its older form) for a bare repository's.
            if name == "HEAD" && kind != Seen::Dir {
                if dir.join("objects").is_dir() && dir.join("refs").is_dir() {
                    git_dirs.push(dir.to_path_buf());
                }
                // Counts: whether `objects` and `refs` are there is looked at again each launch.
                return true;
            }
            let catalogued = per_directory().find(|c| name == c.name);
            if let Some(c) = catalogued {
                d.seal(dir.join(name), c.stub, c.runs);
            }
            // A directory is descended into; another entry counts if its name is catalogued.
            kind == Seen::Dir || catalogued.is_some()
        },
        &mut |dir, e| warnings.push(format!("scanning the workspace: {}: {e}", dir.display())),
    );
    d.warnings.extend(warnings);
    for g in &generated {
        tracing::info!(dir = %g.display(), "not walked: a cache or a virtual environment");
    }
    // Not watched for new repositories either (see `walk`).
    let generated: std::collections::HashSet<PathBuf> = generated.into_iter().collect();
    d.dirs.retain(|dir| !generated.contains(dir));
    d.follow_envrc_includes(home);
    d.add_git_dirs(git_dirs, home);
    d
}

impl Discovery {
    /// Take in what another root's discovery found (a configured writable path).
    pub(crate) fn merge(&mut self, other: Discovery) {
        self.findings.extend(other.findings);
        for r in other.repos {
            if !self.repos.iter().any(|k| k.git_dir == r.git_dir) {
                self.repos.push(r);
            }
        }
        self.warnings.extend(other.warnings);
        self.dirs.extend(other.dirs);
        self.dotenv.extend(other.dotenv);
        self.path_adds.extend(other.path_adds);
    }

    /// Add the repositories of these git directories (and of their common directories, modules and
    /// worktrees): their files git reads, sealed. One already found is not added again.
    pub(crate) fn add_git_dirs(&mut self, mut git_dirs: Vec<PathBuf>, home: Option<&Path>) {
        let mut seen: std::collections::BTreeSet<PathBuf> =
            self.repos.iter().map(|r| r.git_dir.clone()).collect();
        while let Some(g) = git_dirs.pop() {
            let g = std::fs::canonicalize(&g).unwrap_or(g);
            if seen.insert(g.clone()) {
                add_git_dir(self, &g, &mut git_dirs, home);
            }
        }
    }
}

fn add_per_directory(d: &mut Discovery, dir: &Path) {
    for c in per_directory() {
        d.seal(dir.join(c.name), c.stub, c.runs);
    }
}

/// Entry points inside writable agent-state directories of `$HOME` (see `state`).
pub fn discover_state(home: &Path, state_dirs: &[PathBuf]) -> Vec<Finding> {
    state::discover(home, state_dirs)
}

/// `gitdir: <path>` in a `.git` file, resolved relative to the file's directory.
pub fn read_gitdir_pointer(file: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(file).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let target = Path::new(target);
    Some(if target.is_absolute() {
        target.to_path_buf()
    } else {
        file.parent()?.join(target)
    })
}

/// The common directory of a git directory (`commondir` file, else itself).
pub fn common_dir(git_dir: &Path) -> PathBuf {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) if !text.trim().is_empty() => {
            let c = Path::new(text.trim());
            let c = if c.is_absolute() {
                c.to_path_buf()
            } else {
                git_dir.join(c)
            };
            std::fs::canonicalize(&c).unwrap_or(c)
        }
        _ => git_dir.to_path_buf(),
    }
}

fn add_git_dir(d: &mut Discovery, g: &Path, more: &mut Vec<PathBuf>, home: Option<&Path>) {
    let common = common_dir(g);
    let worktree = match g.file_name().and_then(|n| n.to_str()) {
        Some(".git") => g.parent().map(Path::to_path_buf),
        _ => std::fs::read_to_string(g.join("gitdir"))
            .ok()
            .and_then(|t| Path::new(t.trim()).parent().map(Path::to_path_buf)),
    };
    d.repos.push(Repo {
        worktree: worktree.clone(),
        git_dir: g.to_path_buf(),
        common_dir: common.clone(),
    });
    // Files git reads from this git directory; missing ones get content git reads as "unset".
    for f in git::files(git::In::GitDir) {
        d.seal(g.join(f.rel), f.stub, f.runs);
    }
    if g != common {
        // Its hooks and config are the common directory's: sealed there, wherever it lies.
        more.push(common);
        return;
    }
    for f in git::files(git::In::CommonDir) {
        d.seal(g.join(f.rel), f.stub, f.runs);
    }
    let config_files = config_with_includes(&g.join("config"), worktree.as_deref(), home);
    for (file, hooks_path) in config_files {
        if file != g.join("config") {
            d.seal(file, git::INCLUDED.0, git::INCLUDED.1);
        }
        if let Some(hp) = hooks_path {
            d.seal(hp, git::HOOKS_PATH.0, git::HOOKS_PATH.1);
        }
    }
    for sub in ["modules", "worktrees"] {
        let Ok(rd) = std::fs::read_dir(g.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            if sub == "worktrees" {
                let w = e.path();
                for f in git::files(git::In::Worktree) {
                    d.seal(w.join(f.rel), f.stub, f.runs);
                }
            } else {
                collect_module_dirs(&e.path(), more, 0);
            }
        }
    }
}

/// Submodule git directories may nest (`modules/a/modules/b`); a git dir has a `HEAD` and `config`.
fn collect_module_dirs(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    if depth > 10 {
        return;
    }
    if dir.join("HEAD").is_file() && dir.join("config").is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_module_dirs(&e.path(), out, depth + 1);
            }
        }
    }
}

/// The config file and every file it includes (read by `gitconfig`, git's rules; `home` expands
/// `~/`), each with the `core.hooksPath` target it sets, if any.
pub(crate) fn config_with_includes(
    config: &Path,
    worktree: Option<&Path>,
    home: Option<&Path>,
) -> Vec<(PathBuf, Option<PathBuf>)> {
    let c = crate::gitconfig::read(&[config.to_path_buf()], home);
    let git_dir = config.parent().unwrap_or(Path::new("/"));
    c.files
        .iter()
        .map(|f| {
            let hooks = match &f.read {
                crate::gitconfig::Read::Keys(keys) => keys
                    .iter()
                    .rev()
                    .find(|k| k.name == "core.hookspath")
                    .and_then(|k| k.value.as_deref())
                    .map(|v| crate::gitconfig::hooks_path(v, worktree, git_dir, home)),
                _ => None,
            };
            (f.path.clone(), hooks)
        })
        .collect()
}

/// Group findings by path, keeping the first description (a path found twice is sealed once).
pub fn dedup(findings: Vec<Finding>) -> Vec<Finding> {
    let mut by_path: BTreeMap<PathBuf, Finding> = BTreeMap::new();
    for f in findings {
        by_path.entry(f.path.clone()).or_insert(f);
    }
    by_path.into_values().collect()
}

pub(crate) mod envrc;
mod includes;
mod memory;
mod tree;
use tree::walk_tree;
pub(crate) use tree::Links;
mod mise;
mod own;
mod state;
pub(crate) use own::{own_repository, OwnRepo};
pub(crate) use state::state_scripts;
#[cfg(test)]
mod tests;
