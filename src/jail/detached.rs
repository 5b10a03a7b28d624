//! Seals that came off during the session: an entry point sealed one by one (a bind over the file)
//! that something outside replaced — an editor saving by rename, `git checkout` writing the file
//! anew, a delete. The kernel then detaches the jail's bind (a mount point in another namespace does
//! not stop a rename or an unlink), and the jail can write the new file until the session ends.
//!
//! No unprivileged mechanism keeps such a seal on a file in a directory the jail must write (the
//! workspace root): the agent state directories avoid it by being the jail's own (`statedir`), a
//! repository's config by its diversion (`gitcopy`). Here the human is told, at the end, which
//! entry points were replaced while the jail could reach them, to review them before their tools
//! read them (docs/threat-model.md).

use crate::alerts::{at_session_end, AlertKind};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The sealed entry points of a running session: as they were when the command started, kept
/// sealed while it runs (`reseal`).
pub(crate) struct Guarded {
    ids: Vec<Identity>,
    resealer: Option<super::reseal::Resealer>,
    /// Sockets opened outside the jail in the workspace, covered in it (`sockets::later`).
    covering: Option<super::sockets::later::Covering>,
}

/// Record `policy`'s seals and watch them, for the jail whose bwrap is `bwrap`; judge the sockets
/// `sockets` tells of (alerting in the session).
pub(crate) fn guard(
    policy: &super::policy::Policy,
    bwrap: i32,
    sockets: Option<std::sync::mpsc::Receiver<PathBuf>>,
) -> Guarded {
    let session = crate::runtime_dir::SessionDir::of_home(&policy.session_home);
    let telling = || super::sockets::later::Telling {
        session_dir: session.path().to_path_buf(),
        writable: policy.writable_roots(),
    };
    Guarded {
        ids: record(&policy.sealed),
        resealer: super::reseal::start(policy, bwrap),
        covering: sockets.map(|s| super::sockets::later::start(s, bwrap, telling())),
    }
}

impl Guarded {
    /// After the jail: stop watching, and alert on what was replaced meanwhile.
    pub(crate) fn finish(self, policy: &super::policy::Policy, session_dir: &Path) {
        drop(self.resealer);
        drop(self.covering);
        let diverted: Vec<PathBuf> = policy.git_copies.iter().map(|c| c.real.clone()).collect();
        alert(&self.ids, &diverted, session_dir);
    }
}

/// A sealed path as it was when the jail started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
}

/// The identities of the sealed entry points that existed before the session (placeholders are
/// the launcher's own).
pub(crate) fn record(sealed: &[super::policy::Sealed]) -> Vec<Identity> {
    sealed
        .iter()
        .filter(|s| !s.placeholder)
        .filter_map(|s| {
            let m = std::fs::symlink_metadata(&s.path).ok()?;
            Some(Identity {
                path: s.path.clone(),
                dev: m.dev(),
                ino: m.ino(),
            })
        })
        .collect()
}

/// The recorded paths that are no longer the same file (replaced or removed). Pure but for `stat`.
pub(crate) fn replaced(ids: &[Identity], skip: &[PathBuf]) -> Vec<PathBuf> {
    ids.iter()
        .filter(|id| !skip.contains(&id.path))
        .filter(|id| {
            std::fs::symlink_metadata(&id.path)
                .map_or(true, |m| (m.dev(), m.ino()) != (id.dev, id.ino))
        })
        .map(|id| id.path.clone())
        .collect()
}

/// Alert on each replaced entry point (`skip`: paths whose replacement is the launcher's own, such
/// as a diverted `.git/config`).
pub(crate) fn alert(ids: &[Identity], skip: &[PathBuf], session_dir: &Path) {
    for p in replaced(ids, skip) {
        let detail = format!(
            "{} was replaced or removed outside the jail during the session (an editor saving by \
             rename, a checkout); from then on the jail could write it: review it before a tool \
             reads it",
            p.display()
        );
        at_session_end(session_dir, AlertKind::SealDetached, &p, &detail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_replaced_by_rename_or_removed_is_found_and_one_written_in_place_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        for p in [&a, &b, &c] {
            std::fs::write(p, "x").unwrap();
        }
        let sealed: Vec<_> = [&a, &b, &c]
            .iter()
            .map(|p| super::super::policy::Sealed {
                path: (*p).clone(),
                runs: String::new(),
                placeholder: false,
            })
            .collect();
        let ids = record(&sealed);
        std::fs::write(&a, "in place").unwrap();
        std::fs::write(dir.path().join("b.tmp"), "new").unwrap();
        std::fs::rename(dir.path().join("b.tmp"), &b).unwrap();
        std::fs::remove_file(&c).unwrap();
        assert_eq!(replaced(&ids, &[]), vec![b.clone(), c.clone()]);
        assert_eq!(replaced(&ids, &[c]), vec![b]);
    }
}
