//! The watcher: runs outside the jail for the whole session and catches what the jail leaves writable
//! on purpose — executables appearing in writable PATH directories, hooks and exec-capable config in
//! repositories (above all those created during the session).
//!
//! Guards against a planted `~/.local/bin/git` or `.git/hooks/pre-commit` surviving unseen. Design:
//! - one inotify instance; every event is only a hint that "name X in directory D is dirty": the entry
//!   is re-read (`lstat`, hash through a no-follow fd) and compared with the last known state, which
//!   starts as the baseline; the same reconcile path serves inotify, the poll sweep and the final sweep;
//! - watches are added *before* the directory is listed and diffed against the baseline, so nothing
//!   that appears between the baseline and the watch is missed;
//! - a directory falls back to a one-second stat sweep of the full attribute set when inotify cannot
//!   be trusted there: `inotify_init` fails, a watch cannot be added (ENOSPC/EMFILE), the filesystem
//!   drops events (FUSE, 9p, NFS, CIFS/SMB: `statfs`), or `CLAUDE_SANDBOX_WATCH=poll`; a queue
//!   overflow rescans everything at once;
//! - a missing PATH directory is watched through its nearest existing ancestor until it appears;
//! - when the session ends, a final sweep (every directory, a fresh walk for repositories) runs before
//!   `run` returns, so every alert and quarantine of the session is on disk by then.

use crate::baseline::{self, Baseline, Entry, Kind, Sha256};
use crate::entrypoints;
use crate::host::HostEnv;
use crate::quarantine;
use crate::walk;
use inotify::{EventMask, Inotify};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod act;
mod created;
mod deferred;
mod events;
mod gitkeys;
pub(crate) mod gitlinks;
mod judge;
mod register;
mod repos;
pub(crate) mod shellpath;
mod sweep;
mod table;
mod tree;
mod verdict;

pub use table::{poll_only_fs, Mode};
use table::{DirId, PathPos, RepoId, Role, Table};

/// The sweep interval.
pub(crate) const TICK: Duration = Duration::from_secs(1);
/// How often the lazy inotify instance is read at most (`table::Table::lazy`): a repository made
/// inside a tree declared generated during the session is found within this (plus the time to
/// look), not within milliseconds; its hooks and config are looked at once found, as any new
/// repository's are.
pub(crate) const LAZY_TICK: Duration = Duration::from_millis(100);
/// After reading events, the watcher rests this long before it waits on inotify again. While it
/// waits, each event a writer queues wakes it: the writer pays for the wake-up (on this VM a third
/// of what a file's creation costs it, `perf record` of a churn on tmpfs) and the watcher for one
/// more read per event. While it rests, events queue with no one to wake, and the next read takes
/// them together. An event that finds the watcher waiting is handled at once; one in a burst
/// within this much more.
pub(crate) const EVENT_REST: Duration = Duration::from_millis(5);

#[derive(Debug, Clone)]
pub struct WatchConfig {
    pub runtime: PathBuf,
    pub session: String,
    pub workspace: PathBuf,
    pub force_poll: bool,
    /// Quarantine new executables that shadow nothing too (default: alert only).
    pub quarantine_new: bool,
    /// Configured `hidden` globs: a matching file created during the session is visible in the
    /// jail (masks are resolved at launch), so it is reported.
    pub hidden_globs: Vec<String>,
    /// The workspace's directories if the caller already walked them (else the watcher walks).
    pub tree_dirs: Vec<PathBuf>,
    /// Compare everything with the baseline once the watches are in place. Needed when something
    /// may have changed since the baseline (the `watch` command); not when the jail's command is
    /// still held at the gate, since then nothing of the agent's can have happened yet.
    pub catch_up: bool,
    /// Placeholders the launcher makes while the watcher starts (read-only in the jail): their
    /// creation is not news.
    pub placeholders: std::collections::HashSet<PathBuf>,
    /// How long after the start deferred names are read (`RESOLVE_DELAY`; tests stretch it to make
    /// sure a change comes first).
    pub resolve_delay: Duration,
    /// How long after the start the workspace tree's watches are added (`tree`; tests stretch it so
    /// that the command's first writes come before them).
    pub tree_delay: Duration,
    /// What the jail can write (`None`: what this user can write, for `watch`): decides which
    /// directories of the human's future shells are watched (see `shellpath`).
    pub writable_roots: Option<Vec<PathBuf>>,
    /// The host's environment: `$HOME` (git's `~/`, the human's future shells), their shell and
    /// npm prefix (`shellpath`).
    pub host: HostEnv,
    /// The directories an allowed `.envrc` puts on PATH (`PATH_add bin`): first on the human's
    /// shell's PATH in that directory, so watched as PATH directories (`shellpath`).
    pub envrc_path_dirs: Vec<PathBuf>,
    /// Where to tell of each unix socket made in the workspace tree during the session (`run`:
    /// `jail::sockets::later` judges who listens on it).
    pub new_sockets: Option<std::sync::mpsc::Sender<PathBuf>>,
}

