//! The watch table: the inotify instance and every watched directory, each with its role, its mode
//! (inotify or the sweep), its known state and its baseline. Indexes are typed (`DirId`, `RepoId`,
//! `PathPos`) so that one kind of index cannot be used for another.
//!
//! Guards against a directory silently dropping out of the watch: a watch that cannot be added says
//! why and the directory is swept instead; a directory replaced or given up is `Retired`, never
//! left under a role it no longer plays.

use crate::baseline::Entry;
use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A watched directory: its place in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct DirId(usize);

/// A repository: its place in the watcher's list of repositories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RepoId(pub(super) usize);

/// A PATH directory: its position on PATH (the launcher's entries first, then the directories of
/// the human's future shells).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PathPos(pub(super) usize);

/// What a watched directory is watched for. Adding a kind of directory whose entries are judged
/// means a variant here, in `judges_entries`, and its arm in `judge::judge`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Role {
    /// A writable PATH directory: new or changed executables.
    PathDir { pos: PathPos },
    /// A missing PATH directory, watched through its nearest existing ancestor (`Watched::path`).
    Pending { pos: PathPos },
    /// A repository's hooks directory.
    Hooks { repo: RepoId },
    /// A repository's (common) git directory: its config, index and hooks directory.
    GitDir { repo: RepoId },
    /// A workspace directory, watched for new repositories.
    Tree,
    /// No longer watched (replaced, removed, or a pending directory that moved on): its events and
    /// sweeps mean nothing.
    Retired,
}

impl Role {
    /// Whether each entry of the directory is judged (`judge::judge`): re-read on its events,
    /// listed on a rescan, swept by attributes, its executables hashed in the background.
    pub(crate) fn judges_entries(&self) -> bool {
        match self {
            Role::PathDir { .. } | Role::Hooks { .. } => true,
            Role::Pending { .. } | Role::GitDir { .. } | Role::Tree | Role::Retired => false,
        }
    }

    /// Whether the directory is watched for itself (reported by `Watcher::modes`, swept on its own
    /// in sweep mode), not as part of the workspace tree and not retired.
    pub(crate) fn is_own(&self) -> bool {
        !matches!(self, Role::Tree | Role::Retired)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Inotify,
    Poll(String),
}

#[derive(Debug)]
pub(crate) struct Watched {
    pub(super) path: PathBuf,
    pub(super) role: Role,
    pub(super) mode: Mode,
    wd: Option<WatchDescriptor>,
    pub(super) state: BTreeMap<String, Entry>,
    /// The entries at the baseline: only these can "change"; anything else is new.
    pub(super) origin: BTreeMap<String, Entry>,
    /// Names at the baseline whose attributes are not read yet (`baseline::Depth::Names`): each is
    /// read before anything is judged about it (see `resolve`).
    pub(super) deferred: HashSet<String>,
    /// The directory's (dev, ino) when the watch was added.
    pub(super) dir_id: Option<(u64, u64)>,
    /// Sweep mode: the directory as it was when last listed, if it had settled (see `sweep_dir`).
    pub(super) listed_at: Option<super::DirStamp>,
    /// Sweep mode: ticks so far, to spread the baseline's executables over `ROLL` ticks.
    pub(super) turn: usize,
    /// Watched through the lazy instance (`Table::lazy`).
    pub(super) lazy: bool,
}

/// Filesystems whose inotify events cannot be trusted (`statfs` `f_type`).
const POLL_ONLY_FS: &[(i64, &str)] = &[
    (0x6573_5546, "FUSE (virtiofs, gRPC FUSE, sshfs)"),
    (0x0102_1997, "9p"),
    (0x6969, "NFS"),
    (0xFF53_4D42u32 as i64, "CIFS"),
    (0xFE53_4D42u32 as i64, "SMB2"),
];

/// Whether the filesystem of `dir` drops inotify events.
#[must_use]
pub fn poll_only_fs(dir: &Path) -> Option<&'static str> {
    let st = rustix::fs::statfs(dir).ok()?;
    let t = st.f_type as i64;
    POLL_ONLY_FS
        .iter()
        .find(|(magic, _)| *magic == t || (*magic & 0xffff_ffff) == (t & 0xffff_ffff))
        .map(|(_, n)| *n)
}

fn mask_for(role: &Role) -> WatchMask {
    let base =
        WatchMask::ONLYDIR | WatchMask::DONT_FOLLOW | WatchMask::DELETE_SELF | WatchMask::MOVE_SELF;
    match role {
        r if r.judges_entries() => {
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
        _ => base | WatchMask::CREATE | WatchMask::MOVED_TO,
    }
}

pub(super) fn dir_id(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| (m.dev(), m.ino()))
}

