//! Private keys anywhere in the part of `$HOME` the jail reads, by content, and the other names
//! (hard links) of the secrets hidden or masked by path.
//!
//! Guards against a key in an unexpected place (`~/work/deploy.pem`, `~/certs/prod/server.key`,
//! `~/Downloads/id`): `~/.ssh` is looked at by name and content (`secrets::ssh_private_keys`), the
//! rest of the home by content only — a small regular file whose first 16 KiB hold a PEM, OpenSSH or
//! `PuTTY` private-key header is hidden, whatever it is called. And against a hidden secret read
//! under another name: `~/.aws/credentials` hard-linked as `~/dotfiles/aws-credentials`, or a masked
//! `~/.npmrc` linked from `~/dotfiles/npmrc`, is one inode with two names; the second name is hidden
//! too (whole: it reads empty, not as the masked view).
//!
//! The cost is one directory listing per directory and one `stat` per file; a file is *read* only
//! when the scan has not seen it before as it is now. What was read is remembered in the runtime
//! directory (`runtime_dir::RuntimeDir::key_scan`, which the jail cannot see), keyed by device,
//! inode, size, modification and change time, so that any change to a file is read again: a write
//! changes its mtime and ctime, and neither can be set back by its owner (ctime never; a file whose
//! ctime is within a second of the scan is not remembered, as git treats a racy index entry). Not
//! walked: the writable roots (the work: the jail reads and writes it anyway), what is hidden
//! already, `~/.ssh`, `.git` and `node_modules` and declared caches (`walk`), below `MAX_DEPTH`, and
//! beyond `BUDGET` entries (a gap: said, and refused under `fail_closed`).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// At most this many directory entries are looked at per launch (a bound on its cost).
pub(crate) const BUDGET: usize = 50_000;
/// Levels below `$HOME` (`~/a/b/c/d/e/key.pem` is the deepest found): a developer's home measured
/// here has 7,300 entries in 1,300 directories down to six levels, 61,000 in 4,400 down to eight
/// (toolchains, package caches).
pub(crate) const MAX_DEPTH: usize = 6;
/// Files larger than this are not read: a key, even with its certificate chain, is a few KiB.
const MAX_SIZE: u64 = 64 * 1024;
/// The smallest private key file: a PKCS#8 ed25519 key in PEM is ~120 bytes, its armour alone 50.
const MIN_SIZE: u64 = 60;
/// How much of a file is looked at for a header (a chain of certificates may come first).
const HEAD: u64 = 16 * 1024;

/// What the scan found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Found {
    /// Files holding a private key.
    pub(crate) keys: Vec<PathBuf>,
    /// Other names of the hidden or masked secrets (hard links).
    pub(crate) others: Vec<PathBuf>,
    /// The scan stopped at its budget: what lies beyond was not looked at.
    pub(crate) cut_short: bool,
}

/// Whether the start of a file is a private key's (PEM `-----BEGIN … PRIVATE KEY-----`, OpenSSH's
/// `-----BEGIN OPENSSH PRIVATE KEY-----`, `PuTTY`'s `.ppk`). The one content rule, for `~/.ssh` too.
pub(crate) fn looks_like_private_key(head: &[u8]) -> bool {
    let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    (has(b"-----BEGIN ") && has(b"PRIVATE KEY-----")) || head.starts_with(b"PuTTY-User-Key-File-")
}

/// Whether a file of this size is read at all.
fn candidate(size: u64) -> bool {
    (MIN_SIZE..=MAX_SIZE).contains(&size)
}

/// What identifies a directory's listing without reading it: a change to its entries (a name
/// created, removed or renamed) moves its mtime and ctime, and its owner cannot set the ctime back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// What the scan learnt of one directory whose listing is as it was (`Stamp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Listing {
    /// Subdirectories to go on into (their own listings are looked at again).
    dirs: Vec<OsString>,
    /// Files holding a private key.
    keys: Vec<OsString>,
    /// Other names of the secrets.
    others: Vec<OsString>,
}

/// What earlier scans learnt, by directory: read from and written back to one file.
#[derive(Debug, Default)]
pub(crate) struct Remembered {
    /// The inodes whose other names were looked for: when they change, nothing is remembered.
    linked: u64,
    before: HashMap<PathBuf, (Stamp, Listing)>,
    /// This scan's, which replace the file's (so it holds only directories that still exist).
    now: HashMap<PathBuf, (Stamp, Listing)>,
}

/// A hash of the inodes `linked_inodes` found (order-free).
fn linked_hash(linked: &HashSet<(u64, u64)>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut all: Vec<&(u64, u64)> = linked.iter().collect();
    all.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    all.hash(&mut h);
    h.finish()
}

