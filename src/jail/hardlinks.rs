//! Hard links out of the writable roots.
//!
//! Guards against a write through the workspace reaching a file outside it. pnpm's
//! `node_modules/.pnpm/**` files are hard links into its content store (`~/.local/share/pnpm/store`,
//! or `<mount root>/.pnpm-store`), uv's virtual environments link into `~/.cache/uv`, bun into its
//! cache: one inode, two names. A read-only store does not help, since the write goes through the
//! workspace's name; appending to it rewrites the store's file, and every other project and tool that
//! links it runs the payload later, outside the jail.
//!
//! At launch, before the command may run, every regular file below the writable roots is looked at
//! (one `statx` each, no file is read); a file with more links than the walk found inside the roots
//! has a name outside them, and if the jail could write it, the sharing is **broken**: the file is
//! copied beside itself (same bytes, mode and modification time) and the copy renamed over the
//! workspace's name. The store keeps its inode, the workspace keeps its content, and from then on
//! the two are separate files (so this costs a copy once per `pnpm install` made outside, and a
//! walk at every launch). A file that cannot be copied there (a directory the jail cannot write
//! either, a full disk) is bound read-only instead; what is left beyond that, or beyond the walk's
//! budget, is alerted, never silently passed.
//!
//! New installs inside the jail do not link: the environment tells pnpm and uv to copy
//! (`COPY_ENV`), and their stores in the jail are its own layers on another filesystem anyway.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// At most this many directory entries are looked at per launch (a bound on its cost: ~5 µs each).
pub(crate) const SCAN_BUDGET: usize = 200_000;

/// At most this many files are bound read-only when their link cannot be broken (each is a mount).
pub(crate) const MAX_SEALS: usize = 64;

/// Set in the jail: installers copy instead of linking from their stores into the workspace.
pub(crate) const COPY_ENV: &[(&str, &str)] = &[
    ("npm_config_package_import_method", "copy"),
    ("pnpm_config_package_import_method", "copy"),
    ("UV_LINK_MODE", "copy"),
];

/// One regular file the walk found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub path: PathBuf,
    pub dev: u64,
    pub ino: u64,
    pub nlink: u64,
    pub uid: u32,
    pub mode: u32,
}

/// Whether the jail (same uid, no capability) could write this file: its owner may `chmod` it, and
/// anyone may write what has a write bit for group or others.
pub(crate) fn jail_can_write(uid: u32, mode: u32, euid: u32) -> bool {
    uid == euid || mode & 0o022 != 0
}

/// The files whose inode has a name outside the roots (more links than the walk found) and that
/// the jail could write: every name found of each such inode, in walk order.
pub(crate) fn shared_outside(seen: &[Seen], euid: u32) -> Vec<&Seen> {
    let mut found: HashMap<(u64, u64), u64> = HashMap::new();
    for s in seen {
        *found.entry((s.dev, s.ino)).or_default() += 1;
    }
    seen.iter()
        .filter(|s| s.nlink > found[&(s.dev, s.ino)] && jail_can_write(s.uid, s.mode, euid))
        .collect()
}

/// A directory as it was when the walk found no file with a second link in it: device, inode,
/// modification and change times (ns). Adding, removing or renaming an entry changes the times, so
/// an unchanged stamp means the same entries, and their files need no `statx` again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Stamp([u64; 4]);

impl Stamp {
    fn of(st: &rustix::fs::Statx) -> Stamp {
        let ns = |t: rustix::fs::StatxTimestamp| (t.tv_sec as u64) << 30 | u64::from(t.tv_nsec);
        Stamp([
            rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
            st.stx_ino,
            ns(st.stx_mtime),
            ns(st.stx_ctime),
        ])
    }
}

/// What the walk saw.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub files: Vec<Seen>,
    /// Directory entries looked at.
    pub entries: usize,
    /// The budget ran out: what was not looked at is unknown.
    pub truncated: bool,
    /// Directories that could not be read.
    pub unreadable: Vec<PathBuf>,
    /// The directories with no linked file, for the next launch.
    pub clean: Vec<Stamp>,
    /// Directories whose files were not looked at again (unchanged and clean last time).
    pub skipped: usize,
}

