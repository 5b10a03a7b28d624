//! The workspace's own repository when its git directory lies outside the workspace: a linked
//! worktree (`git worktree add ../feature`: the git directory is the main repository's
//! `.git/worktrees/feature`, its common directory that `.git`), a submodule's working tree (the
//! superproject's `.git/modules/<name>`), a workspace below a repository's root (one package of a
//! monorepo, `--workspace pkg`). git writes there to commit (objects, refs, the index, logs,
//! `worktrees/<name>`), so those directories are writable roots of the jail; discovery seals their
//! hooks, config and `info/` as it does a `.git` inside the workspace (`catalogue::git::FILES`).
//! The working tree around the workspace stays read-only.
//!
//! Guards against a pointer planted to widen the jail: a `.git` file may name any directory, so a
//! git directory outside is taken only when it names the workspace back — a linked worktree's
//! `gitdir`, a submodule's `core.worktree`, files in the outside directory that the jail could not
//! write when the pointer was planted — and never for a repository whose working tree holds
//! `$HOME` (a dotfiles repository in `~`: its git directory is every shell's startup file's).

use std::path::{Path, PathBuf};

/// The workspace's repository, where its git directories lie outside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnRepo {
    /// The repository's working tree root: the workspace, or the directory above it holding `.git`.
    pub worktree: PathBuf,
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
    /// The directories outside the workspace that git writes to commit: the common directory, and
    /// the git directory when it does not lie inside it. Resolved.
    pub outside: Vec<PathBuf>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn is_dir(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
}

/// A path a git file names, relative to `base` unless absolute (trailing newline dropped).
fn named(text: &str, base: &Path) -> Option<PathBuf> {
    let t = text.lines().next()?.trim();
    if t.is_empty() {
        return None;
    }
    Some(canonical(&base.join(t)))
}

/// Whether `git_dir` (named by the `.git` file `dot`) names the working tree `top` back: a linked
/// worktree's `gitdir` file holds the path of `dot`, a submodule's config `core.worktree` the
/// working tree.
fn names_back(git_dir: &Path, dot: &Path, top: &Path) -> bool {
    if let Ok(text) = std::fs::read_to_string(git_dir.join("gitdir")) {
        if named(&text, git_dir).is_some_and(|p| p == canonical(dot)) {
            return true;
        }
    }
    let config = crate::gitconfig::read(&[git_dir.join("config")], None);
    config
        .keys
        .iter()
        .rev()
        .find(|k| k.file == git_dir.join("config") && k.key.name == "core.worktree")
        .and_then(|k| k.key.value.as_deref())
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(|v| named(v, git_dir))
        .is_some_and(|p| p == canonical(top))
}

