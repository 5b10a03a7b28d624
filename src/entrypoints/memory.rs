//! What the entry-point walk (`walk_tree`) remembers of each directory between launches, so that
//! an unchanged directory costs one `statx`, not a read of its entries.
//!
//! Guards against an entry point planted between sessions and missed because the walk trusted an
//! old listing. A directory is taken from memory only while its stamp (`walk::memo::Stamp`:
//! device, inode, modification and change times, taken before the listing was read) is the same:
//! any entry added, removed or renamed moves it, and a listing whose times were not settled when it
//! was read (`Stamp::racy`) is not kept. A stamp does not cover the subdirectories: each one gets
//! its own `statx`. What a listing holds is what the walk's `visit` said counts (every
//! subdirectory, and the other entries it acted on) and the declaration files it saw; the bytes of
//! a declaration are read again at every launch (`walk::declared`), since they can change without
//! the directory changing. A listing that holds a regular file with a second link is not kept
//! (`tree::Links`): the hard-link scan takes this memory's word for the directories the walk covers,
//! so such a directory is read, and its files looked at, at every launch until its link is broken.
//! The memory lives in the runtime directory, hidden from the jail, and a
//! file that is not whole and ours is not used at all: the walk reads everything.

use super::Seen;
use crate::walk::memo::{Changes, Stamp};
use crate::walk::Declarations;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// What the walk needs of one directory's listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Listing {
    /// The entries other than directories that `visit` said count, in the listing's order.
    pub(super) entries: Vec<(OsString, Seen)>,
    /// Every subdirectory (what `visit` decides of each is decided again at each launch).
    pub(super) subdirs: Vec<OsString>,
    /// The declaration files it holds (`walk::declared` reads them again at each launch).
    pub(super) declarations: Declarations,
}

/// A listing and the stamp its directory had before it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Remembered {
    pub(super) stamp: Stamp,
    pub(super) listing: Listing,
    /// Come to by this walk (not in the file): what is not, is gone or moved.
    pub(super) seen: bool,
}

/// Each remembered directory by its path's bytes: last launch's memory, updated in place into this
/// one's (a move from one map into another was a hash, an insert and a share of the rehashes per
/// directory: 10k directories at 200k files).
pub(super) type Memory = HashMap<OsString, Remembered>;

/// Whether a directory remembered with `remembered` is read again, its stamp being `now` (`None`:
/// not a directory, or not looked at).
pub(super) fn listed_again(remembered: Option<Stamp>, now: Option<Stamp>) -> bool {
    remembered.is_none() || remembered != now
}

/// Whether a listing read whole after a stamp `stamp` is kept for the next launch (`started`: when
/// this walk began, `walk::memo::now`).
pub(super) fn kept(stamp: Stamp, whole: bool, started: u64) -> bool {
    whole && !stamp.racy(started)
}

/// The walk's memory: last launch's, made this one's as the walk goes.
#[derive(Debug, Default)]
pub(super) struct Recall {
    pub(super) memory: Memory,
    /// Written by another build: no listing is taken from it, only which directories were free of
    /// linked files (`decode_any`).
    pub(super) other_build: bool,
    pub(super) changes: Changes,
    pub(super) started: u64,
    /// Directories taken from memory, and read.
    pub(super) reused: usize,
    pub(super) listed: usize,
}

impl Recall {
    /// Before the walk: nothing is come to yet (a memory handed on from another walk was).
    pub(super) fn start(&mut self) {
        self.memory.values_mut().for_each(|r| r.seen = false);
    }

    /// A listing read now, in place of what the memory held of its directory: kept or not, and how
    /// the memory changed.
    pub(super) fn listed(&mut self, dir: PathBuf, read: Remembered, whole: bool) {
        self.listed += 1;
        let keep = kept(read.stamp, whole, self.started);
        let read = Remembered { seen: true, ..read };
        match self.memory.get_mut(dir.as_os_str()) {
            Some(b) if keep => {
                if b.listing == read.listing {
                    self.changes.restamped += 1;
                } else {
                    self.changes.reshaped = true;
                }
                *b = read;
            }
            Some(_) => {
                self.memory.remove(dir.as_os_str());
                self.changes.reshaped = true;
            }
            None if keep => {
                self.changes.reshaped = true;
                self.memory.insert(dir.into_os_string(), read);
            }
            None => {}
        }
    }