/// Walk the roots (never following a symlink, never leaving a root's filesystem: a mount below
/// it is another place) and keep the regular files with more than one link. The files of a
/// directory that is in `clean` unchanged are not looked at.
pub(crate) fn scan(roots: &[PathBuf], budget: usize, clean: &HashSet<Stamp>) -> Scan {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir, StatxFlags, CWD};
    use std::os::unix::ffi::OsStrExt;
    let mut out = Scan::default();
    let mut buf = vec![std::mem::MaybeUninit::<u8>::uninit(); 32 * 1024];
    let mask = StatxFlags::TYPE | StatxFlags::MODE | StatxFlags::NLINK | StatxFlags::UID;
    let dir_mask = StatxFlags::TYPE | StatxFlags::INO | StatxFlags::MTIME | StatxFlags::CTIME;
    for root in roots {
        // A root inside another root is walked once.
        if roots.iter().any(|r| r != root && root.starts_with(r)) {
            continue;
        }
        let Ok(top) = rustix::fs::statx(CWD, root, AtFlags::SYMLINK_NOFOLLOW, mask) else {
            continue;
        };
        let dev = (top.stx_dev_major, top.stx_dev_minor);
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let Ok(fd) = rustix::fs::open(&dir, flags, Mode::empty()) else {
                out.unreadable.push(dir);
                continue;
            };
            // Before its entries are read: a change while they are read moves the stamp.
            let Ok(st) = rustix::fs::statx(&fd, "", AtFlags::EMPTY_PATH, dir_mask) else {
                out.unreadable.push(dir);
                continue;
            };
            if (st.stx_dev_major, st.stx_dev_minor) != dev {
                continue;
            }
            let stamp = Stamp::of(&st);
            let known = clean.contains(&stamp);
            out.skipped += usize::from(known);
            let found = out.files.len();
            let mut complete = true;
            let mut entries = RawDir::new(&fd, &mut buf);
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
                if out.entries > budget {
                    out.truncated = true;
                    return out;
                }
                match entry.file_type() {
                    FileType::Directory => stack.push(dir.join(name)),
                    FileType::RegularFile if known => {}
                    FileType::RegularFile | FileType::Unknown => {
                        let Ok(st) = rustix::fs::statx(&fd, name, AtFlags::SYMLINK_NOFOLLOW, mask)
                        else {
                            complete = false;
                            continue;
                        };
                        let kind = FileType::from_raw_mode(st.stx_mode.into());
                        if kind == FileType::Directory {
                            stack.push(dir.join(name));
                        } else if kind == FileType::RegularFile && st.stx_nlink > 1 {
                            out.files.push(Seen {
                                path: dir.join(name),
                                dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
                                ino: st.stx_ino,
                                nlink: st.stx_nlink.into(),
                                uid: st.stx_uid,
                                mode: u32::from(st.stx_mode) & 0o7777,
                            });
                        }
                    }
                    _ => {}
                }
            }
            if complete && out.files.len() == found {
                out.clean.push(stamp);
            }
        }
    }
    out
}

/// The clean directories of the last launch on these roots, kept in the runtime directory (hidden
/// from the jail: the agent cannot mark a directory clean).
pub(crate) fn cache_file(runtime: &Path, roots: &[PathBuf]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    roots.hash(&mut h);
    runtime
        .join("hardlinks")
        .join(format!("{:016x}", h.finish()))
}

pub(crate) fn load(file: &Path) -> HashSet<Stamp> {
    let bytes = std::fs::read(file).unwrap_or_default();
    bytes
        .chunks_exact(32)
        .map(|c| {
            let n = |i: usize| u64::from_le_bytes(c[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
            Stamp([n(0), n(1), n(2), n(3)])
        })
        .collect()
}

pub(crate) fn save(file: &Path, clean: &[Stamp]) -> std::io::Result<()> {
    let dir = file.parent().ok_or(std::io::ErrorKind::InvalidInput)?;
    std::fs::create_dir_all(dir)?;
    let bytes: Vec<u8> = clean
        .iter()
        .flat_map(|s| s.0.iter().flat_map(|n| n.to_le_bytes()))
        .collect();
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, file)
}

/// Give `s.path` an inode of its own: copy it beside itself (bytes, mode, times), then rename the
/// copy over it, but only while the name still is the inode the walk saw.
pub(crate) fn break_link(s: &Seen) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags, Timespec, Timestamps};
    use std::os::unix::fs::MetadataExt;
    let dir = s.path.parent().ok_or(std::io::ErrorKind::InvalidInput)?;
    let name = s.path.file_name().ok_or(std::io::ErrorKind::InvalidInput)?;
    let src = rustix::fs::open(
        &s.path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&src)?;
    if st.st_ino != s.ino || st.st_dev != s.dev {
        return Err(std::io::Error::other("changed since the walk"));
    }
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".claude-sandbox-unlink.{}", std::process::id()));
    let tmp = dir.join(&tmp_name);
    let dst = rustix::fs::open(
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let copied = (|| -> std::io::Result<()> {
        let mut from = std::fs::File::from(src);
        let mut to = std::fs::File::from(dst);
        std::io::copy(&mut from, &mut to)?;
        rustix::fs::fchmod(&to, Mode::from_raw_mode(st.st_mode & 0o7777))?;
        let meta = from.metadata()?;
        let ts = |sec: i64, nsec: i64| Timespec {
            tv_sec: sec,
            tv_nsec: nsec as _,
        };
        rustix::fs::futimens(
            &to,
            &Timestamps {
                last_access: ts(meta.atime(), meta.atime_nsec()),
                last_modification: ts(meta.mtime(), meta.mtime_nsec()),
            },
        )?;
        let now = std::fs::symlink_metadata(&s.path)?;
        if now.ino() != s.ino || now.dev() != s.dev {
            return Err(std::io::Error::other("changed since the walk"));
        }
        std::fs::rename(&tmp, &s.path)
    })();
    if copied.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    copied
}

