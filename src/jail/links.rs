//! Entry points reached through symbolic links from the read-only part of `$HOME`.
//!
//! Guards against a dotfiles repository that is the workspace. With stow (or by hand),
//! `~/.bashrc -> ~/dotfiles/bashrc` and `~/.config/fish -> ~/dotfiles/fish`: the link is read-only in
//! the jail, but its target lies in a writable root, and the human's shell runs the target. Every
//! symlink at the top of `$HOME` and in `~/.config` (two levels, where stow folds and users link by
//! hand) is resolved; a target inside a writable root is sealed like any entry point, whatever it
//! is, because everything the human's `$HOME` shows is read-only in the jail.

use crate::entrypoints::{Finding, Stub};
use std::path::{Path, PathBuf};

/// Findings for the targets of `$HOME`'s symlinks that lie in a writable root (but not in a hole:
/// a hole is writable by design).
pub(crate) fn home_link_targets(
    home: &Path,
    holes: &[PathBuf],
    writable_roots: &[PathBuf],
) -> Vec<Finding> {
    let mut links = Vec::new();
    let mut dirs = vec![(home.to_path_buf(), 1), (home.join(".config"), 2)];
    while let Some((dir, depth)) = dirs.pop() {
        if holes.iter().any(|h| dir.starts_with(h)) {
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let path = e.path();
            if t.is_symlink() {
                links.push(path);
            } else if t.is_dir() && depth > 1 && dir != home {
                dirs.push((path, depth - 1));
            }
        }
    }
    let mut out = Vec::new();
    for link in links {
        if holes.contains(&link) {
            continue;
        }
        let Ok(target) = std::fs::canonicalize(&link) else {
            continue; // dangling: nothing runs yet, and nothing outside a writable root can appear
        };
        let in_writable = writable_roots.iter().any(|r| target.starts_with(r));
        let in_hole = holes.iter().any(|h| target.starts_with(h));
        if in_writable && !in_hole {
            let shown = link
                .strip_prefix(home)
                .map(|r| format!("~/{}", r.display()))
                .unwrap_or_else(|_| link.display().to_string());
            out.push(Finding {
                path: target,
                stub: Stub::Dir,
                runs: format!("{shown} links here: your tools read it outside the jail"),
            });
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
        let hole = home.join(".cache");
        for d in [
            &ws.join("fish"),
            &hole,
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
        link(&hole, ".cache-link"); // into a hole
        link(&root.join("missing"), ".zshrc"); // dangling
        let got = home_link_targets(
            &home,
            std::slice::from_ref(&hole),
            &[ws.clone(), hole.clone()],
        );
        let mut paths: Vec<_> = got.iter().map(|f| f.path.clone()).collect();
        paths.sort();
        assert_eq!(
            paths,
            [ws.join("bashrc"), ws.join("fish"), ws.join("gitconfig")]
        );
        assert!(got
            .iter()
            .any(|f| f.runs.starts_with("~/.bashrc links here")));
    }
}