/// The repository of `ws` (git's discovery: `ws/.git`, else the nearest directory above with a
/// `.git`), when git writes outside `ws` to commit in it. `home`: resolved `$HOME`.
pub(crate) fn own_repository(ws: &Path, home: &Path) -> Option<OwnRepo> {
    let (top, dot) = ws
        .ancestors()
        .map(|d| (d, d.join(".git")))
        .find(|(_, dot)| std::fs::symlink_metadata(dot).is_ok())?;
    if top != ws && (home.starts_with(top) || top == Path::new("/")) {
        return None;
    }
    let meta = std::fs::symlink_metadata(&dot).ok()?;
    let git_dir = if meta.is_dir() {
        canonical(&dot)
    } else if meta.is_file() {
        let target = super::read_gitdir_pointer(&dot).map(|t| canonical(&t))?;
        if !names_back(&target, &dot, top) {
            tracing::info!(
                pointer = %dot.display(),
                "its git directory does not name it back: not made writable"
            );
            return None;
        }
        target
    } else {
        return None; // a `.git` symlink: git follows it, the jail does not widen through it
    };
    let common_dir = super::common_dir(&git_dir);
    let real_repo = git_dir.join("HEAD").is_file()
        && is_dir(&common_dir.join("objects"))
        && is_dir(&common_dir.join("refs"));
    if !real_repo {
        return None;
    }
    let mut outside: Vec<PathBuf> = Vec::new();
    for d in [&common_dir, &git_dir] {
        if !d.starts_with(ws) && !outside.iter().any(|o| d.starts_with(o)) {
            outside.push(d.clone());
        }
    }
    (!outside.is_empty()).then(|| OwnRepo {
        worktree: top.to_path_buf(),
        git_dir,
        common_dir,
        outside,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@x")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@x")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn repo(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        git(dir, &["init", "-q"]);
        std::fs::write(dir.join("a"), "a").unwrap();
        git(dir, &["add", "a"]);
        git(dir, &["commit", "-qm", "a"]);
    }

    /// A linked worktree, a subdirectory of a repository and of a worktree: the common directory
    /// (and nothing of the working tree) is what git writes outside; a repository in the workspace
    /// writes nothing outside.
    #[test]
    fn the_git_directories_outside_the_workspace_are_found() {
        let t = tempfile::tempdir().unwrap();
        let root = canonical(t.path());
        let home = root.join("home");
        std::fs::create_dir(&home).unwrap();
        let main = root.join("main");
        repo(&main);
        git(&main, &["worktree", "add", "-q", "../feature"]);
        std::fs::create_dir_all(main.join("pkg/a")).unwrap();
        std::fs::create_dir_all(root.join("feature/sub")).unwrap();

        let wt = own_repository(&root.join("feature"), &home).unwrap();
        assert_eq!(wt.git_dir, main.join(".git/worktrees/feature"));
        assert_eq!(wt.common_dir, main.join(".git"));
        assert_eq!(wt.outside, [main.join(".git")]);
        let below = own_repository(&main.join("pkg/a"), &home).unwrap();
        assert_eq!(
            (below.worktree.clone(), below.outside),
            (main.clone(), vec![main.join(".git")])
        );
        let in_wt = own_repository(&root.join("feature/sub"), &home).unwrap();
        assert_eq!(in_wt.outside, [main.join(".git")]);
        assert_eq!(own_repository(&main, &home), None);
        assert_eq!(own_repository(&home, &root.join("nothing")), None);
    }

    /// A `.git` file naming a repository that does not name it back widens nothing, and neither
    /// does a repository around `$HOME`.
    #[test]
    fn a_pointer_not_named_back_and_a_repository_around_home_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let root = canonical(t.path());
        let other = root.join("other");
        repo(&other);
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(
            ws.join(".git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap();
        assert_eq!(own_repository(&ws, &root.join("h")), None);
        // A worktree's git directory that names another worktree.
        git(&other, &["worktree", "add", "-q", "../wt"]);
        std::fs::write(
            ws.join(".git"),
            format!("gitdir: {}\n", other.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        assert_eq!(own_repository(&ws, &root.join("h")), None);
        assert!(own_repository(&root.join("wt"), &root.join("h")).is_some());
        // `$HOME` inside the repository's working tree: a dotfiles repository.
        std::fs::create_dir_all(other.join("home/proj")).unwrap();
        assert_eq!(
            own_repository(&other.join("home/proj"), &other.join("home")),
            None
        );
    }

    /// A submodule's working tree as the workspace: its git directory is the superproject's
    /// `modules/<name>`, which names it back with `core.worktree`.
    #[test]
    fn a_submodule_as_the_workspace_writes_its_module_directory() {
        let t = tempfile::tempdir().unwrap();
        let root = canonical(t.path());
        let lib = root.join("lib");
        repo(&lib);
        let sup = root.join("super");
        repo(&sup);
        git(
            &sup,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                lib.to_str().unwrap(),
                "lib",
            ],
        );
        let sub = own_repository(&sup.join("lib"), &root.join("h")).unwrap();
        assert_eq!(sub.git_dir, sup.join(".git/modules/lib"));
        assert_eq!(sub.outside, [sup.join(".git/modules/lib")]);
    }
}
