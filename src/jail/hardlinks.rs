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
//! (`plan::COPY_ENV`), and their stores in the jail are its own layers on another filesystem anyway.

use crate::alerts::{Alert, AlertKind, Severity};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// At most this many directory entries are read per launch (a bound on its cost, ~2.5 µs each: the
/// first launch on a workspace of a million files). What was found clean is remembered even when the
/// budget runs out, so the next launch reads on from there (`scan::scan`).
pub(crate) const SCAN_BUDGET: usize = 1_000_000;

/// At most this many files are bound read-only when their link cannot be broken (each is a mount).
pub(crate) const MAX_SEALS: usize = 64;

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

mod feed;
mod scan;
pub(crate) use feed::{feed, Check, Feed, Intake};
pub(crate) use scan::cache_file;

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

/// What `protect` did: for the debug log (`-vv`) and the tests.
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
#[cfg(test)]
pub(crate) fn protect(roots: &[PathBuf], budget: usize, cache: Option<&Path>) -> Report {
    protect_at(roots, budget, cache, scan::now())
}

/// `protect` at the time `now` (`scan::now`'s units): what the memory may keep depends on it.
#[cfg(test)]
pub(crate) fn protect_at(
    roots: &[PathBuf],
    budget: usize,
    cache: Option<&Path>,
    now: u64,
) -> Report {
    protect_fed(roots, None, budget, cache, now)
}

/// `protect_at`, the root `intake` covers walked by the entry-point walk (`feed`).
pub(crate) fn protect_fed(
    roots: &[PathBuf],
    intake: Option<Intake>,
    budget: usize,
    cache: Option<&Path>,
    now: u64,
) -> Report {
    let euid = rustix::process::geteuid().as_raw();
    let known = cache.map(scan::load).unwrap_or_default();
    let found = scan::scan_fed(roots, intake, budget, known, now);
    // Saved when the budget ran out too: the directories found clean are not read again, and a
    // workspace larger than the budget is complete after a launch or two, not alerted at each.
    if let Some(file) = cache.filter(|_| scan::worth_saving(found.changes)) {
        if let Err(e) = scan::save(file, &found.clean) {
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
    let report = timed(&plan.writable_roots(), runtime, None);
    record(plan, &report, runtime, session);
}

/// `protect` with the launch's budget, its cost in the debug log (`-vv`).
pub(crate) fn timed(roots: &[PathBuf], runtime: &Path, intake: Option<Intake>) -> Report {
    let t0 = std::time::Instant::now();
    // Nothing remembered where a directory's times may lag a change (`walk::memo::exact_times`).
    let cache = (roots.iter().all(|r| crate::walk::memo::exact_times(r)))
        .then(|| cache_file(runtime, roots));
    let report = protect_fed(roots, intake, SCAN_BUDGET, cache.as_deref(), scan::now());
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
    plan.gaps.extend(report.left.iter().cloned());
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
    let alert = Alert::new(
        AlertKind::HardLinkOpen,
        Severity::High,
        root,
        detail,
        session,
    );
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