    /// A directory that could not be read: forgotten.
    pub(super) fn forget(&mut self, dir: &Path) {
        self.changes.reshaped |= self.memory.remove(dir.as_os_str()).is_some();
    }

    /// Once the walk is done: what the memory held that the walk did not come to is gone.
    pub(super) fn finish(&mut self) {
        let before = self.memory.len();
        self.memory.retain(|_, r| r.seen);
        self.changes.reshaped |= self.memory.len() != before;
    }
}

/// The memory file of the walk of `root` in the runtime directory `runtime` (`None`: `root`
/// cannot be looked at).
pub(super) fn file(runtime: &Path, root: &Path) -> Option<PathBuf> {
    let name = crate::walk::memo::key(root)?;
    Some(
        crate::runtime_dir::RuntimeDir::new(runtime)
            .entrypoint_memory()
            .join(name),
    )
}

/// The file's first bytes: what it is and the codec's version. Every memory of this version was
/// written by a walk that kept no listing holding a linked file (`tree::Links`), whichever build
/// wrote it: a build that changes that must change the version.
const MAGIC: &[u8] = b"claude-sandbox entry-point walk memory 4\n";

/// The identity the memory is for: the root's path, device and inode, and the build that wrote it.
/// What a listing keeps is what this build's walk said counts (the catalogue's names, the pruned
/// and declaration rules): a release that adds a name (`AGENTS.md`...) must not trust a listing
/// an older one kept without it, so another build (an update, a second install sharing the
/// runtime directory) reads everything once.
fn identity(root: &Path) -> Option<(Vec<u8>, [u64; 6])> {
    use std::os::unix::fs::MetadataExt;
    let raw = Stamp::at(root)?.raw();
    let exe = std::fs::metadata("/proc/self/exe").ok()?;
    let mtime = u64::try_from(exe.mtime()).ok()? << 30 | u64::try_from(exe.mtime_nsec()).ok()?;
    let ids = [raw[0], raw[1], exe.dev(), exe.ino(), exe.size(), mtime];
    Some((root.as_os_str().as_bytes().to_vec(), ids))
}

/// FNV-1a's step over the file's body eight bytes at a time (each step a bijection of the state,
/// so any one word changed changes the sum), then its last bytes and its length: a file changed or
/// cut anywhere is not used. A byte at a time was 1.5 ms of every launch on a 1.5 MB memory.
fn checksum(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut words = bytes.chunks_exact(8);
    let mut h = (&mut words).fold(0xcbf2_9ce4_8422_2325_u64, |h, w| {
        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
        (h ^ w).wrapping_mul(PRIME)
    });
    for b in words.remainder() {
        h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
    }
    (h ^ bytes.len() as u64).wrapping_mul(PRIME)
}

fn kind_byte(kind: Seen) -> u8 {
    match kind {
        Seen::Dir => 0,
        Seen::File => 1,
        Seen::Other => 2,
    }
}

fn byte_kind(b: u8) -> Option<Seen> {
    Some(match b {
        0 => Seen::Dir,
        1 => Seen::File,
        2 => Seen::Other,
        _ => return None,
    })
}

/// The memory of the walk of `root`, as bytes.
pub(super) fn encode(root: &Path, memory: &Memory) -> Option<Vec<u8>> {
    let (path, ids) = identity(root)?;
    let mut out = MAGIC.to_vec();
    let put = |b: &[u8], out: &mut Vec<u8>| {
        out.extend((b.len() as u64).to_le_bytes());
        out.extend(b);
    };
    put(&path, &mut out);
    for n in ids {
        out.extend(n.to_le_bytes());
    }
    out.extend((memory.len() as u64).to_le_bytes());
    for (dir, r) in memory {
        put(dir.as_bytes(), &mut out);
        for n in r.stamp.raw() {
            out.extend(n.to_le_bytes());
        }
        let d = r.listing.declarations;
        out.push(u8::from(d.cache_tag) | u8::from(d.venv) << 1);
        out.extend((r.listing.entries.len() as u64).to_le_bytes());
        for (name, kind) in &r.listing.entries {
            out.push(kind_byte(*kind));
            put(name.as_bytes(), &mut out);
        }
        out.extend((r.listing.subdirs.len() as u64).to_le_bytes());
        for s in &r.listing.subdirs {
            put(s.as_bytes(), &mut out);
        }
    }
    let sum = checksum(&out);
    out.extend(sum.to_le_bytes());
    Some(out)
}