/// A directory's identity and change time. Any entry created, removed or renamed in it moves its
/// ctime, so an unchanged stamp means unchanged names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirStamp {
    dev: u64,
    ino: u64,
    ctime_ns: i64,
}

/// A stamp is trusted only when its ctime is this old: timestamps are coarse (a clock tick), so a
/// change in the same tick as the previous one could leave ctime where it was.
const SETTLE_NS: i64 = 1_000_000_000;

/// In sweep mode, each executable that was there at the baseline is re-read every `ROLL` ticks
/// (it can only "change", which is alerted, never quarantined as a plant); names are checked every
/// tick, and everything else that could become an executable too.
const ROLL: usize = 5;

/// One tick of the coarse realtime clock, which the kernel stamps ctime with: a change made after
/// an instant read from the fine clock can carry a ctime up to one tick before it.
fn coarse_tick_ns() -> i64 {
    let mut res = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres only writes the timespec it is given.
    let ok = unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &raw mut res) } == 0;
    if ok {
        res.tv_sec * 1_000_000_000 + res.tv_nsec
    } else {
        10_000_000
    }
}

fn settled_stamp(dir: &Path) -> Option<DirStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    let ctime_ns = m.ctime() * 1_000_000_000 + m.ctime_nsec();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos();
    let now = i64::try_from(now).ok()?;
    (now - ctime_ns >= SETTLE_NS).then_some(DirStamp {
        dev: m.dev(),
        ino: m.ino(),
        ctime_ns,
    })
}

pub(crate) struct Watcher {
    cfg: WatchConfig,
    /// The inotify instance and the watched directories.
    table: Table,
    path: Vec<(PathBuf, bool)>,
    /// Every PATH entry's directory, by its position on PATH.
    path_dirs: Vec<PathBuf>,
    /// The repositories watched (`repos`).
    repos: repos::Repos,
    /// Workspace-tree watches added so far, and how many there may be (`tree::tree_budget`).
    tree_watches: usize,
    tree_budget: usize,
    /// The walk's directories still to be watched, a batch per turn of the event loop (`tree`).
    tree_queue: std::collections::VecDeque<PathBuf>,
    /// Whether running out of tree watches was said already.
    tree_warned: bool,
    /// Where verdicts go: the quarantine and the alert store (a recording fake in tests).
    sink: Box<dyn act::Sink>,
    /// When the session started, as ctimes tell it.
    since: deferred::Since,
    /// In sweep mode, where the workspace's `.git` and `HEAD` entries were at the last tick.
    last_markers: Vec<PathBuf>,
    /// In sweep mode, each workspace directory's listing as of its last settled stamp.
    tree_cache: HashMap<PathBuf, Listing>,
    /// Names whose attributes or hashes are still to be read (`deferred`).
    deferred: deferred::Deferred,
    /// Events may have been missed (queue overflow, tree budget spent, a tree directory swept):
    /// the final sweep must then walk everything.
    lost_events: bool,
    /// The human's future shells: their search order, the login shell's answer (`shellpath`).
    future: shellpath::Future,
    /// Names whose quarantine failed, and why: tried again each tick and in the final sweep
    /// (`verdict`).
    failed: std::collections::BTreeMap<(DirId, String), String>,
    /// Alerts the store still refuses, described (reported at the end).
    unsent: Vec<String>,
    /// Catalogued names made in the workspace, judged at the next tick (`created`).
    created_names: std::collections::BTreeSet<PathBuf>,
    /// Sweep mode: the names `note_listed_names` has kept already (each is alerted once).
    created_listed: std::collections::HashSet<PathBuf>,
}

/// How a deferred name is read (see `Watcher::resolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resolve {
    /// Before the session's command can run: as it is, it is the baseline.
    Quiet,
    /// An event for it was queued before it was read: changed in the session.
    Event,
    /// Events may have been lost: changed if its ctime is the session's.
    Ctime,
}

