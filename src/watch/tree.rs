//! The workspace tree's watches (`Role::Tree`: a new `.git` there is a new repository whose hooks
//! are quarantined), added from the event loop a batch at a time, after the watcher has started,
//! instead of before the gate: at 100k files (5k directories) they cost ~150 ms, which no launch
//! waits for now. What the gate must wait for (PATH directories, repositories) is watched before.
//!
//! Guards against the window this opens: a repository (or a directory holding one, or a catalogued
//! name) made by the jail's first commands in a directory whose watch is not in yet sends no event.
//! So each directory, once its watch is in, is stamped (`walk::memo::Stamp`, as the walks' memories:
//! device, inode, modification and change times), and if the stamp is racy against the watcher's
//! start (`Stamp::racy`: changed since, or within the clock's coarseness before) it is treated as if
//! it had sent the events: every entry changed since the start (a directory, `.git` or `HEAD`: by the
//! same margin; another name: `Since::changed_by_ctime`) is handed to the event path as a CREATE (a new `.git` finds the repository, a new directory is walked and
//! watched, `events`).
//!
//! Why there is no window. The walk that listed the directories ran before the watcher started
//! (time S), and the jail's command starts after (the gate opens once `Watcher::new` is done). Take
//! a tree directory D, its watch added at W, its stamp read at B > W. A change to D's entries (an
//! entry made, renamed in or out, removed) at time t moves D's ctime to the coarse clock at t, which
//! lags the fine clock by milliseconds (its stated tick is 4 ms here; 5 ms and more was seen),
//! always by less than the stamp's margin M (2 s, `RACY_SECONDS`), and which userland cannot set.
//! - t >= W: the watch is in; inotify queues the event synchronously, in the system call.
//! - S <= t < W: B is read after the change, so D's ctime >= S - M: racy, D is listed. The entry
//!   made at t carries a ctime >= S - M itself (made, or renamed: rename moves the moved inode's
//!   ctime), so the listing hands it on; a directory made at t is walked and watched whole
//!   (`add_tree_in` watches before it lists, as before), whatever was made inside it earlier.
//! - D replaced at t (another directory renamed onto its path, S <= t < W): the new inode is the
//!   one watched and stamped; its parent's ctime moved too, and the parent (watched: an event;
//!   not yet: its own listing) hands the new directory on whole, old entries and all.
//! - t < S: before the command could run (as before: the watcher does not catch up at launch).
//!
//! A change in both windows is handed on twice; the event path is idempotent (a repository known is
//! not added again, one inode has one tree entry: `Table::add_in`). What is left unwatched when
//! the session ends (a `true` is over before 5k watches are in) needs no watch: the jail is gone,
//! so one `statx` per directory tells which changed, and only those are looked at again
//! (`finish_tree_queue`).
//!
//! The budget is what the system allows: `fs.inotify.max_user_watches` (per user, shared with other
//! sessions and programs) less a margin. Out of watches anyway (ENOSPC) the tree stops being watched
//! and the final sweep walks it, said once, with the fix.

use super::*;
use crate::walk::memo::{self, Stamp};

/// Tree directories watched per turn of the event loop, between two looks at the queue (~30 µs
/// each: a batch is ~2 ms).
pub(super) const TREE_BATCH: usize = 64;

/// The kernel's default (and, since 5.11, its least) `max_user_watches`, when it cannot be read.
const KERNEL_MIN_WATCHES: usize = 8192;

/// The watches left for everything else (PATH directories, repositories, other sessions, editors
/// and file watchers of the same user): a quarter of the limit, at least this many.
const MIN_MARGIN: usize = 1024;

const MAX_USER_WATCHES: &str = "/proc/sys/fs/inotify/max_user_watches";

