//! The baseline: what the writable PATH directories and the workspace's git hooks and exec-capable
//! config keys looked like when the session started, taken *before* the jail starts and kept where the
//! jail cannot see it (the runtime directory).
//!
//! Guards against a planted command or hook being taken for one that was there before: the watcher
//! compares everything it sees with this record (type, mode, owner, size, times, inode, link count, a
//! hash of each executable, link targets), and decides "shadows /usr/bin/git" from the full PATH.
//! Missing PATH entries are recorded too (Debian's `~/.profile` adds `~/.local/bin` once it exists),
//! and relative entries are flagged. FIFOs and devices are never read; hashes are capped.
//!
//! Taking it is attributes only (one `lstat` per entry): the hashes are added by the watcher, in the
//! background once the command runs, and kept only where the attributes (ctime included) are still
//! the baseline's after hashing — so a hash always describes the content the baseline saw, and an
//! entry changed before it was hashed is judged by its attributes.
//!
//! For `run`, even the attributes of the PATH directories' entries wait (`Depth::Names`): the launch
//! lists names only, and the watcher reads each entry once its inotify watch is in place — a name
//! with an event queued before it was read is taken as changed in the session (see `watch.rs`).

use crate::entrypoints;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Symlink,
    Dir,
    Other,
}

/// A SHA-256 digest: 32 bytes in memory (the watcher keeps two per executable for the whole
/// session; as a hex `String` each took three times that), hex in JSON.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Sha256(pub [u8; 32]);

impl Sha256 {
    /// The digest of a regular file, read through a no-follow fd (`None` for anything else, or
    /// past the size cap).
    pub(crate) fn of_path(path: &Path) -> Option<Sha256> {
        Sha256::from_hex(&crate::quarantine::sha256_path(path)?)
    }

    pub(crate) fn from_hex(hex: &str) -> Option<Sha256> {
        let bytes = hex.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).ok()?;
            out[i] = u8::from_str_radix(text, 16).ok()?;
        }
        Some(Sha256(out))
    }

    pub(crate) fn hex(&self) -> String {
        hex(&self.0)
    }
}

/// Lower-case hex of `bytes` (the digests' one spelling in records and file names).
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl std::fmt::Debug for Sha256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hex())
    }
}

impl Serialize for Sha256 {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for Sha256 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Sha256::from_hex(&text).ok_or_else(|| serde::de::Error::custom("not a SHA-256 in hex"))
    }
}

/// The attributes compared for one directory entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub kind: Kind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub sha256: Option<Sha256>,
    pub link_target: Option<PathBuf>,
    /// Read after the session started and changed by then (see `Depth::Names`): the attributes are
    /// the changed ones, so the entry counts as changed whatever they say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_in_session: bool,
}

impl Entry {
    /// `lstat` (and the link target of a symlink), without hashing.
    pub(crate) fn metadata(path: &Path) -> Option<Entry> {
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Entry::from_metadata(&m, || path.to_path_buf()))
    }

    /// From an `lstat` result; `path` is asked for only for a symlink, to read its target.
    pub(crate) fn from_metadata(m: &std::fs::Metadata, path: impl FnOnce() -> PathBuf) -> Entry {
        let ft = m.file_type();
        let kind = if ft.is_symlink() {
            Kind::Symlink
        } else if ft.is_file() {
            Kind::File
        } else if ft.is_dir() {
            Kind::Dir
        } else {
            Kind::Other
        };
        let mut e = Entry {
            kind,
            mode: m.mode() & 0o7777,
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            dev: m.dev(),
            ino: m.ino(),
            nlink: m.nlink(),
            sha256: None,
            link_target: None,
            changed_in_session: false,
        };
        if ft.is_symlink() {
            e.link_target = std::fs::read_link(path()).ok();
        }
        e
    }

    /// Every attribute but the hash is the same: the content cannot have changed (ctime moves on
    /// every write and userland cannot set it), so the old hash still holds.
    pub(crate) fn same_metadata(&self, other: &Entry) -> bool {
        // Field by field, cheapest first: the sweep calls this for every entry every second.
        self.ctime_ns == other.ctime_ns
            && self.ino == other.ino
            && self.mtime_ns == other.mtime_ns
            && self.size == other.size
            && self.mode == other.mode
            && self.dev == other.dev
            && self.nlink == other.nlink
            && self.uid == other.uid
            && self.gid == other.gid
            && self.kind == other.kind
            && self.link_target == other.link_target
    }

    /// Could run when looked up by name: a symlink (judged by name: its target can change), or a
    /// regular file with an exec bit.
    pub(crate) fn is_executable(&self) -> bool {
        self.kind == Kind::Symlink || (self.kind == Kind::File && self.mode & 0o111 != 0)
    }

    /// Whether an executable changed in a way that matters: content, mode, link target, identity.
    pub(crate) fn exec_changed(&self, new: &Entry) -> bool {
        self.changed_in_session
            || self.kind != new.kind
            || self.mode != new.mode
            || self.link_target != new.link_target
            || self.ino != new.ino
            || self.dev != new.dev
            || (self.sha256.is_some() && new.sha256.is_some() && self.sha256 != new.sha256)
            || (self.sha256.is_none()
                && (self.size != new.size
                    || self.mtime_ns != new.mtime_ns
                    || self.ctime_ns != new.ctime_ns))
    }
}

