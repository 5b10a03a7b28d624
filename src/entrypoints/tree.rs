//! The entry-point walk itself (`walk_tree`): one read of each directory of a root that is not
//! pruned or declared generated (`walk`), remembered between launches (`memory`), and serving the
//! hard-link scan in the same pass (`Links`).
//!
//! Guards against the cost of reading a large workspace twice at every launch — once for entry
//! points, once for files linked out of it — without giving up either's exactness: a directory this
//! walk reads is looked at for links as the scan would (a `statx` per regular file), a listing that
//! holds a linked file is not remembered (so it is read, and looked at, again next time), and what
//! this walk does not descend into is handed to the scan whole.

use super::{memory, Seen};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// What the walk does for the hard-link scan in the directories it reads (`jail::hardlinks::feed`).
/// A walk whose memory is kept must look (`jail::hardlinks::Check` when no scan takes the files):
/// a listing is remembered only when none of its regular files has a second link, and the scan
/// trusts the walk's memory for the directories the walk covers.
pub(crate) trait Links {
    /// A regular file `name` of `dir`, open at `fd`, just listed: `Ok(Some)` when it has more
    /// than one link, `Err` when it could not be looked at.
    fn look(
        &mut self,
        fd: rustix::fd::BorrowedFd<'_>,
        dir: &Path,
        name: &OsStr,
    ) -> Result<Option<crate::jail::hardlinks::Seen>, ()>;
    /// The linked files of a directory the walk read and descends into.
    fn found(&mut self, files: Vec<crate::jail::hardlinks::Seen>);
    /// A directory the walk does not descend into (pruned, declared generated, `.git`): the scan
    /// walks it whole.
    fn subtree(&mut self, dir: &Path);
}

/// Visit every entry under `root` (`root` itself excluded) without descending into directories
/// `walk::pruned`, into symlinks, or into a directory below `root` that a tool declares its own
/// (`walk::declared`; those are returned): `visit(dir, name, kind)` returns, for a directory,
/// whether to descend into it, and for another entry whether it counts. Only those that count are
/// remembered, and given to `visit` again when the directory is taken from memory: the filter is
/// `visit` itself, and its answer must depend on the name and kind alone (what else it looks at is
/// looked at again each time). A directory's subdirectories are visited once its whole listing is
/// read, so that the declaration is known first. One `getdents` buffer for the whole walk and no
/// allocation per file: only directories' names and the entries that count are kept (the
/// workspace can hold tens of thousands of files and the walk is on the launch path). A directory
/// `recall` holds with the same stamp is not read (`memory`). Directories that cannot be read are
/// reported through `unreadable`. With `links`, each directory read is looked at for hard links
/// and each directory not descended into is handed over (`Links`).
pub(super) fn walk_tree(
    root: &Path,
    trust: crate::walk::Trust,
    recall: &mut memory::Recall,
    mut links: Option<&mut dyn Links>,
    visit: &mut dyn FnMut(&Path, &OsStr, Seen) -> bool,
    unreadable: &mut dyn FnMut(&Path, std::io::Error),
) -> Vec<PathBuf> {
    use rustix::fs::{Mode, OFlags};
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut out = Out {
        stack: vec![root.to_path_buf()],
        generated: Vec::new(),
        linked: Vec::new(),
    };
    let base = crate::walk::memo::Base::open(root);
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    // A declaration's bytes can change without its directory changing: read at every launch.
    let declared = |dir: &Path, listing: &memory::Listing, fd: Option<rustix::fd::OwnedFd>| {
        dir != root
            && listing.declarations != crate::walk::Declarations::default()
            && fd
                .or_else(|| rustix::fs::open(dir, flags, Mode::empty()).ok())
                .is_some_and(|fd| crate::walk::declared(&fd, listing.declarations, trust))
    };
    recall.start();
    while let Some(dir) = out.stack.pop() {
        let stamp_now = || match &base {
            Some(base) => base.stamp(&dir),
            None => crate::walk::memo::Stamp::at(&dir),
        };
        let remembered = match recall.memory.get_mut(dir.as_os_str()) {
            Some(b) if !recall.other_build && !memory::listed_again(Some(b.stamp), stamp_now()) => {
                Some(b)
            }
            _ => None,
        };
        if let Some(b) = remembered {
            // From memory: `visit` is given what counted when it was read.
            b.seen = true;
            recall.reused += 1;
            for (name, kind) in &b.listing.entries {
                visit(&dir, name, *kind);
            }
            let declared = declared(&dir, &b.listing, None);
            out.descend(&dir, &b.listing, declared, links.as_deref_mut(), visit);
            continue;
        }
        let fd = match rustix::fs::open(&dir, flags, Mode::empty()) {
            Ok(fd) => fd,
            // Removed since its parent was listed (another session's placeholder, at its end):
            // nothing is there to seal, and nothing to say on the agent's terminal.
            Err(e) => {
                recall.forget(&dir);
                if e != rustix::io::Errno::NOENT || dir == root {
                    unreadable(&dir, e.into());
                }
                continue;
            }
        };
        let mut lister = Lister {
            dir: &dir,
            root,
            links: links.as_deref_mut(),
            linked: &mut out.linked,
            // Another build's memory: its word that the directory held no linked file, while it is
            // as it was then.
            clean_at: (recall.other_build)
                .then(|| recall.memory.get(dir.as_os_str()).map(|b| b.stamp))
                .flatten(),
        };
        let (read, whole) = lister.list(&fd, &mut buf, visit, unreadable);
        let declared = declared(&dir, &read.listing, Some(fd));
        out.descend(&dir, &read.listing, declared, links.as_deref_mut(), visit);
        recall.listed(dir, read, whole);
    }
    recall.finish();
    out.generated
}