/// What `protect` did: for `explain -v`, the debug log and the tests.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub entries: usize,
    /// Directories unchanged since the last launch found them clean.
    pub skipped: usize,
    pub broken: usize,
    /// Bound read-only (their link could not be broken).
    pub sealed: Vec<PathBuf>,
    /// Neither broken nor sealed, or not looked at: alerted.
    pub left: Vec<String>,
    pub truncated: bool,
}

/// Scan the writable roots and break (else seal) every hard link out of them. Returns the paths to
/// bind read-only and what is left open. `cache`: where the clean directories are remembered.
pub(crate) fn protect(roots: &[PathBuf], budget: usize, cache: Option<&Path>) -> Report {
    let euid = rustix::process::geteuid().as_raw();
    let clean = cache.map(load).unwrap_or_default();
    let found = scan(roots, budget, &clean);
    if let Some(file) = cache.filter(|_| !found.truncated) {
        if let Err(e) = save(file, &found.clean) {
            tracing::info!("{}: {e}", file.display());
        }
    }
    let mut report = Report {
        entries: found.entries,
        skipped: found.skipped,
        truncated: found.truncated,
        ..Report::default()
    };
    for s in shared_outside(&found.files, euid) {
        match break_link(s) {
            Ok(()) => report.broken += 1,
            Err(e) if report.sealed.len() < MAX_SEALS => {
                tracing::info!(
                    "{}: link not broken ({e}); bound read-only",
                    s.path.display()
                );
                report.sealed.push(s.path.clone());
            }
            Err(e) => report.left.push(format!(
                "{}: hard link to a file outside the workspace, writable in the jail ({e})",
                s.path.display()
            )),
        }
    }
    if found.truncated {
        report.left.push(format!(
            "the hard-link scan stopped after {budget} entries: files beyond were not checked for links outside the workspace"
        ));
    }
    report
}

/// At launch, before the gate opens: break the links out of the plan's writable roots, bind
/// read-only what could not be broken, alert on the rest.
pub(crate) fn apply(plan: &mut super::plan::Plan, runtime: &Path, session: &str) {
    let report = timed(&plan.writable_roots(), runtime);
    record(plan, &report, runtime, session);
}

/// `protect` with the launch's budget, its cost in the debug log (`-vv`).
pub(crate) fn timed(roots: &[PathBuf], runtime: &Path) -> Report {
    let t0 = std::time::Instant::now();
    let report = protect(roots, SCAN_BUDGET, Some(&cache_file(runtime, roots)));
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        entries = report.entries,
        unchanged_dirs = report.skipped,
        broken = report.broken,
        sealed = report.sealed.len(),
        left = report.left.len(),
        truncated = report.truncated,
        "hard links out of the writable roots"
    );
    report
}

/// The files whose link could not be broken become seals; what is left is alerted.
pub(crate) fn record(plan: &mut super::plan::Plan, report: &Report, runtime: &Path, session: &str) {
    for path in &report.sealed {
        plan.policy.sealed.push(super::policy::Sealed {
            path: path.clone(),
            runs: "a hard link to a file outside the workspace (its link could not be broken)"
                .into(),
            placeholder: false,
        });
    }
    for l in &report.left {
        tracing::warn!("{l}");
    }
    alert(runtime, session, &plan.policy.workspace, report);
}