/// The limit of this user's inotify watches, if the kernel tells it.
pub(super) fn max_user_watches() -> Option<usize> {
    std::fs::read_to_string(MAX_USER_WATCHES)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How many workspace directories one session watches at most, given the user's limit.
pub(super) fn tree_budget(max_user_watches: Option<usize>) -> usize {
    let max = max_user_watches.unwrap_or(KERNEL_MIN_WATCHES);
    max.saturating_sub((max / 4).max(MIN_MARGIN))
}

/// The stamp of whatever is at `path` (a `.git` or `HEAD` may be a file), its symlink not followed.
fn stamp(path: &Path) -> Option<Stamp> {
    let st = rustix::fs::statx(
        rustix::fs::CWD,
        path,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        rustix::fs::StatxFlags::BASIC_STATS,
    )
    .ok()?;
    Some(Stamp::of(&st))
}

impl Watcher {
    /// Watch up to `n` of the directories still queued, each looked at again once its watch is in.
    pub(super) fn add_tree_batch(&mut self, n: usize) {
        for _ in 0..n {
            let Some(dir) = self.tree_queue.pop_front() else {
                return;
            };
            if self.tree_queue.is_empty() {
                tracing::debug!(
                    dirs = self.tree_watches + 1,
                    ms = self.since.elapsed_ms(),
                    "workspace tree watched"
                );
            }
            // `None`: out of watches, the queue is dropped, the final sweep walks.
            let Some(idx) = self.watch_tree_dir(dir, false) else {
                return;
            };
            self.look_again(idx);
        }
    }

    /// The session is over, every process of the jail gone: what is left of the queue needs no
    /// watch, since nothing changes any more. A directory unchanged since the start is done with
    /// one `statx`; one that changed is watched and looked at again, as in a batch (so the final
    /// sweep need not walk the whole workspace because a short session ended first).
    pub(super) fn finish_tree_queue(&mut self) {
        let start = self.start_stamp_time();
        while let Some(dir) = self.tree_queue.pop_front() {
            if !stamp(&dir).is_some_and(|s| s.racy(start)) {
                continue;
            }
            let Some(idx) = self.watch_tree_dir(dir, false) else {
                return;
            };
            self.look_again(idx);
        }
    }

    /// The watcher's start, as `Stamp` holds times.
    fn start_stamp_time(&self) -> u64 {
        let started = self.since.started;
        memo::time(
            started.div_euclid(1_000_000_000),
            u32::try_from(started.rem_euclid(1_000_000_000)).unwrap_or(0),
        )
    }

    /// The tree directory `idx`, its watch just added: if it changed since the watcher started,
    /// what changed is handed to the event path as if its events had come (see the module doc).
    fn look_again(&mut self, idx: DirId) {
        if self.table[idx].mode != Mode::Inotify {
            return; // swept: the final sweep walks it (`tree_all_live`)
        }
        let dir = self.table[idx].path.clone();
        let start = self.start_stamp_time();
        // Gone: its parent's ctime moved, and the parent hands on what replaced it.
        if !stamp(&dir).is_some_and(|s| s.racy(start)) {
            return;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return;
        };
        let changed: Vec<(String, bool)> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let path = e.path();
                // The launcher's own, made while the watcher starts; a repository the walk knew
                // (its `.git` moves with the launcher's placeholders in it): nothing to hand on,
                // and the event path would walk the whole tree below to find it again.
                if self.cfg.placeholders.contains(&path)
                    || (name == ".git" && self.repos.knows(&path))
                    || (name == "HEAD" && self.repos.knows(&dir))
                {
                    return None;
                }
                let is_dir = e.file_type().ok()?.is_dir();
                // What finds a repository (a directory, a `.git` file or `HEAD`) by the stamp's
                // margin: the coarse clock was seen > 5 ms behind the fine one here, more than
                // its stated tick, so a `.git` made after the start can carry an older time. A
                // repository the walk knew is not added again (`discover_repos`). Other names
                // only matter if catalogued (judged again at the session's end): by the
                // watcher's own test, which a file edited just before the launch does not meet.
                let changed = if is_dir || name == ".git" || name == "HEAD" {
                    stamp(&path)?.racy(start)
                } else {
                    self.since.changed_by_ctime(&Entry::metadata(&path)?)
                };
                changed.then_some((name, is_dir))
            })
            .collect();
        tracing::debug!(dir = %dir.display(), changed = changed.len(), "tree directory changed before its watch");
        for (name, is_dir) in changed {
            let mask = if is_dir {
                EventMask::CREATE | EventMask::ISDIR
            } else {
                EventMask::CREATE
            };
            self.handle(idx, Some(name), mask);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The budget leaves a quarter of the user's watches to everything else, and never less than
    /// `MIN_MARGIN`; a default kernel of today (this machine: 192 543) watches a 200k-file
    /// workspace's ~10k directories whole.
    #[test]
    fn the_budget_is_what_the_limit_leaves() {
        assert_eq!(tree_budget(Some(192_543)), 192_543 - 48_135);
        assert!(tree_budget(Some(192_543)) > 10_000);
        assert_eq!(tree_budget(Some(1_048_576)), 786_432);
        assert_eq!(tree_budget(None), 8192 - 2048);
        assert_eq!(tree_budget(Some(2000)), 2000 - MIN_MARGIN);
        assert_eq!(tree_budget(Some(100)), 0);
    }

    fn repo(dir: &Path) {
        for sub in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(dir.join(".git").join(sub)).unwrap();
        }
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    /// The jail's first writes can come before the tree's watches are in (they are added from the
    /// event loop): a repository made in a deep directory not watched yet, and a new directory
    /// holding one, send no event. Each directory is looked at again once its watch is in, so both
    /// are found without any event, and the new directory is watched from then on.
    #[test]
    fn what_is_made_before_a_tree_directory_is_watched_is_handed_on() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let runtime = t.path().join("rt");
        let deep = ws.join("a/b/c");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        let path_env = std::env::join_paths([PathBuf::from("/usr/bin")]).unwrap();
        let base = baseline::take(
            "s",
            &path_env,
            &ws,
            &|_| false,
            &[],
            None,
            baseline::Depth::Names,
        );
        let mut cfg = super::super::tests::config(&ws, runtime);
        cfg.tree_dirs = vec![ws.clone(), ws.join("a"), ws.join("a/b"), deep.clone()];
        let mut w = Watcher::new(cfg, &base);
        assert!(w.table.inotify_open(), "this test needs inotify");
        assert_eq!(w.tree_watches, 0, "the tree is watched from the event loop");
        repo(&deep);
        repo(&ws.join("a/new/r"));
        w.add_tree_batch(usize::MAX);
        let (events, _) = w.table.read_events();
        assert!(events.is_empty(), "made before every watch: {events:?}");
        let canonical = |p: PathBuf| std::fs::canonicalize(p).unwrap();
        for made in ["a/b/c/.git", "a/new/r/.git"] {
            assert!(
                w.repos
                    .git_dirs()
                    .contains(&canonical(ws.join(made)).as_path()),
                "{made}: a repository made before its directory was watched was missed: {:?}",
                w.repos.git_dirs()
            );
        }
        assert!(!w.lost_events);
        // The new directory is watched: a repository made in it later is found from its events.
        repo(&ws.join("a/new/later"));
        w.drain();
        assert!(
            w.repos
                .git_dirs()
                .contains(&canonical(ws.join("a/new/later/.git")).as_path()),
            "{:?}",
            w.repos.git_dirs()
        );
    }

    /// A session over before the tree's watches were in: the final sweep finds what was made in a
    /// directory not watched yet without walking the workspace (`lost_events` stays false).
    #[test]
    fn a_session_over_before_the_watches_finishes_the_queue_without_a_walk() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let runtime = t.path().join("rt");
        let deep = ws.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        let path_env = std::env::join_paths([PathBuf::from("/usr/bin")]).unwrap();
        let base = baseline::take(
            "s",
            &path_env,
            &ws,
            &|_| false,
            &[],
            None,
            baseline::Depth::Names,
        );
        let mut cfg = super::super::tests::config(&ws, runtime);
        cfg.tree_dirs = vec![ws.clone(), ws.join("a"), deep.clone()];
        let mut w = Watcher::new(cfg, &base);
        repo(&deep);
        w.final_sweep();
        assert!(w.tree_queue.is_empty());
        assert!(!w.lost_events, "the final sweep walked the workspace");
        let git_dir = std::fs::canonicalize(deep.join(".git")).unwrap();
        assert!(
            w.repos.git_dirs().contains(&git_dir.as_path()),
            "{:?}",
            w.repos.git_dirs()
        );
    }
}
