//! The PATH a planted command is judged against: the one the human's next shell will have.
//!
//! Guards against a plant in a directory that the launcher's PATH does not have yet, or has last.
//! In a stock Debian/Ubuntu devcontainer `~/.local/bin` is not on PATH until it exists, and
//! `~/.profile` then puts it (and `~/bin`) *first* in every later login shell: the agent creates it,
//! plants `git`, and the human's next terminal runs the plant. So the conventional user bin
//! directories are judged first, whether or not they exist or are on the launcher's PATH, followed
//! by the launcher's own PATH (a directory on both keeps its first place). A directory the jail
//! cannot write stays out of the watcher's way (`baseline::take` asks the jail's policy).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Where users' shells and tools put personal commands, relative to `$HOME`, in the order a login
/// shell would end up with them (`~/.profile` prepends `~/bin`, then `~/.local/bin`; rustup's
/// `~/.cargo/env` prepends `~/.cargo/bin`; Go's `~/go/bin` is added by hand).
pub(crate) const USER_BIN_DIRS: &[&str] = &[".local/bin", "bin", ".cargo/bin", "go/bin"];

/// The user bin directories (and npm's global prefix `bin`, from `$NPM_CONFIG_PREFIX` or
/// `prefix=` in `~/.npmrc`), then `launcher`'s entries, each directory once.
pub(crate) fn judged_path(
    home: &Path,
    launcher: &OsStr,
    npm_prefix_env: Option<&OsStr>,
) -> OsString {
    let mut dirs: Vec<PathBuf> = USER_BIN_DIRS.iter().map(|d| home.join(d)).collect();
    if let Some(prefix) = npm_prefix(home, npm_prefix_env) {
        dirs.push(prefix.join("bin"));
    }
    for d in std::env::split_paths(launcher) {
        if !dirs.iter().any(|x| same_dir(x, &d)) {
            dirs.push(d);
        }
    }
    std::env::join_paths(dirs).unwrap_or_else(|_| launcher.to_os_string())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    a.components().eq(b.components())
}

/// npm's global prefix when the user set one (`npm config get prefix` would cost a Node start).
fn npm_prefix(home: &Path, env: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(p) = env.map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(p);
    }
    let text = std::fs::read_to_string(home.join(".npmrc")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        if k.trim() != "prefix" {
            return None;
        }
        let v = v.trim();
        let p = match v.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(v.replace("${HOME}", &home.to_string_lossy())),
        };
        p.is_absolute().then_some(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_bin_dirs_come_first_once_and_the_launchers_path_follows() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        std::fs::write(home.join(".npmrc"), "color=false\nprefix = ~/.npm-global\n").unwrap();
        let launcher = format!(
            "/usr/local/bin:/usr/bin:{}/.local/bin/:/bin",
            home.display()
        );
        let got: Vec<PathBuf> =
            std::env::split_paths(&judged_path(home, launcher.as_ref(), None)).collect();
        let want: Vec<PathBuf> = [
            home.join(".local/bin"),
            home.join("bin"),
            home.join(".cargo/bin"),
            home.join("go/bin"),
            home.join(".npm-global/bin"),
            "/usr/local/bin".into(),
            "/usr/bin".into(),
            "/bin".into(),
        ]
        .into();
        assert_eq!(got, want);
        let env: Vec<PathBuf> = std::env::split_paths(&judged_path(
            home,
            "/usr/bin".as_ref(),
            Some("/opt/npm".as_ref()),
        ))
        .collect();
        assert!(env.contains(&PathBuf::from("/opt/npm/bin")));
    }
}
