//! The watcher's start for a launch: the baseline of the writable PATH directories and the
//! repositories, then the watches — while bwrap builds the jail, before the gate opens.
//!
//! Guards against a plant made before the watcher looked: the command is held at the gate until both
//! the seals and the watches are in.

use super::input::Launch;
use crate::error::{Error, Result};
use crate::jail::plan::Plan;
use crate::{baseline, watch};
use std::path::Path;

/// Baseline the writable PATH directories and the repositories, then start the watcher. The
/// baseline's record (`baseline.json` in the session directory, hidden from the jail, removed with
/// it) is for a human looking during the session: nothing reads it back, so a thread of its own
/// writes it, a quarter of a second in, and not at all for a session that is over by then.
pub(super) fn start_watcher(
    plan: &Plan,
    launch: &Launch,
    session_dir: &Path,
    new_sockets: Option<std::sync::mpsc::Sender<std::path::PathBuf>>,
) -> Result<(watch::Running, Record)> {
    let (runtime, session) = (launch.runtime, launch.session);
    let t0 = std::time::Instant::now();
    let host = &launch.input.host;
    let base = baseline::take(
        &session.id,
        &launch.input.path_env,
        &launch.input.cwd,
        &|p| plan.jail_can_write(p),
        &plan.repos,
        host.home().as_deref(),
        baseline::Depth::Names,
    );
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "baseline taken");
    let cfg = watch::WatchConfig {
        runtime: runtime.to_path_buf(),
        session: session.id.clone(),
        workspace: plan.policy.workspace.clone(),
        force_poll: launch.knobs.force_poll,
        quarantine_new: plan.quarantine_new,
        hidden_globs: plan.hidden_globs.clone(),
        tree_dirs: plan.workspace_dirs.clone(),
        catch_up: false,
        placeholders: plan.placeholders.iter().map(|p| p.path.clone()).collect(),
        resolve_delay: launch.knobs.resolve_delay,
        tree_delay: launch.knobs.tree_delay,
        writable_roots: Some(plan.writable_roots()),
        host: host.clone(),
        envrc_path_dirs: plan.envrc_path_dirs.clone(),
        new_sockets,
    };
    let t0 = std::time::Instant::now();
    let running =
        watch::Running::start(cfg, &base).map_err(|e| Error::io("starting the watcher", e))?;
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "watches added");
    let file = crate::runtime_dir::SessionDir::at(session_dir.to_path_buf()).baseline();
    let (over, wait) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        // Not while the agent starts on the same cores; not at all for a session over by then.
        let written = match wait.recv_timeout(RECORD_DELAY) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => base.write(&file),
            _ => Ok(()),
        };
        drop(base);
        // The watcher keeps its own copy for the whole session: give back what the set-up used.
        // SAFETY: malloc_trim only releases free heap memory.
        unsafe { libc::malloc_trim(0) };
        written
    });
    Ok((running, Record { over, writer }))
}

/// The baseline's record is written this long into the session (see `start_watcher`).
const RECORD_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

/// The thread that writes the baseline's record, and the way to tell it the session is over.
pub(super) struct Record {
    over: std::sync::mpsc::Sender<()>,
    writer: std::thread::JoinHandle<Result<()>>,
}

impl Record {
    /// Wait for the record (written, or not needed: the session ended before it was due).
    pub(super) fn finish(self) -> Result<()> {
        drop(self.over);
        self.writer
            .join()
            .unwrap_or_else(|_| Err(Error::Jail("writing the baseline's record panicked".into())))
    }
}
