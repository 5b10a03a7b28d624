//! The launcher: plan, create placeholders, start bwrap, forward signals, propagate the exit status,
//! clean up. `run` here; the input read once in `input`, the session and its clean-up guards in
//! `session`, the watcher's start in `watcher`, bwrap, the sealer, the gate and the signals in
//! `supervise`.
//!
//! Guards against a jail that is weaker than it claims: bwrap is found by absolute path (never through
//! a PATH the agent can write), the seccomp filter and the status pipe are passed as file descriptors,
//! and any failure before the command starts stops the launch with status 125 and a one-line cause.
//!
//! Signals: the jailed command stays in the launcher's process group and keeps the terminal, so
//! terminal-generated signals (Ctrl-C, Ctrl-\, SIGWINCH on resize, SIGHUP on hangup) reach it
//! directly from the kernel. Signals *sent* to the launcher by a process (`kill`, a supervisor) are
//! forwarded to the command: bwrap's own init (PID 1 in the jail) ignores them, so the launcher finds
//! the init's children and signals them.

use super::args::{bwrap_args, shell_quote};
use super::layout::{EXEC_FD, GO_FD, READY_FD, SECCOMP_FD, STATUS_FD, STDERR_FD};
use super::plan::{add_seals, plan, plan_jail, Plan, PlanInput};
use super::policy::{Fds, Sealing};
use super::{home, placeholders};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

mod input;
mod session;
mod supervise;
mod watcher;

pub use input::plan_input;

/// Signals forwarded to the jailed command.
pub const FORWARDED: &[i32] = &[SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2];

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub workspace: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub dry_run: bool,
    /// `--network MODE`: replaces the configured mode.
    pub network: Option<crate::net::Mode>,
    /// `--allow-domain D`: added to the allow list.
    pub allow_domains: Vec<String>,
    pub command: Vec<OsString>,
}

/// `claude-sandbox run`: returns the exit status to exit with.
pub fn run(opts: &RunOptions, env: &HostEnv) -> Result<i32> {
    let Some(cmd) = opts.command.first() else {
        return Err(Error::Usage(
            "run: no COMMAND given; usage: claude-sandbox run [--] COMMAND [ARGS...]".into(),
        ));
    };
    let t_start = std::time::Instant::now();
    let session = placeholders::SessionId::current();
    let (input, _config) = plan_input(opts, &session.id, env)?;
    let knobs = input::Knobs::of(env);
    let resolved = crate::host::resolve_command(cmd, &input.path_env, &input.cwd)?;
    // Clean up after dead sessions before planning, so their placeholders are not taken for the
    // human's files (and then pulled away under this session).
    let runtime = if opts.dry_run {
        None
    } else {
        let runtime = crate::runtime::ensure(&input.runtime_dir)?;
        // Made before planning, so that the plan hides it in the jail (`layers::prepare` says why
        // when it cannot be made).
        let _ = super::layers::ensure_store(&super::layers::store_dir(&input.home, env));
        placeholders::sweep(&runtime)?;
        home::sweep_dead(&runtime, session_alive, &input.home);
        Some(runtime)
    };
    tracing::debug!(
        ms = t_start.elapsed().as_secs_f64() * 1e3,
        "resolved, dead sessions swept"
    );
    let sealing = knobs.sealing;
    let t0 = std::time::Instant::now();
    // When the launcher seals, bwrap needs only the cheap part of the plan: the walk of the
    // workspace for entry points runs while bwrap builds the jail (the gate keeps the command
    // waiting until the seals are in).
    let seals_pending = runtime.is_some() && sealing == Sealing::ByLauncher;
    let mut plan = if seals_pending {
        plan_jail(&input)?
    } else {
        let mut plan = plan(&input)?;
        refuse_masked_command(&plan, cmd, &resolved)?;
        if runtime.is_some() {
            super::gitcopy::refuse_unpinnable(&plan.repos)
                .map_err(|e| Error::Jail(e.to_string()))?;
            super::hardlinks::apply(&mut plan, &input.runtime_dir, &session.id);
        }
        plan
    };
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "planned");
    for w in &plan.warnings {
        tracing::warn!("{w}");
    }
    let fds = Fds {
        seccomp: Some(SECCOMP_FD),
        status: Some(STATUS_FD),
        exec_helper: Some((EXEC_FD, STDERR_FD)),
        gate: Some((READY_FD, GO_FD)),
    };
    // `--dry-run` prints the jail as bwrap alone would build it: the same mounts, one argv, no gate.
    let args = bwrap_args(&plan.policy, Fds { gate: None, ..fds }, Sealing::InBwrap);
    let Some(runtime) = runtime else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", shell_quote(plan.policy.bwrap.as_os_str()));
        for a in &args {
            let _ = writeln!(out, "{}", shell_quote(a));
        }
        return Ok(0);
    };
    // Held until the session ends: the store in use, and the overlay's upper directories.
    let store = super::layers::store_dir(&input.home, env);
    let _layers = super::layers::prepare(&store, &mut plan.policy.layers)?;
    let pending = seals_pending.then_some(PendingSeals {
        input: &input,
        command: cmd,
        resolved: &resolved,
        session: &session.id,
    });
    let launch = session::Launch {
        input: &input,
        knobs,
        runtime: &runtime,
        session: &session,
    };
    session::execute(plan, pending, fds, &launch)
}

/// A command that is masked in the jail (`sudo`, bwrap itself) would fail there with a confusing
/// error: refuse it before anything runs.
fn refuse_masked_command(plan: &Plan, cmd: &std::ffi::OsStr, resolved: &Path) -> Result<()> {
    let Ok(real) = std::fs::canonicalize(resolved) else {
        return Ok(());
    };
    match plan.policy.masks.iter().find(|m| m.path == real) {
        Some(m) => Err(Error::NotExecutable(
            cmd.to_string_lossy().into_owned(),
            format!(": {} is masked in the jail ({})", real.display(), m.why),
        )),
        None => Ok(()),
    }
}

/// The part of the plan still to do once bwrap has started (see `plan::add_seals`).
struct PendingSeals<'a> {
    input: &'a PlanInput,
    command: &'a std::ffi::OsStr,
    resolved: &'a Path,
    session: &'a str,
}

impl PendingSeals<'_> {
    fn complete(self, plan: &mut Plan) -> Result<()> {
        let t0 = std::time::Instant::now();
        // `plan_jail`'s warnings, already shown.
        let shown = plan.warnings.len();
        // The hard-link scan walks the same roots: side by side (it only reads `$HOME`'s holes,
        // which `plan_jail` fixed, and renames nothing `add_seals` looks for).
        let roots = plan.writable_roots();
        let links = std::thread::scope(|s| {
            let links = s.spawn(|| super::hardlinks::timed(&roots, &self.input.runtime_dir));
            add_seals(plan, self.input);
            tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "seals planned");
            links.join()
        })
        .map_err(|_| Error::Jail("the hard-link scan panicked".into()))?;
        super::hardlinks::record(plan, &links, &self.input.runtime_dir, self.session);
        for w in &plan.warnings[shown..] {
            tracing::warn!("{w}");
        }
        refuse_masked_command(plan, self.command, self.resolved)
    }
}

fn session_alive(record: &[u8]) -> bool {
    serde_json::from_slice::<placeholders::SessionId>(record).is_ok_and(|s| s.alive())
}
