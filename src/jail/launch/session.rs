//! A launch's session: its directory and `$HOME`, its placeholders, the seals and the watcher made
//! side by side while the command waits at the gate, and the end: final sweep, merge back, release,
//! state sweep. `launch` runs them in order (and the jail again when sealing from outside fails).
//!
//! Guards against a session that leaves its traces behind when a step fails: each thing made is held
//! by a guard (`SessionHome`, `HeldPlaceholders`, `Unopened`) that undoes it when dropped — in the
//! reverse order of making, the jail first — so that every early return cleans up the same way, and
//! only the normal end (`end_session`) takes them apart in its own order.

use super::input::Launch;
use super::supervise::{Held, Jail};
use super::watcher::{start_watcher, Record};
use crate::error::{Error, Result};
use crate::jail::gitcopy;
use crate::jail::mounts::{mounts, the_sealers};
use crate::jail::placeholders::{self, SessionId};
use crate::jail::plan::{Placeholder, Plan};
use crate::jail::policy::{GitCopy, Sealing};
use crate::jail::{home, seal, statesweep};
use crate::watch;
use std::path::{Path, PathBuf};

/// The session directory and its `$HOME`: merged back and removed when dropped, unless the normal
/// end took them (`finish`).
pub(super) struct SessionHome {
    pub(super) dir: PathBuf,
    home: PathBuf,
    workspace: PathBuf,
    armed: bool,
}

/// The jail's own agent state directories (`statedir`), in the session directory `dir`.
fn make_state_dirs(plan: &Plan, dir: &Path) -> Result<()> {
    let states = crate::jail::statedir::of_policy(&plan.policy);
    crate::jail::statedir::prepare(dir, &plan.policy.home, &states)
        .map_err(|e| Error::io("making the jail's own agent state directories", e))
}

impl SessionHome {
    /// `states_now`: also make the jail's own state directories (when bwrap mounts `$HOME`; the
    /// sealer's thread makes them otherwise, beside the placeholders).
    pub(super) fn prepare(plan: &Plan, launch: &Launch, states_now: bool) -> Result<SessionHome> {
        let session = launch.session;
        let dir = home::session_dir(launch.runtime, &session.id);
        let record = serde_json::json!({
            "id": session.id, "pid": session.pid, "start": session.start,
            "lock": session.lock, "workspace": plan.policy.workspace,
        });
        home::prepare(&dir, &plan.policy.home, record.to_string().as_bytes())?;
        // The masked views of configs holding a secret: bound over them by bwrap or the sealer.
        for v in &plan.policy.views {
            let written = match &v.text {
                Some(text) => crate::secrets::inject::write_view(text, &v.copy),
                None => crate::secrets::views::write_copy(&v.path, v.format, &v.copy),
            };
            written.map_err(|e| {
                Error::io(
                    format!(
                        "making the masked view of {} (the launch stops rather than show it \
                         unmasked; free space in {}, or add the file to `hidden`)",
                        v.path.display(),
                        launch.runtime.display()
                    ),
                    e,
                )
            })?;
        }
        let made = SessionHome {
            dir,
            home: plan.policy.home.clone(),
            workspace: plan.policy.workspace.clone(),
            armed: true,
        };
        if states_now {
            make_state_dirs(plan, &made.dir)?;
        }
        Ok(made)
    }

    /// Merge `~/.claude.json` back and remove the directory; the notes for the human.
    fn finish(mut self) -> Vec<String> {
        self.armed = false;
        home::finish(&self.dir, &self.home, &self.workspace)
    }
}

impl Drop for SessionHome {
    fn drop(&mut self) {
        if self.armed {
            home::finish(&self.dir, &self.home, &self.workspace);
        }
    }
}

/// This session's hold on its placeholders: released when dropped (the last session holding one
/// removes it), unless the normal end released them after its final sweep.
pub(super) struct HeldPlaceholders<'a> {
    runtime: &'a Path,
    session: &'a SessionId,
    armed: bool,
}

impl HeldPlaceholders<'_> {
    fn release(mut self) -> Result<()> {
        self.armed = false;
        placeholders::release(self.runtime, self.session)
    }
}

impl Drop for HeldPlaceholders<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = placeholders::release(self.runtime, self.session);
        }
    }
}

/// A jail whose gate has not opened: aborted when dropped (the command never runs).
pub(super) struct Unopened(pub(super) Option<Jail>);