/// The memory in `bytes` if it is whole, ours, and of this `root` (its path, device and inode);
/// else `None`, and the walk reads every directory.
#[cfg(test)]
pub(super) fn decode(root: &Path, bytes: &[u8]) -> Option<Memory> {
    decode_any(root, bytes).and_then(|(m, other)| (!other).then_some(m))
}

/// `decode`, also of a memory another build wrote (then `true`): its listings are not this
/// build's to trust (`identity`), but that a directory was free of linked files while its stamp
/// holds is (`MAGIC`), which spares the first launch after an update a `statx` per file.
pub(super) fn decode_any(root: &Path, bytes: &[u8]) -> Option<(Memory, bool)> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut r = crate::walk::memo::Reader(body.strip_prefix(MAGIC)?);
    let (path, ids) = identity(root)?;
    if r.bytes()? != path.as_slice() {
        return None;
    }
    let mut read = [0u64; 6];
    for n in &mut read {
        *n = r.u64()?;
    }
    if read[..2] != ids[..2] {
        return None;
    }
    let other_build = read[2..] != ids[2..];
    let n = r.u64()?;
    // Sized once (a directory takes at least 50 bytes of the file: a number read from it is not
    // trusted further).
    let capacity = usize::try_from(n)
        .unwrap_or(usize::MAX)
        .min(body.len() / 50);
    let mut out = HashMap::with_capacity(capacity);
    for _ in 0..n {
        let dir = OsString::from_vec(r.bytes()?.to_vec());
        let mut stamp = [0u64; 4];
        for s in &mut stamp {
            *s = r.u64()?;
        }
        let d = r.byte()?;
        if d > 3 {
            return None;
        }
        let mut listing = Listing {
            declarations: Declarations {
                cache_tag: d & 1 != 0,
                venv: d & 2 != 0,
            },
            ..Listing::default()
        };
        for _ in 0..r.u64()? {
            let kind = byte_kind(r.byte()?)?;
            listing
                .entries
                .push((OsString::from_vec(r.bytes()?.to_vec()), kind));
        }
        for _ in 0..r.u64()? {
            listing
                .subdirs
                .push(OsString::from_vec(r.bytes()?.to_vec()));
        }
        let stamp = Stamp::from_raw(stamp);
        let seen = false;
        out.insert(
            dir,
            Remembered {
                stamp,
                listing,
                seen,
            },
        );
    }
    r.0.is_empty().then_some((out, other_build))
}

/// The memory kept for `root` in `file`: empty if there is none or it is not whole and ours.
/// Also whether another build wrote it (`decode_any`).
pub(super) fn load(file: &Path, root: &Path) -> (Memory, bool) {
    let Ok(bytes) = std::fs::read(file) else {
        return (Memory::new(), false);
    };
    decode_any(root, &bytes).unwrap_or_else(|| {
        tracing::info!(
            file = %file.display(),
            "entry-point walk memory not used: not whole or not this workspace's"
        );
        (Memory::new(), false)
    })
}

/// Keep the memory for the next launch, when it changed enough (`walk::memo::worth_saving`).
pub(super) fn save(file: &Path, root: &Path, recall: &Recall) {
    if !crate::walk::memo::worth_saving(recall.changes) {
        return;
    }
    let Some(bytes) = encode(root, &recall.memory) else {
        return;
    };
    if let Err(e) = crate::walk::memo::write_whole(file, &bytes) {
        tracing::info!("{}: {e}", file.display());
    }
}

#[cfg(test)]
mod tests;