impl Remembered {
    /// What `path` holds (nothing when it is missing, unreadable or of another format, or when the
    /// secrets' inodes changed: everything is listed again).
    pub(crate) fn load(path: &Path, linked: &HashSet<(u64, u64)>) -> Remembered {
        let linked = linked_hash(linked);
        let before = std::fs::read(path)
            .ok()
            .and_then(|b| codec::decode(&b, linked))
            .unwrap_or_default();
        Remembered {
            linked,
            before,
            now: HashMap::new(),
        }
    }

    /// Write this scan's listings to `path` (replacing it whole), when they differ from what was
    /// read. A failure only costs the next launch its listings.
    pub(crate) fn save(&self, path: &Path) {
        if self.now == self.before {
            return;
        }
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let bytes = codec::encode(self.linked, &self.now);
        let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            tracing::debug!("the key scan's listings were not saved: {e}");
        }
    }
}

/// The file's format: a magic line, the hash of the linked inodes, then per directory its path,
/// stamp and three lists of names, each length-prefixed (names are any bytes).
mod codec {
    use super::{Listing, Stamp};
    use std::collections::HashMap;
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::PathBuf;

    const MAGIC: &[u8] = b"claude-sandbox key scan 1\n";

    pub(super) fn encode(linked: u64, dirs: &HashMap<PathBuf, (Stamp, Listing)>) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend(linked.to_le_bytes());
        let bytes = |out: &mut Vec<u8>, b: &[u8]| {
            out.extend((b.len() as u64).to_le_bytes());
            out.extend(b);
        };
        for (path, (st, l)) in dirs {
            bytes(&mut out, path.as_os_str().as_bytes());
            for n in [st.dev, st.ino] {
                out.extend(n.to_le_bytes());
            }
            for n in [st.mtime.0, st.mtime.1, st.ctime.0, st.ctime.1] {
                out.extend(n.to_le_bytes());
            }
            for names in [&l.dirs, &l.keys, &l.others] {
                out.extend((names.len() as u64).to_le_bytes());
                for n in names {
                    bytes(&mut out, n.as_bytes());
                }
            }
        }
        out
    }

    struct Reader<'a>(&'a [u8]);

    impl Reader<'_> {
        fn u64(&mut self) -> Option<u64> {
            let (head, rest) = self.0.split_first_chunk::<8>()?;
            self.0 = rest;
            Some(u64::from_le_bytes(*head))
        }
        fn i64(&mut self) -> Option<i64> {
            self.u64().map(|n| i64::from_le_bytes(n.to_le_bytes()))
        }
        fn bytes(&mut self) -> Option<Vec<u8>> {
            let n = usize::try_from(self.u64()?).ok()?;
            if n > self.0.len() {
                return None;
            }
            let (b, rest) = self.0.split_at(n);
            self.0 = rest;
            Some(b.to_vec())
        }
        fn names(&mut self) -> Option<Vec<OsString>> {
            let n = self.u64()?;
            (0..n)
                .map(|_| self.bytes().map(OsString::from_vec))
                .collect()
        }
    }

    pub(super) fn decode(b: &[u8], linked: u64) -> Option<HashMap<PathBuf, (Stamp, Listing)>> {
        let mut r = Reader(b.strip_prefix(MAGIC)?);
        if r.u64()? != linked {
            return None;
        }
        let mut out = HashMap::new();
        while !r.0.is_empty() {
            let path = PathBuf::from(OsString::from_vec(r.bytes()?));
            let st = Stamp {
                dev: r.u64()?,
                ino: r.u64()?,
                mtime: (r.i64()?, r.i64()?),
                ctime: (r.i64()?, r.i64()?),
            };
            let l = Listing {
                dirs: r.names()?,
                keys: r.names()?,
                others: r.names()?,
            };
            out.insert(path, (st, l));
        }
        Some(out)
    }
}

/// The first `HEAD` bytes of a file, opened without following a symlink or blocking on a FIFO.
pub(crate) fn read_head(path: &Path) -> Option<Vec<u8>> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::open(path, flags | OFlags::NOCTTY, Mode::empty()).ok()?;
    let mut head = Vec::new();
    std::fs::File::from(fd)
        .take(HEAD)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// The (device, inode) of every file among `hidden` (and in the directories among them, a few
/// levels down) that has more than one name: the names the home scan looks for.
pub(crate) fn linked_inodes(hidden: &[PathBuf]) -> HashSet<(u64, u64)> {
    let mut out = HashSet::new();
    for p in hidden {
        let Ok(m) = std::fs::symlink_metadata(p) else {
            continue;
        };
        if m.is_file() && m.nlink() > 1 {
            out.insert((m.dev(), m.ino()));
        } else if m.is_dir() {
            let walk = walkdir::WalkDir::new(p).max_depth(4).follow_links(false);
            for e in walk.into_iter().take(5_000).flatten() {
                if let Ok(m) = e.metadata() {
                    if m.is_file() && m.nlink() > 1 {
                        out.insert((m.dev(), m.ino()));
                    }
                }
            }
        }
    }
    out
}

