//! Directories where sockets appear after launch, shown to the jail as a fixed view.
//!
//! Guards against an escape hatch opened during the session. Masks are computed at launch from the
//! sockets listening then; a socket made later is reachable from the jail, since connecting needs
//! no write access to the filesystem: an ssh `ControlMaster` socket (`~/.ssh/cm-*`) made by the
//! human's next `git push`, a restarted gpg-agent (`~/.gnupg/S.gpg-agent`), a restarted dockerd
//! (`/run/docker.sock`: a bind over the old socket is detached when the path is replaced outside).
//! So these directories are replaced in the jail by a read-only tmpfs holding read-only binds of
//! what the jail may see, taken at launch: nothing created there later is visible at all.
//!
//! - `~/.ssh`: its files (three levels, each bound on its own) but private keys (by name or
//!   content: `secrets`); no directory is kept as such, so no later socket appears in one;
//!   `config`, `known_hosts` and public keys stay.
//! - `~/.gnupg`: its files but `private-keys-v1.d`; `~/.docker`: its files (not `run/docker.sock`).
//! - `/run`: default deny: only what name resolution and locking read (`RUN_KEEP`), the directory
//!   `/etc/resolv.conf` links into, and the mount points of the jail's private directories.
//!
//! A `ControlPath` directory elsewhere (`~/.cache/ssh`) is masked by the plan as a directory. A
//! socket opened during the session in the workspace is judged as it appears (`later`).

use super::policy::RunView;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub(crate) mod later;

/// What of the host's `/run` the jail sees (relative to `/run`), where it exists.
const RUN_KEEP: &[&str] = &[
    "systemd/resolve",
    "resolvconf",
    "NetworkManager/resolv.conf",
    "lock",
    "utmp",
    "shm",
];

/// `/run` as the jail sees it, or `None` where `/run` is not a directory.
pub(crate) fn run_view(private: &[PathBuf]) -> Option<RunView> {
    let run = Path::new(super::layout::RUN);
    if !std::fs::symlink_metadata(run).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let mut keep: Vec<PathBuf> = RUN_KEEP.iter().map(|r| run.join(r)).collect();
    if let Ok(t) = std::fs::canonicalize("/etc/resolv.conf") {
        if let Some(dir) = t.parent().filter(|d| d.starts_with(run) && *d != run) {
            keep.push(dir.to_path_buf());
        }
    }
    keep.retain(|p| std::fs::symlink_metadata(p).is_ok());
    keep.sort();
    keep.dedup();
    // A kept path inside another is covered by it.
    let covered: Vec<PathBuf> = keep
        .iter()
        .filter(|k| keep.iter().any(|o| o != *k && k.starts_with(o)))
        .cloned()
        .collect();
    keep.retain(|k| !covered.contains(k));
    let dirs = private
        .iter()
        .filter(|p| p.starts_with(run) && p.as_path() != run)
        .cloned()
        .collect();
    Some(RunView { keep, dirs })
}

/// The fixed views of a policy, to ask which paths they leave out.
pub(crate) struct Views {
    run: Option<RunView>,
    filtered: Vec<(PathBuf, Vec<OsString>)>,
}

impl Views {
    pub(crate) fn of(policy: &super::policy::Policy) -> Self {
        let filtered = policy
            .home_entries
            .iter()
            .filter_map(|e| match &e.bind {
                super::policy::HomeBind::Filtered(keep) => {
                    Some((policy.home.join(&e.name), keep.clone()))
                }
                _ => None,
            })
            .collect();
        Views {
            run: policy.run_view.clone(),
            filtered,
        }
    }

    /// Whether `p` lies in a view but not in anything it keeps: such a path is not in the jail.
    pub(crate) fn leave_out(&self, p: &Path) -> bool {
        let in_run = self.run.as_ref().is_some_and(|v| {
            p.starts_with("/run") && !v.keep.iter().chain(&v.dirs).any(|k| p.starts_with(k))
        });
        in_run
            || self.filtered.iter().any(|(dir, keep)| {
                p.starts_with(dir) && !keep.iter().any(|n| p.starts_with(dir.join(n)))
            })
    }
}

/// The files of `~/.ssh` the jail sees (relative paths), or `None` when it is not a directory:
/// regular files (and symlinks to them) but private keys, by name or content. No directory is
/// kept as such — its files are bound one by one into the view's own directories — so a socket
/// made later in any subdirectory (a `ControlPath` set in the system config, `-o`, or one with
/// `${VAR}` or `%h` in its directory part) is not in the jail.
pub(crate) fn ssh_view(home: &Path) -> Option<Vec<OsString>> {
    let keys = crate::secrets::ssh_private_keys(home);
    view(&home.join(".ssh"), |path| !keys.iter().any(|k| k == path))
}

/// The files of `~/.gnupg` the jail sees: all but `private-keys-v1.d` (sockets are never files).
pub(crate) fn gnupg_view(home: &Path) -> Option<Vec<OsString>> {
    let private = home.join(".gnupg/private-keys-v1.d");
    view(&home.join(".gnupg"), |path| !path.starts_with(&private))
}