/// One PATH entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathDir {
    pub path: PathBuf,
    /// Position on PATH (0 = searched first).
    pub index: usize,
    pub relative: bool,
    pub exists: bool,
    /// Writable from inside the jail (so watched).
    pub writable: bool,
    pub entries: BTreeMap<String, Entry>,
    /// `Depth::Names`: the names that were here, attributes not read yet (then `entries` is empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<String>,
    /// For each executable name here: what it shadows later on PATH, if anything (`Depth::Attributes`
    /// only).
    pub shadows: BTreeMap<String, PathBuf>,
}

/// How much of each writable PATH directory `take` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// Every entry's attributes (`lstat`), and what each executable shadows.
    Attributes,
    /// Names only (one `getdents` pass): for a watcher that reads the attributes itself once its
    /// watches are in place, before anything of the session can have run.
    Names,
}

/// One repository's hooks and exec-capable config.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoBaseline {
    pub git_dir: PathBuf,
    pub common_dir: PathBuf,
    pub worktree: Option<PathBuf>,
    pub hooks_dir: PathBuf,
    pub hooks: BTreeMap<String, Entry>,
    /// `(file, key, value)` for every exec-capable key.
    pub exec_keys: Vec<(PathBuf, String, String)>,
    /// Whether its common directory held a `commondir` (which would make it no common directory).
    #[serde(default)]
    pub had_commondir: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    pub taken_at: String,
    pub session: String,
    pub path_env: String,
    pub dirs: Vec<PathDir>,
    pub repos: Vec<RepoBaseline>,
}

/// Split PATH; relative entries are resolved against `cwd` and flagged.
pub(crate) fn path_entries(path_env: &std::ffi::OsStr, cwd: &Path) -> Vec<(PathBuf, bool)> {
    std::env::split_paths(path_env)
        .map(|p| {
            if p.as_os_str().is_empty() {
                (cwd.to_path_buf(), true)
            } else if p.is_relative() {
                (cwd.join(p), true)
            } else {
                (p, false)
            }
        })
        .collect()
}

/// The first executable regular file named `name` in PATH entries after `index`.
pub(crate) fn shadowed(dirs: &[(PathBuf, bool)], index: usize, name: &str) -> Option<PathBuf> {
    let dir = &dirs.get(index)?.0;
    // The same directory listed again later (a devcontainer's probe and `~/.profile` both add
    // `~/.local/bin`) is not a command it shadows: it is itself.
    dirs.iter()
        .skip(index + 1)
        .filter(|(d, _)| d != dir)
        .map(|(d, _)| d.join(name))
        .find(|p| is_exec_file(p))
}

fn is_exec_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

