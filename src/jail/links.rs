//! Entry points reached through symbolic links from the read-only part of `$HOME`.
//!
//! Guards against a dotfiles repository that is the workspace. With stow (or by hand),
//! `~/.bashrc -> ~/dotfiles/bashrc` and `~/.config/fish -> ~/dotfiles/fish`: the link is read-only in
//! the jail, but its target lies in a writable root, and the human's shell runs the target. Every
//! symlink at the top of `$HOME`, in `~/.config` (four levels), `~/.ssh`, `~/.gnupg` and top-level
//! `*.d` directories is resolved — a dangling one too, as far as its target exists (the agent could
//! create the rest) — and a target inside a writable root is sealed like any entry point (a
//! placeholder where it is missing), because everything `$HOME` shows is read-only in the jail.
//!
//! The same holds for what the human's global git config names: an `include.path` (or
//! `includeIf`) target and a global `core.hooksPath` that lie in a writable root are read by every
//! `git` the human runs, in every repository.

use crate::catalogue::Stub;
use crate::entrypoints::Finding;
use crate::host::{self, HostEnv};
use std::path::{Path, PathBuf};

/// At most this many directory entries are read looking for links (a bound on the launch's cost).
const SCAN_BUDGET: usize = 20_000;

/// Where links to dotfiles live, with how many levels are read below each: the top of `$HOME`,
/// `~/.config`, `~/.ssh`, `~/.gnupg`, every top-level `*.d` directory (`~/.bashrc.d`) and the
/// agents' state directories with a top level of the jail's own.
fn scan_roots(home: &Path) -> Vec<(PathBuf, usize)> {
    let mut roots = vec![
        (home.to_path_buf(), 1),
        (home.join(".config"), 4),
        (home.join(".ssh"), 3),
        (home.join(".gnupg"), 2),
    ];
    if let Ok(rd) = std::fs::read_dir(home) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir())
                && e.file_name().to_string_lossy().ends_with(".d")
            {
                roots.push((e.path(), 2));
            }
        }
    }
    // The agents' state directories whose top level is the jail's own (`jail::statedir`): read-only
    // there but for the allowlisted binds (holes, skipped), and a link at the top or in a read-only
    // directory (`settings.json`, `CLAUDE.md`, `commands/x.md`) is what your agent reads outside.
    for sd in crate::runtimes::state_dirs().filter(|s| s.own_top_level()) {
        roots.push((home.join(sd.path), 2));
    }
    roots
}

/// Where a link leads even when its target does not exist yet: the longest existing ancestor of
/// the target, resolved, with the rest appended (the agent could create the rest).
fn lead(link: &Path) -> Option<PathBuf> {
    if let Ok(t) = std::fs::canonicalize(link) {
        return Some(t);
    }
    let raw = std::fs::read_link(link).ok()?;
    let target = link.parent()?.join(raw);
    let mut existing = target.as_path();
    let mut rest = Vec::new();
    while std::fs::symlink_metadata(existing).is_err() {
        rest.push(existing.file_name()?.to_owned());
        existing = existing.parent()?;
    }
    let mut out = std::fs::canonicalize(existing).ok()?;
    for part in rest.iter().rev() {
        if part == ".." {
            return None; // a missing component followed by `..`: nothing lexical to trust
        }
        out.push(part);
    }
    Some(out)
}

/// Findings for the targets of `$HOME`'s symlinks that lie in a writable root (but not in a hole:
/// a hole is writable by design), existing or not.
pub(crate) fn home_link_targets(
    home: &Path,
    holes: &[PathBuf],
    writable_roots: &[PathBuf],
) -> (Vec<Finding>, Option<String>) {
    let mut links = Vec::new();
    let mut cut = None;
    let mut budget = SCAN_BUDGET;
    let mut dirs = scan_roots(home);
    while let Some((dir, depth)) = dirs.pop() {
        if holes.iter().any(|h| dir.starts_with(h)) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if budget == 0 {
                cut = Some(format!(
                    "stopped looking for links into the workspace after {SCAN_BUDGET} entries of $HOME"
                ));
                break;
            }
            budget -= 1;
            let Ok(t) = e.file_type() else { continue };
            let path = e.path();
            if t.is_symlink() {
                links.push(path);
            } else if t.is_dir() && depth > 1 {
                dirs.push((path, depth - 1));
            }
        }
    }
    links.sort();
    links.dedup();
    let mut out = Vec::new();
    for link in links {
        if holes.contains(&link) {
            continue;
        }
        let Some(target) = lead(&link) else {
            continue;
        };
        let in_writable = writable_roots
            .iter()
            .any(|r| target.starts_with(r) && target != *r);
        let in_hole = holes.iter().any(|h| target.starts_with(h));
        if in_writable && !in_hole {
            let shown = link.strip_prefix(home).map_or_else(
                |_| link.display().to_string(),
                |r| format!("~/{}", r.display()),
            );
            out.push(Finding {
                path: target,
                stub: Stub::Dir,
                runs: format!("{shown} links here: your tools read it outside the jail"),
            });
        }
    }
    (out, cut)
}

