//! The catalogue of entry points and their discovery in a workspace and a home directory.
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
//!   submodules), bare repositories, `modules/*` of submodules, `worktrees/*`, with their `hooks/`,
//!   `config`, `config.worktree`, `commondir`, the `core.hooksPath` target and `include` targets;
//! - the agent-state directories' own entry points (`~/.claude/settings.json`, `~/.codex/config.toml`...),
//!   every existing entry of a measured runtime's state directory that is not on its writable
//!   allowlist, and the scripts its settings name (`state`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What a missing entry point is replaced with. A directory is the default because every reader we
/// checked treats a directory where it expects a file as absent (rustup, pyenv, npm, git's untracked
/// listing), while an empty *file* changes behaviour (an empty `rust-toolchain.toml` breaks cargo, an
/// empty `.python-version` switches pyenv to the system python). Files inside `.git` are the exception:
/// git refuses a directory there, so they get content git reads as "nothing set".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stub {
    /// An empty directory.
    Dir,
    /// A file with this content.
    File(&'static str),
}

/// One catalogued name: where it is looked for, who runs what it holds.
#[derive(Debug, Clone, Copy)]
pub struct Catalogued {
    pub name: &'static str,
    pub stub: Stub,
    pub runs: &'static str,
    /// The commands that read it. When none of them is installed (on PATH or in a conventional user
    /// bin directory), a missing one gets no placeholder: nothing outside would run it, and one
    /// created during the session is alerted at its end (`jail::plan::readers`). Empty: always
    /// placeholdered (read by editors and agents that need not be on PATH, or by us).
    pub read_by: &'static [&'static str],
    /// Set in the jail while the name is a placeholder, for a reader that fails on a directory.
    pub jail_env: Option<(&'static str, &'static str)>,
}

const LEFTHOOK: &[&str] = &["lefthook"];
const CARGO: &[&str] = &["cargo", "rustup", "rustc"];
/// npm reads a `.npmrc` in the directory it runs in even without a `package.json`.
const NODE_PMS: &[&str] = &["npm", "npx", "pnpm", "yarn", "bun", "corepack"];

/// Always placeholdered when missing (also the agents' project names, `runtimes`: the agent that
/// reads one may run as an editor's extension, not from PATH).
pub(crate) const fn dir(name: &'static str, runs: &'static str) -> Catalogued {
    Catalogued {
        name,
        stub: Stub::Dir,
        runs,
        read_by: &[],
        jail_env: None,
    }
}

/// Placeholdered when missing only if one of `read_by` is installed.
const fn read_by(
    name: &'static str,
    read_by: &'static [&'static str],
    runs: &'static str,
) -> Catalogued {
    Catalogued {
        name,
        stub: Stub::Dir,
        runs,
        read_by,
        jail_env: None,
    }
}

