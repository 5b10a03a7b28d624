//! What the agent installed this session in the home PATH directories (`layers::PATH_DIRS`).
//!
//! Those directories are the jail's own layers: an install there never reaches your PATH, so you
//! would not learn of it but by looking in the store. Guards against that silence: the names are
//! taken before the jail starts and again at its end, in the directories where this session's
//! writes land (its upper directory, or the jail's own directory where no overlay is made), and
//! what is new or changed is listed in the session's summary, with the way to bring one over
//! (`claude-sandbox adopt`). Names are the jail's choice: the caller escapes them.

use crate::jail::policy::{Layer, LayerMount};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// What tells a rewritten entry from an untouched one: inode, change time (a rename or a `chmod`
/// changes it too).
type Stamp = (u64, i64, i64);

/// One home PATH directory: where the human's shells look, and where the session's writes land.
#[derive(Debug)]
struct Dir {
    /// Relative to `$HOME` (`.local/bin`).
    rel: &'static str,
    /// The jail's directories that hold it for this session.
    sources: Vec<PathBuf>,
    before: BTreeMap<OsString, Stamp>,
}

/// The home PATH directories' entries at the start of a session.
#[derive(Debug, Default)]
pub(crate) struct Installed {
    dirs: Vec<Dir>,
}

/// Where the session's writes to `home/rel` land: the layer that holds it, in the directories
/// that layer writes to (none when the jail sees your directory read-only).
pub(crate) fn sources(home: &Path, rel: &str, layers: &[Layer]) -> Vec<PathBuf> {
    let path = home.join(rel);
    let Some(l) = layers
        .iter()
        .filter(|l| path.starts_with(&l.path))
        .max_by_key(|l| l.path.components().count())
    else {
        return Vec::new();
    };
    if l.mount() == LayerMount::Yours {
        return Vec::new();
    }
    let rest = path.strip_prefix(&l.path).unwrap_or(Path::new(""));
    // Both: bwrap may end up making the mounts (no overlay, `own`) after the plan chose one.
    vec![l.upper.join(rest), l.own.join(rest)]
}

fn stamps(dirs: &[PathBuf]) -> BTreeMap<OsString, Stamp> {
    let mut out = BTreeMap::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(d) else {
            continue;
        };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            // An overlay's whiteout: removed in the jail, nothing installed.
            if m.file_type().is_char_device() && m.rdev() == 0 {
                continue;
            }
            out.insert(e.file_name(), (m.ino(), m.ctime(), m.ctime_nsec()));
        }
    }
    out
}

/// The names in `after` that are not in `before`, or are there changed.
pub(crate) fn changed(
    before: &BTreeMap<OsString, Stamp>,
    after: &BTreeMap<OsString, Stamp>,
) -> Vec<OsString> {
    after
        .iter()
        .filter(|(n, s)| before.get(*n) != Some(s))
        .map(|(n, _)| n.clone())
        .collect()
}

impl Installed {
    /// Take the entries now (after `layers::prepare`, which chose this session's upper
    /// directories).
    pub(crate) fn before(home: &Path, layers: &[Layer]) -> Self {
        let dirs = super::PATH_DIRS
            .iter()
            .map(|rel| {
                let sources = sources(home, rel, layers);
                let before = stamps(&sources);
                Dir {
                    rel,
                    sources,
                    before,
                }
            })
            .collect();
        Self { dirs }
    }

    /// What was installed since `before`, per directory (relative to `$HOME`), in name order.
    pub(crate) fn since(&self) -> Vec<(&'static str, Vec<OsString>)> {
        self.dirs
            .iter()
            .map(|d| (d.rel, changed(&d.before, &stamps(&d.sources))))
            .filter(|(_, names)| !names.is_empty())
            .collect()
    }

    /// The session summary's lines: one per directory with installs, names escaped.
    pub(crate) fn notes(&self) -> Vec<String> {
        self.since()
            .into_iter()
            .map(|(rel, names)| {
                let names: Vec<String> = names
                    .iter()
                    .map(|n| crate::escape::visible_bytes(n.as_encoded_bytes()))
                    .collect();
                format!(
                    "installed in the jail's ~/{rel} this session: {} (they run in the jail and its \
                     next sessions, never on your PATH; `claude-sandbox adopt NAME` brings one over)",
                    names.join(", ")
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, Stamp)]) -> BTreeMap<OsString, Stamp> {
        entries.iter().map(|(n, s)| ((*n).into(), *s)).collect()
    }

    #[test]
    fn new_and_rewritten_names_are_installed_untouched_ones_are_not() {
        let before = map(&[("kept", (1, 10, 0)), ("rewritten", (2, 10, 0))]);
        let after = map(&[
            ("kept", (1, 10, 0)),
            ("rewritten", (3, 11, 5)),
            ("new", (4, 12, 0)),
        ]);
        assert_eq!(changed(&before, &after), vec!["new", "rewritten"]);
        assert!(changed(&after, &after).is_empty());
    }

    #[test]
    fn a_session_sees_what_it_wrote_in_its_upper_directory_and_names_are_escaped() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let store = t.path().join("store");
        std::fs::create_dir_all(home.join(".local")).unwrap();
        let layers = super::super::plan(&home, &store);
        let local = layers.iter().find(|l| l.name == "local").unwrap();
        let bin = local.upper.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("old"), "").unwrap();
        let snap = Installed::before(&home, &layers);
        std::fs::write(bin.join("pygmentize"), "").unwrap();
        std::fs::write(bin.join("evil\x1b]52;c;x\x07"), "").unwrap();
        let since = snap.since();
        assert_eq!(since.len(), 1, "{since:?}");
        assert_eq!(since[0].0, ".local/bin");
        assert_eq!(since[0].1.len(), 2);
        let notes = snap.notes();
        assert!(notes[0].contains("~/.local/bin"), "{notes:?}");
        assert!(notes[0].contains("pygmentize"), "{notes:?}");
        assert!(!notes[0].contains('\x1b'), "{notes:?}");
        assert!(!notes[0].contains("old"), "{notes:?}");
    }
}