/// The scan of `home` at launch, with what earlier ones learnt remembered in `cache`: `skip` as
/// `scan` takes it, `secrets` the hidden and masked paths whose other names are looked for.
pub(crate) fn elsewhere(home: &Path, skip: &[PathBuf], secrets: &[PathBuf], cache: &Path) -> Found {
    let start = std::time::Instant::now();
    let linked = linked_inodes(secrets);
    let mut remembered = Remembered::load(cache, &linked);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let found = scan(home, skip, &linked, &mut remembered, (BUDGET, now));
    remembered.save(cache);
    tracing::debug!(
        "home scan for private keys: {} directories, {} listed again, in {:?}",
        remembered.now.len(),
        remembered
            .now
            .iter()
            .filter(|(p, v)| remembered.before.get(*p) != Some(*v))
            .count(),
        start.elapsed()
    );
    found
}

/// Walk the home (see the module's doc): `skip` are directories and files not looked at (the
/// writable roots, what is hidden already, `~/.ssh`); `linked` the inodes `linked_inodes` found.
/// `budget` bounds the entries listed and the directories looked at; `now` is in seconds since the
/// epoch.
pub(crate) fn scan(
    home: &Path,
    skip: &[PathBuf],
    linked: &HashSet<(u64, u64)>,
    remembered: &mut Remembered,
    (budget, now): (usize, i64),
) -> Found {
    let skip: HashSet<&Path> = skip.iter().map(PathBuf::as_path).collect();
    let mut found = Found::default();
    let mut seen = 0usize;
    let mut stack: Vec<(PathBuf, usize)> = vec![(home.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        let stamp = Stamp::of(&m);
        let listing = match remembered.before.get(&dir) {
            Some((st, l)) if *st == stamp => {
                seen += 1;
                l.clone()
            }
            _ => match list(&dir, depth, &skip, linked, &mut seen) {
                Some(l) => l,
                None => continue,
            },
        };
        if seen > budget {
            found.cut_short = true;
            return found;
        }
        found.keys.extend(listing.keys.iter().map(|n| dir.join(n)));
        found
            .others
            .extend(listing.others.iter().map(|n| dir.join(n)));
        stack.extend(listing.dirs.iter().map(|n| (dir.join(n), depth + 1)));
        // A change within the same clock tick could leave the stamp as it was: not remembered.
        if stamp.ctime.0 < now - 1 && stamp.mtime.0 < now - 1 {
            remembered.now.insert(dir, (stamp, listing));
        }
    }
    found.keys.sort();
    found.others.sort();
    found
}

/// List one directory: its files judged, its subdirectories to go on into. None when it cannot be
/// read (nor then by the jail, which is the same user).
fn list(
    dir: &Path,
    depth: usize,
    skip: &HashSet<&Path>,
    linked: &HashSet<(u64, u64)>,
    seen: &mut usize,
) -> Option<Listing> {
    let rd = std::fs::read_dir(dir).ok()?;
    let mut decl = crate::walk::Declarations::default();
    let mut l = Listing::default();
    for e in rd.flatten() {
        *seen += 1;
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name();
        decl.note(name.as_encoded_bytes());
        if skip.contains(dir.join(&name).as_path()) {
            continue;
        }
        if ft.is_dir() {
            if depth + 1 < MAX_DEPTH && !crate::walk::pruned(&name) {
                l.dirs.push(name);
            }
        } else if ft.is_file() {
            let Ok(m) = e.metadata() else { continue };
            if m.nlink() > 1 && linked.contains(&(m.dev(), m.ino())) {
                l.others.push(name);
            } else if candidate(m.size())
                && read_head(&e.path()).is_some_and(|h| looks_like_private_key(&h))
            {
                l.keys.push(name);
            }
        }
    }
    // A declared cache or virtual environment is regenerable output, not where keys are kept.
    if depth > 0 && crate::walk::skips_listed(dir, decl, crate::walk::Trust::Any) {
        l.dirs.clear();
    }
    Some(l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    const KEY: &[u8] = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nQyNTUxOQAAACBzZWNyZXQtc2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0AAAA\n-----END OPENSSH PRIVATE KEY-----\n";

    #[test]
    fn the_headers_of_private_keys_and_nothing_else() {
        assert!(looks_like_private_key(KEY));
        assert!(looks_like_private_key(
            b"-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n-----BEGIN RSA PRIVATE KEY-----\n"
        ));
        assert!(looks_like_private_key(
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
        ));
        assert!(looks_like_private_key(
            b"PuTTY-User-Key-File-3: ssh-ed25519\n"
        ));
        assert!(!looks_like_private_key(b"-----BEGIN PUBLIC KEY-----\n"));
        assert!(!looks_like_private_key(b"-----BEGIN CERTIFICATE-----\n"));
        assert!(!looks_like_private_key(
            b"the words PRIVATE KEY----- alone\n"
        ));
    }

    #[test]
    fn what_is_remembered_reads_back_as_it_was_written() {
        let st = Stamp {
            dev: 2049,
            ino: 77,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
        };
        let l = Listing {
            dirs: vec!["a".into(), "b\nc".into()],
            keys: vec![OsString::from_vec(vec![0xff, b'k'])],
            others: vec![],
        };
        let dirs = HashMap::from([(PathBuf::from("/h/x"), (st, l))]);
        let bytes = codec::encode(7, &dirs);
        assert_eq!(codec::decode(&bytes, 7), Some(dirs));
        assert_eq!(
            codec::decode(&bytes, 8),
            None,
            "other secrets: nothing remembered"
        );
        assert_eq!(codec::decode(&bytes[..bytes.len() - 1], 7), None);
        assert_eq!(codec::decode(b"junk", 7), None);
    }

    fn now() -> i64 {
        let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        i64::try_from(d.unwrap().as_secs()).unwrap()
    }

    #[test]
    fn keys_anywhere_but_the_skipped_places_and_other_names_of_secrets() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        for d in [
            "work/certs",
            "ws",
            ".ssh",
            "proj/node_modules/x",
            ".aws",
            "dotfiles",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("work/certs/deploy"), KEY).unwrap();
        std::fs::write(home.join("ws/key.pem"), KEY).unwrap();
        std::fs::write(home.join(".ssh/id"), KEY).unwrap();
        std::fs::write(home.join("proj/node_modules/x/k.pem"), KEY).unwrap();
        std::fs::write(home.join("work/notes.txt"), [b'x'; 500]).unwrap();
        std::fs::write(home.join(".aws/credentials"), "[default]\nkey = AKIA\n").unwrap();
        std::fs::hard_link(
            home.join(".aws/credentials"),
            home.join("dotfiles/aws-credentials"),
        )
        .unwrap();
        let skip = vec![home.join("ws"), home.join(".ssh"), home.join(".aws")];
        let linked = linked_inodes(&[home.join(".aws")]);
        assert_eq!(linked.len(), 1);
        let mut r = Remembered::default();
        let found = scan(home, &skip, &linked, &mut r, (BUDGET, now()));
        assert_eq!(found.keys, vec![home.join("work/certs/deploy")]);
        assert_eq!(found.others, vec![home.join("dotfiles/aws-credentials")]);
        assert!(!found.cut_short);
    }

    #[test]
    fn a_remembered_listing_is_used_only_while_the_directory_is_as_it_was() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("h");
        std::fs::create_dir_all(home.join("a/b")).unwrap();
        std::fs::write(home.join("a/b/notes"), [b'x'; 500]).unwrap();
        std::fs::write(home.join("a/key"), KEY).unwrap();
        let store = t.path().join("remembered");
        let none = HashSet::new();
        let scan_at = |later: i64| {
            let mut r = Remembered::load(&store, &none);
            let found = scan(&home, &[], &none, &mut r, (BUDGET, now() + later));
            r.save(&store);
            (found.keys, r.now.len())
        };
        // Just made: nothing is remembered (the racy second), everything is found.
        assert_eq!(scan_at(0), (vec![home.join("a/key")], 0));
        // Seconds later: remembered.
        assert_eq!(scan_at(10), (vec![home.join("a/key")], 3));
        // A key made in a directory whose listing was remembered: found (its stamp moved).
        std::fs::write(home.join("a/b/second.pem"), KEY).unwrap();
        let (keys, _) = scan_at(10);
        assert_eq!(keys, vec![home.join("a/b/second.pem"), home.join("a/key")]);
        // A forged listing for a stamp that is not the directory's is never used.
        let stamp = Stamp {
            dev: 1,
            ino: 2,
            mtime: (0, 0),
            ctime: (0, 0),
        };
        let forged = HashMap::from([(home.clone(), (stamp, Listing::default()))]);
        std::fs::write(&store, codec::encode(linked_hash(&none), &forged)).unwrap();
        assert_eq!(scan_at(10).0.len(), 2);
    }

    #[test]
    fn the_budget_cuts_the_scan_short_and_says_so() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        for i in 0..30 {
            std::fs::File::create(home.join(i.to_string())).unwrap();
        }
        let none = HashSet::new();
        assert!(scan(home, &[], &none, &mut Remembered::default(), (29, now())).cut_short);
        assert!(!scan(home, &[], &none, &mut Remembered::default(), (30, now())).cut_short);
    }
}