impl Unopened {
    pub(super) fn jail(&mut self) -> &mut Jail {
        self.0
            .as_mut()
            .expect("an unopened jail is there until taken")
    }

    pub(super) fn take(mut self) -> Jail {
        self.0.take().expect("an unopened jail is taken once")
    }
}

impl Drop for Unopened {
    fn drop(&mut self) {
        if let Some(jail) = self.0.take() {
            jail.abort();
        }
    }
}

/// Make `which` placeholders, timed.
fn make_placeholders(launch: &Launch, which: &[Placeholder], sealed: &[PathBuf]) -> Result<()> {
    let t0 = std::time::Instant::now();
    let made = placeholders::acquire(launch.runtime, launch.session, which, sealed);
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        n = which.len(),
        "placeholders created"
    );
    made
}

/// What the jail's seals and the watcher need of the session while the command waits at the gate.
pub(super) struct BeforeGate<'a> {
    pub(super) plan: &'a Plan,
    pub(super) launch: &'a Launch<'a>,
    pub(super) session_dir: &'a Path,
    pub(super) t0: std::time::Instant,
    /// Where the watcher tells of sockets made in the workspace (`jail::sockets::later`).
    pub(super) new_sockets: Option<std::sync::mpsc::Sender<std::path::PathBuf>>,
}

/// The sealing's outcome, the watcher when one was started, and the jail's git configs when the
/// sealer mounts them.
pub(super) type Sealed = (
    Result<Held>,
    Option<Result<(watch::Running, Record)>>,
    Option<Vec<GitCopy>>,
);

impl BeforeGate<'_> {
    /// Two things before the gate opens, side by side: the watcher (baseline and watches) when
    /// `start_watcher`, and the jail's seals (their placeholders and git configs first, then the
    /// mounts, once bwrap is ready).
    pub(super) fn seal_and_watch(
        &self,
        jail: &mut Jail,
        for_sealer: &[Placeholder],
        to_copy: Option<Vec<GitCopy>>,
        start_watcher_too: bool,
    ) -> Sealed {
        let (plan, launch, session_dir) = (self.plan, self.launch, self.session_dir);
        // The git copies and the mount points in the session's `$HOME` are made beside the
        // placeholders: all mostly wait on the disk (new inodes), none touches what the others make,
        // and all are done before the sealer runs. (A copy exists only when the launcher seals.)
        std::thread::scope(|scope| {
            let copying = to_copy.map(|mut copies| {
                scope.spawn(move || {
                    let states = make_state_dirs(plan, session_dir);
                    let n = seal::premake_mount_points(&plan.policy);
                    tracing::debug!(n, "mount points made in the session's $HOME");
                    let t_git = std::time::Instant::now();
                    let home = &plan.policy.session_home;
                    let warnings = gitcopy::prepare(
                        session_dir,
                        home,
                        launch.session,
                        &plan.policy.writable,
                        &mut copies,
                    );
                    tracing::debug!(
                        ms = t_git.elapsed().as_secs_f64() * 1e3,
                        n = copies.len(),
                        "git configs copied and diverted"
                    );
                    (copies, warnings, states)
                })
            });
            let sealing = scope.spawn(|| -> (Result<Held>, Option<Vec<_>>) {
                // Always: another session's placeholders this one sealed as it found them (made
                // between this session's look at the registry and its walk) are held by it too;
                // so are those it mounts a view on (Claude Code's `.claude` in the project: made
                // by a session started a moment before, it was removed at that one's end under
                // this one's view, and left in the workspace).
                let sealed: Vec<PathBuf> = plan
                    .policy
                    .sealed
                    .iter()
                    .map(|s| s.path.clone())
                    .chain(plan.policy.state_views.iter().map(|(p, _)| p.clone()))
                    .collect();
                let made = make_placeholders(launch, for_sealer, &sealed);
                // Joined before anything fails: the copies' diversions are withdrawn with them.
                let Ok(copied) = copying.map(std::thread::ScopedJoinHandle::join).transpose()
                else {
                    return (
                        Err(Error::Jail("copying git configs panicked".into())),
                        None,
                    );
                };
                let (copied, warnings, states) =
                    copied.map_or((None, Vec::new(), Ok(())), |(c, w, s)| (Some(c), w, s));
                if let Err(e) = made.and(states) {
                    return (Err(e), copied);
                }
                // Shown only now: a launch stopped above says one line, its error.
                for w in warnings {
                    tracing::warn!("{w}");
                }
                let git_copies = copied.as_deref().unwrap_or(&plan.policy.git_copies);
                let mounts = mounts(&plan.policy, git_copies);
                (
                    Ok(jail.hold_and_seal(the_sealers(&mounts), self.t0)),
                    copied,
                )
            });
            let started = start_watcher_too
                .then(|| start_watcher(plan, launch, session_dir, self.new_sockets.clone()));
            let (held, copied) = sealing
                .join()
                .unwrap_or_else(|_| (Err(Error::Jail("sealing panicked".into())), None));
            (held, started, copied)
        })
    }
}