/// Names sealed at the workspace root (blocked when missing) and wherever they exist below it,
/// besides the agent runtimes' own (`runtimes`; both together: `per_directory`).
/// Missing ones below the root are not blocked: a placeholder per name per directory would cost a
/// mount each (about 0.4 ms apiece at launch) for directories the human rarely opens as a project.
const TOOLS: &[Catalogued] = &[
    dir(
        ".vscode",
        "VS Code: tasks.json folderOpen tasks, settings naming executables, launch.json",
    ),
    dir(
        ".devcontainer",
        "Dev Containers: initializeCommand on the host, post*Command, features",
    ),
    dir(".idea", "JetBrains IDEs: run configurations, startup tasks"),
    read_by(
        ".husky",
        &["npm", "pnpm", "yarn", "bun", "husky"],
        "husky: git hooks run by every commit",
    ),
    read_by(".lefthook", LEFTHOOK, "lefthook: hook scripts"),
    read_by(
        ".cargo",
        CARGO,
        "cargo: config.toml runner, rustc-wrapper, linker for every cargo command",
    ),
    read_by(".envrc", &["direnv"], "direnv: shell code run on cd"),
    read_by(
        ".npmrc",
        NODE_PMS,
        "npm: node-options, script-shell, git, editor",
    ),
    read_by(
        ".yarnrc.yml",
        &["yarn", "corepack"],
        "yarn: yarnPath runs a JavaScript file",
    ),
    Catalogued {
        // pnpm `require`s it, and a directory fails every install: while it is a placeholder the
        // jail's pnpm reads `/dev/null` instead (an empty module: no hooks). Not an empty file,
        // which `git add -A` would commit.
        jail_env: Some(("npm_config_pnpmfile", "/dev/null")),
        ..read_by(
            ".pnpmfile.cjs",
            &["pnpm", "corepack"],
            "pnpm: hooks run on install",
        )
    },
    read_by("bunfig.toml", &["bun", "bunx"], "bun: preload scripts"),
    read_by(
        "mise.toml",
        &["mise"],
        "mise: [hooks] enter/cd, [env] _.source on cd",
    ),
    read_by(
        ".mise.toml",
        &["mise"],
        "mise: [hooks] enter/cd, [env] _.source on cd",
    ),
    read_by(
        ".tool-versions",
        &["asdf", "mise"],
        "asdf/mise: `path:` tool versions run by shims",
    ),
    read_by(
        ".python-version",
        &["pyenv", "uv", "rye"],
        "pyenv: selects the python that shims run",
    ),
    read_by(
        "rust-toolchain.toml",
        CARGO,
        "rustup: `path =` toolchain run by cargo/rustc proxies",
    ),
    read_by(
        "rust-toolchain",
        CARGO,
        "rustup: toolchain run by cargo/rustc proxies",
    ),
    read_by("lefthook.yml", LEFTHOOK, "lefthook: hook commands"),
    read_by(".lefthook.yml", LEFTHOOK, "lefthook: hook commands"),
    read_by("lefthook-local.yml", LEFTHOOK, "lefthook: hook commands"),
    read_by(
        ".pre-commit-config.yaml",
        &["pre-commit", "prek"],
        "pre-commit/prek: `repo: local` entry commands on commit",
    ),
    read_by("hk.pkl", &["hk"], "hk: hook commands"),
    read_by(
        ".exrc",
        &["vi", "vim", "nvim", "ex", "view"],
        "vi/vim with `exrc`: ex commands",
    ),
    dir(
        crate::config::WORKSPACE_FILE,
        "claude-sandbox: the next session's policy",
    ),
];

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
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Dir,
    File,
    Other,
}

/// Visit every entry under `root` (`root` itself excluded) without descending into directories
/// `walk::pruned`, into symlinks, or into a directory below `root` that a tool declares its own
/// (`walk::declared`; those are returned): `visit(dir, name, kind)` returns whether to descend
/// into a directory. A directory's subdirectories are visited once its whole listing is read, so
/// that the declaration is known first. One `getdents` buffer for the whole walk and no allocation
/// per file: only directories' names and paths are kept (the workspace can hold tens of thousands
/// of files and the walk is on the launch path). Directories that cannot be read are reported
/// through `unreadable`.
fn walk_tree(
    root: &Path,
    visit: &mut dyn FnMut(&Path, &std::ffi::OsStr, Seen) -> bool,
    unreadable: &mut dyn FnMut(&Path, std::io::Error),
) -> Vec<PathBuf> {
    use rustix::fs::{FileType, Mode, OFlags, RawDir};
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut stack = vec![root.to_path_buf()];
    let mut generated = Vec::new();
    let mut subdirs: Vec<std::ffi::OsString> = Vec::new();
    while let Some(dir) = stack.pop() {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(&dir, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(e) => {
                unreadable(&dir, e.into());
                continue;
            }
        };
        subdirs.clear();
        let mut declarations = crate::walk::Declarations::default();
        let mut entries = RawDir::new(&fd, &mut buf);
        while let Some(entry) = entries.next() {
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    unreadable(&dir, e.into());
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
                    match rustix::fs::statat(&fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                            Seen::Dir
                        }
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                            Seen::File
                        }
                        _ => Seen::Other,
                    }
                }
                _ => Seen::Other,
            };
            match (name.as_bytes(), kind) {
                (n, Seen::File) if declarations.note(n) => {}
                (_, Seen::Dir) => subdirs.push(name.to_owned()),
                _ => {
                    visit(&dir, name, kind);
                }
            }
        }
        if dir != root && crate::walk::declared(&fd, declarations, crate::walk::Trust::Any) {
            generated.push(dir);
            continue;
        }
        for name in subdirs.drain(..) {
            if visit(&dir, &name, Seen::Dir) {
                stack.push(dir.join(&name));
            }
        }
    }
    generated
}