/// The files of `~/.docker` the jail sees (Docker Desktop's socket lives in `~/.docker/run`;
/// `config.json` is masked as a secret afterwards).
pub(crate) fn docker_view(home: &Path) -> Option<Vec<OsString>> {
    view(&home.join(".docker"), |_| true)
}

/// The names, relative to `dir`, of regular files (or symlinks to regular files) up to three levels
/// down that `keep` accepts; `None` when `dir` is not a directory.
fn view(dir: &Path, keep: impl Fn(&Path) -> bool) -> Option<Vec<OsString>> {
    if !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    let mut names: Vec<OsString> = walkdir::WalkDir::new(dir)
        .min_depth(1)
        .max_depth(3)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|e| {
            let file = e.file_type().is_file()
                || (e.file_type().is_symlink()
                    && std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()));
            file && keep(e.path())
        })
        .filter_map(|e| {
            e.path()
                .strip_prefix(dir)
                .ok()
                .map(|r| r.as_os_str().to_owned())
        })
        .collect();
    names.sort();
    Some(names)
}

/// The directories `ControlPath` (in `~/.ssh/config` and the files it includes from `~/.ssh`)
/// puts sockets in: `~` and `%d` expanded; a pattern's directory part must be literal.
pub(crate) fn control_path_dirs(home: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut files = vec![home.join(".ssh/config")];
    let mut seen = 0;
    while let Some(f) = files.pop() {
        seen += 1;
        if seen > 16 {
            break;
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines() {
            let line = line.trim();
            let (key, value) = match line.split_once(|c: char| c.is_whitespace() || c == '=') {
                Some((k, v)) => (
                    k,
                    v.trim_start_matches(|c: char| c.is_whitespace() || c == '='),
                ),
                None => continue,
            };
            let value = value.trim().trim_matches('"');
            let expand = |v: &str| -> PathBuf {
                let h = home.to_string_lossy();
                let v = v.replace("%d", &h).replace("${HOME}", &h);
                match v.strip_prefix("~/") {
                    Some(rest) => home.join(rest),
                    None if Path::new(&v).is_relative() => home.join(".ssh").join(v),
                    None => PathBuf::from(v),
                }
            };
            if key.eq_ignore_ascii_case("ControlPath") && !value.eq_ignore_ascii_case("none") {
                // The literal part of the directory: up to the first component with a token.
                let full = expand(value);
                let literal: PathBuf = full
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .components()
                    .take_while(|c| !c.as_os_str().to_string_lossy().contains(['%', '$']))
                    .collect();
                out.push(literal);
            } else if key.eq_ignore_ascii_case("Include") {
                for inc in value.split_whitespace() {
                    let p = expand(inc);
                    // Literal includes only (a glob's matches are read as listed in its directory).
                    match (p.parent(), p.file_name().and_then(|n| n.to_str())) {
                        (Some(dir), Some(name)) if name.contains('*') => {
                            let (head, tail) = name.split_once('*').unwrap_or((name, ""));
                            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                                let n = e.file_name().to_string_lossy().into_owned();
                                if n.starts_with(head) && n.ends_with(tail) {
                                    files.push(e.path());
                                }
                            }
                        }
                        _ => files.push(p),
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ssh_view_keeps_config_and_public_files_and_leaves_out_keys_and_socket_dirs() {
        let h = tempfile::tempdir().unwrap();
        let home = h.path();
        let ssh = home.join(".ssh");
        std::fs::create_dir_all(ssh.join("sockets")).unwrap();
        std::fs::create_dir_all(ssh.join("config.d")).unwrap();
        std::fs::write(
            ssh.join("config"),
            "Include config.d/*\nHost a\n  ControlPath ~/.ssh/sockets/%r@%h:%p\n",
        )
        .unwrap();
        std::fs::write(
            ssh.join("config.d/work"),
            "Host b\n  ControlPath=%d/.cache/ssh/cm-%C\n",
        )
        .unwrap();
        std::fs::write(ssh.join("known_hosts"), "").unwrap();
        std::fs::write(ssh.join("id_ed25519.pub"), "").unwrap();
        std::fs::write(ssh.join("id_ed25519"), "").unwrap();
        std::fs::write(
            ssh.join("github"),
            "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n",
        )
        .unwrap();
        let listener = std::os::unix::net::UnixListener::bind(ssh.join("cm-sock")).unwrap();
        assert_eq!(
            control_path_dirs(home),
            [home.join(".cache/ssh"), ssh.join("sockets")]
        );
        let names: Vec<String> = ssh_view(home)
            .unwrap()
            .into_iter()
            .map(|n| n.into_string().unwrap())
            .collect();
        assert_eq!(
            names,
            ["config", "config.d/work", "id_ed25519.pub", "known_hosts"]
        );
        drop(listener);
        assert_eq!(ssh_view(&home.join("nowhere")), None);
    }

    #[test]
    fn run_keeps_name_resolution_and_private_mount_points_only() {
        let v = run_view(&["/tmp".into(), "/run/user/1000".into()]).unwrap();
        assert_eq!(v.dirs, [PathBuf::from("/run/user/1000")]);
        assert!(v.keep.iter().all(|k| k.starts_with("/run")));
        assert!(!v.keep.iter().any(|k| k.ends_with("docker.sock")));
    }
}
