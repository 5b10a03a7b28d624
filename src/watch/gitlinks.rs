//! Repositories reached through gitlinks: the submodule entries (mode 160000) of every watched
//! repository's index and the `path`s of its `.gitmodules`, followed wherever they point.
//!
//! Guards against a repository hidden where the walks do not look (`node_modules`, a cache, a virtual
//! environment): the agent commits a gitlink to `node_modules/.x`, whose repository sets
//! `core.fsmonitor`; `git status` in the *main* repository (VS Code runs it by itself) recurses into
//! the submodule and runs it. The index is parsed here (versions 2 to 4, SHA-1 or SHA-256), never by
//! running git in a repository the agent wrote.

use super::Watcher;
use std::path::{Component, Path, PathBuf};

pub(crate) mod index;

/// The paths of every gitlink (mode 160000) in an index file, `None` if it is not one git writes.
pub(crate) fn index_gitlinks(index: impl std::io::Read, hash_len: usize) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    index::for_each_entry(index, hash_len, index::CHUNK, |mode, path| {
        if mode & 0o170_000 == 0o160_000 {
            out.push(path.to_vec());
        }
    })?;
    Some(out)
}

/// The paths in a repository's index (`git_dir/index`, hashed as its common directory's config
/// says), `None` without a readable one: what is staged or committed there.
pub(crate) fn index_paths(
    git_dir: &Path,
    common_dir: &Path,
) -> Option<std::collections::HashSet<Vec<u8>>> {
    let index = crate::jail::readback::open_as_tools_do(&git_dir.join("index")).ok()?;
    let mut out = std::collections::HashSet::new();
    index::for_each_entry(index, hash_len(common_dir), index::CHUNK, |_, path| {
        out.insert(path.to_vec());
    })?;
    Some(out)
}

/// The object id's length of a repository: 32 with `extensions.objectFormat = sha256`, else 20.
fn hash_len(common_dir: &Path) -> usize {
    let sha256 = crate::gitconfig::read(&[common_dir.join("config")], None)
        .keys
        .iter()
        .any(|l| {
            l.key.name == "extensions.objectformat"
                && l.key
                    .value
                    .as_deref()
                    .is_some_and(|v| v.eq_ignore_ascii_case(b"sha256"))
        });
    if sha256 {
        32
    } else {
        20
    }
}

/// A gitlink path git would use: relative, no `..`, no empty or `.` component.
fn safe_relative(path: &Path) -> bool {
    !path.as_os_str().is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)))
}

/// Every submodule path of a repository: its index's gitlinks and its `.gitmodules` entries.
///
/// The index is read whole each time, never remembered by its stamp: the jail can write it through
/// a shared mapping, and a page dirtied once takes later writes without moving its times (until
/// writeback), so a settled stamp does not prove the bytes unchanged.
fn submodule_paths(git_dir: &Path, common_dir: &Path, worktree: &Path) -> Vec<PathBuf> {
    use crate::jail::readback::{open_as_tools_do, read_as_tools_do};
    use std::os::unix::ffi::OsStrExt;
    let mut out: Vec<PathBuf> = open_as_tools_do(&git_dir.join("index"))
        .ok()
        .and_then(|i| index_gitlinks(i, hash_len(common_dir)))
        .unwrap_or_default()
        .into_iter()
        .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(&p)))
        .collect();
    if let Ok(bytes) = read_as_tools_do(&worktree.join(".gitmodules")) {
        if let Ok(keys) = crate::gitconfig::parse(&bytes) {
            out.extend(
                keys.iter()
                    .filter(|k| {
                        k.name.starts_with("submodule.")
                            && crate::gitconfig::variable(&k.name) == "path"
                    })
                    .filter_map(|k| k.value.as_deref())
                    .map(|v| PathBuf::from(std::ffi::OsStr::from_bytes(v))),
            );
        }
    }
    out.retain(|p| safe_relative(p));
    out.sort();
    out.dedup();
    out
}

impl Watcher {
    /// Repositories the launch's kind of walk misses: it honours every cache tag, the watcher only
    /// those older than the session (`walk::Trust`).
    pub(super) fn discover_in_fresh_caches(&mut self) {
        let ws = self.cfg.workspace.clone();
        // The launch's walk honours every cache tag; the watcher only those older than the session.
        let before = self.since.declared_before();
        let mut named = Vec::new();
        let markers = super::git_markers(&ws, &mut self.tree_cache, before, &mut named);
        self.note_listed_names(named);
        for m in markers {
            let git_dir = if m.file_name().is_some_and(|n| n == "HEAD") {
                m.parent().map(Path::to_path_buf)
            } else {
                Some(std::fs::canonicalize(&m).unwrap_or_else(|_| m.clone()))
            };
            if git_dir.is_some_and(|g| !self.repos.knows(&g)) {
                if let Some(parent) = m.parent() {
                    self.discover_repos(parent);
                }
            }
        }
    }

    /// Follow every watched repository's gitlinks to repositories not known yet. `new`: found
    /// during the session, so nothing in them is trusted (see `discover_repos`); otherwise (the
    /// watcher's start, before the gate) what is there is their baseline.
    pub(super) fn follow_gitlinks(&mut self) {
        self.follow_gitlinks_as(true);
    }