/// The names in a directory (UTF-8 ones: others cannot shadow a command typed by name).
pub(crate) fn list_names(dir: &Path) -> Vec<String> {
    use rustix::fs::{Mode, OFlags, RawDir};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::open(dir, flags, Mode::empty()) else {
        return Vec::new();
    };
    // One allocation per name (`read_dir` makes two), and a buffer that holds a whole
    // `node_modules/.bin` in one or two `getdents64`.
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mut names = Vec::new();
    let mut entries = RawDir::new(&fd, &mut buf);
    while let Some(Ok(e)) = entries.next() {
        match e.file_name().to_str() {
            Ok("." | "..") | Err(_) => {}
            Ok(name) => names.push(name.to_string()),
        }
    }
    names
}

/// Read one directory's entries.
pub(crate) fn scan_dir(dir: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        // `DirEntry::metadata` is an `lstat` relative to the open directory: no path walk.
        let entry = e
            .metadata()
            .ok()
            .map(|m| Entry::from_metadata(&m, || e.path()));
        if let (Some(s), Some(entry)) = (name.to_str(), entry) {
            out.insert(s.to_string(), entry);
        }
    }
    out
}

/// Take the baseline. `writable` decides which PATH directories the jail can write; `home` is
/// `$HOME` as git expands `~/` in the repositories' configs.
pub fn take(
    session: &str,
    path_env: &std::ffi::OsStr,
    cwd: &Path,
    writable: &dyn Fn(&Path) -> bool,
    repos: &[entrypoints::Repo],
    home: Option<&Path>,
    depth: Depth,
) -> Baseline {
    let all = path_entries(path_env, cwd);
    let mut dirs: Vec<PathDir> = all
        .iter()
        .enumerate()
        .map(|(index, (path, relative))| {
            let writable = writable(path);
            let exists = path.is_dir();
            let (entries, deferred) = match (writable && exists, depth) {
                (false, _) => (BTreeMap::new(), Vec::new()),
                (true, Depth::Attributes) => (scan_dir(path), Vec::new()),
                (true, Depth::Names) => (BTreeMap::new(), list_names(path)),
            };
            PathDir {
                path: path.clone(),
                index,
                relative: *relative,
                exists,
                writable,
                entries,
                deferred,
                shadows: BTreeMap::new(),
            }
        })
        .collect();
    if depth == Depth::Attributes {
        add_shadows(&mut dirs);
    }
    let repos = repos.iter().map(|r| repo_baseline(r, home)).collect();
    Baseline {
        taken_at: crate::alerts::now_rfc3339(),
        session: session.into(),
        path_env: path_env.to_string_lossy().into_owned(),
        dirs,
        repos,
    }
}

/// For each executable read in full: the first executable of the same name later on PATH. The
/// other directories' names are listed once, so "what does this shadow" is a set lookup, not a stat
/// of the name in every later directory.
fn add_shadows(dirs: &mut [PathDir]) {
    let listed: Vec<std::collections::HashSet<String>> = dirs
        .iter()
        .map(|d| {
            if d.writable && d.exists {
                d.entries.keys().cloned().collect()
            } else {
                list_names(&d.path).into_iter().collect()
            }
        })
        .collect();
    for i in 0..dirs.len() {
        let shadows = dirs[i]
            .entries
            .iter()
            .filter(|(_, e)| e.is_executable())
            .filter_map(|(name, _)| {
                (i + 1..dirs.len())
                    .filter(|j| listed[*j].contains(name))
                    .map(|j| dirs[j].path.join(name))
                    .find(|p| is_exec_file(p))
                    .map(|p| (name.clone(), p))
            })
            .collect();
        dirs[i].shadows = shadows;
    }
}

/// The hooks directory and exec-capable keys of one repository.
pub(crate) fn repo_baseline(r: &entrypoints::Repo, home: Option<&Path>) -> RepoBaseline {
    let exec_keys = exec_keys(&r.common_dir, &r.git_dir, home);
    let hooks_dir = exec_keys
        .iter()
        .rev()
        .find(|(_, k, _)| k == "core.hookspath")
        .map_or_else(
            || r.common_dir.join("hooks"),
            |(_, _, v)| {
                crate::gitconfig::hooks_path(v.as_bytes(), r.worktree.as_deref(), &r.git_dir, home)
            },
        );
    RepoBaseline {
        git_dir: r.git_dir.clone(),
        common_dir: r.common_dir.clone(),
        worktree: r.worktree.clone(),
        hooks: scan_dir(&hooks_dir),
        hooks_dir,
        exec_keys,
        had_commondir: std::fs::symlink_metadata(r.common_dir.join("commondir")).is_ok(),
    }
}

