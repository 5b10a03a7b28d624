//! The walk of the writable roots for files with more than one link, and what it remembers
//! between launches (so that a launch costs one `statx` per unchanged directory, not a `statx` per
//! file and a read of every directory).
//!
//! A directory in which the walk found no linked file is remembered with its stamp (device, inode,
//! modification and change times) and its subdirectories. Adding, removing or renaming an entry
//! changes the times (and the change time cannot be set from user space), so while the stamp is the
//! same the entries are the same, and the walk takes the subdirectories from memory without
//! reading the directory or looking at its files: a store's file linked *into* the workspace (what
//! pnpm, uv and bun do) is a new name, and its directory is read again. Only a directory whose times
//! are settled is remembered (`Stamp::racy`: the kernel's clock for them ticks every few ms, so two
//! changes in one tick leave one stamp). What that misses (docs/layers.md): a second name made
//! *outside* for a file already in the workspace (`git clone --local` of it, `cp -al`) changes
//! the file's link count and change time but no directory here; seeing it takes a `statx` per
//! file at every launch (~2.6 µs each here: 0.8 s for 300k files, docs/performance.md), which this
//! does not pay. The memory lives in the runtime directory, hidden from the jail, so the agent
//! cannot mark a directory clean.

use super::Seen;
#[cfg(test)]
use crate::walk::memo::time;
pub(crate) use crate::walk::memo::{now, worth_saving, Changes};
use crate::walk::memo::{Base, Stamp};
use rustix::fd::AsFd;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// A directory found clean: its stamp and its subdirectories' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Clean {
    pub stamp: Stamp,
    pub subdirs: Vec<OsString>,
    /// Come to by this launch's walk (not kept in the file): what is not is gone, or moved.
    pub seen: bool,
}

/// The memory: each clean directory by its path's bytes. Keyed by bytes, not `PathBuf` (whose hash
/// walks the path's components), and one map from last launch's memory to the next, updated in
/// place: a copy, or a move from one map to another, was a third of the scan's time on an unchanged
/// `node_modules` (perf, 4456 directories), and the move still a fifth at 15k directories.
pub(crate) type Memory = HashMap<OsString, Clean>;

/// What the walk saw.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub files: Vec<Seen>,
    /// Directory entries read.
    pub entries: usize,
    /// The budget ran out: what was not looked at is unknown.
    pub truncated: bool,
    /// Directories that could not be read.
    pub unreadable: Vec<PathBuf>,
    /// The directories with no linked file, for the next launch.
    pub clean: Memory,
    /// Directories taken from memory (unchanged and clean last time).
    pub skipped: usize,
    /// How `clean` differs from the memory the walk started from.
    pub changes: Changes,
}

/// Walk the roots (never following a symlink; a mount below a root is walked too: the jail can
/// write it) and keep the regular files with more than one link. A directory that
/// `known` holds with the same stamp is not read. `started`: now (`now`), as the racy check sees it.
#[cfg(test)]
pub(crate) fn scan(roots: &[PathBuf], budget: usize, known: Memory, started: u64) -> Scan {
    scan_fed(roots, None, budget, known, started)
}

/// `scan`, with the root `intake` covers walked by the entry-point walk (`feed`): the scan walks the
/// other roots (not descending into the covered one), then each directory the walk hands over as it
/// comes, and the covered root itself only if the walk did not say it was done.
pub(crate) fn scan_fed(
    roots: &[PathBuf],
    intake: Option<super::feed::Intake>,
    budget: usize,
    known: Memory,
    started: u64,
) -> Scan {
    use super::feed::Hand;
    let mut w = Walker {
        out: Scan {
            clean: known,
            ..Scan::default()
        },
        buf: vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024],
        budget,
        started,
    };
    // A memory handed on from another scan in this process was come to by that one.
    w.out.clean.values_mut().for_each(|c| c.seen = false);
    let covered = intake.as_ref().map(|f| f.covered.as_path());
    for root in roots {
        // A root inside another root is walked once; one inside the covered root, by the walk.
        if roots.iter().any(|r| r != root && root.starts_with(r))
            || covered.is_some_and(|c| root.starts_with(c))
        {
            continue;
        }
        if !w.walk(root, covered) {
            return w.out;
        }
    }
    if let Some(intake) = intake {
        // What the intake brings is dropped if the walk does not finish: the workspace is then
        // walked whole, and a file counted twice would look linked inside only (`shared_outside`).
        let before = w.out.files.len();
        let mut done = false;
        for hand in &intake.rx {
            match hand {
                Hand::Subtree(dir) => {
                    if !w.walk(&dir, None) {
                        return w.out;
                    }
                }
                Hand::Files(files) => w.out.files.extend(files),
                Hand::Done { truncated } => {
                    // Its files past the budget are unknown; the scan's own part goes on.
                    w.out.truncated |= truncated;
                    done = true;
                    break;
                }
            }
        }
        if !done {
            w.out.files.truncate(before);
            tracing::debug!(root = %intake.covered.display(), "the entry-point walk did not finish: the hard-link scan walks it");
            if !w.walk(&intake.covered, None) {
                return w.out;
            }
        }
    }
    // What the memory holds that the walk did not come to is gone (or moved) since.
    let mut out = w.out;
    let before = out.clean.len();
    out.clean.retain(|_, c| c.seen);
    out.changes.reshaped |= out.clean.len() != before;
    out
}