/// Deferred names read per turn of the event loop, between two looks at the queue.
const RESOLVE_BATCH: usize = 128;

/// Deferred names are read from this long after the watcher starts: not while the jail's command
/// starts, and not at all in a session shorter than that (its final sweep reads only what events
/// name).
pub const RESOLVE_DELAY: Duration = Duration::from_millis(20);

/// Baseline executables hashed per turn of the event loop (~15 µs each for small files).
const HASH_BATCH: usize = 32;

/// Hashing starts this long after the watcher: not while the jail is being built and the agent is
/// starting, on the same cores. Until an executable is hashed, a change is judged by attributes.
const HASH_DELAY: Duration = Duration::from_millis(250);

impl Watcher {
    /// Set up every watch and catch up with the baseline. Synchronous: when it returns, the watcher
    /// has seen everything that happened since the baseline.
    pub(crate) fn new(cfg: WatchConfig, base: &Baseline) -> Self {
        let table = Table::new(cfg.force_poll);
        let cwd = std::env::current_dir().unwrap_or_else(|_| cfg.workspace.clone());
        let path = baseline::path_entries(OsStr::new(&base.path_env), &cwd);
        let sink = Box::new(act::Store::new(&cfg.runtime));
        let mut w = Watcher {
            cfg,
            table,
            path,
            path_dirs: base.dirs.iter().map(|d| d.path.clone()).collect(),
            repos: repos::Repos::default(),
            tree_watches: 0,
            tree_budget: tree::tree_budget(tree::max_user_watches()),
            tree_queue: std::collections::VecDeque::new(),
            tree_warned: false,
            last_markers: Vec::new(),
            tree_cache: HashMap::new(),
            since: deferred::Since::now(coarse_tick_ns()),
            sink,
            deferred: deferred::Deferred::default(),
            lost_events: false,
            future: shellpath::Future::default(),
            failed: std::collections::BTreeMap::new(),
            unsent: Vec::new(),
            created_names: std::collections::BTreeSet::new(),
            created_listed: std::collections::HashSet::new(),
        };
        for d in base.dirs.iter().filter(|d| d.writable) {
            if d.exists {
                let idx = w.table.add(
                    d.path.clone(),
                    Role::PathDir {
                        pos: PathPos(d.index),
                    },
                    d.entries.clone(),
                );
                w.table[idx].deferred = d.deferred.iter().cloned().collect();
                if !d.deferred.is_empty() {
                    w.deferred.dirs.push(idx);
                }
                if matches!(w.table[idx].mode, Mode::Poll(_)) {
                    // No events to go by: the sweep compares attributes, so read them now.
                    w.resolve_all(idx, Resolve::Quiet);
                }
            } else {
                w.add_pending(PathPos(d.index));
            }
        }
        w.watch_future_shells(OsStr::new(&base.path_env));
        for r in &base.repos {
            w.add_repo(r.clone());
        }
        let ws = w.cfg.workspace.clone();
        if w.cfg.tree_dirs.is_empty() {
            w.add_tree(&ws);
        } else if w.table.has_inotify() {
            // Watched from the event loop, off the launch's critical path (`tree`).
            w.tree_queue = std::mem::take(&mut w.cfg.tree_dirs).into();
        }
        w.follow_gitlinks_as(false);
        if w.cfg.catch_up {
            w.rescan_all();
        }
        w.deferred.unhashed = w
            .table
            .iter()
            .filter(|(_, d)| d.role.judges_entries())
            .flat_map(|(idx, d)| {
                d.origin
                    .iter()
                    .filter(|(_, e)| {
                        e.kind == Kind::File && e.is_executable() && e.sha256.is_none()
                    })
                    .map(move |(name, _)| (idx, name.clone()))
            })
            .collect();
        w
    }

    /// Which mode each watched directory is in (for doctor and logs).
    pub(crate) fn modes(&self) -> Vec<(PathBuf, Mode)> {
        self.table
            .iter()
            .filter(|(_, d)| d.role.is_own())
            .map(|(_, d)| (d.path.clone(), d.mode.clone()))
            .collect()
    }
}

