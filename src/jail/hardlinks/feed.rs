//! The workspace's share of the hard-link scan, done by the entry-point walk
//! (`entrypoints::Links`): one read and one `statx` per directory of the workspace instead of two.
//!
//! Guards against a link missed in the hand-over. The walk covers exactly the directories it reads
//! or takes from its memory (a listing is remembered only if none of its regular files had a
//! second link when it was read, `entrypoints::memory`), and hands over every directory it does not
//! descend into (`.git`, `node_modules`, a declared cache or environment), which the scan walks
//! whole with its own memory. The files the walk found linked come over with them. Only once the
//! walk says it is done (`Feed::done`) does the scan take the workspace as covered: a walk that
//! ended any other way (a panic, a path that never walked it) leaves the scan to walk the whole
//! workspace itself.

use super::Seen;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// The statx fields the scan needs of a file.
pub(super) const MASK: rustix::fs::StatxFlags = rustix::fs::StatxFlags::TYPE
    .union(rustix::fs::StatxFlags::MODE)
    .union(rustix::fs::StatxFlags::NLINK)
    .union(rustix::fs::StatxFlags::UID)
    .union(rustix::fs::StatxFlags::INO);

/// Look at `name` in the directory `dir` open at `fd` (no symlink followed): its type, and the file
/// itself if it is a regular file with more than one link (the scan's one rule for a candidate).
pub(super) fn look_at(
    fd: rustix::fd::BorrowedFd<'_>,
    dir: &Path,
    name: &OsStr,
) -> rustix::io::Result<(rustix::fs::FileType, Option<Seen>)> {
    use rustix::fs::{AtFlags, FileType};
    let st = rustix::fs::statx(fd, name, AtFlags::SYMLINK_NOFOLLOW, MASK)?;
    let kind = FileType::from_raw_mode(st.stx_mode.into());
    let linked = (kind == FileType::RegularFile && st.stx_nlink > 1).then(|| Seen {
        path: dir.join(name),
        dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        nlink: st.stx_nlink.into(),
        uid: st.stx_uid,
        mode: u32::from(st.stx_mode) & 0o7777,
    });
    Ok((kind, linked))
}

/// Looks, and keeps nothing: a walk whose memory is kept but whose files no scan takes (the
/// session's end), so that what it remembers holds no linked file. At most `SCAN_BUDGET` files are
/// looked at (a bound on a walk's cost, as the scan's own): a file past it is "could not be looked
/// at", so its directory is not remembered and the next walk reads on from there.
pub(crate) struct Check {
    left: usize,
    /// A look was refused for the budget.
    spent: bool,
}

impl Default for Check {
    fn default() -> Check {
        Check {
            left: super::SCAN_BUDGET,
            spent: false,
        }
    }
}

impl crate::entrypoints::Links for Check {
    fn look(
        &mut self,
        fd: rustix::fd::BorrowedFd<'_>,
        dir: &Path,
        name: &OsStr,
    ) -> Result<Option<Seen>, ()> {
        let Some(left) = self.left.checked_sub(1) else {
            self.spent = true;
            return Err(());
        };
        self.left = left;
        look_at(fd, dir, name).map(|(_, s)| s).map_err(|_| ())
    }
    fn found(&mut self, _: Vec<Seen>) {}
    fn subtree(&mut self, _: &Path) {}
}

/// What the walk hands over.
pub(super) enum Hand {
    Subtree(PathBuf),
    Files(Vec<Seen>),
    /// The walk is complete; `truncated`: some files were not looked at (the budget ran out).
    Done {
        truncated: bool,
    },
}

/// The walk's end of the hand-over.
pub(crate) struct Feed {
    tx: mpsc::Sender<Hand>,
    /// The root it walks.
    pub(crate) root: PathBuf,
    check: Check,
}

/// The scan's end: the root the walk covers, and what it hands over.
pub(crate) struct Intake {
    pub(super) covered: PathBuf,
    pub(super) rx: mpsc::Receiver<Hand>,
}

/// A hand-over for the walk of `root`.
pub(crate) fn feed(root: &Path) -> (Feed, Intake) {
    feed_within(root, Check::default())
}

fn feed_within(root: &Path, check: Check) -> (Feed, Intake) {
    let (tx, rx) = mpsc::channel();
    let root = root.to_path_buf();
    (
        Feed {
            tx,
            root: root.clone(),
            check,
        },
        Intake { covered: root, rx },
    )
}