/// Why a watch could not be added, as the human can act on it.
fn watch_failure(e: &std::io::Error) -> String {
    match rustix::io::Errno::from_io_error(e) {
        Some(rustix::io::Errno::NOSPC) => {
            "out of inotify watches (raise fs.inotify.max_user_watches)".to_string()
        }
        Some(rustix::io::Errno::MFILE) => {
            "out of inotify instances or file descriptors (raise fs.inotify.max_user_instances or ulimit -n)".to_string()
        }
        _ => format!("inotify_add_watch failed: {e}"),
    }
}

/// One event: the directory it names, the name in it, and what happened.
pub(super) type Event = (DirId, Option<String>, EventMask);

/// The inotify instance and the watched directories.
#[derive(Debug)]
pub(crate) struct Table {
    inotify: Option<Inotify>,
    /// A second instance, read at most every `super::LAZY_TICK` (`events`), for the workspace
    /// directories inside a tree declared generated during the session (a `CACHEDIR.TAG` the agent
    /// may have made: not trusted, so still watched for new repositories). A build writes thousands
    /// of files there; read one by one, each woke the watcher. Made when first needed.
    lazy: Option<Inotify>,
    /// Why inotify is not used at all (every directory is swept).
    inotify_error: Option<String>,
    /// Whether the last `inotify_add_watch` failed for want of watches (ENOSPC): the workspace tree
    /// stops being watched then (`super::tree`).
    out_of_watches: bool,
    dirs: Vec<Watched>,
    by_wd: HashMap<WatchDescriptor, Vec<DirId>>,
    /// The buffer inotify events are read into (64 KiB, kept between reads).
    event_buf: Vec<u8>,
}

impl std::ops::Index<DirId> for Table {
    type Output = Watched;
    fn index(&self, id: DirId) -> &Watched {
        &self.dirs[id.0]
    }
}

impl std::ops::IndexMut<DirId> for Table {
    fn index_mut(&mut self, id: DirId) -> &mut Watched {
        &mut self.dirs[id.0]
    }
}

impl Table {
    pub(super) fn new(force_poll: bool) -> Table {
        let (inotify, inotify_error) = if force_poll {
            (None, Some(format!("{}=poll", crate::host::WATCH)))
        } else {
            match Inotify::init() {
                Ok(i) => (Some(i), None),
                Err(e) => (None, Some(format!("inotify unavailable: {e}"))),
            }
        };
        Table {
            inotify,
            lazy: None,
            inotify_error,
            out_of_watches: false,
            dirs: Vec::new(),
            by_wd: HashMap::new(),
            event_buf: Vec::new(),
        }
    }

    /// Whether inotify is used at all (else every directory is swept).
    pub(super) fn has_inotify(&self) -> bool {
        self.inotify_error.is_none()
    }

    /// Whether the instance is still open (taken by `take_inotify` at the end).
    #[cfg(test)]
    pub(super) fn inotify_open(&self) -> bool {
        self.inotify.is_some()
    }

    /// The instances, taken to be closed as late as possible (`super::Closing`).
    pub(super) fn take_inotify(&mut self) -> Vec<Inotify> {
        self.inotify
            .take()
            .into_iter()
            .chain(self.lazy.take())
            .collect()
    }

    /// Whether the lazy instance exists (some directory was watched through it).
    pub(super) fn has_lazy(&self) -> bool {
        self.lazy.is_some()
    }

    /// Every directory id so far (directories added later are not included).
    pub(super) fn ids(&self) -> impl Iterator<Item = DirId> {
        (0..self.dirs.len()).map(DirId)
    }

    /// How many directories there are (retired ones included).
    pub(super) fn len(&self) -> usize {
        self.dirs.len()
    }

    /// Whether the last watch added failed because the user's inotify watches are spent.
    pub(super) fn out_of_watches(&self) -> bool {
        self.out_of_watches
    }