/// The state directories (bound writable) are made before bwrap starts, and every placeholder too
/// when bwrap makes the seals. The sealer needs the seals' placeholders only once the jail is up, so
/// those are made while bwrap sets up (making an inode can wait on the disk: 2 to 50 ms for 40 of
/// them here). Returns the ones made, and the session's hold on them.
pub(super) fn placeholders_before_bwrap<'a>(
    plan: &Plan,
    sealing: Sealing,
    launch: &Launch<'a>,
) -> Result<(Vec<Placeholder>, HeldPlaceholders<'a>)> {
    let for_bwrap: Vec<_> = plan
        .placeholders
        .iter()
        .filter(|p| p.state_dir || sealing == Sealing::InBwrap)
        .cloned()
        .collect();
    if !for_bwrap.is_empty() {
        make_placeholders(launch, &for_bwrap, &[])?;
    }
    let held = HeldPlaceholders {
        runtime: launch.runtime,
        session: launch.session,
        armed: true,
    };
    Ok((for_bwrap, held))
}

/// After the jail: the final sweep (before `run` returns, so that a script checking right after
/// sees every alert), then the placeholders and the session directory go.
pub(super) fn end_session(
    plan: &Plan,
    launch: &Launch,
    session_home: SessionHome,
    held_placeholders: HeldPlaceholders,
    watcher: Option<(watch::Running, Record)>,
) {
    let (runtime, session) = (launch.runtime, launch.session);
    let session_dir = session_home.dir.clone();
    let t0 = std::time::Instant::now();
    let (running, writer) = match watcher {
        Some((w, writer)) => (Some(w), Some(writer)),
        None => (None, None),
    };
    // The session home is merged back (after the baseline's record, since its directory goes) while
    // the watcher sweeps; the placeholders go after the sweep, which must not see them go.
    let closing = std::thread::scope(|scope| {
        let merged = scope.spawn(|| {
            if let Some(Err(e)) = writer.map(Record::finish) {
                crate::logfile::note(&format!("the baseline's record was not kept: {e}"));
            }
            super::created::finish(plan, &session_dir);
            super::edited::finish(plan, &session_dir);
            session_home.finish()
        });
        let closing = running.map(watch::Running::finish);
        tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "final sweep done");
        // Notes name what the jail wrote (file names, keys): escaped.
        for note in merged.join().unwrap_or_default() {
            crate::logfile::note(&crate::escape::visible(&note));
        }
        closing
    });
    let t0 = std::time::Instant::now();
    if let Err(e) = held_placeholders.release() {
        crate::logfile::note(&e.to_string());
    }
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "placeholders removed"
    );
    for note in crate::jail::worktrees::finish(&plan.worktree_listings) {
        crate::logfile::note(&note);
    }
    let git_home = Some(plan.policy.home.as_path());
    for note in crate::jail::local_remotes::notes(plan, git_home) {
        crate::logfile::note(&note);
    }
    let placeheld: Vec<PathBuf> = plan.placeholders.iter().map(|p| p.path.clone()).collect();
    let home = &plan.policy.home;
    for note in statesweep::sweep(runtime, &session.id, home, &plan.state_listings, &placeheld) {
        crate::logfile::note(&crate::escape::visible(&note));
    }
    // Escaped where the names are put in (`installed::notes`).
    for note in launch.installed.notes() {
        crate::logfile::note(&note);
    }
    // Last, so that the kernel frees the watches while the clean-up runs. Closing still waits for
    // an SRCU grace period: 0.1 ms, or 10-20 ms in 4 launches of 10 here (docs/performance.md, "The
    // end of a session"). Logged under its own target, so that the benchmark can read it alone.
    let t0 = std::time::Instant::now();
    drop(closing);
    tracing::debug!(
        target: "claude_sandbox::timing",
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "inotify instance closed"
    );
}