/// Whether `name` in the open directory still has the attributes of `e` (an `fstatat`, no
/// allocation). A symlink's target is not compared: replacing a symlink makes a new inode.
// The `stat` field types differ between architectures (nlink is 32 bits on aarch64): cast them all
// (between signed and unsigned twins: the kernel keeps sizes and times >= 0).
#[allow(
    clippy::unnecessary_cast,
    clippy::cast_sign_loss,
    clippy::cast_possible_wrap
)]
fn unchanged_at(dirfd: &OwnedFd, name: &str, e: &Entry) -> bool {
    let Ok(st) = rustix::fs::statat(dirfd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    let kind = match rustix::fs::FileType::from_raw_mode(st.st_mode) {
        rustix::fs::FileType::Symlink => Kind::Symlink,
        rustix::fs::FileType::RegularFile => Kind::File,
        rustix::fs::FileType::Directory => Kind::Dir,
        _ => Kind::Other,
    };
    st.st_ctime as i64 * 1_000_000_000 + st.st_ctime_nsec as i64 == e.ctime_ns
        && st.st_ino as u64 == e.ino
        && st.st_mtime as i64 * 1_000_000_000 + st.st_mtime_nsec as i64 == e.mtime_ns
        && st.st_size as u64 == e.size
        && st.st_mode as u32 & 0o7777 == e.mode
        && st.st_dev as u64 == e.dev
        && st.st_nlink as u64 == e.nlink
        && st.st_uid as u32 == e.uid
        && st.st_gid as u32 == e.gid
        && kind == e.kind
}

/// What `git_markers` keeps of one directory: its stamp, subdirectories and markers.
#[derive(Debug)]
struct Listing {
    stamp: DirStamp,
    subdirs: Vec<PathBuf>,
    markers: Vec<PathBuf>,
}

/// Every entry named `.git` or `HEAD` under `root` (not inside `.git` or `node_modules`), from
/// directory listings alone. A directory whose settled stamp has not moved is not listed again:
/// its subdirectories and markers come from `cache` (a new `.git` moves its parent's ctime). The
/// catalogued names (`judge::judge_created_name`) and the sockets of each directory listed afresh
/// go to `named`: in sweep mode, what made a directory change may be a new entry point (`created`)
/// or a socket the jail can reach (`created::Watcher::check_socket`).
fn git_markers(
    root: &Path,
    cache: &mut HashMap<PathBuf, Listing>,
    before: i64,
    named: &mut Vec<PathBuf>,
) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let stamp = settled_stamp(&dir);
        seen.insert(dir.clone());
        if let Some(l) = cache.get(&dir).filter(|l| Some(l.stamp) == stamp) {
            out.extend(l.markers.iter().cloned());
            stack.extend(l.subdirs.iter().cloned());
            continue;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            cache.remove(&dir);
            continue;
        };
        let (mut subdirs, mut markers) = (Vec::new(), Vec::new());
        let mut declarations = walk::Declarations::default();
        for e in rd.flatten() {
            let name = e.file_name();
            let socket = || {
                use std::os::unix::fs::FileTypeExt;
                e.file_type().is_ok_and(|t| t.is_socket())
            };
            if name
                .to_str()
                .is_some_and(|n| judge::judge_created_name(n).is_some())
                || socket()
            {
                named.push(e.path());
            }
            match name.as_bytes() {
                b".git" | b"HEAD" => markers.push(e.path()),
                n if declarations.note(n) => {}
                _ if walk::pruned(&name) => {}
                _ if e.file_type().is_ok_and(|t| t.is_dir()) => subdirs.push(e.path()),
                _ => {}
            }
        }
        // A cache or a virtual environment declared before the session is not walked (`walk`).
        if dir != root && walk::skips_listed(&dir, declarations, walk::Trust::Before(before)) {
            subdirs.clear();
            markers.clear();
        }
        out.extend(markers.iter().cloned());
        stack.extend(subdirs.iter().cloned());
        match stamp {
            Some(stamp) => {
                cache.insert(
                    dir,
                    Listing {
                        stamp,
                        subdirs,
                        markers,
                    },
                );
            }
            None => {
                cache.remove(&dir);
            }
        }
    }
    cache.retain(|d, _| seen.contains(d));
    out.sort();
    out
}

/// A watcher thread for `run`: set up synchronously, then run until stopped.
pub struct Running {
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<Vec<Inotify>>>,
}