    /// The id at `n` (for walks that also cover directories added on the way).
    pub(super) fn id_at(&self, n: usize) -> Option<DirId> {
        (n < self.dirs.len()).then_some(DirId(n))
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (DirId, &Watched)> {
        self.dirs.iter().enumerate().map(|(i, d)| (DirId(i), d))
    }

    pub(super) fn find(&self, role: &Role) -> Option<DirId> {
        self.dirs.iter().position(|d| &d.role == role).map(DirId)
    }

    pub(super) fn add(
        &mut self,
        path: PathBuf,
        role: Role,
        state: BTreeMap<String, Entry>,
    ) -> DirId {
        self.add_in(path, role, state, false)
    }

    /// A workspace directory inside a tree declared generated during the session: watched through
    /// the lazy instance (the ordinary one if that cannot be made).
    pub(super) fn add_lazy_tree(&mut self, path: PathBuf) -> DirId {
        let lazy = self.has_lazy() || self.make_lazy();
        self.add_in(path, Role::Tree, BTreeMap::new(), lazy)
    }

    fn make_lazy(&mut self) -> bool {
        if self.inotify.is_none() || self.inotify_error.is_some() {
            return false;
        }
        match Inotify::init() {
            Ok(i) => self.lazy = Some(i),
            Err(e) => {
                tracing::info!("a second inotify instance: {e}; build trees wake the watcher");
            }
        }
        self.lazy.is_some()
    }

    fn add_in(
        &mut self,
        path: PathBuf,
        role: Role,
        state: BTreeMap<String, Entry>,
        lazy: bool,
    ) -> DirId {
        let (mode, wd) = self.watch(&path, &role, lazy);
        // One inode, one workspace-tree entry: a directory reached twice (queued at launch and
        // found again through its parent, `super::tree`) would hand every event over twice.
        if role == Role::Tree {
            if let Some(same) = wd
                .as_ref()
                .and_then(|wd| self.by_wd.get(wd))
                .and_then(|ids| {
                    ids.iter()
                        .copied()
                        .find(|i| self.dirs[i.0].role == Role::Tree)
                })
            {
                return same;
            }
        }
        let id = DirId(self.dirs.len());
        // Only a PATH directory's names are ever deferred (see `rescan`).
        let dir_id = matches!(role, Role::PathDir { .. })
            .then(|| dir_id(&path))
            .flatten();
        match (&mode, &wd) {
            (Mode::Inotify, Some(wd)) => {
                self.by_wd.entry(wd.clone()).or_default().push(id);
                if role != Role::Tree {
                    tracing::info!(dir = %path.display(), "watching with inotify");
                }
            }
            (Mode::Poll(reason), _) => {
                tracing::info!(dir = %path.display(), reason = %reason, "watching by a one-second sweep");
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
            deferred: HashSet::default(),
            dir_id,
            listed_at: None,
            turn: 0,
            lazy,
        });
        id
    }

    /// Add an inotify watch, or say why this directory is swept instead.
    fn watch(&mut self, path: &Path, role: &Role, lazy: bool) -> (Mode, Option<WatchDescriptor>) {
        if let Some(reason) = &self.inotify_error {
            return (Mode::Poll(reason.clone()), None);
        }
        if let Some(fs) = poll_only_fs(path) {
            return (
                Mode::Poll(format!("{fs} does not report every change")),
                None,
            );
        }
        let ino = if lazy {
            self.lazy.as_mut()
        } else {
            self.inotify.as_mut()
        };
        let Some(ino) = ino else {
            return (Mode::Poll("no inotify".into()), None);
        };
        // Added to whatever this inode is already watched for: one directory can have two roles
        // (a workspace directory on PATH is also part of the workspace tree), and a plain add would
        // replace the first role's events with the second's.
        match ino
            .watches()
            .add(path, mask_for(role) | WatchMask::MASK_ADD)
        {
            Ok(wd) => {
                self.out_of_watches = false;
                (Mode::Inotify, Some(wd))
            }
            Err(e) => {
                self.out_of_watches =
                    rustix::io::Errno::from_io_error(&e) == Some(rustix::io::Errno::NOSPC);
                (Mode::Poll(watch_failure(&e)), None)
            }
        }
    }

    /// Watch a directory again under its path (after it was replaced).
    pub(super) fn rewatch(&mut self, id: DirId) {
        let (path, role) = (self[id].path.clone(), self[id].role.clone());
        let (mode, wd) = self.watch(&path, &role, self[id].lazy);
        if let Some(wd) = &wd {
            self.by_wd.entry(wd.clone()).or_default().push(id);
        }
        self[id].mode = mode;
        self[id].wd = wd;
    }

    pub(super) fn unwatch(&mut self, id: DirId) {
        if let Some(wd) = self[id].wd.take() {
            if let Some(list) = self.by_wd.get_mut(&wd) {
                list.retain(|i| *i != id);
                if list.is_empty() {
                    self.by_wd.remove(&wd);
                    // Only the instance the descriptor belongs to removes it.
                    for ino in [self.inotify.as_mut(), self.lazy.as_mut()]
                        .into_iter()
                        .flatten()
                    {
                        let _ = ino.watches().remove(wd.clone());
                    }
                }
            }
        }
    }

    /// Stop watching a directory for good: no events, no sweeps, nothing known of its names.
    pub(super) fn retire(&mut self, id: DirId) {
        self.unwatch(id);
        self[id].state.clear();
        self[id].role = Role::Retired;
    }

    /// Wait for an event or for `stop`, the lazy instance's too when `lazy` says it is due:
    /// (inotify readable, lazy instance readable, stop readable).
    pub(super) fn wait(&self, stop: &OwnedFd, timeout: Duration, lazy: bool) -> (bool, bool, bool) {
        use rustix::event::{PollFd, PollFlags};
        let ts = rustix::event::Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let lazy = self.lazy.as_ref().filter(|_| lazy).map(|i| i.as_fd());
        let main = self.inotify.as_ref().map(|i| i.as_fd());
        let mut fds = vec![PollFd::new(stop, PollFlags::IN)];
        fds.extend(main.iter().map(|fd| PollFd::new(fd, PollFlags::IN)));
        fds.extend(lazy.iter().map(|fd| PollFd::new(fd, PollFlags::IN)));
        let _ = rustix::event::poll(&mut fds, Some(&ts));
        let ready = |i: usize| !fds[i].revents().is_empty();
        let main_ready = main.is_some() && ready(1);
        let lazy_ready = lazy.is_some() && ready(fds.len() - 1);
        (main_ready, lazy_ready, ready(0))
    }

    /// Read every queued event (one read returns one buffer's worth: loop until it would block):
    /// (directory, name, mask) for each, and whether the queue overflowed.
    pub(super) fn read_events(&mut self) -> (Vec<Event>, bool) {
        self.read_events_of(false)
    }

    /// `read_events` of the lazy instance (nothing when there is none).
    pub(super) fn read_lazy_events(&mut self) -> (Vec<Event>, bool) {
        self.read_events_of(true)
    }

    fn read_events_of(&mut self, lazy: bool) -> (Vec<Event>, bool) {
        let mut dirty: Vec<Event> = Vec::new();
        let mut overflow = false;
        let mut buf = std::mem::take(&mut self.event_buf);
        if buf.is_empty() {
            buf = vec![0u8; 64 * 1024];
        }
        loop {
            let ino = if lazy {
                self.lazy.as_mut()
            } else {
                self.inotify.as_mut()
            };
            let Some(ino) = ino else { break };
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
                for id in self.by_wd.get(&ev.wd).into_iter().flatten() {
                    dirty.push((*id, name.clone(), ev.mask));
                }
            }
            if !any {
                break;
            }
        }
        self.event_buf = buf;
        (dirty, overflow)
    }