/// Walk the workspace and collect entry points and repositories (`home`: `$HOME` as git expands
/// `~/` in an include).
pub fn discover_workspace(ws: &Path, home: Option<&Path>) -> Discovery {
    let mut d = Discovery::default();
    let mut git_dirs: Vec<PathBuf> = Vec::new();
    add_per_directory(&mut d, ws);
    d.dirs.push(ws.to_path_buf());
    let mut warnings = Vec::new();
    let generated = walk_tree(
        ws,
        &mut |dir, name, kind| {
            if name == ".git" {
                let path = dir.join(name);
                match kind {
                    Seen::Dir => git_dirs.push(path),
                    Seen::File => {
                        d.seal(
                            path.clone(),
                            Stub::Dir,
                            "git: `.git` pointer file names the git directory",
                        );
                        match read_gitdir_pointer(&path) {
                            Some(target) => git_dirs.push(target),
                            None => d
                                .warnings
                                .push(format!("{}: unreadable `gitdir:` pointer", path.display())),
                        }
                    }
                    Seen::Other => {}
                }
                return false;
            }
            if kind == Seen::Dir {
                if crate::walk::pruned(name) {
                    return false;
                }
                d.dirs.push(dir.join(name));
            }
            if name == "HEAD" && kind == Seen::File {
                if dir.join("objects").is_dir() && dir.join("refs").is_dir() {
                    git_dirs.push(dir.to_path_buf());
                }
                return false;
            }
            if let Some(c) = per_directory().find(|c| name == c.name) {
                d.seal(dir.join(name), c.stub, c.runs);
            }
            true
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
    let mut seen = std::collections::BTreeSet::new();
    while let Some(g) = git_dirs.pop() {
        let g = std::fs::canonicalize(&g).unwrap_or(g);
        if seen.insert(g.clone()) {
            add_git_dir(&mut d, &g, &mut git_dirs, home);
        }
    }
    d
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
    d.seal(
        g.join("config.worktree"),
        Stub::File(""),
        "git: per-worktree config (core.fsmonitor, hooks)",
    );
    d.seal(
        g.join("commondir"),
        Stub::File(".\n"),
        "git: `commondir` redirects hooks and config",
    );
    if g != common {
        return;
    }
    d.seal(
        g.join("hooks"),
        Stub::Dir,
        "git: hooks run by commit, checkout, merge, push, status",
    );
    d.seal(
        g.join("config"),
        Stub::File(""),
        "git: core.fsmonitor, core.hooksPath, hook.*, filters, aliases",
    );
    let config_files = config_with_includes(&g.join("config"), worktree.as_deref(), home);
    for (file, hooks_path) in config_files {
        if file != g.join("config") {
            d.seal(
                file,
                Stub::File(""),
                "git: file included by a repository's config",
            );
        }
        if let Some(hp) = hooks_path {
            d.seal(hp, Stub::Dir, "git: core.hooksPath target: every hook");
        }
    }
    for sub in ["modules", "worktrees"] {
        let Ok(rd) = std::fs::read_dir(g.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            if sub == "worktrees" {
                let w = e.path();
                d.seal(
                    w.join("commondir"),
                    Stub::File("../..\n"),
                    "git: a worktree's `commondir`",
                );
                d.seal(
                    w.join("config.worktree"),
                    Stub::File(""),
                    "git: per-worktree config",
                );
                d.seal(
                    w.join("gitdir"),
                    Stub::File(""),
                    "git: a worktree's back-pointer",
                );
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

mod state;
pub(crate) use state::state_scripts;
#[cfg(test)]
mod tests;