/// The walk's state besides its memory.
struct Out {
    stack: Vec<PathBuf>,
    /// The directories declared generated (not descended into).
    generated: Vec<PathBuf>,
    /// The linked files of the directory just read (`Links`).
    linked: Vec<crate::jail::hardlinks::Seen>,
}

impl Out {
    /// After a directory's listing: into its subdirectories `visit` takes, unless it is declared
    /// generated; what is not descended into is handed to `links`, with the linked files of a
    /// directory that is.
    fn descend<'l>(
        &mut self,
        dir: &Path,
        listing: &memory::Listing,
        declared: bool,
        links: Option<&mut (dyn Links + 'l)>,
        visit: &mut dyn FnMut(&Path, &OsStr, Seen) -> bool,
    ) {
        if declared {
            self.generated.push(dir.to_path_buf());
            // The scan reads it whole, its own files included: not reported twice.
            self.linked.clear();
            if let Some(l) = links {
                l.subtree(dir);
            }
            return;
        }
        let mut links = links;
        if let Some(l) = links.as_deref_mut() {
            if !self.linked.is_empty() {
                l.found(std::mem::take(&mut self.linked));
            }
        }
        for name in &listing.subdirs {
            if visit(dir, name, Seen::Dir) {
                self.stack.push(dir.join(name));
            } else if let Some(l) = links.as_deref_mut() {
                l.subtree(&dir.join(name));
            }
        }
    }
}

/// One directory's read.
struct Lister<'a, 'l> {
    dir: &'a Path,
    root: &'a Path,
    links: Option<&'a mut (dyn Links + 'l)>,
    /// Its regular files with more than one link.
    linked: &'a mut Vec<crate::jail::hardlinks::Seen>,
    /// A stamp at which it held none (another build's memory): its files are not looked at again
    /// while it has that stamp.
    clean_at: Option<crate::walk::memo::Stamp>,
}

impl Lister<'_, '_> {
    /// Read the directory open at `fd`: its stamp (before its entries), and what the walk needs of
    /// its listing; the entries other than directories and declarations are given to `visit` as
    /// they are read, and kept if it says they count. Also whether the listing was read whole and
    /// may be kept: with `links`, not when a regular file has a second link or could not be looked
    /// at (its directory is read, and looked at, again next time).
    fn list(
        &mut self,
        fd: &rustix::fd::OwnedFd,
        buf: &mut [std::mem::MaybeUninit<u8>],
        visit: &mut dyn FnMut(&Path, &OsStr, Seen) -> bool,
        unreadable: &mut dyn FnMut(&Path, std::io::Error),
    ) -> (memory::Remembered, bool) {
        use rustix::fd::AsFd;
        use rustix::fs::{FileType, RawDir};
        use std::os::unix::ffi::OsStrExt;
        let dir = self.dir;
        let stamp = crate::walk::memo::Stamp::open(fd);
        let mut whole = stamp.is_some();
        let clean = stamp.is_some() && stamp == self.clean_at;
        let mut listing = memory::Listing::default();
        let mut entries = RawDir::new(fd, buf);
        while let Some(entry) = entries.next() {
            let entry = match entry {
                Ok(e) => e,
                // Removed while it was being listed (the same placeholder, a moment later).
                Err(rustix::io::Errno::NOENT) if dir != self.root => {
                    whole = false;
                    break;
                }
                Err(e) => {
                    unreadable(dir, e.into());
                    whole = false;
                    break;
                }
            };
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let kind = match entry.file_type() {
                FileType::Directory => Seen::Dir,
                FileType::RegularFile => Seen::File,
                FileType::Unknown => {
                    match rustix::fs::statat(fd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {
                            Seen::Dir
                        }
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                            Seen::File
                        }
                        Ok(_) => Seen::Other,
                        Err(_) => {
                            // Not known for sure: used now as the walk always did, not remembered.
                            whole = false;
                            Seen::Other
                        }
                    }
                }
                _ => Seen::Other,
            };
            if kind == Seen::File && !clean {
                if let Some(links) = self.links.as_deref_mut() {
                    match links.look(fd.as_fd(), dir, name) {
                        Ok(None) => {}
                        Ok(Some(s)) => {
                            self.linked.push(s);
                            whole = false;
                        }
                        Err(()) => whole = false,
                    }
                }
            }
            match (name.as_bytes(), kind) {
                (n, Seen::File) if listing.declarations.note(n) => {}
                (_, Seen::Dir) => listing.subdirs.push(name.to_owned()),
                _ => {
                    if visit(dir, name, kind) {
                        listing.entries.push((name.to_owned(), kind));
                    }
                }
            }
        }
        // Without a stamp nothing is kept (`whole` is false); the placeholder is never compared.
        let stamp = stamp.unwrap_or(crate::walk::memo::Stamp::from_raw([0; 4]));
        let seen = true;
        (
            memory::Remembered {
                stamp,
                listing,
                seen,
            },
            whole,
        )
    }
}