    /// Remove every watch (the session is over); the instance itself is closed by the caller.
    pub(super) fn release_watches(&mut self) {
        for wd in std::mem::take(&mut self.by_wd).into_keys() {
            for ino in [self.inotify.as_mut(), self.lazy.as_mut()]
                .into_iter()
                .flatten()
            {
                let _ = ino.watches().remove(wd.clone());
            }
        }
        for d in &mut self.dirs {
            d.wd = None;
        }
    }

    /// Whether inotify has seen every workspace directory so far: none of them is swept.
    pub(super) fn tree_all_live(&self) -> bool {
        self.inotify.is_some()
            && self.inotify_error.is_none()
            && !self
                .dirs
                .iter()
                .any(|d| d.role == Role::Tree && matches!(d.mode, Mode::Poll(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reasons a watch fails name the limit to raise, not an errno number.
    #[test]
    fn a_failed_watch_names_the_limit_to_raise() {
        let nospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(watch_failure(&nospc).contains("max_user_watches"));
        let mfile = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(watch_failure(&mfile).contains("max_user_instances"));
        let other = std::io::Error::from_raw_os_error(libc::EACCES);
        assert!(watch_failure(&other).starts_with("inotify_add_watch failed"));
    }

    /// A workspace directory on PATH is watched twice, as a PATH directory and as part of the
    /// workspace tree (`run` passes every directory its walk found). One inode has one watch per
    /// instance: the second role must add to its events, not replace them, or the PATH directory
    /// stops hearing of writes, mode changes and removals.
    #[test]
    fn a_directory_watched_in_two_roles_hears_every_event_either_needs() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_path_buf();
        let mut table = Table::new(false);
        let path_dir = table.add(
            dir.clone(),
            Role::PathDir {
                pos: super::super::PathPos(0),
            },
            BTreeMap::new(),
        );
        table.add(dir.clone(), Role::Tree, BTreeMap::new());
        let f = dir.join("tool");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::remove_file(&f).unwrap();
        let wanted = [
            EventMask::CREATE,
            EventMask::CLOSE_WRITE,
            EventMask::ATTRIB,
            EventMask::DELETE,
        ];
        let heard = |events: &[Event], what: EventMask| {
            events.iter().any(|(id, name, m)| {
                *id == path_dir && name.as_deref() == Some("tool") && m.contains(what)
            })
        };
        // Read until every event has come, for a while: the close can come late (a process another
        // test forked between the open and the close holds the file until its exec closes it).
        let mut events = Vec::new();
        let t0 = std::time::Instant::now();
        while !wanted.iter().all(|w| heard(&events, *w)) && t0.elapsed().as_secs() < 5 {
            events.extend(table.read_events().0);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for what in wanted {
            assert!(heard(&events, what), "{what:?} not heard: {events:?}");
        }
    }
}