/// The inotify instance of a finished watcher, its watches already removed. Closing an instance
/// waits until the kernel has freed its watches: one SRCU grace period, 0.1 ms when it is expedited,
/// 10-20 ms when it has to follow another one (freeing many watches at once queues several).
/// Removing the watches at the end of the final sweep and closing after the clean-up gave the slow
/// case in 41 of 100 launches here, closing with the watches in place in 75 of 100
/// (docs/performance.md, "The end of a session").
/// With more than one instance (the lazy one, `table`), they are closed side by side: each close
/// waits for a grace period, and waits that run at once overlap instead of adding up.
pub struct Closing(Vec<Inotify>);

impl Drop for Closing {
    fn drop(&mut self) {
        let mut all = std::mem::take(&mut self.0);
        let Some(first) = all.pop() else {
            return;
        };
        std::thread::scope(|scope| {
            for other in all {
                scope.spawn(move || drop(other));
            }
            drop(first);
        });
    }
}

impl Running {
    /// # Errors
    /// The stop pipe or the watcher's thread cannot be made.
    pub fn start(cfg: WatchConfig, base: &Baseline) -> std::io::Result<Running> {
        let (stop_r, stop_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let mut watcher = Watcher::new(cfg, base);
        let thread = std::thread::Builder::new()
            .name("watcher".into())
            .spawn(move || {
                watcher.run(&stop_r);
                watcher.table.release_watches();
                watcher.table.take_inotify()
            })?;
        Ok(Running {
            stop: Some(stop_w),
            thread: Some(thread),
        })
    }

    /// Stop and wait for the final sweep. Drop what it returns as late as possible.
    #[must_use]
    pub fn finish(mut self) -> Closing {
        self.stop.take(); // closing the write end makes the read end readable (POLLHUP)
        Closing(
            self.thread
                .take()
                .and_then(|t| t.join().ok())
                .unwrap_or_default(),
        )
    }
}

/// `claude-sandbox watch`: the watcher in the foreground, without a jail, until SIGINT/SIGTERM.
/// Writable PATH directories are those this user can write.
pub(crate) fn foreground(workspace: Option<PathBuf>, env: &HostEnv) -> crate::Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| crate::Error::io("reading the current directory", e))?;
    let ws = workspace.unwrap_or_else(|| crate::host::default_workspace(&cwd));
    let ws = std::fs::canonicalize(&ws).map_err(|e| {
        crate::Error::named_path(
            e,
            || format!("{}: no such directory; pass --workspace DIR", ws.display()),
            || format!("resolving the workspace {}", ws.display()),
        )
    })?;
    let runtime = crate::runtime_dir::ensure(&crate::runtime_dir::locate(env))?;
    let session = format!("watch-{}", std::process::id());
    let path_env = env.path();
    let user_can_write = |p: &Path| {
        let existing = p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
        rustix::fs::access(existing, rustix::fs::Access::WRITE_OK).is_ok()
    };
    let home = env.home();
    let repos = entrypoints::discover_workspace(&ws, home.as_deref()).repos;
    let base = baseline::take(
        &session,
        path_env,
        &cwd,
        &user_can_write,
        &repos,
        home.as_deref(),
        baseline::Depth::Attributes,
    );
    let (stop_r, stop_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| crate::Error::io("pipe", e.into()))?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let w = stop_w
            .try_clone()
            .map_err(|e| crate::Error::io("pipe", e))?;
        signal_hook::low_level::pipe::register_raw(sig, w)
            .map_err(|e| crate::Error::io("registering signals", e))?;
    }
    let cfg = WatchConfig {
        runtime,
        session,
        workspace: ws,
        force_poll: env.get_str(crate::host::WATCH) == Some("poll"),
        quarantine_new: false,
        hidden_globs: Vec::new(),
        catch_up: true,
        placeholders: std::collections::HashSet::default(),
        tree_dirs: Vec::new(),
        resolve_delay: RESOLVE_DELAY,
        tree_delay: Duration::ZERO,
        writable_roots: None,
        host: env.clone(),
        // Not planned here: `claude-sandbox run` follows the `.envrc` files.
        envrc_path_dirs: Vec::new(),
        // No jail to keep them from.
        new_sockets: None,
    };
    let mut watcher = Watcher::new(cfg, &base);
    for (dir, mode) in watcher.modes() {
        match mode {
            Mode::Inotify => eprintln!("claude-sandbox: watching {} (inotify)", dir.display()),
            Mode::Poll(why) => eprintln!(
                "claude-sandbox: watching {} (one-second sweep: {why})",
                dir.display()
            ),
        }
    }
    watcher.run(&stop_r);
    Ok(0)
}

#[cfg(test)]
mod tests;