impl Feed {
    /// The walk of the root is complete: what it did not hand over, it covered (or, past the
    /// budget, says it did not).
    pub(crate) fn done(self) {
        let truncated = self.check.spent;
        // The scan has stopped (its budget ran out): nothing to tell it.
        let _ = self.tx.send(Hand::Done { truncated });
    }
}

impl crate::entrypoints::Links for Feed {
    fn look(
        &mut self,
        fd: rustix::fd::BorrowedFd<'_>,
        dir: &Path,
        name: &OsStr,
    ) -> Result<Option<Seen>, ()> {
        self.check.look(fd, dir, name)
    }
    fn found(&mut self, files: Vec<Seen>) {
        let _ = self.tx.send(Hand::Files(files));
    }
    fn subtree(&mut self, dir: &Path) {
        let _ = self.tx.send(Hand::Subtree(dir.to_path_buf()));
    }
}

#[cfg(test)]
mod tests {
    use super::super::{protect_fed, Report, SCAN_BUDGET};
    use super::*;
    use crate::walk::memo::{now, time};
    use std::os::unix::fs::MetadataExt;

    /// A minute from now: every directory the test made is settled.
    fn later() -> u64 {
        now() + time(60, 0)
    }

    /// One launch's pair: the entry-point walk of `ws` feeding the scan of `roots` beside it.
    fn launch(ws: &Path, roots: &[PathBuf], rt: &Path) -> Report {
        let (mut feed, intake) = feed(ws);
        let cache = rt.join("links");
        std::thread::scope(|s| {
            let scan =
                s.spawn(|| protect_fed(roots, Some(intake), SCAN_BUDGET, Some(&cache), later()));
            let trust = (crate::walk::Trust::Any, later());
            crate::entrypoints::discover_at(ws, rt, trust, Some(&mut feed));
            feed.done();
            scan.join().unwrap()
        })
    }

