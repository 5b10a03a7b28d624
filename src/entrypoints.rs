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

/// Visit every entry under `root` (`root` itself excluded) without descending into directories
/// `walk::pruned`, into symlinks, or into a directory below `root` that a tool declares its own
/// (`walk::declared`; those are returned): `visit(dir, name, kind)` returns, for a directory,
/// whether to descend into it, and for another entry whether it counts. Only those that count are
/// remembered, and given to `visit` again when the directory is taken from memory: the filter is
/// `visit` itself, and its answer must depend on the name and kind alone (what else it looks at is
/// looked at again each time). A directory's subdirectories are visited once its whole listing is
/// read, so that the declaration is known first. One `getdents` buffer for the whole walk and no
/// allocation per file: only directories' names and the entries that count are kept (the
/// workspace can hold tens of thousands of files and the walk is on the launch path). A directory
/// `recall` holds with the same stamp is not read (`memory`). Directories that cannot be read are
/// reported through `unreadable`.
fn walk_tree(
    root: &Path,
    trust: crate::walk::Trust,
    recall: &mut memory::Recall,
    visit: &mut dyn FnMut(&Path, &std::ffi::OsStr, Seen) -> bool,
    unreadable: &mut dyn FnMut(&Path, std::io::Error),
) -> Vec<PathBuf> {
    use rustix::fs::{Mode, OFlags};
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut stack = vec![root.to_path_buf()];
    let mut generated = Vec::new();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    while let Some(dir) = stack.pop() {
        let before = recall.known.remove(dir.as_os_str());
        let stamp_now = || crate::walk::memo::Stamp::at(&dir);
        let unchanged = before
            .as_ref()
            .is_some_and(|b| !memory::listed_again(Some(b.stamp), stamp_now()));
        // `Some(what it replaces, whether it was read whole)` when read now.
        let (read, fd, fresh) = match before {
            Some(b) if unchanged => {
                recall.reused += 1;
                (b, None, None)
            }
            before => {
                let fd = match rustix::fs::open(&dir, flags, Mode::empty()) {
                    Ok(fd) => fd,
                    // Removed since its parent was listed (another session's placeholder, at its
                    // end): nothing is there to seal, and nothing to say on the agent's terminal.
                    Err(e) => {
                        recall.changes.reshaped |= before.is_some();
                        if e != rustix::io::Errno::NOENT || dir == root {
                            unreadable(&dir, e.into());
                        }
                        continue;
                    }
                };
                let (read, whole) = list(&dir, &fd, root, &mut buf, visit, unreadable);
                (read, Some(fd), Some((before, whole)))
            }
        };
        let listing = &read.listing;
        if fresh.is_none() {
            // From memory: `visit` is given what counted when it was read.
            for (name, kind) in &listing.entries {
                visit(&dir, name, *kind);
            }
        }
        // A declaration's bytes can change without its directory changing: read at every launch.
        let declared = dir != root
            && listing.declarations != crate::walk::Declarations::default()
            && fd
                .or_else(|| rustix::fs::open(&dir, flags, Mode::empty()).ok())
                .is_some_and(|fd| crate::walk::declared(&fd, listing.declarations, trust));
        if declared {
            generated.push(dir.clone());
        } else {
            for name in &listing.subdirs {
                if visit(&dir, name, Seen::Dir) {
                    stack.push(dir.join(name));
                }
            }
        }
        match fresh {
            None => {
                recall.next.insert(dir.into_os_string(), read);
            }
            Some((before, whole)) => recall.listed(dir, before.as_ref(), read, whole),
        }
    }
    recall.finish();
    generated
}

/// Read the directory open at `fd`: its stamp (before its entries), and what the walk needs of
/// its listing; the entries other than directories and declarations are given to `visit` as they
/// are read, and kept if it says they count. Also whether the listing was read whole.
fn list(
    dir: &Path,
    fd: &rustix::fd::OwnedFd,
    root: &Path,
    buf: &mut [std::mem::MaybeUninit<u8>],
    visit: &mut dyn FnMut(&Path, &std::ffi::OsStr, Seen) -> bool,
    unreadable: &mut dyn FnMut(&Path, std::io::Error),
) -> (memory::Remembered, bool) {
    use rustix::fs::{FileType, RawDir};
    use std::os::unix::ffi::OsStrExt;
    let stamp = crate::walk::memo::Stamp::open(fd);
    let mut whole = stamp.is_some();
    let mut listing = memory::Listing::default();
    let mut entries = RawDir::new(fd, buf);
    while let Some(entry) = entries.next() {
        let entry = match entry {
            Ok(e) => e,
            // Removed while it was being listed (the same placeholder, a moment later).
            Err(rustix::io::Errno::NOENT) if dir != root => {
                whole = false;
                break;
            }
            Err(e) => {
                unreadable(dir, e.into());
                whole = false;
                break;
            }
        };
        let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        let kind = match entry.file_type() {
            FileType::Directory => Seen::Dir,
            FileType::RegularFile => Seen::File,
            FileType::Unknown => {
                match rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                        Seen::Dir
                    }
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                        Seen::File
                    }
                    Ok(_) => Seen::Other,
                    Err(_) => {
                        // Not known for sure: used now as the walk always did, not remembered.
                        whole = false;
                        Seen::Other
                    }
                }
            }
            _ => Seen::Other,
        };
        match (name.as_bytes(), kind) {
            (n, Seen::File) if listing.declarations.note(n) => {}
            (_, Seen::Dir) => listing.subdirs.push(name.to_owned()),
            _ => {
                if visit(dir, name, kind) {
                    listing.entries.push((name.to_owned(), kind));
                }
            }
        }
    }
    // Without a stamp nothing is kept (`whole` is false); the placeholder is never compared.
    let stamp = stamp.unwrap_or(crate::walk::memo::Stamp::from_raw([0; 4]));
    (memory::Remembered { stamp, listing }, whole)
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
    let file = runtime.and_then(|rt| memory::file(rt, ws));
    let mut recall = memory::Recall {
        known: (file.as_deref())
            .map(|f| memory::load(f, ws))
            .unwrap_or_default(),
        started: crate::walk::memo::now(),
        ..memory::Recall::default()
    };
    let d = discover_recalling(ws, home, trust, &mut recall);
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

/// `discover_workspace` with this memory (`recall.next`: the memory for the next launch).
fn discover_recalling(
    ws: &Path,
    home: Option<&Path>,
    trust: crate::walk::Trust,
    recall: &mut memory::Recall,
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
mod mise;
mod own;
mod state;
pub(crate) use own::{own_repository, OwnRepo};
pub(crate) use state::state_scripts;
#[cfg(test)]
mod tests;