/// The scan under way.
struct Walker {
    out: Scan,
    buf: Vec<std::mem::MaybeUninit<u8>>,
    budget: usize,
    started: u64,
}

impl Walker {
    /// Walk `root`, not descending into `skip`. False when the budget ran out: what was not come
    /// to is kept as it was remembered (each entry is used only while its stamp still matches, so
    /// the next launch goes on from there).
    fn walk(&mut self, root: &Path, skip: Option<&Path>) -> bool {
        use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};
        let out = &mut self.out;
        let Some(base) = Base::open(root) else {
            return true;
        };
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if skip.is_some_and(|s| dir == s) || from_memory(out, &base, &dir, &mut stack) {
                continue;
            }
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            // Before its entries are read: a change while they are read moves the stamp.
            let opened = rustix::fs::open(&dir, flags, Mode::empty()).and_then(|fd| {
                let st = rustix::fs::statx(&fd, "", AtFlags::EMPTY_PATH, crate::walk::memo::MASK)?;
                Ok((fd, st))
            });
            let Ok((fd, st)) = opened else {
                // Gone from the memory, if it was there.
                out.changes.reshaped |= out.clean.remove(dir.as_os_str()).is_some();
                out.unreadable.push(dir);
                continue;
            };
            let found = out.files.len();
            let mut complete = true;
            let mut subdirs = Vec::new();
            let mut entries = RawDir::new(&fd, &mut self.buf);
            while let Some(entry) = entries.next() {
                let Ok(entry) = entry else {
                    out.unreadable.push(dir.clone());
                    complete = false;
                    break;
                };
                let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                out.entries += 1;
                if out.entries > self.budget {
                    out.truncated = true;
                    out.changes.reshaped = true;
                    return false;
                }
                let kind = match entry.file_type() {
                    FileType::Directory => FileType::Directory,
                    FileType::RegularFile | FileType::Unknown => {
                        let Ok((kind, linked)) = super::feed::look_at(fd.as_fd(), &dir, name)
                        else {
                            complete = false;
                            continue;
                        };
                        out.files.extend(linked);
                        kind
                    }
                    other => other,
                };
                if kind == FileType::Directory {
                    subdirs.push(name.to_owned());
                    stack.push(dir.join(name));
                }
            }
            let stamp = Stamp::of(&st);
            if complete && out.files.len() == found && !stamp.racy(self.started) {
                remember(
                    out,
                    dir,
                    Clean {
                        stamp,
                        subdirs,
                        seen: true,
                    },
                );
            } else {
                out.changes.reshaped |= out.clean.remove(dir.as_os_str()).is_some();
            }
        }
        true
    }
}

/// Whether `dir` is remembered clean and unchanged (one `statx` by name, no symlink followed at the
/// end): then it is not read, and its subdirectories come from memory.
fn from_memory(out: &mut Scan, base: &Base, dir: &Path, stack: &mut Vec<PathBuf>) -> bool {
    let Some(k) = out.clean.get_mut(dir.as_os_str()) else {
        return false;
    };
    let unchanged = base.stamp(dir) == Some(k.stamp);
    if unchanged {
        k.seen = true;
        out.skipped += 1;
        stack.extend(k.subdirs.iter().map(|n| dir.join(n)));
    }
    unchanged
}

/// A directory read now and found clean: in the memory, in place of what it held of it.
fn remember(out: &mut Scan, dir: PathBuf, clean: Clean) {
    if let Some(b) = out.clean.get_mut(dir.as_os_str()) {
        if b.subdirs == clean.subdirs {
            out.changes.restamped += 1;
        } else {
            out.changes.reshaped = true;
        }
        *b = clean;
        return;
    }
    out.changes.reshaped = true;
    out.clean.insert(dir.into_os_string(), clean);
}

/// Where the memory of the last launch on these roots is kept.
pub(crate) fn cache_file(runtime: &Path, roots: &[PathBuf]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    roots.hash(&mut h);
    crate::runtime_dir::RuntimeDir::new(runtime)
        .hardlink_memory()
        .join(format!("{:016x}", h.finish()))
}

