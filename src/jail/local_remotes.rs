//! Local remotes the jail cannot write. A `git push` from the jail to a repository on this machine
//! outside the writable places fails with git's own words ("unpacker error", "Read-only file
//! system"), which do not name the jail; the human then turns the guard off to find out why. The
//! session's end names the remote and the knob that opens it (`--writable`, `writable`), which
//! seals that repository as the workspace's are. Its message is not changed: git prints it.

use super::plan::Plan;
use std::path::{Path, PathBuf};

/// One line per remote URL of the session's repositories that is a local path, exists, and lies
/// outside every place the jail can write.
pub(crate) fn notes(plan: &Plan, home: Option<&Path>) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for repo in &plan.repos {
        let config = crate::gitconfig::read(&[repo.common_dir.join("config")], home);
        let base = repo.worktree.as_deref().unwrap_or(&repo.git_dir);
        for located in &config.keys {
            let Some(remote) = remote_of(&located.key.name) else {
                continue;
            };
            let Some(path) = local_path(&located.key.text(), base) else {
                continue;
            };
            let Ok(path) = std::fs::canonicalize(&path) else {
                continue;
            };
            if plan.jail_can_write(&path) || !seen.insert(path.clone()) {
                continue;
            }
            out.push(
                crate::escape::visible(&format!(
                "git remote `{remote}` is {p}, outside the places the jail can write: a push to it \
                 from the jail fails there; to allow it, run with `--writable {p}` or add it to \
                 `writable` in ~/.config/claude-sandbox/config.toml",
                p = path.display()
            ))
                .into_owned(),
            );
        }
    }
    out
}

/// `remote.NAME.url` or `remote.NAME.pushurl`: NAME.
fn remote_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("remote.")?;
    rest.strip_suffix(".url")
        .or_else(|| rest.strip_suffix(".pushurl"))
}

/// The directory a remote URL names on this machine, as git reads it: `file://` URLs, and paths
/// (git takes `host:path` for ssh unless a `/` comes before the first `:`). Relative paths are
/// taken from the working tree, where the human runs git.
fn local_path(url: &str, base: &Path) -> Option<PathBuf> {
    if let Some(p) = url.strip_prefix("file://") {
        return Some(PathBuf::from(p));
    }
    if url.contains("://") {
        return None;
    }
    match (url.find(':'), url.find('/')) {
        (Some(colon), Some(slash)) if colon < slash => None,
        (Some(_), None) => None,
        _ => Some(base.join(url)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_are_paths_and_others_are_not() {
        let b = Path::new("/w");
        assert_eq!(local_path("/srv/r.git", b), Some("/srv/r.git".into()));
        assert_eq!(local_path("../r.git", b), Some("/w/../r.git".into()));
        assert_eq!(local_path("file:///srv/r", b), Some("/srv/r".into()));
        assert_eq!(local_path("./a:b/c", b), Some("/w/./a:b/c".into()));
        for remote in [
            "git@github.com:o/r.git",
            "https://h/r",
            "ssh://h/r",
            "host:r",
        ] {
            assert_eq!(local_path(remote, b), None, "{remote}");
        }
    }

    #[test]
    fn only_url_keys_of_remotes_count() {
        assert_eq!(remote_of("remote.origin.url"), Some("origin"));
        assert_eq!(remote_of("remote.a.b.pushurl"), Some("a.b"));
        assert_eq!(remote_of("remote.origin.fetch"), None);
        assert_eq!(remote_of("branch.main.remote"), None);
    }
}