    #[test]
    fn the_walk_and_the_scan_share_the_workspace_and_every_link_out_is_broken_once() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (ws, store, other, rt) = (
            root.join("ws"),
            root.join("store"),
            root.join("other"),
            root.join("rt"),
        );
        for dir in [
            "src/a",
            "src/b",
            "node_modules/.pnpm/p",
            "target/debug",
            ".git/objects",
            "inner",
        ] {
            std::fs::create_dir_all(ws.join(dir)).unwrap();
        }
        std::fs::create_dir_all(&store).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::create_dir_all(&rt).unwrap();
        std::fs::write(
            ws.join("target/CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        )
        .unwrap();
        let link = |n: &str, to: &Path| {
            let s = store.join(n);
            std::fs::write(&s, n).unwrap();
            std::fs::hard_link(&s, to).unwrap();
        };
        // Read by the walk; in a pruned tree; in a declared cache and at its top; in `.git`; in
        // a root the walk does not cover.
        link("s1", &ws.join("src/a/linked"));
        link("s2", &ws.join("node_modules/.pnpm/p/index.js"));
        link("s3", &ws.join("target/debug/linked"));
        link("s4", &ws.join("target/linked"));
        link("s5", &ws.join(".git/objects/pack"));
        link("s6", &other.join("linked"));
        // Two names, both inside: nothing outside to reach.
        std::fs::write(ws.join("inner/b"), "b").unwrap();
        std::fs::hard_link(ws.join("inner/b"), ws.join("inner/c")).unwrap();
        let roots = [ws.clone(), other.clone()];
        let nlink = |p: &Path| std::fs::metadata(p).unwrap().nlink();
        let first = launch(&ws, &roots, &rt);
        assert_eq!(first.broken, 6, "{first:?}");
        assert!(
            first.left.is_empty() && first.sealed.is_empty(),
            "{first:?}"
        );
        for n in ["s1", "s2", "s3", "s4", "s5", "s6"] {
            assert_eq!(nlink(&store.join(n)), 1, "{n} still shared");
        }
        assert_eq!(nlink(&ws.join("inner/c")), 2);
        // Unchanged since: nothing to do, and the scan reads only what changed (the directories
        // whose links were broken, the inner pair's).
        let second = launch(&ws, &roots, &rt);
        assert_eq!((second.broken, second.left.len()), (0, 0), "{second:?}");
        // Planted between launches, where the walk remembered a listing and where the scan did.
        link("s7", &ws.join("src/a/planted"));
        link("s8", &ws.join("node_modules/.pnpm/p/planted.js"));
        let third = launch(&ws, &roots, &rt);
        assert_eq!(third.broken, 2, "{third:?}");
        assert_eq!((nlink(&store.join("s7")), nlink(&store.join("s8"))), (1, 1));
        // A walk that keeps its memory but feeds no scan (the session's end) does not remember
        // a listing with a linked file: the next launch reads it and breaks the link.
        link("s9", &ws.join("src/b/planted"));
        let trust = (crate::walk::Trust::Before(i64::MAX), later());
        crate::entrypoints::discover_at(&ws, &rt, trust, None);
        assert_eq!(launch(&ws, &roots, &rt).broken, 1);
        assert_eq!(nlink(&store.join("s9")), 1);
    }

    #[test]
    fn a_walk_that_never_says_it_is_done_leaves_the_whole_workspace_to_the_scan() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        std::fs::write(root.join("outside"), "x").unwrap();
        std::fs::hard_link(root.join("outside"), ws.join("a/b/linked")).unwrap();
        let (mut feed, intake) = feed(&ws);
        // Handed the linked file and its directory, then dropped (a walk that panicked after it
        // sent them): counted once, as the scan's own walk finds it.
        let fd = rustix::fs::open(
            ws.join("a/b"),
            rustix::fs::OFlags::RDONLY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let linked = look_at(
            rustix::fd::AsFd::as_fd(&fd),
            &ws.join("a/b"),
            OsStr::new("linked"),
        )
        .unwrap()
        .1;
        crate::entrypoints::Links::found(&mut feed, vec![linked.expect("two links")]);
        crate::entrypoints::Links::subtree(&mut feed, &ws.join("a"));
        drop(feed);
        let r = protect_fed(
            std::slice::from_ref(&ws),
            Some(intake),
            SCAN_BUDGET,
            None,
            later(),
        );
        assert_eq!(r.broken, 1, "{r:?}");
        assert_eq!(std::fs::metadata(root.join("outside")).unwrap().nlink(), 1);
    }

    #[test]
    fn a_walk_past_its_budget_says_so_and_the_next_launch_looks_on() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (ws, rt) = (root.join("ws"), root.join("rt"));
        for i in 0..6 {
            std::fs::create_dir_all(ws.join(format!("{i}"))).unwrap();
            for j in 0..3 {
                std::fs::write(ws.join(format!("{i}/{j}")), "x").unwrap();
            }
        }
        std::fs::create_dir_all(&rt).unwrap();
        std::fs::write(root.join("outside"), "").unwrap();
        for i in 0..6 {
            std::fs::hard_link(root.join("outside"), ws.join(format!("{i}/linked"))).unwrap();
        }
        // 24 files, 6 looked at per launch: each launch says it stopped, until all are seen.
        let cache = rt.join("links");
        let once = || {
            let check = Check {
                left: 6,
                spent: false,
            };
            let (mut feed, intake) = feed_within(&ws, check);
            std::thread::scope(|s| {
                let scan = s.spawn(|| {
                    protect_fed(
                        std::slice::from_ref(&ws),
                        Some(intake),
                        SCAN_BUDGET,
                        Some(&cache),
                        later(),
                    )
                });
                let trust = (crate::walk::Trust::Any, later());
                crate::entrypoints::discover_at(&ws, &rt, trust, Some(&mut feed));
                feed.done();
                scan.join().unwrap()
            })
        };
        let reports: Vec<Report> = (0..20).map(|_| once()).collect();
        assert!(reports[0].truncated, "{:?}", reports[0]);
        assert!(reports[0].left[0].contains("stopped"), "{:?}", reports[0]);
        let done = reports
            .iter()
            .position(|r| !r.truncated)
            .expect("never complete");
        assert!(
            done >= 2,
            "a budget of 6 covers 24 files in one launch: {reports:?}"
        );
        assert!(reports[done..]
            .iter()
            .all(|r| r.left.is_empty() && r.broken == 0));
        let broken: usize = reports.iter().map(|r| r.broken).sum();
        assert_eq!(
            broken, 6,
            "each link broken once it is looked at: {reports:?}"
        );
        assert_eq!(std::fs::metadata(root.join("outside")).unwrap().nlink(), 1);
    }
}