/// Read the memory; anything malformed ends it there (what was read before is kept).
pub(crate) fn load(file: &Path) -> Memory {
    let bytes = std::fs::read(file).unwrap_or_default();
    let mut out = HashMap::new();
    let mut r = crate::walk::memo::Reader(&bytes);
    while !r.0.is_empty() {
        let Some(entry) = (|| {
            let path = OsString::from_vec(r.bytes()?.to_vec());
            let mut stamp = [0u64; 4];
            for n in &mut stamp {
                *n = r.u64()?;
            }
            let n = r.u64()?;
            let mut subdirs = Vec::new();
            for _ in 0..n {
                subdirs.push(OsString::from_vec(r.bytes()?.to_vec()));
            }
            Some((
                path,
                Clean {
                    stamp: Stamp::from_raw(stamp),
                    subdirs,
                    seen: false,
                },
            ))
        })() else {
            break;
        };
        out.insert(entry.0, entry.1);
    }
    out
}

/// Write the memory (a new file renamed over the old: a reader never sees half of it).
pub(crate) fn save(file: &Path, clean: &Memory) -> std::io::Result<()> {
    let mut bytes = Vec::new();
    let put = |b: &[u8], out: &mut Vec<u8>| {
        out.extend((b.len() as u64).to_le_bytes());
        out.extend(b);
    };
    for (path, c) in clean {
        put(path.as_bytes(), &mut bytes);
        for n in c.stamp.raw() {
            bytes.extend(n.to_le_bytes());
        }
        bytes.extend((c.subdirs.len() as u64).to_le_bytes());
        for s in &c.subdirs {
            put(s.as_bytes(), &mut bytes);
        }
    }
    crate::walk::memo::write_whole(file, &bytes)
}

#[cfg(test)]
mod tests {
    use super::super::{protect_at, Report, SCAN_BUDGET};
    use super::*;

    /// A launch a minute from now: every directory the test made is settled (not racy).
    fn protect(roots: &[PathBuf], budget: usize, cache: Option<&Path>) -> Report {
        protect_at(roots, budget, cache, later())
    }

    fn later() -> u64 {
        now() + time(60, 0)
    }