/// The key under which a config git refuses is recorded among the exec-capable keys (its value says
/// why): the reader fails closed, so such a file is alerted, never taken as empty.
pub(crate) const REFUSED_KEY: &str = "(a config git refuses to read)";

/// Exec-capable keys (entry-point catalogue §2.2–2.3) in a repository's config files and includes,
/// read by `gitconfig` (git's own grammar and include rules; `home` expands `~/`); a file git
/// refuses is `REFUSED_KEY`.
pub(crate) fn exec_keys(
    common_dir: &Path,
    git_dir: &Path,
    home: Option<&Path>,
) -> Vec<(PathBuf, String, String)> {
    let mut files = own_config_files(common_dir, git_dir);
    files.dedup();
    let c = crate::gitconfig::read(&files, home);
    let mut out: Vec<(PathBuf, String, String)> = c
        .keys
        .iter()
        .filter_map(|l| {
            let lower = l.key.name.to_ascii_lowercase();
            let value = l.key.text();
            crate::catalogue::git::is_exec_key(&lower, &value)
                .then(|| (l.file.clone(), lower, value))
        })
        .collect();
    for (file, bad) in c.bad() {
        out.push((file.to_path_buf(), REFUSED_KEY.into(), bad.to_string()));
    }
    out
}

/// A repository's own config files (what it includes may be someone else's).
pub(crate) fn own_config_files(common_dir: &Path, git_dir: &Path) -> Vec<PathBuf> {
    vec![
        common_dir.join("config"),
        common_dir.join("config.worktree"),
        git_dir.join("config.worktree"),
    ]
}

impl Baseline {
    /// Write atomically, owned by us, mode 0600.
    pub(crate) fn write(&self, file: &Path) -> Result<()> {
        let tmp = file.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| Error::io(format!("writing {}", tmp.display()), e))?;
        // Streamed: no copy of the whole record in memory (2 MB for 10 000 entries).
        let mut out = std::io::BufWriter::new(&mut f);
        serde_json::to_writer(&mut out, self)
            .map_err(std::io::Error::other)
            .and_then(|()| out.flush())
            .and_then(|()| std::fs::rename(&tmp, file))
            .map_err(|e| Error::io(format!("writing {}", file.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_and_kinds_keep_their_json_shape() {
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
        let sha = Sha256::from_hex(hex).unwrap();
        assert_eq!(sha.hex(), hex);
        assert!(Sha256::from_hex("9f86").is_none());
        assert!(Sha256::from_hex(&"zz".repeat(32)).is_none());
        let json = serde_json::to_string(&(Kind::Symlink, Some(sha))).unwrap();
        assert_eq!(json, format!("[\"symlink\",\"{hex}\"]"));
        let back: (Kind, Option<Sha256>) = serde_json::from_str(&json).unwrap();
        assert_eq!(back, (Kind::Symlink, Some(sha)));
    }

    #[test]
    fn a_directory_listed_twice_on_path_does_not_shadow_itself() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (bin, usr) = (tmp.path().join("bin"), tmp.path().join("usr"));
        for d in [&bin, &usr] {
            std::fs::create_dir(d).unwrap();
            let git = d.join("git");
            std::fs::write(&git, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let dirs = vec![
            (bin.clone(), true),
            (bin.clone(), true),
            (usr.clone(), false),
        ];
        assert_eq!(shadowed(&dirs, 0, "git"), Some(usr.join("git")));
        let order = vec![bin.clone(), bin.clone(), usr.clone()];
        assert_eq!(
            crate::watch::shellpath::shadowed_in(&order, &bin, "git"),
            Some(usr.join("git"))
        );
        std::fs::remove_file(usr.join("git")).unwrap();
        assert_eq!(shadowed(&dirs, 0, "git"), None);
    }
}