/// Findings for the files the human's global git config includes and the hooks directory it names,
/// where they lie in a writable root (not a hole); `env`: git's `$XDG_CONFIG_HOME` and `$HOME`.
pub(crate) fn global_git_targets(
    home: &Path,
    holes: &[PathBuf],
    writable_roots: &[PathBuf],
    env: &HostEnv,
) -> Vec<Finding> {
    let xdg = env
        .get(host::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    let mut out = Vec::new();
    for global in [home.join(".gitconfig"), xdg.join("git/config")] {
        let git_home = env.home();
        for (file, hooks) in
            crate::entrypoints::config_with_includes(&global, None, git_home.as_deref())
        {
            let named = [(file, crate::catalogue::git::GLOBAL_INCLUDED)]
                .into_iter()
                .chain(hooks.map(|h| (h, crate::catalogue::git::GLOBAL_HOOKS_PATH)));
            for (path, runs) in named {
                let Ok(target) = std::fs::canonicalize(&path) else {
                    continue;
                };
                if writable_roots.iter().any(|r| target.starts_with(r))
                    && !holes.iter().any(|h| target.starts_with(h))
                {
                    out.push(Finding {
                        path: target,
                        stub: Stub::Dir,
                        runs: runs.into(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_into_writable_roots_are_found_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let (home, ws) = (root.join("h"), root.join("h/dotfiles"));
        let cache = home.join(".cache");
        for d in [
            &ws.join("fish"),
            &cache,
            &home.join(".config/git"),
            &root.join("ro"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in ["bashrc", "gitconfig", "fish/config.fish"] {
            std::fs::write(ws.join(f), "").unwrap();
        }
        std::fs::write(root.join("ro/profile"), "").unwrap();
        let link = |t: &Path, l: &str| std::os::unix::fs::symlink(t, home.join(l)).unwrap();
        link(&ws.join("bashrc"), ".bashrc"); // top level, into the workspace
        link(Path::new("../../dotfiles/gitconfig"), ".config/git/config"); // relative, two levels down
        link(&ws.join("fish"), ".config/fish"); // a folded directory
        link(&root.join("ro/profile"), ".profile"); // read-only already
        link(&cache, ".cache-link"); // into a cache
        link(&root.join("missing"), ".zshrc"); // dangling, outside every writable root
        link(&ws.join("bash_local"), ".bash_local"); // dangling into the workspace: it can appear
        for d in [".ssh", ".config/nvim/lua", ".bashrc.d"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::create_dir_all(ws.join("nvim")).unwrap();
        std::fs::write(ws.join("nvim/init.lua"), "").unwrap();
        std::fs::write(ws.join("sshconfig"), "").unwrap();
        link(&ws.join("sshconfig"), ".ssh/config"); // inside ~/.ssh
        link(&ws.join("nvim/init.lua"), ".config/nvim/lua/init.lua"); // three levels down
        link(&ws.join("aliases.sh"), ".bashrc.d/aliases.sh"); // a *.d directory, dangling
        let (got, cut) = home_link_targets(
            &home,
            std::slice::from_ref(&cache),
            &[ws.clone(), cache.clone()],
        );
        assert_eq!(cut, None);
        let mut paths: Vec<_> = got.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        let want: Vec<PathBuf> = [
            "aliases.sh",
            "bash_local",
            "bashrc",
            "fish",
            "gitconfig",
            "nvim/init.lua",
            "sshconfig",
        ]
        .iter()
        .map(|n| ws.join(n))
        .collect();
        assert_eq!(paths, want);
        assert!(got
            .iter()
            .any(|f| f.runs.starts_with("~/.bashrc links here")));
    }

    #[test]
    fn global_git_config_includes_and_hooks_path_in_a_writable_root_are_found() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let (home, ws) = (root.join("h"), root.join("ws"));
        std::fs::create_dir_all(ws.join("hooks")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(ws.join("extra.inc"), "[alias]\n\tx = !true\n").unwrap();
        std::fs::write(
            home.join(".gitconfig"),
            format!(
                "[include]\n\tpath = {}\n[core]\n\thooksPath = {}\n[include]\n\tpath = elsewhere.inc\n",
                ws.join("extra.inc").display(),
                ws.join("hooks").display()
            ),
        )
        .unwrap();
        std::fs::write(home.join("elsewhere.inc"), "").unwrap();
        let env = HostEnv::default();
        let got = global_git_targets(&home, &[], std::slice::from_ref(&ws), &env);
        let mut paths: Vec<_> = got.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        assert_eq!(paths, [ws.join("extra.inc"), ws.join("hooks")]);
    }
}
