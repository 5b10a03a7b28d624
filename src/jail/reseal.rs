//! Seals put back while the session runs: an entry point sealed one by one that something outside
//! replaces (an editor saving by rename, a checkout writing it anew) loses its bind in the jail —
//! the kernel detaches a mount whose name is renamed over or unlinked from another namespace — and
//! the new file is writable inside. A thread watches the directories of those entry points and, on
//! a new file at a sealed name, has `__seal` join the jail again and bind it read-only over itself.
//!
//! This narrows the opening to the time between the rename and the new bind (measured in
//! docs/performance.md); it does not close it, and nothing tells who wrote in between. So the
//! replacement is still alerted at the end of the session (`detached`). Seals that cannot come off
//! this way do not need it: the agents' state directories are the jail's own (`statedir`), a
//! repository's config is diverted (`gitcopy`), sealed directories keep their bind.

use super::mounts::Mount;
use super::policy::Policy;
use super::seal::SealRequest;
use inotify::{Inotify, WatchDescriptor, WatchMask};
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The sealed paths to keep sealed, by directory. Pure.
pub(crate) fn targets(policy: &Policy) -> HashMap<PathBuf, Vec<OsString>> {
    let diverted: Vec<&Path> = policy.git_copies.iter().map(|c| c.real.as_path()).collect();
    let mut out: HashMap<PathBuf, Vec<OsString>> = HashMap::new();
    for s in &policy.sealed {
        if diverted.contains(&s.path.as_path()) {
            continue;
        }
        if let (Some(dir), Some(name)) = (s.path.parent(), s.path.file_name()) {
            out.entry(dir.to_path_buf())
                .or_default()
                .push(name.to_owned());
        }
    }
    out
}

/// The running watch; stopped (and its thread joined) when dropped.
pub(crate) struct Resealer {
    stop: Option<OwnedFd>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Resealer {
    /// The thread sees the pipe's end and returns; not joined: closing its inotify instance waits
    /// for the kernel (an SRCU grace period, 10-20 ms at times), which then overlaps the end of the
    /// session instead of adding to it.
    fn drop(&mut self) {
        drop(self.stop.take());
        drop(self.thread.take());
    }
}

/// Start watching `policy`'s sealed entry points for the jail whose bwrap is `bwrap`. `None` when
/// there is nothing to watch or no watch can be had (the end-of-session alert still tells).
pub(crate) fn start(policy: &Policy, bwrap: i32) -> Option<Resealer> {
    let targets = targets(policy);
    if targets.is_empty() {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let inotify = Inotify::init().ok()?;
    let mask =
        WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::ONLYDIR | WatchMask::DONT_FOLLOW;
    let mut dirs: HashMap<WatchDescriptor, (PathBuf, Vec<OsString>)> = HashMap::new();
    for (dir, names) in targets {
        match inotify.watches().add(&dir, mask) {
            Ok(wd) => {
                dirs.insert(wd, (dir, names));
            }
            Err(e) => tracing::info!("not watching {} for replaced seals: {e}", dir.display()),
        }
    }
    let (stop_r, stop_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).ok()?;
    let thread = std::thread::Builder::new()
        .name("reseal".into())
        .spawn(move || watch(inotify, &dirs, &stop_r, bwrap, &exe))
        .ok()?;
    Some(Resealer {
        stop: Some(stop_w),
        thread: Some(thread),
    })
}

fn watch(
    mut inotify: Inotify,
    dirs: &HashMap<WatchDescriptor, (PathBuf, Vec<OsString>)>,
    stop: &OwnedFd,
    bwrap: i32,
    exe: &Path,
) {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut buf = [0u8; 4096];
    loop {
        let mut fds = [
            PollFd::new(&inotify, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        if poll(&mut fds, None).is_err() || !fds[1].revents().is_empty() {
            return;
        }
        let Ok(events) = inotify.read_events(&mut buf) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for ev in events {
            let (Some((dir, names)), Some(name)) = (dirs.get(&ev.wd), ev.name) else {
                continue;
            };
            if names.iter().any(|n| n == name) {
                paths.push(dir.join(name));
            }
        }
        // A symlink is not bound over (the bind would land on its target): the end alert tells.
        paths.retain(|p| std::fs::symlink_metadata(p).is_ok_and(|m| !m.file_type().is_symlink()));
        paths.dedup();
        if !paths.is_empty() {
            let t0 = std::time::Instant::now();
            let result = reseal(bwrap, &paths, exe);
            tracing::debug!(
                ms = t0.elapsed().as_secs_f64() * 1e3,
                n = paths.len(),
                ok = result.is_ok(),
                "replaced seals bound again"
            );
            if let Err(e) = result {
                tracing::warn!("a replaced seal was not bound again: {e}");
            }
        }
    }
}

/// Have `__seal` bind `paths` read-only over themselves in the jail of `bwrap`.
fn reseal(bwrap: i32, paths: &[PathBuf], exe: &Path) -> std::io::Result<()> {
    seal_into(
        bwrap,
        paths.iter().cloned().map(Mount::ReadOnly).collect(),
        exe,
    )
}

/// The jail's first process (outer PID) under its bwrap `bwrap`: its namespaces are the jail's.
pub(crate) fn jail_init(bwrap: i32) -> std::io::Result<i32> {
    std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children"))?
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<i32>().ok())
        .ok_or_else(|| std::io::Error::other("the jail has no first process"))
}

/// Have `__seal` (the binary `exe`) join the running jail of `bwrap` and make `ops` there: in the
/// jail's mount namespace only, the human's view is untouched.
pub(crate) fn seal_into(bwrap: i32, ops: Vec<Mount>, exe: &Path) -> std::io::Result<()> {
    use std::io::Write;
    let request = SealRequest {
        pid: jail_init(bwrap)?,
        ops,
    };
    let mut child = std::process::Command::new(exe)
        .arg(super::seal::SUBCOMMAND)
        .env_remove(crate::host::SEAL)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let text = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
    child.stdin.take().expect("piped").write_all(&text)?;
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}
