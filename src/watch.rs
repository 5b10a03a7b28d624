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

use crate::alerts::{self, Alert, Severity, Store};
use crate::baseline::{self, Baseline, Entry, Kind, RepoBaseline, Sha256};
use crate::entrypoints;
use crate::quarantine;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod gitkeys;
mod gitlinks;
pub(crate) mod shellpath;

/// Environment variable forcing the poll sweep everywhere.
pub const ENV_MODE: &str = "CLAUDE_SANDBOX_WATCH";
/// The sweep interval.
pub const TICK: Duration = Duration::from_secs(1);
/// At most this many watches for discovering new repositories in the workspace tree.
pub const TREE_BUDGET: usize = 8192;
/// Names made by our own in-place neutralisation.
const NEUTRALISED_MARK: &str = ".claude-sandbox-q-";

/// Filesystems whose inotify events cannot be trusted (`statfs` f_type).
const POLL_ONLY_FS: &[(i64, &str)] = &[
    (0x6573_5546, "FUSE (virtiofs, gRPC FUSE, sshfs)"),
    (0x0102_1997, "9p"),
    (0x6969, "NFS"),
    (0xFF53_4D42u32 as i64, "CIFS"),
    (0xFE53_4D42u32 as i64, "SMB2"),
];

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
    /// What the jail can write (`None`: what this user can write, for `watch`): decides which
    /// directories of the human's future shells are watched (see `shellpath`).
    pub writable_roots: Option<Vec<PathBuf>>,
}

/// Environment variable setting `WatchConfig::resolve_delay` for `run`, in milliseconds.
pub const ENV_RESOLVE_DELAY: &str = "CLAUDE_SANDBOX_RESOLVE_DELAY_MS";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    PathDir {
        index: usize,
    },
    /// A missing PATH directory, watched through its nearest existing ancestor (`Watched::path`).
    Pending {
        index: usize,
    },
    Hooks {
        repo: usize,
    },
    GitDir {
        repo: usize,
    },
    Tree,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Inotify,
    Poll(String),
}

#[derive(Debug)]
struct Watched {
    path: PathBuf,
    role: Role,
    mode: Mode,
    wd: Option<WatchDescriptor>,
    state: BTreeMap<String, Entry>,
    /// The entries at the baseline: only these can "change"; anything else is new.
    origin: BTreeMap<String, Entry>,
    /// Names at the baseline whose attributes are not read yet (`baseline::Depth::Names`): each is
    /// read before anything is judged about it (see `resolve`).
    deferred: std::collections::HashSet<String>,
    /// The directory's (dev, ino) when the watch was added.
    dir_id: Option<(u64, u64)>,
    /// Sweep mode: the directory as it was when last listed, if it had settled (see `sweep_dir`).
    listed_at: Option<DirStamp>,
    /// Sweep mode: ticks so far, to spread the baseline's executables over `ROLL` ticks.
    turn: usize,
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
    let ok = unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &mut res) } == 0;
    match ok {
        true => res.tv_sec * 1_000_000_000 + res.tv_nsec,
        false => 10_000_000, // HZ=100, the coarsest Linux tick
    }
}

fn dir_id(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

fn settled_stamp(dir: &Path) -> Option<DirStamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    let ctime_ns = m.ctime() * 1_000_000_000 + m.ctime_nsec();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_nanos() as i64;
    (now - ctime_ns >= SETTLE_NS).then_some(DirStamp {
        dev: m.dev(),
        ino: m.ino(),
        ctime_ns,
    })
}

pub struct Watcher {
    cfg: WatchConfig,
    inotify: Option<Inotify>,
    inotify_error: Option<String>,
    dirs: Vec<Watched>,
    by_wd: HashMap<WatchDescriptor, Vec<usize>>,
    path: Vec<(PathBuf, bool)>,
    /// Every PATH entry's directory, by its position on PATH.
    path_dirs: Vec<PathBuf>,
    repos: Vec<RepoBaseline>,
    known_git_dirs: BTreeSet<PathBuf>,
    tree_watches: usize,
    store: Store,
    /// When the watcher started (ns since the epoch), to tell files made during the session.
    started: i64,
    /// In sweep mode, where the workspace's `.git` and `HEAD` entries were at the last tick.
    last_markers: Vec<PathBuf>,
    /// In sweep mode, each workspace directory's listing as of its last settled stamp.
    tree_cache: HashMap<PathBuf, Listing>,
    /// The events this watcher acted on: (path, when) — for tests and the benchmark.
    pub actions: Vec<(PathBuf, Instant)>,
    /// Baseline executables not hashed yet: (directory index, name). Hashed a few at a time between
    /// events (see `hash_origins`).
    unhashed: Vec<(usize, String)>,
    /// Events may have been missed (queue overflow, tree budget spent, a tree directory swept):
    /// the final sweep must then walk everything.
    lost_events: bool,
    /// The buffer inotify events are read into (64 KiB, kept between reads).
    event_buf: Vec<u8>,
    /// The directories that started with deferred names (PATH directories listed at launch).
    deferring: Vec<usize>,
    /// Any entry whose ctime is at or after this (ns since the epoch) was changed after the watcher
    /// started: its start, less one tick of the coarse clock the kernel stamps ctime with.
    changed_since: i64,
    /// The human's future shells: their search order, the login shell's answer (`shellpath`).
    future: shellpath::Future,
    /// Repositories created during the session: their exec-capable keys are taken out.
    new_repos: BTreeSet<usize>,
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

fn mask_for(role: &Role) -> WatchMask {
    let base =
        WatchMask::ONLYDIR | WatchMask::DONT_FOLLOW | WatchMask::DELETE_SELF | WatchMask::MOVE_SELF;
    match role {
        Role::PathDir { .. } | Role::Hooks { .. } => {
            base | WatchMask::CREATE
                | WatchMask::MOVED_TO
                | WatchMask::MOVED_FROM
                | WatchMask::DELETE
                | WatchMask::CLOSE_WRITE
                | WatchMask::ATTRIB
                | WatchMask::EXCL_UNLINK
        }
        Role::GitDir { .. } => {
            base | WatchMask::CREATE
                | WatchMask::MOVED_TO
                | WatchMask::CLOSE_WRITE
                | WatchMask::ATTRIB
        }
        Role::Pending { .. } | Role::Tree => base | WatchMask::CREATE | WatchMask::MOVED_TO,
    }
}

/// Whether the filesystem of `dir` drops inotify events.
pub fn poll_only_fs(dir: &Path) -> Option<&'static str> {
    let st = rustix::fs::statfs(dir).ok()?;
    let t = st.f_type as i64;
    POLL_ONLY_FS
        .iter()
        .find(|(magic, _)| *magic == t || (*magic as u32 as i64) == (t & 0xffff_ffff))
        .map(|(_, n)| *n)
}

