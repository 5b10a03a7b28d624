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
//! The cost is one `stat` per directory and per file, and a listing only of a directory whose
//! entries changed; a file is *read* only when the scan has not seen it before as it is now. What
//! was learnt is remembered in the runtime directory (`runtime_dir::RuntimeDir::key_scan`, which the
//! jail cannot see): per directory its stamp (device, inode, size, mtime, ctime), its subdirectories
//! and its files, each with its own stamp and verdict, so that a new name, a write in place and a
//! new link are all seen: each moves a ctime, which its owner cannot set back (a stamp within a
//! second of the scan is not trusted later, as git treats a racy index entry). Not
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
/// `-----BEGIN OPENSSH PRIVATE KEY-----`, an armoured `PGP PRIVATE KEY BLOCK`, `PuTTY`'s `.ppk`,
/// age's `AGE-SECRET-KEY-1`). The one content rule, for `~/.ssh` too.
pub(crate) fn looks_like_private_key(head: &[u8]) -> bool {
    let has = |needle: &[u8]| head.windows(needle.len()).any(|w| w == needle);
    (has(b"-----BEGIN ") && (has(b"PRIVATE KEY-----") || has(b"PRIVATE KEY BLOCK-----")))
        || head.starts_with(b"PuTTY-User-Key-File-")
        || has(b"AGE-SECRET-KEY-1")
}

/// Whether a file of this size is read at all.
fn candidate(size: u64) -> bool {
    (MIN_SIZE..=MAX_SIZE).contains(&size)
}

/// What identifies a directory's listing, or a file's content and links, without reading it: a
/// change to a directory's entries (a name created, removed or renamed), a write to a file and a
/// new link to it all move the ctime, which its owner cannot set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether a change within the same clock tick could have left it as it is (git's racy
    /// entry): not trusted later.
    fn racy(&self, now: i64) -> bool {
        self.ctime.0 >= now - 1 || self.mtime.0 >= now - 1
    }
}

/// What a regular file was found to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Plain,
    Key,
    /// Another name of a secret.
    Other,
    /// Judged, but its stamp was racy: judged again next time.
    Unsure,
}

/// What the scan learnt of one directory whose listing is as it was (`Stamp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Listing {
    /// Subdirectories to go on into (their own listings are looked at again).
    dirs: Vec<OsString>,
    /// Its regular files, each judged while its stamp is as it was.
    files: Vec<(OsString, Stamp, Verdict)>,
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

mod codec;

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
            // The same names: each file looked at again (one stat), read only if it changed.
            Some((st, l)) if *st == stamp => {
                seen += 1 + l.files.len();
                restat(&dir, l.clone(), linked, now)
            }
            _ => match list(&dir, depth, &skip, linked, (&mut seen, now)) {
                Some(l) => l,
                None => continue,
            },
        };
        if seen > budget {
            found.cut_short = true;
            return found;
        }
        for (name, _, v) in &listing.files {
            match v {
                Verdict::Key => found.keys.push(dir.join(name)),
                Verdict::Other => found.others.push(dir.join(name)),
                Verdict::Plain | Verdict::Unsure => {}
            }
        }
        stack.extend(listing.dirs.iter().map(|n| (dir.join(n), depth + 1)));
        if !stamp.racy(now) {
            remembered.now.insert(dir, (stamp, listing));
        }
    }
    found.keys.sort();
    found.others.sort();
    found
}

/// What a regular file is: another name of a secret, a key, or plain; `Unsure` when its stamp is
/// racy (judged the same, but not trusted next time).
fn judge(
    path: &Path,
    (stamp, nlink): (Stamp, u64),
    linked: &HashSet<(u64, u64)>,
    now: i64,
) -> (Stamp, Verdict) {
    let v = if nlink > 1 && linked.contains(&(stamp.dev, stamp.ino)) {
        Verdict::Other
    } else if candidate(stamp.size) && read_head(path).is_some_and(|h| looks_like_private_key(&h)) {
        Verdict::Key
    } else {
        Verdict::Plain
    };
    let v = match v {
        Verdict::Plain if stamp.racy(now) => Verdict::Unsure,
        v => v,
    };
    (stamp, v)
}

/// A remembered listing's files, each stat'ed again and judged again when its stamp moved (a write
/// in place, a new link); one that is no longer a regular file is dropped.
// `stat` field types differ between architectures: keep the casts (times are >= 0).
#[allow(clippy::unnecessary_cast, clippy::cast_possible_wrap)]
fn restat(dir: &Path, mut l: Listing, linked: &HashSet<(u64, u64)>, now: i64) -> Listing {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    // One open of the directory, then a stat relative to it per file (no path walk each time).
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
        l.files.clear();
        return l;
    };
    l.files.retain_mut(|(name, st, v)| {
        match rustix::fs::statat(&fd, &*name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(m) if FileType::from_raw_mode(m.st_mode) == FileType::RegularFile => {
                let now_st = Stamp {
                    dev: m.st_dev as u64,
                    ino: m.st_ino as u64,
                    size: u64::try_from(m.st_size).unwrap_or(0),
                    mtime: (m.st_mtime as i64, m.st_mtime_nsec as i64),
                    ctime: (m.st_ctime as i64, m.st_ctime_nsec as i64),
                };
                if now_st != *st || *v == Verdict::Unsure {
                    (*st, *v) = judge(&dir.join(&*name), (now_st, m.st_nlink as u64), linked, now);
                }
                true
            }
            _ => false,
        }
    });
    l
}

/// List one directory: its files judged, its subdirectories to go on into. None when it cannot be
/// read (nor then by the jail, which is the same user).
fn list(
    dir: &Path,
    depth: usize,
    skip: &HashSet<&Path>,
    linked: &HashSet<(u64, u64)>,
    (seen, now): (&mut usize, i64),
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
            let (stamp, v) = judge(&e.path(), (Stamp::of(&m), m.nlink()), linked, now);
            l.files.push((name, stamp, v));
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
        assert!(looks_like_private_key(
            b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n"
        ));
        assert!(looks_like_private_key(
            b"# created: 2026\nAGE-SECRET-KEY-1QQQ\n"
        ));
        assert!(!looks_like_private_key(
            b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n"
        ));
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
            size: 411,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
        };
        let l = Listing {
            dirs: vec!["a".into(), "b\nc".into()],
            files: vec![
                (OsString::from_vec(vec![0xff, b'k']), st, Verdict::Key),
                ("o".into(), st, Verdict::Other),
                ("p".into(), st, Verdict::Plain),
                ("u".into(), st, Verdict::Unsure),
            ],
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
        // A key written in place into a file the scan knew as plain, in a directory whose listing
        // did not change, and a new name of it: both seen.
        std::fs::write(home.join("a/b/notes"), KEY).unwrap();
        let (keys, _) = scan_at(10);
        assert_eq!(
            keys,
            vec![
                home.join("a/b/notes"),
                home.join("a/b/second.pem"),
                home.join("a/key")
            ]
        );
        // A forged listing for a stamp that is not the directory's is never used.
        let stamp = Stamp {
            dev: 1,
            ino: 2,
            size: 0,
            mtime: (0, 0),
            ctime: (0, 0),
        };
        let forged = HashMap::from([(home.clone(), (stamp, Listing::default()))]);
        std::fs::write(&store, codec::encode(linked_hash(&none), &forged)).unwrap();
        assert_eq!(scan_at(10).0.len(), 3);
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
