//! Mount points in the session's `$HOME`, made by the launcher before the sealer runs.
//!
//! Guards against the sealer making them one by one while the command waits: the jail's `$HOME` is
//! the session's private directory (in the runtime directory), and each of the human's `$HOME`
//! entries and each layer directly in it needs a mount point there — a new inode each, 0.1–0.3 ms
//! apiece on this machine's ext4, 20 or more for a lived-in `$HOME`. The launcher makes them beside
//! the seal placeholders, of the type the sealer would make (a directory for a directory, an empty
//! file for a file, as bwrap does), so the sealer finds them and only mounts. Where the type is not
//! certain at this point (`~/.gitconfig` may become the jail's symlink, `gitcopy`; a symlinked
//! entry; a source gone) nothing is made and the sealer decides, as before. Nothing here is seen in
//! the jail without its mount on top: every mount point made is one the ops mount over, or the
//! seal fails and the command never runs.

use crate::jail::policy::{HomeBind, Policy};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

/// Make the mount points; returns how many were made.
pub(crate) fn premake(policy: &Policy) -> usize {
    let home = &policy.session_home;
    let mut count = 0;
    let mut make = |name: &std::ffi::OsStr, dir: bool| {
        let dst = home.join(name);
        if std::fs::symlink_metadata(&dst).is_ok() {
            return;
        }
        let ok = if dir {
            std::fs::DirBuilder::new().mode(0o755).create(&dst).is_ok()
        } else {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&dst)
                .is_ok()
        };
        count += usize::from(ok);
    };
    for e in &policy.home_entries {
        let dir = match &e.bind {
            HomeBind::ReadOnly if e.name == ".gitconfig" => continue,
            // What the sealer's bind resolves (symlinks followed): its type decides the point's.
            HomeBind::ReadOnly | HomeBind::Writable => {
                match std::fs::metadata(policy.home.join(&e.name)) {
                    Ok(m) => m.is_dir(),
                    Err(_) => continue,
                }
            }
            HomeBind::Filtered(_) => true,
            // The jail's own directory, made with its mount points by `statedir::prepare`.
            HomeBind::Symlink(_) | HomeBind::State { .. } => continue,
        };
        make(&e.name, dir);
    }
    // A layer directly in `$HOME` (one inside another layer gets its point in that layer).
    for l in &policy.layers {
        if l.path.parent() == Some(policy.home.as_path()) {
            if let Some(name) = l.path.file_name() {
                make(name, true);
            }
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jail::policy::HomeEntry;

    /// Each mount point is of the type the sealer would make (a directory for a directory, a file
    /// for a file, a directory for a filtered entry and a layer directly in `$HOME`), and none is
    /// made where the sealer decides later: `~/.gitconfig`, a symlink, a source gone, a layer inside
    /// another.
    #[test]
    fn mount_points_are_made_only_where_their_type_is_certain() {
        let t = tempfile::tempdir().unwrap();
        let (home, session) = (t.path().join("h"), t.path().join("s"));
        for d in [".config", ".cargo/registry"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(home.join(".bashrc"), "").unwrap();
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        let mut p = Policy::example();
        p.home = home.clone();
        p.session_home = session.clone();
        let entry = |name: &str, bind: HomeBind| HomeEntry {
            name: name.into(),
            bind,
        };
        p.home_entries = vec![
            entry(".bashrc", HomeBind::ReadOnly),
            entry(".config", HomeBind::Writable),
            entry(".gitconfig", HomeBind::ReadOnly),
            entry(".gone", HomeBind::ReadOnly),
            entry(".ssh", HomeBind::Filtered(vec!["config".into()])),
            entry(".vimrc", HomeBind::Symlink("dot/vimrc".into())),
        ];
        let store = t.path().join("store");
        p.layers = crate::jail::layers::plan(&home, &store);
        assert!(p
            .layers
            .iter()
            .any(|l| l.path == home.join(".cargo/registry")));
        let made = premake(&p);
        let kind = |name: &str| {
            std::fs::symlink_metadata(session.join(name))
                .ok()
                .map(|m| m.is_dir())
        };
        assert_eq!(kind(".bashrc"), Some(false));
        assert_eq!(kind(".config"), Some(true));
        assert_eq!(kind(".ssh"), Some(true));
        for none in [".gitconfig", ".gone", ".vimrc", ".cargo/registry"] {
            assert_eq!(kind(none), None, "{none}");
        }
        for layer in [".cache", ".npm", ".local", ".cargo", "go", "bin"] {
            assert_eq!(kind(layer), Some(true), "{layer}");
        }
        assert_eq!(made, 9);
        // Made already: nothing again.
        assert_eq!(premake(&p), 0);
    }
}