impl Watcher {
    /// Set up every watch and catch up with the baseline. Synchronous: when it returns, the watcher
    /// has seen everything that happened since the baseline.
    pub fn new(cfg: WatchConfig, base: &Baseline) -> Self {
        let (inotify, inotify_error) = if cfg.force_poll {
            (None, Some(format!("{ENV_MODE}=poll")))
        } else {
            match Inotify::init() {
                Ok(i) => (Some(i), None),
                Err(e) => (None, Some(format!("inotify unavailable: {e}"))),
            }
        };
        let cwd = std::env::current_dir().unwrap_or_else(|_| cfg.workspace.clone());
        let path = baseline::path_entries(OsStr::new(&base.path_env), &cwd);
        let store = Store::new(&cfg.runtime);
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        let mut w = Watcher {
            cfg,
            inotify,
            inotify_error,
            dirs: Vec::new(),
            by_wd: HashMap::new(),
            path,
            path_dirs: base.dirs.iter().map(|d| d.path.clone()).collect(),
            repos: Vec::new(),
            known_git_dirs: BTreeSet::new(),
            tree_watches: 0,
            last_markers: Vec::new(),
            tree_cache: HashMap::new(),
            started,
            store,
            actions: Vec::new(),
            unhashed: Vec::new(),
            lost_events: false,
            event_buf: Vec::new(),
            deferring: Vec::new(),
            changed_since: started - coarse_tick_ns(),
            future: Default::default(),
            new_repos: BTreeSet::new(),
        };
        for d in base.dirs.iter().filter(|d| d.writable) {
            if d.exists {
                let idx = w.add(
                    d.path.clone(),
                    Role::PathDir { index: d.index },
                    d.entries.clone(),
                );
                w.dirs[idx].deferred = d.deferred.iter().cloned().collect();
                if !d.deferred.is_empty() {
                    w.deferring.push(idx);
                }
                if matches!(w.dirs[idx].mode, Mode::Poll(_)) {
                    // No events to go by: the sweep compares attributes, so read them now.
                    w.resolve_all(idx, Resolve::Quiet);
                }
            } else {
                w.add_pending(d.index);
            }
        }
        w.watch_future_shells(OsStr::new(&base.path_env));
        for r in &base.repos {
            w.add_repo(r.clone());
        }
        let ws = w.cfg.workspace.clone();
        if w.cfg.tree_dirs.is_empty() {
            w.add_tree(&ws);
        } else {
            for dir in std::mem::take(&mut w.cfg.tree_dirs) {
                if !w.watch_tree_dir(dir) {
                    break;
                }
            }
        }
        w.follow_gitlinks_as(false);
        if w.cfg.catch_up {
            w.rescan_all();
        }
        w.unhashed = w
            .dirs
            .iter()
            .enumerate()
            .filter(|(_, d)| matches!(d.role, Role::PathDir { .. } | Role::Hooks { .. }))
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

    /// Read a deferred name: its attributes become its baseline, or, when it was changed in the
    /// session by then, a baseline that counts as changed whatever comes next.
    fn resolve(&mut self, idx: usize, name: &str, how: Resolve) {
        if !self.dirs[idx].deferred.remove(name) {
            return;
        }
        if let Some(e) = Entry::metadata(&self.dirs[idx].path.join(name)) {
            let changed = match how {
                Resolve::Quiet => false,
                Resolve::Event => true,
                Resolve::Ctime => self.changed_by_ctime(&e),
            };
            self.settle(idx, name, e, changed);
        }
    }

    fn resolve_all(&mut self, idx: usize, how: Resolve) {
        let names: Vec<String> = self.dirs[idx].deferred.iter().cloned().collect();
        for name in names {
            self.resolve(idx, &name, how);
        }
    }

    fn settle(&mut self, idx: usize, name: &str, mut e: Entry, changed: bool) {
        let d = &mut self.dirs[idx];
        if changed {
            // Left out of `state`: the next look at it judges it against this origin.
            e.changed_in_session = true;
            d.origin.insert(name.to_string(), e);
            return;
        }
        if e.kind == Kind::File && e.is_executable() {
            self.unhashed.push((idx, name.to_string()));
        }
        d.state.insert(name.to_string(), e.clone());
        d.origin.insert(name.to_string(), e);
    }

    /// ctime moves on every change (content, mode, owner, links, rename) and userland cannot set
    /// it. A filesystem with whole-second timestamps rounds down: then the second counts.
    fn changed_by_ctime(&self, e: &Entry) -> bool {
        const SEC: i64 = 1_000_000_000;
        e.ctime_ns >= self.changed_since
            || (e.ctime_ns % SEC == 0
                && e.ctime_ns >= self.changed_since - self.changed_since % SEC)
    }

    /// Read up to `n` deferred names in the background, then look at the queue: a name with an
    /// event queued by then may have been read after it changed, so it counts as changed. Exact:
    /// inotify queues inside the system call that makes the change, and the watch predates the
    /// session's command. After a lost event, ctime decides.
    fn resolve_batch(&mut self, n: usize) {
        let dirs = &self.dirs;
        let batch: Vec<(usize, String, Option<Entry>)> = self
            .deferring
            .iter()
            .flat_map(|&idx| {
                dirs[idx]
                    .deferred
                    .iter()
                    .map(move |name| (idx, name.clone()))
            })
            .take(n)
            .map(|(idx, name)| {
                let e = Entry::metadata(&self.dirs[idx].path.join(&name));
                (idx, name, e)
            })
            .collect();
        let (dirty, overflow) = self.read_events();
        let evented: std::collections::HashSet<(usize, &str)> = dirty
            .iter()
            .filter_map(|(idx, name, _)| name.as_deref().map(|n| (*idx, n)))
            .collect();
        let mut settled = Vec::with_capacity(batch.len());
        for (idx, name, e) in batch {
            let Some(e) = e else {
                // Gone since it was listed: nothing to settle, and not to be read again.
                self.dirs[idx].deferred.remove(&name);
                continue;
            };
            let changed = if overflow {
                self.changed_by_ctime(&e)
            } else {
                evented.contains(&(idx, name.as_str()))
            };
            settled.push((idx, name, e, changed));
        }
        drop(evented);
        for (idx, name, e, changed) in settled {
            if self.dirs[idx].deferred.remove(&name) {
                self.settle(idx, &name, e, changed);
            }
        }
        self.dispatch(dirty, overflow);
    }

    /// Whether names are still deferred (see `resolve_batch`).
    fn any_deferred(&self) -> bool {
        self.deferring
            .iter()
            .any(|&idx| !self.dirs[idx].deferred.is_empty())
    }

    /// Hash up to `n` baseline executables. A hash is kept only if the file's attributes are still
    /// the baseline's afterwards: then it is the content the baseline saw (ctime moves on any
    /// write). Otherwise the entry stays unhashed and is judged by its attributes.
    fn hash_origins(&mut self, n: usize) {
        let start = self.unhashed.len().saturating_sub(n);
        for (idx, name) in self.unhashed.split_off(start) {
            let path = self.dirs[idx].path.join(&name);
            let Some(sha) = Sha256::of_path(&path) else {
                continue;
            };
            let Some(after) = Entry::metadata(&path) else {
                continue;
            };
            let dir = &mut self.dirs[idx];
            for map in [&mut dir.origin, &mut dir.state] {
                if let Some(e) = map.get_mut(&name).filter(|e| e.same_metadata(&after)) {
                    e.sha256 = Some(sha);
                }
            }
        }
    }

    /// Which mode each watched directory is in (for doctor and logs).
    pub fn modes(&self) -> Vec<(PathBuf, Mode)> {
        self.dirs
            .iter()
            .filter(|d| d.role != Role::Tree)
            .map(|d| (d.path.clone(), d.mode.clone()))
            .collect()
    }

    fn add(&mut self, path: PathBuf, role: Role, state: BTreeMap<String, Entry>) -> usize {
        let (mode, wd) = self.watch(&path, &role);
        let idx = self.dirs.len();
        // Only a PATH directory's names are ever deferred (see `rescan`).
        let dir_id = matches!(role, Role::PathDir { .. })
            .then(|| dir_id(&path))
            .flatten();
        match (&mode, &wd) {
            (Mode::Inotify, Some(wd)) => {
                self.by_wd.entry(wd.clone()).or_default().push(idx);
                if role != Role::Tree {
                    tracing::info!(dir = %path.display(), "watching with inotify");
                }
            }
            (Mode::Poll(reason), _) => {
                tracing::info!(dir = %path.display(), reason = %reason, "watching by a one-second sweep")
            }
            _ => {}
        }
        let origin = state.clone();
        self.dirs.push(Watched {
            path,
            role,
            mode,
            wd,
            state,
            origin,
            deferred: Default::default(),
            dir_id,
            listed_at: None,
            turn: 0,
        });
        idx
    }

    /// Add an inotify watch, or say why this directory is swept instead.
    fn watch(&mut self, path: &Path, role: &Role) -> (Mode, Option<WatchDescriptor>) {
        if let Some(reason) = &self.inotify_error {
            return (Mode::Poll(reason.clone()), None);
        }
        if let Some(fs) = poll_only_fs(path) {
            return (
                Mode::Poll(format!("{fs} does not report every change")),
                None,
            );
        }
        let Some(ino) = self.inotify.as_mut() else {
            return (Mode::Poll("no inotify".into()), None);
        };
        match ino.watches().add(path, mask_for(role)) {
            Ok(wd) => (Mode::Inotify, Some(wd)),
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(28) => "out of inotify watches (fs.inotify.max_user_watches)".to_string(),
                    Some(24) => "out of inotify instances or file descriptors".to_string(),
                    _ => format!("inotify_add_watch failed: {e}"),
                };
                (Mode::Poll(why), None)
            }
        }
    }

    fn unwatch(&mut self, idx: usize) {
        if let Some(wd) = self.dirs[idx].wd.take() {
            if let Some(list) = self.by_wd.get_mut(&wd) {
                list.retain(|i| *i != idx);
                if list.is_empty() {
                    self.by_wd.remove(&wd);
                    if let Some(ino) = self.inotify.as_mut() {
                        let _ = ino.watches().remove(wd);
                    }
                }
            }
        }
    }

    /// Watch the nearest existing ancestor of a PATH directory that does not exist (yet), then look
    /// again: whatever was created between finding that ancestor and watching it sends no event
    /// (`mkdir -p node_modules/.bin` makes both in microseconds).
    fn add_pending(&mut self, index: usize) {
        let target = self.path_dirs[index].clone();
        if let Some(a) = target.ancestors().skip(1).find(|a| a.is_dir()) {
            let idx = self.add(a.to_path_buf(), Role::Pending { index }, BTreeMap::new());
            self.pending_changed(idx, index);
        }
    }

    fn add_repo(&mut self, r: RepoBaseline) {
        if !self.known_git_dirs.insert(r.git_dir.clone()) {
            return;
        }
        let repo = self.repos.len();
        let (common, hooks_dir, hooks) =
            (r.common_dir.clone(), r.hooks_dir.clone(), r.hooks.clone());
        self.repos.push(r);
        self.add(common, Role::GitDir { repo }, BTreeMap::new());
        if hooks_dir.is_dir() {
            self.add(hooks_dir, Role::Hooks { repo }, hooks);
        }
    }

    /// Watch the workspace tree (not `.git`, not `node_modules`) for new repositories.
    fn add_tree(&mut self, root: &Path) {
        if self.inotify_error.is_some() {
            return; // the sweep walks the tree instead
        }
        let since = self.declared_before();
        let walker = walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| {
                e.file_type().is_dir()
                    && !matches!(e.file_name().to_str(), Some(".git" | "node_modules"))
                    && (e.depth() == 0 || !entrypoints::walk_skips(e.path(), since))
            });
        for e in walker.flatten() {
            if !self.watch_tree_dir(e.path().to_path_buf()) {
                return;
            }
        }
    }

    /// Watch one workspace directory for new repositories; false once the budget is spent.
    fn watch_tree_dir(&mut self, dir: PathBuf) -> bool {
        if self.inotify_error.is_some() {
            return false;
        }
        if self.tree_watches >= TREE_BUDGET {
            tracing::warn!("workspace too large to watch for new repositories live ({TREE_BUDGET} directories); the final sweep checks it");
            self.lost_events = true;
            return false;
        }
        self.tree_watches += 1;
        self.add(dir, Role::Tree, BTreeMap::new());
        true
    }

    /// Register repositories that appeared under `root` (a walk; cheap for a new subtree).
    fn discover_repos(&mut self, root: &Path) {
        for r in entrypoints::discover_workspace(root).repos {
            if self.known_git_dirs.contains(&r.git_dir) {
                continue;
            }
            tracing::info!(git_dir = %r.git_dir.display(), "new repository");
            let mut b = baseline::repo_baseline(&r);
            // Created during the session: nothing in it is trusted, so all of it is checked.
            b.hooks.clear();
            b.exec_keys.clear();
            let repo = self.repos.len();
            self.add_repo(b);
            self.new_repos.insert(repo);
            self.check_keys(repo);
            if let Some(idx) = self
                .dirs
                .iter()
                .position(|d| d.role == (Role::Hooks { repo }))
            {
                self.rescan(idx);
            }
        }
    }

    /// Run until `stop` becomes readable (or its write end is closed), then do the final sweep.
    pub fn run(&mut self, stop: OwnedFd) {
        let started = Instant::now();
        let mut last_sweep = started;
        let resolve_from = Instant::now() + self.cfg.resolve_delay;
        let hash_from = Instant::now() + HASH_DELAY;
        loop {
            self.take_login_path(false, started);
            let mut wait = TICK.saturating_sub(last_sweep.elapsed());
            if let Some(login) = self.login_wait(started) {
                wait = wait.min(login);
            }
            if self.any_deferred() {
                wait = wait.min(resolve_from.saturating_duration_since(Instant::now()));
            }
            if !self.unhashed.is_empty() {
                wait = wait.min(hash_from.saturating_duration_since(Instant::now()));
            }
            let (ino_ready, stop_ready) = self.wait(&stop, wait);
            if stop_ready {
                break;
            }
            if ino_ready {
                self.drain();
            }
            if last_sweep.elapsed() >= TICK {
                self.sweep_polled();
                last_sweep = Instant::now();
            }
            if self.any_deferred() && Instant::now() >= resolve_from {
                self.resolve_batch(RESOLVE_BATCH);
            } else if Instant::now() >= hash_from {
                self.hash_origins(HASH_BATCH);
            }
        }
        self.final_sweep();
    }

    fn wait(&self, stop: &OwnedFd, timeout: Duration) -> (bool, bool) {
        use rustix::event::{PollFd, PollFlags};
        let ts = rustix::event::Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: timeout.subsec_nanos() as i64,
        };
        match &self.inotify {
            Some(ino) => {
                let fd = ino.as_fd();
                let mut fds = [
                    PollFd::new(&fd, PollFlags::IN),
                    PollFd::new(stop, PollFlags::IN),
                ];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
            }
            None => {
                let mut fds = [PollFd::new(stop, PollFlags::IN)];
                let _ = rustix::event::poll(&mut fds, Some(&ts));
                (false, !fds[0].revents().is_empty())
            }
        }
    }

    /// Read every queued event and act on it.
    fn drain(&mut self) {
        let (dirty, overflow) = self.read_events();
        self.dispatch(dirty, overflow);
    }

    /// Read every queued event (one read returns one buffer's worth: loop until it would block):
    /// (directory index, name, mask) for each, and whether the queue overflowed.
    #[allow(clippy::type_complexity)]
    fn read_events(&mut self) -> (Vec<(usize, Option<String>, EventMask)>, bool) {
        let mut dirty: Vec<(usize, Option<String>, EventMask)> = Vec::new();
        let mut overflow = false;
        let mut buf = std::mem::take(&mut self.event_buf);
        if buf.is_empty() {
            buf = vec![0u8; 64 * 1024];
        }
        while let Some(ino) = self.inotify.as_mut() {
            let events = match ino.read_events(&mut buf) {
                Ok(ev) => ev,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!("reading inotify events: {e}; rescanning");
                    overflow = true;
                    break;
                }
            };
            let mut any = false;
            for ev in events {
                any = true;
                if ev.mask.contains(EventMask::Q_OVERFLOW) {
                    overflow = true;
                    continue;
                }
                let name = ev.name.and_then(|n| n.to_str()).map(String::from);
                for idx in self.by_wd.get(&ev.wd).cloned().unwrap_or_default() {
                    dirty.push((idx, name.clone(), ev.mask));
                }
            }
            if !any {
                break;
            }
        }
        self.event_buf = buf;
        (dirty, overflow)
    }

    fn dispatch(&mut self, dirty: Vec<(usize, Option<String>, EventMask)>, overflow: bool) {
        if overflow {
            self.lost_events = true;
            tracing::warn!("inotify queue overflowed: rescanning everything");
            self.rescan_all();
            self.walk_tree_for_repos();
        }
        for (idx, name, mask) in dirty {
            self.handle(idx, name, mask);
        }
    }

    fn handle(&mut self, idx: usize, name: Option<String>, mask: EventMask) {
        if mask.intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED) {
            if self.dirs[idx].role != Role::Tree {
                self.root_changed(idx);
            }
            return;
        }
        match self.dirs[idx].role.clone() {
            Role::PathDir { .. } | Role::Hooks { .. } => {
                if let Some(n) = name {
                    self.resolve(idx, &n, Resolve::Event);
                    self.reconcile(idx, &n);
                }
            }
            Role::Pending { index } => self.pending_changed(idx, index),
            Role::GitDir { repo } => match name.as_deref() {
                Some("config" | "config.worktree") => self.check_keys(repo),
                Some("index") => self.follow_gitlinks(),
                Some("hooks") => self.hooks_appeared(repo),
                _ => {}
            },
            Role::Tree => {
                let dir = self.dirs[idx].path.clone();
                if name
                    .as_deref()
                    .is_some_and(|n| self.cfg.placeholders.contains(&dir.join(n)))
                {
                    return; // the launcher's own, made while the watcher starts; sealed read-only
                }
                if let Some(n) = name.as_deref() {
                    self.check_hidden_glob(&dir.join(n));
                }
                match name.as_deref() {
                    Some(".git") | Some("HEAD") => self.discover_repos(&dir),
                    Some("node_modules") => {}
                    Some(n) if mask.contains(EventMask::ISDIR) => {
                        let sub = dir.join(n);
                        // A cache or a virtual environment (its tag may come after the directory:
                        // cargo makes `target/` first) is not walked, as at launch
                        // (entrypoints::walk_skips: not for a tag made during the session).
                        if (dir != self.cfg.workspace
                            && entrypoints::walk_skips(&dir, self.declared_before()))
                            || entrypoints::walk_skips(&sub, self.declared_before())
                        {
                            return;
                        }
                        self.add_tree(&sub);
                        self.discover_repos(&sub);
                    }
                    _ => {}
                }
            }
        }
    }

    /// A watched directory was moved or deleted: re-resolve it and rescan.
    fn root_changed(&mut self, idx: usize) {
        self.unwatch(idx);
        // Not the directory whose names were listed: whatever is there now under those names is
        // not the baseline's.
        self.resolve_all(idx, Resolve::Event);
        let (path, role) = (self.dirs[idx].path.clone(), self.dirs[idx].role.clone());
        tracing::warn!(dir = %path.display(), "watched directory replaced or removed; re-watching");
        if let Role::PathDir { index } = role {
            if !path.is_dir() {
                self.dirs[idx].state.clear();
                self.dirs[idx].role = Role::Tree; // retired
                self.add_pending(index);
                return;
            }
        }
        if path.is_dir() {
            let (mode, wd) = self.watch(&path, &role);
            if let Some(wd) = &wd {
                self.by_wd.entry(wd.clone()).or_default().push(idx);
            }
            self.dirs[idx].mode = mode;
            self.dirs[idx].wd = wd;
            self.rescan(idx);
        }
    }

    fn pending_changed(&mut self, idx: usize, index: usize) {
        if self.dirs[idx].role != (Role::Pending { index }) {
            return;
        }
        let target = self.path_dirs[index].clone();
        if target.is_dir() {
            tracing::info!(dir = %target.display(), "PATH directory appeared");
            self.unwatch(idx);
            self.dirs[idx].role = Role::Tree; // retired
            let new = self.add(target, Role::PathDir { index }, BTreeMap::new());
            self.rescan(new);
        } else {
            let deeper = target
                .ancestors()
                .skip(1)
                .find(|a| a.is_dir())
                .map(Path::to_path_buf);
            if deeper.as_ref() != Some(&self.dirs[idx].path) {
                self.unwatch(idx);
                self.dirs[idx].role = Role::Tree;
                self.add_pending(index);
            }
        }
    }

    fn hooks_appeared(&mut self, repo: usize) {
        let dir = self.repos[repo].hooks_dir.clone();
        if dir.is_dir() && !self.dirs.iter().any(|d| d.role == (Role::Hooks { repo })) {
            let idx = self.add(dir, Role::Hooks { repo }, BTreeMap::new());
            self.rescan(idx);
        }
    }

    /// Compare every entry of one directory with its known state.
    fn rescan(&mut self, idx: usize) {
        match self.dirs[idx].role.clone() {
            Role::PathDir { .. } | Role::Hooks { .. } => {
                if !self.dirs[idx].deferred.is_empty()
                    && dir_id(&self.dirs[idx].path) != self.dirs[idx].dir_id
                {
                    // Replaced, its events perhaps lost: see `root_changed`.
                    self.resolve_all(idx, Resolve::Event);
                }
                let current = baseline::list_names(&self.dirs[idx].path);
                for n in &current {
                    self.reconcile(idx, n);
                }
                // Names that went away: forget them (nothing to judge in an absence).
                let listed: std::collections::HashSet<&String> = current.iter().collect();
                self.dirs[idx].state.retain(|k, _| listed.contains(k));
            }
            Role::Pending { index } => self.pending_changed(idx, index),
            Role::GitDir { repo } => {
                self.check_keys(repo);
                self.hooks_appeared(repo);
            }
            Role::Tree => {}
        }
    }

    fn rescan_all(&mut self) {
        // Directories added on the way (a PATH directory that appeared) are rescanned too.
        let mut idx = 0;
        while idx < self.dirs.len() {
            self.rescan(idx);
            idx += 1;
        }
    }

    /// Look once more at every PATH directory still awaited (the final sweep's cheap check).
    fn check_pending(&mut self) {
        let mut idx = 0;
        while idx < self.dirs.len() {
            if let Role::Pending { index } = self.dirs[idx].role {
                self.pending_changed(idx, index);
            }
            idx += 1;
        }
    }

    fn sweep_polled(&mut self) {
        for idx in 0..self.dirs.len() {
            if matches!(self.dirs[idx].mode, Mode::Poll(_)) && self.dirs[idx].role != Role::Tree {
                self.sweep_dir(idx);
            }
        }
        if self.inotify_error.is_some() {
            // A cheap listing first (names only, no stat): the full discovery walk runs only when a
            // `.git` or `HEAD` appeared, moved or went away.
            let before = self.declared_before();
            let markers = git_markers(&self.cfg.workspace, &mut self.tree_cache, before);
            if markers != self.last_markers {
                self.last_markers = markers;
                self.walk_tree_for_repos();
            }
        }
    }

    /// One tick for one swept directory. Names are listed again only when the directory changed
    /// (or has not settled); otherwise its entries are re-read: every one that is not an
    /// executable (it could become one), and a `ROLL`th of the baseline's executables in turn.
    /// Executables new this session were judged when they appeared and are not re-read.
    fn sweep_dir(&mut self, idx: usize) {
        if !matches!(
            self.dirs[idx].role,
            Role::PathDir { .. } | Role::Hooks { .. }
        ) {
            self.rescan(idx);
            return;
        }
        if !self.dirs[idx].deferred.is_empty() {
            // Swept from now on (re-watching failed): the sweep needs every attribute.
            self.resolve_all(idx, Resolve::Ctime);
        }
        let stamp = settled_stamp(&self.dirs[idx].path);
        let d = &mut self.dirs[idx];
        d.turn += 1;
        if stamp.is_none() || stamp != d.listed_at {
            d.listed_at = stamp;
            self.rescan(idx);
            return;
        }
        let turn = d.turn % ROLL;
        // One open directory, one `fstatat` per entry, compared in place: no path, no allocation
        // unless something differs (then the ordinary reconcile judges it).
        let Ok(dirfd) = rustix::fs::open(
            &d.path,
            rustix::fs::OFlags::RDONLY
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        ) else {
            self.rescan(idx);
            return;
        };
        // Every tick: what could become an executable. In turn: the baseline's executables.
        let could_become = d.state.iter().filter(|(_, e)| !e.is_executable());
        let in_turn = d
            .origin
            .iter()
            .filter(|(_, o)| o.is_executable())
            .enumerate()
            .filter(|(i, _)| i % ROLL == turn)
            .filter_map(|(_, (name, _))| d.state.get_key_value(name));
        let differs: Vec<String> = could_become
            .chain(in_turn)
            .filter(|(name, e)| !unchanged_at(&dirfd, name, e))
            .map(|(name, _)| name.clone())
            .collect();
        for name in differs {
            self.reconcile(idx, &name);
        }
    }

    fn walk_tree_for_repos(&mut self) {
        let ws = self.cfg.workspace.clone();
        self.discover_repos(&ws);
        self.discover_in_fresh_caches();
        self.follow_gitlinks();
    }

    /// The session is over. Every process of the jail is gone, so every event it caused is queued
    /// (inotify queues synchronously, inside the system call): when no event can have been lost,
    /// reading the queue, sweeping the swept directories and re-reading the repositories' configs
    /// is complete. Otherwise: everything once more, repositories found afresh.
    pub fn final_sweep(&mut self) {
        self.take_login_path(true, Instant::now());
        if self.is_live_complete() {
            self.drain();
            if !self.lost_events {
                self.sweep_polled();
                self.check_pending();
                self.follow_gitlinks();
                for repo in 0..self.repos.len() {
                    self.check_keys(repo);
                }
                // A file made in a directory that was new and not watched yet is seen only here.
                self.check_new_secrets();
                return;
            }
        }
        self.rescan_all();
        self.check_new_secrets();
        self.walk_tree_for_repos();
        for repo in 0..self.repos.len() {
            self.check_keys(repo);
        }
    }

    /// Secrets matching a configured hidden glob that appeared during the session (resolved at
    /// launch, so visible in the jail). Walks only the globs' roots; nothing when none is set.
    fn check_new_secrets(&mut self) {
        let started = self.started;
        for path in crate::secrets::glob_matches(&self.cfg.hidden_globs) {
            if Entry::metadata(&path).is_some_and(|e| e.ctime_ns >= started) {
                self.check_hidden_glob(&path);
            }
        }
    }

    /// Remove every watch (the session is over); the instance itself is closed by the caller.
    fn release_watches(&mut self) {
        let Some(ino) = self.inotify.as_mut() else {
            return;
        };
        for wd in std::mem::take(&mut self.by_wd).into_keys() {
            let _ = ino.watches().remove(wd);
        }
        for d in &mut self.dirs {
            d.wd = None;
        }
    }

    /// Whether inotify has seen everything so far: no overflow, and every tree directory watched.
    fn is_live_complete(&self) -> bool {
        self.inotify.is_some()
            && self.inotify_error.is_none()
            && !self.lost_events
            && !self
                .dirs
                .iter()
                .any(|d| d.role == Role::Tree && matches!(d.mode, Mode::Poll(_)))
    }

    /// One entry of one directory: compare, decide, act.
    fn reconcile(&mut self, idx: usize, name: &str) {
        if name.contains(NEUTRALISED_MARK) {
            return;
        }
        // Reached without an event for it (a rescan): whether it changed is the ctime's to say.
        self.resolve(idx, name, Resolve::Ctime);
        let path = self.dirs[idx].path.join(name);
        let meta = Entry::metadata(&path);
        // The sweep's common case: nothing changed. Same attributes (ctime included) means the
        // same content: no hash, no copy.
        if let (Some(m), Some(prev)) = (&meta, self.dirs[idx].state.get(name)) {
            if prev.same_metadata(m) {
                return;
            }
        }
        let role = self.dirs[idx].role.clone();
        let current = meta.map(|mut c| {
            if c.kind == Kind::File && c.is_executable() {
                c.sha256 = match self.dirs[idx].state.get(name) {
                    Some(prev) if prev.same_metadata(&c) && prev.sha256.is_some() => prev.sha256,
                    _ => Sha256::of_path(&path),
                };
            }
            c
        });
        let previous = match &current {
            Some(c) => self.dirs[idx].state.insert(name.to_string(), c.clone()),
            None => self.dirs[idx].state.remove(name),
        };
        let Some(cur) = current else { return };
        if !cur.is_executable() {
            return;
        }
        let newly = previous.as_ref().is_none_or(|p| !p.is_executable());
        let changed = !newly && previous.as_ref().is_some_and(|p| p.exec_changed(&cur));
        if !newly && !changed {
            return;
        }
        let link = describe_links(&cur);
        match role {
            Role::PathDir { index } => self.judge_path_entry(idx, index, name, &cur, newly, &link),
            Role::Hooks { repo } if !name.ends_with(".sample") => {
                let detail = format!(
                    "git hook `{name}` of {}{link}",
                    self.repos[repo].git_dir.display()
                );
                self.quarantine(idx, name, Severity::Critical, "git-hook", detail, &cur);
            }
            _ => {}
        }
    }

    /// A new or changed executable in a writable PATH directory.
    fn judge_path_entry(
        &mut self,
        idx: usize,
        index: usize,
        name: &str,
        cur: &Entry,
        newly: bool,
        link: &str,
    ) {
        let origin = self.dirs[idx]
            .origin
            .get(name)
            .filter(|o| o.is_executable())
            .cloned();
        if let Some(o) = origin {
            // An executable that was there at the baseline: any difference is tampering.
            if o.exec_changed(cur) {
                let detail =
                    format!("an executable on PATH changed since the session started{link}");
                self.quarantine(idx, name, Severity::High, "path-changed", detail, cur);
            }
            return;
        }
        if !newly {
            // New this session and still being written: it was judged when it appeared (one that
            // shadows a command is gone already; a harmless one was reported).
            return;
        }
        let shadows = baseline::shadowed(&self.path, index, name)
            .or_else(|| shellpath::shadowed_in(&self.future.order, &self.dirs[idx].path, name));
        if let Some(target) = shadows {
            let detail = format!("shadows {}{link}", target.display());
            self.quarantine(idx, name, Severity::Critical, "path-shadow", detail, cur);
        } else if self.cfg.quarantine_new {
            let detail = format!("new executable on PATH{link}");
            self.quarantine(idx, name, Severity::Info, "path-new", detail, cur);
        } else {
            let path = self.dirs[idx].path.join(name);
            let detail = format!("new executable on PATH, shadows nothing{link}");
            self.alert(
                Severity::Info,
                "path-new",
                &path,
                detail,
                "alerted",
                None,
                cur,
            );
        }
    }

    fn quarantine(
        &mut self,
        idx: usize,
        name: &str,
        sev: Severity,
        kind: &str,
        detail: String,
        entry: &Entry,
    ) {
        let dir = self.dirs[idx].path.clone();
        let path = dir.join(name);
        match quarantine::quarantine(&self.cfg.runtime, &dir, OsStr::new(name), &detail) {
            Ok(Some(rec)) => {
                self.dirs[idx].state.remove(name);
                let action = if rec.method == "moved" {
                    "quarantined"
                } else {
                    "neutralised"
                };
                let detail = if rec.nlink > 1 {
                    format!("{detail}; its other hard links keep their mode")
                } else {
                    detail
                };
                self.alert(
                    sev,
                    kind,
                    &path,
                    detail,
                    action,
                    Some(rec.id.clone()),
                    entry,
                );
                self.actions.push((path, Instant::now()));
            }
            Ok(None) => {
                self.dirs[idx].state.remove(name);
            }
            Err(e) => {
                let detail = format!("{detail}; quarantine FAILED: {e}");
                self.alert(
                    Severity::Critical,
                    kind,
                    &path,
                    detail,
                    "failed",
                    None,
                    entry,
                );
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn alert(
        &mut self,
        sev: Severity,
        kind: &str,
        path: &Path,
        detail: String,
        action: &str,
        qid: Option<String>,
        e: &Entry,
    ) {
        let alert = Alert {
            id: alerts::new_id("a"),
            time: alerts::now_rfc3339(),
            severity: sev,
            kind: kind.into(),
            path: path.to_path_buf(),
            detail,
            action: action.into(),
            quarantine_id: qid,
            sha256: e.sha256.map(|s| s.hex()),
            session: self.cfg.session.clone(),
            fingerprint: format!(
                "{kind}:{}:{}:{}:{}",
                path.display(),
                e.dev,
                e.ino,
                e.ctime_ns
            ),
        };
        self.record(alert);
    }

    fn record(&mut self, alert: Alert) {
        match self.store.add(&alert) {
            Ok(true) => tracing::warn!(
                "{}: {} {}",
                alert.severity.as_str(),
                alert.path.display(),
                alert.detail
            ),
            Ok(false) => {}
            Err(err) => {
                tracing::error!("cannot record an alert for {}: {err}", alert.path.display())
            }
        }
    }

    /// A new file matching a `hidden` glob: visible to the agent until the next session.
    fn check_hidden_glob(&mut self, path: &Path) {
        let text = path.to_string_lossy();
        let Some(glob) = self
            .cfg
            .hidden_globs
            .iter()
            .find(|g| crate::secrets::glob_match(g, &text))
            .cloned()
        else {
            return;
        };
        let Some(e) = Entry::metadata(path) else {
            return;
        };
        let detail = format!("matches hidden = \"{glob}\" but appeared during the session: the jail can read it until the next session");
        self.alert(
            Severity::High,
            "secret-visible",
            path,
            detail,
            "alerted",
            None,
            &e,
        );
    }
}

/// Whether `name` in the open directory still has the attributes of `e` (an `fstatat`, no
/// allocation). A symlink's target is not compared: replacing a symlink makes a new inode.
// The `stat` field types differ between architectures (nlink is 32 bits on aarch64): cast them all.
#[allow(clippy::unnecessary_cast)]
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
/// its subdirectories and markers come from `cache` (a new `.git` moves its parent's ctime).
fn git_markers(root: &Path, cache: &mut HashMap<PathBuf, Listing>, before: i64) -> Vec<PathBuf> {
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
        let (mut subdirs, mut markers, mut tagged) = (Vec::new(), Vec::new(), false);
        for e in rd.flatten() {
            let name = e.file_name();
            match name.as_bytes() {
                b".git" | b"HEAD" => markers.push(e.path()),
                b"node_modules" => {}
                b"CACHEDIR.TAG" | b"pyvenv.cfg" => tagged = true,
                _ if e.file_type().is_ok_and(|t| t.is_dir()) => subdirs.push(e.path()),
                _ => {}
            }
        }
        // A cache or a virtual environment is not walked (entrypoints::declares_generated).
        if tagged && dir != root && entrypoints::walk_skips(&dir, before) {
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

fn describe_links(e: &Entry) -> String {
    match (&e.link_target, e.nlink) {
        (Some(t), _) => format!(" (symlink to {})", t.display()),
        (None, n) if n > 1 => format!(" (hard link, {n} names)"),
        _ => String::new(),
    }
}

/// A watcher thread for `run`: set up synchronously, then run until stopped.
pub struct Running {
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<Option<Inotify>>>,
}

/// The inotify instance of a finished watcher, its watches already removed. Closing an instance
/// waits until the kernel has freed its watches: one SRCU grace period, 0.1 ms when it is expedited,
/// 10-20 ms when it has to follow another one (freeing many watches at once queues several).
/// Removing the watches at the end of the final sweep and closing after the clean-up gave the slow
/// case in 41 of 100 launches here, closing with the watches in place in 75 of 100
/// (docs/performance.md, "The end of a session").
pub struct Closing(#[allow(dead_code)] Option<Inotify>);

impl Running {
    pub fn start(cfg: WatchConfig, base: &Baseline) -> std::io::Result<Running> {
        let (stop_r, stop_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let mut watcher = Watcher::new(cfg, base);
        let thread = std::thread::Builder::new()
            .name("watcher".into())
            .spawn(move || {
                watcher.run(stop_r);
                watcher.release_watches();
                watcher.inotify.take()
            })?;
        Ok(Running {
            stop: Some(stop_w),
            thread: Some(thread),
        })
    }

    /// Stop and wait for the final sweep. Drop what it returns as late as possible.
    pub fn finish(mut self) -> Closing {
        self.stop.take(); // closing the write end makes the read end readable (POLLHUP)
        Closing(self.thread.take().and_then(|t| t.join().ok().flatten()))
    }
}

/// `claude-sandbox watch`: the watcher in the foreground, without a jail, until SIGINT/SIGTERM.
/// Writable PATH directories are those this user can write.
pub fn foreground(workspace: Option<PathBuf>) -> crate::Result<i32> {
    let cwd = std::env::current_dir()
        .map_err(|e| crate::Error::io("reading the current directory", e))?;
    let ws = workspace.unwrap_or_else(|| crate::jail::launch::default_workspace(&cwd));
    let ws = std::fs::canonicalize(&ws)
        .map_err(|e| crate::Error::Usage(format!("{}: {e}", ws.display())))?;
    let runtime = crate::runtime::ensure(&crate::runtime::locate())?;
    let session = format!("watch-{}", std::process::id());
    let path_env = std::env::var_os("PATH").unwrap_or_default();
    let user_can_write = |p: &Path| {
        let existing = p.ancestors().find(|a| a.exists()).unwrap_or(Path::new("/"));
        rustix::fs::access(existing, rustix::fs::Access::WRITE_OK).is_ok()
    };
    let repos = entrypoints::discover_workspace(&ws).repos;
    let base = baseline::take(
        &session,
        &path_env,
        &cwd,
        &user_can_write,
        &repos,
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
        force_poll: std::env::var(ENV_MODE).is_ok_and(|v| v == "poll"),
        quarantine_new: false,
        hidden_globs: Vec::new(),
        catch_up: true,
        placeholders: Default::default(),
        tree_dirs: Vec::new(),
        resolve_delay: RESOLVE_DELAY,
        writable_roots: None,
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
    watcher.run(stop_r);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A `run` watcher's configuration for a workspace watched as a tree.
    fn config(ws: &Path, runtime: PathBuf) -> WatchConfig {
        WatchConfig {
            runtime,
            session: "s".into(),
            workspace: ws.to_path_buf(),
            force_poll: false,
            quarantine_new: false,
            hidden_globs: Vec::new(),
            tree_dirs: vec![ws.to_path_buf()],
            catch_up: false,
            placeholders: Default::default(),
            resolve_delay: RESOLVE_DELAY,
            writable_roots: Some(vec![ws.to_path_buf()]),
        }
    }

    /// `mkdir -p node_modules/.bin && cp … .bin/ls` can outrun the watcher: `.bin` is made after the
    /// watcher saw it missing and before it watches `node_modules`, so no event ever names it. The
    /// watcher must look again once the watch is in place. (Found as a rare miss of the battery's
    /// `path-node-modules-bin` and of `a_hard_link_and_a_path_dir_created_during_the_session`.)
    #[test]
    fn a_path_directory_made_before_its_parent_is_watched_is_still_scanned() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let runtime = t.path().join("rt");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        let late = ws.join("node_modules/.bin");
        let path_env = std::env::join_paths([late.clone(), PathBuf::from("/usr/bin")]).unwrap();
        let in_ws = |p: &Path| p.starts_with(&ws);
        let base = baseline::take(
            "s",
            &path_env,
            &ws,
            &in_ws,
            &[],
            baseline::Depth::Attributes,
        );
        let index = base.dirs.iter().find(|d| d.path == late).unwrap().index;
        let mut w = Watcher::new(config(&ws, runtime), &base);
        assert!(w.inotify.is_some(), "this test needs inotify");
        // The whole chain exists before the watch moves down to `node_modules`.
        std::fs::create_dir_all(&late).unwrap();
        let plant = late.join("ls");
        std::fs::write(&plant, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plant, std::fs::Permissions::from_mode(0o755)).unwrap();
        w.add_pending(index);
        assert!(
            !plant.exists(),
            "a plant in a PATH directory that appeared unseen was not quarantined"
        );
    }

    /// A `CACHEDIR.TAG` or `pyvenv.cfg` made during the session is not honoured (the agent can tag any
    /// directory it makes): repositories inside are found and watched like any other (issue 16).
    #[test]
    fn a_cache_tagged_during_the_session_is_walked() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let runtime = t.path().join("rt");
        std::fs::create_dir(&ws).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        let path_env = std::env::join_paths([PathBuf::from("/usr/bin")]).unwrap();
        let base = baseline::take("s", &path_env, &ws, &|_| false, &[], baseline::Depth::Names);
        let mut w = Watcher::new(config(&ws, runtime), &base);
        assert!(w.inotify.is_some(), "this test needs inotify");
        let repo = |dir: &Path| {
            for sub in ["hooks", "objects", "refs"] {
                std::fs::create_dir_all(dir.join(".git").join(sub)).unwrap();
            }
            std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        };
        std::fs::create_dir(ws.join("target")).unwrap();
        std::fs::write(
            ws.join("target/CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        )
        .unwrap();
        repo(&ws.join("target/debug/build/dep"));
        std::fs::create_dir(ws.join(".venv")).unwrap();
        std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        repo(&ws.join(".venv/src/editable"));
        repo(&ws.join("src/r"));
        w.drain();
        let git_dirs: Vec<&Path> = w.repos.iter().map(|r| r.git_dir.as_path()).collect();
        let canonical = |p: PathBuf| std::fs::canonicalize(p).unwrap();
        assert!(
            git_dirs.contains(&canonical(ws.join("src/r/.git")).as_path()),
            "a repository made beside the cache was missed: {git_dirs:?}"
        );
        for hidden in ["target/debug/build/dep/.git", ".venv/src/editable/.git"] {
            assert!(
                git_dirs.contains(&canonical(ws.join(hidden)).as_path()),
                "{hidden}: a repository in a directory tagged during the session was missed: {git_dirs:?}"
            );
        }
    }

    /// Sweep mode looks for `.git`/`HEAD` markers the same way: not inside a tagged cache.
    #[test]
    fn the_sweep_does_not_look_for_repositories_inside_a_cache() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path();
        std::fs::create_dir_all(ws.join("target/debug/dep/.git")).unwrap();
        std::fs::write(
            ws.join("target/CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        )
        .unwrap();
        std::fs::create_dir_all(ws.join(".venv/src/editable/.git")).unwrap();
        std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::create_dir_all(ws.join("src/r/.git")).unwrap();
        let markers = git_markers(ws, &mut HashMap::new(), i64::MAX);
        assert_eq!(markers, vec![ws.join("src/r/.git")]);
    }

    /// At launch a PATH directory's names are only listed; their attributes are read a little later
    /// (`resolve_batch`). One changed in between has an event queued by then and counts as changed
    /// (here a shadowing `ls`: quarantined); one untouched becomes baseline; one gone is dropped, so
    /// that the reading ends.
    #[test]
    fn names_read_after_launch_count_a_change_made_in_between() {
        let t = tempfile::tempdir().unwrap();
        let ws = t.path().join("ws");
        let bin = ws.join("bin");
        let runtime = t.path().join("rt");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir(&runtime).unwrap();
        for name in ["ls", "cat", "gone"] {
            let p = bin.join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path_env = std::env::join_paths([bin.clone(), PathBuf::from("/usr/bin")]).unwrap();
        let in_ws = |p: &Path| p.starts_with(&ws);
        let base = baseline::take("s", &path_env, &ws, &in_ws, &[], baseline::Depth::Names);
        // Gone before the watch: no event will ever name it.
        std::fs::remove_file(bin.join("gone")).unwrap();
        let mut w = Watcher::new(config(&ws, runtime), &base);
        assert!(w.inotify.is_some(), "this test needs inotify");
        assert!(w.any_deferred(), "Depth::Names defers every name");
        std::fs::write(bin.join("ls"), "#!/bin/sh\necho planted\n").unwrap();
        w.resolve_batch(RESOLVE_BATCH);
        assert!(
            !w.any_deferred(),
            "a name that went away is still waiting to be read"
        );
        assert!(
            !bin.join("ls").exists(),
            "a shadowing executable changed before it was read was not quarantined"
        );
        assert!(
            bin.join("cat").exists(),
            "an untouched executable was quarantined"
        );
        let idx = w.dirs.iter().position(|d| d.path == bin).unwrap();
        assert!(
            w.dirs[idx].state.contains_key("cat"),
            "an untouched name did not become baseline"
        );
    }
}