    #[test]
    fn unchanged_clean_directories_are_not_read_again_and_a_new_link_is_found() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let (ws, store) = (root.join("ws"), root.join("store"));
        for sub in ["a", "b", "c/d"] {
            std::fs::create_dir_all(ws.join(sub)).unwrap();
            std::fs::write(ws.join(sub).join("f"), "x").unwrap();
        }
        std::fs::create_dir_all(&store).unwrap();
        std::fs::write(store.join("s"), "store").unwrap();
        let cache = root.join("rt/cache");
        let roots = [ws.clone()];
        let first = protect(&roots, SCAN_BUDGET, Some(&cache));
        assert_eq!((first.skipped, first.broken), (0, 0));
        let mem = load(&cache);
        assert_eq!(mem.len(), 5, "ws, a, b, c, c/d: {mem:?}");
        assert_eq!(mem[ws.join("c").as_os_str()].subdirs, ["d"]);
        // A link added to `b` changes `b`: read again, and broken; the others are skipped.
        std::fs::hard_link(store.join("s"), ws.join("b/linked")).unwrap();
        let second = protect(&roots, SCAN_BUDGET, Some(&cache));
        assert_eq!((second.skipped, second.broken), (4, 1));
        assert_eq!(std::fs::metadata(store.join("s")).unwrap().nlink(), 1);
        // A new directory below a remembered one changes it: the new one is walked.
        std::fs::create_dir(ws.join("c/d/e")).unwrap();
        std::fs::hard_link(store.join("s"), ws.join("c/d/e/linked")).unwrap();
        assert_eq!(protect(&roots, SCAN_BUDGET, Some(&cache)).broken, 1);
        // A memory that cannot be read is an empty one: everything is read.
        std::fs::write(&cache, "garbage").unwrap();
        assert_eq!(protect(&roots, SCAN_BUDGET, Some(&cache)).skipped, 0);
    }

    #[test]
    fn the_memory_is_written_again_only_when_it_changed_enough() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        for i in 0..40 {
            std::fs::create_dir_all(ws.join(format!("{i}/x"))).unwrap();
        }
        let roots = [ws.clone()];
        let again = |mem: &Memory| {
            let found = scan(&roots, SCAN_BUDGET, mem.clone(), later());
            (found.changes, found.clean)
        };
        let (first, mem) = again(&Memory::new());
        assert!(first.reshaped && worth_saving(first), "all new: {first:?}");
        assert_eq!(mem.len(), 81);
        let (same, _) = again(&mem);
        assert_eq!(same, Changes::default());
        assert!(!worth_saving(same));
        // A few directories whose times moved (the placeholders' come and go): read again, not saved.
        let touch = |dir: &Path| {
            std::fs::write(dir.join("t"), "").unwrap();
            std::fs::remove_file(dir.join("t")).unwrap();
        };
        for i in 0..3 {
            touch(&ws.join(i.to_string()));
        }
        let (restamped, _) = again(&mem);
        assert_eq!(restamped.restamped, 3);
        assert!(!restamped.reshaped && !worth_saving(restamped));
        // Many: saved.
        for i in 0..20 {
            touch(&ws.join(i.to_string()));
        }
        assert!(worth_saving(again(&mem).0));
        let (_, mem) = again(&mem);
        // A new subdirectory, a directory gone, a directory no longer clean: each is saved.
        std::fs::create_dir(ws.join("5/y")).unwrap();
        let (grown, mem) = again(&mem);
        assert!(grown.reshaped && worth_saving(grown));
        std::fs::remove_dir_all(ws.join("6")).unwrap();
        let (shrunk, mem) = again(&mem);
        assert!(shrunk.reshaped);
        assert_eq!(mem.len(), 80);
        std::fs::write(d.path().join("outside"), "").unwrap();
        std::fs::hard_link(d.path().join("outside"), ws.join("7/x/linked")).unwrap();
        let (linked, mem) = again(&mem);
        assert!(linked.reshaped);
        assert!(!mem.contains_key(ws.join("7/x").as_os_str()));
    }

    #[test]
    fn a_directory_changed_in_the_last_seconds_is_read_again_next_time() {
        let d = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
        std::fs::create_dir_all(ws.join("a")).unwrap();
        let roots = [ws.clone()];
        // Just made: a second change in the same clock tick would keep its times.
        let racy = scan(&roots, SCAN_BUDGET, Memory::new(), now());
        assert!(racy.clean.is_empty(), "{:?}", racy.clean);
        let settled = scan(&roots, SCAN_BUDGET, Memory::new(), later());
        assert_eq!(settled.clean.len(), 2);
        // A directory whose times are ahead of this clock (another machine's) is not kept either.
        let before = scan(&roots, SCAN_BUDGET, Memory::new(), now() - time(3600, 0));
        assert!(before.clean.is_empty());
    }

    #[test]
    fn a_walk_past_its_budget_is_remembered_and_the_next_launch_reads_on() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let ws = root.join("ws");
        for i in 0..6 {
            std::fs::create_dir_all(ws.join(format!("{i}"))).unwrap();
            for j in 0..4 {
                std::fs::write(ws.join(format!("{i}/{j}")), "x").unwrap();
            }
        }
        std::fs::write(root.join("outside"), "").unwrap();
        std::fs::hard_link(root.join("outside"), ws.join("5/linked")).unwrap();
        let cache = root.join("rt/cache");
        let roots = [ws.clone()];
        // 6 directories in the top, 25 files below, 12 entries a launch: a few launches read them
        // all, each on from where the last stopped, and then nothing is alerted.
        let reports: Vec<Report> = (0..5).map(|_| protect(&roots, 12, Some(&cache))).collect();
        assert!(reports[0].truncated && !reports[0].left.is_empty());
        let done = reports
            .iter()
            .position(|r| !r.truncated)
            .expect("never complete");
        assert!(done <= 3, "{reports:?}");
        assert!(reports[done..].iter().all(|r| r.left.is_empty()));
        let broken: usize = reports.iter().map(|r| r.broken).sum();
        assert_eq!(
            broken, 1,
            "the link is broken once it is reached: {reports:?}"
        );
        assert!(
            reports[4].entries <= 5,
            "only `5` read again: {:?}",
            reports[4]
        );
    }

    #[test]
    fn the_memory_reads_back_what_was_written() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("m");
        let mut m = Memory::new();
        m.insert(
            OsString::from("/w/a b"),
            Clean {
                stamp: Stamp::from_raw([1, 2, 3, u64::MAX]),
                subdirs: vec!["x".into(), OsString::from_vec(vec![0xff, b'y'])],
                seen: false,
            },
        );
        m.insert(
            OsString::from("/w"),
            Clean {
                stamp: Stamp::from_raw([0; 4]),
                subdirs: vec![],
                seen: false,
            },
        );
        save(&file, &m).unwrap();
        assert_eq!(load(&file), m);
        // Cut short: what was whole is kept, the rest dropped.
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 3]).unwrap();
        assert_eq!(load(&file).len(), 1);
    }
}