/// Record what is left open as an alert in the runtime directory's store, for the human's prompt.
pub(crate) fn alert(runtime: &Path, session: &str, root: &Path, report: &Report) {
    if report.left.is_empty() {
        return;
    }
    let shown: Vec<&str> = report.left.iter().take(5).map(String::as_str).collect();
    let more = report.left.len().saturating_sub(shown.len());
    let detail = format!(
        "{}{}",
        shown.join("; "),
        if more > 0 {
            format!("; and {more} more")
        } else {
            String::new()
        }
    );
    let alert = crate::alerts::Alert {
        id: crate::alerts::new_id("a"),
        time: crate::alerts::now_rfc3339(),
        severity: crate::alerts::Severity::High,
        kind: "hard-link-open".into(),
        path: root.to_path_buf(),
        detail,
        action: "alerted".into(),
        quarantine_id: None,
        sha256: None,
        session: session.to_string(),
        fingerprint: format!("hard-link-open:{}:{session}", root.display()),
    };
    if let Err(e) = crate::alerts::Store::new(runtime).add(&alert) {
        tracing::warn!("recording an alert: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(path: &str, ino: u64, nlink: u64, uid: u32, mode: u32) -> Seen {
        Seen {
            path: path.into(),
            dev: 1,
            ino,
            nlink,
            uid,
            mode,
        }
    }

    #[test]
    fn only_inodes_with_a_name_outside_that_the_jail_can_write_are_shared() {
        let files = [
            seen("/w/a", 1, 2, 1000, 0o644), // one name here, one in the store
            seen("/w/b", 2, 2, 1000, 0o644), // both names here
            seen("/w/c", 2, 2, 1000, 0o644),
            seen("/w/d", 3, 3, 1000, 0o444), // read-only, but the owner may chmod it
            seen("/w/e", 3, 3, 1000, 0o444),
            seen("/w/f", 4, 2, 0, 0o644), // root's, not writable for uid 1000
            seen("/w/g", 5, 2, 0, 0o666), // root's, writable by anyone
        ];
        let got: Vec<&str> = shared_outside(&files, 1000)
            .iter()
            .map(|s| s.path.to_str().unwrap())
            .collect();
        assert_eq!(got, ["/w/a", "/w/d", "/w/e", "/w/g"]);
        // Root in the jail holds no capability: another uid's files stay out of its reach.
        let root: Vec<&str> = shared_outside(&files, 0)
            .iter()
            .map(|s| s.path.to_str().unwrap())
            .collect();
        assert_eq!(root, ["/w/f", "/w/g"]);
    }

    #[test]
    fn breaking_a_link_keeps_bytes_mode_and_time_and_leaves_the_store_alone() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let store = root.join("store");
        let ws = root.join("ws");
        std::fs::create_dir_all(store.join("s")).unwrap();
        std::fs::create_dir_all(ws.join("nm/pkg")).unwrap();
        std::fs::write(store.join("s/f"), "module.exports = 1\n").unwrap();
        std::fs::set_permissions(store.join("s/f"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        std::fs::hard_link(store.join("s/f"), ws.join("nm/pkg/f")).unwrap();
        std::fs::hard_link(ws.join("nm/pkg/f"), ws.join("nm/pkg/g")).unwrap(); // 3 links
        std::fs::write(ws.join("alone"), "x").unwrap();
        let before = std::fs::metadata(store.join("s/f")).unwrap();
        let report = protect(std::slice::from_ref(&ws), SCAN_BUDGET, None);
        assert_eq!(report.broken, 2, "{report:?}");
        assert!(report.sealed.is_empty() && report.left.is_empty());
        for n in ["f", "g"] {
            let m = std::fs::metadata(ws.join("nm/pkg").join(n)).unwrap();
            assert_ne!(m.ino(), before.ino());
            assert_eq!(m.nlink(), 1);
            assert_eq!(m.mode() & 0o7777, 0o755);
            assert_eq!(m.mtime(), before.mtime());
            assert_eq!(m.mtime_nsec(), before.mtime_nsec());
            assert_eq!(
                std::fs::read(ws.join("nm/pkg").join(n)).unwrap(),
                b"module.exports = 1\n"
            );
        }
        assert_eq!(std::fs::metadata(store.join("s/f")).unwrap().nlink(), 1);
        // Nothing was left beside them.
        assert_eq!(std::fs::read_dir(ws.join("nm/pkg")).unwrap().count(), 2);
        // A second launch finds nothing to do.
        assert_eq!(protect(&[ws], SCAN_BUDGET, None).broken, 0);
    }

    #[test]
    fn unchanged_clean_directories_are_not_looked_at_again_and_a_new_link_is_found() {
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
        assert_eq!(load(&cache).len(), 5, "ws, a, b, c, c/d");
        // A link added to `b` changes `b`: looked at again, and broken; the others are skipped.
        std::fs::hard_link(store.join("s"), ws.join("b/linked")).unwrap();
        let second = protect(&roots, SCAN_BUDGET, Some(&cache));
        assert_eq!((second.skipped, second.broken), (4, 1));
        assert_eq!(std::fs::metadata(store.join("s")).unwrap().nlink(), 1);
        // A cache that cannot be read is an empty one: everything is looked at.
        std::fs::write(&cache, "garbage").unwrap();
        assert_eq!(protect(&roots, SCAN_BUDGET, Some(&cache)).skipped, 0);
    }

    #[test]
    fn a_scan_past_its_budget_says_so() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..10 {
            std::fs::write(d.path().join(i.to_string()), "").unwrap();
        }
        let r = protect(&[d.path().to_path_buf()], 5, None);
        assert!(r.truncated);
        assert!(
            r.left[0].contains("stopped after 5 entries"),
            "{:?}",
            r.left
        );
    }
}