    pub(super) fn follow_gitlinks_as(&mut self, new: bool) {
        let mut n = 0;
        while let Some(repo) = self.repos.id_at(n) {
            let r = self.repo(repo);
            n += 1;
            let Some(wt) = r.worktree.clone() else {
                continue;
            };
            let (git_dir, common_dir) = (r.git_dir.clone(), r.common_dir.clone());
            for sub in submodule_paths(&git_dir, &common_dir, &wt) {
                let target = wt.join(&sub);
                let dotgit = target.join(".git");
                let git_dir = match std::fs::symlink_metadata(&dotgit) {
                    Err(_) => continue,
                    Ok(m) if m.is_file() => crate::entrypoints::read_gitdir_pointer(&dotgit),
                    Ok(_) => Some(dotgit),
                };
                // Known already (an ordinary submodule, found at launch): no walk of its tree.
                let git_dir = git_dir.map(|g| std::fs::canonicalize(&g).unwrap_or(g));
                if git_dir.is_some_and(|g| self.repos.knows(&g)) {
                    continue;
                }
                let home = self.cfg.host.home();
                let found = crate::entrypoints::discover_workspace(&target, home.as_deref()).repos;
                if found.iter().all(|g| self.repos.knows(&g.git_dir)) {
                    continue;
                }
                tracing::info!(dir = %target.display(), "repository reached through a gitlink");
                if new {
                    self.discover_repos(&target);
                } else {
                    for g in found {
                        self.add_repo(crate::baseline::repo_baseline(&g, home.as_deref()));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .output()
            .expect("git is needed for this test");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    /// Real indexes, versions 2, 3 and 4, read like `git ls-files --stage` reads them.
    #[test]
    fn gitlinks_are_read_from_real_indexes_of_every_version() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        git(r, &["init", "-q"]);
        for f in ["a", "node_modules/x/b", "zz/long/name/c"] {
            std::fs::create_dir_all(r.join(f).parent().unwrap()).unwrap();
            std::fs::write(r.join(f), f).unwrap();
        }
        git(r, &["add", "."]);
        let sha = "0123456789012345678901234567890123456789";
        // A name of 4095 bytes or more: its length no longer fits the flags, and ends at its NUL.
        let long = format!("{}/deep", "d".repeat(4200));
        for p in ["node_modules/.x", "node_modules/.y", "sub", long.as_str()] {
            git(
                r,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("160000,{sha},{p}"),
                ],
            );
        }
        std::fs::write(r.join("ita"), "later").unwrap();
        git(r, &["add", "--intent-to-add", "ita"]); // an extended flag: index version 3 at least
        for version in ["2", "3", "4"] {
            git(r, &["update-index", "--index-version", version]);
            let index = std::fs::read(r.join(".git/index")).unwrap();
            let links = index_gitlinks(index.as_slice(), 20).expect("an index git wrote");
            let links: Vec<String> = links
                .iter()
                .map(|l| String::from_utf8(l.clone()).unwrap())
                .collect();
            assert_eq!(
                links,
                [long.as_str(), "node_modules/.x", "node_modules/.y", "sub"],
                "v{version}"
            );
        }
        assert!(index_gitlinks(&b"DIRX"[..], 20).is_none());
    }

    /// Found while writing the fuzz target for this parser (a made-up version-4 index): a
    /// prefix-length varint that reaches `usize::MAX` and goes on overflowed `strip + 1` (a panic
    /// in a debug build, a wrapped length in a release one). It is `None` now: not an index git
    /// writes.
    #[test]
    fn a_prefix_length_past_any_path_is_not_an_index() {
        let mut index = b"DIRC".to_vec();
        index.extend_from_slice(&4u32.to_be_bytes());
        index.extend_from_slice(&1u32.to_be_bytes());
        let mut entry = [0u8; 40];
        entry[24..28].copy_from_slice(&0o160_000u32.to_be_bytes());
        index.extend_from_slice(&entry);
        index.extend_from_slice(&[0x11; 20]);
        index.extend_from_slice(&[0, 4]);
        // 0, then seven bits at a time up to usize::MAX, and one more.
        index.extend_from_slice(&[
            0x80, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xfe, 0xff, 0x00,
        ]);
        index.extend_from_slice(b"sub\0");
        assert_eq!(index_gitlinks(index.as_slice(), 20), None);
        assert!(!safe_relative(Path::new("../up")));
        assert!(!safe_relative(Path::new("/abs")));
        assert!(safe_relative(Path::new("node_modules/.x")));
    }

    /// Found by the attacker review: a FIFO the agent made at `.git/index` or `.gitmodules` (or as
    /// a config git includes) must not hang the watcher, nor the session's end that reads the index
    /// after the jail is gone (nothing would ever write to it).
    #[test]
    fn a_fifo_in_place_of_the_index_or_gitmodules_is_not_waited_on() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path().to_path_buf();
        git(&r, &["init", "-q"]);
        let fifo = |p: &Path| {
            let _ = std::fs::remove_file(p);
            rustix::fs::mknodat(
                rustix::fs::CWD,
                p,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap();
        };
        fifo(&r.join(".git/index"));
        fifo(&r.join(".gitmodules"));
        std::fs::write(r.join(".git/config"), "[include]\n\tpath = fifo\n").unwrap();
        fifo(&r.join(".git/fifo"));
        let (done, wait) = std::sync::mpsc::channel();
        let dir = r.clone();
        std::thread::spawn(move || {
            let git_dir = dir.join(".git");
            let subs = submodule_paths(&git_dir, &git_dir, &dir);
            let paths = index_paths(&git_dir, &git_dir);
            let _ = done.send((subs, paths));
        });
        let (subs, paths) = wait
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("waited on a FIFO");
        assert!(subs.is_empty() && paths.is_none());
    }
}
