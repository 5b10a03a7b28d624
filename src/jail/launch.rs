//! The launcher: plan, create placeholders, start bwrap, forward signals, propagate the exit status,
//! clean up. `run` and `execute` here hold the order of a launch (the steps of docs/architecture.md,
//! "A launch"); its parts never call back into them: the input read once in `input`, the session
//! and its clean-up guards in `session`, the watcher's start in `watcher`, bwrap, the sealer, the
//! gate and the signals in `supervise`.
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
use super::plan::{plan, plan_jail, Plan, PlanInput};
use super::policy::{Fds, Sealing};
use super::{gitcopy, home, placeholders};
use crate::error::{Error, Result};
use crate::host::HostEnv;
use crate::watch;
use input::Launch;
use session::{end_session, placeholders_before_bwrap, BeforeGate, SessionHome, Unopened};
use std::io::Write;
use std::path::Path;
use supervise::{Gate, Jail};
use watcher::Record;

mod created;
pub(crate) mod edited;
mod hangup;
mod input;
mod session;
mod supervise;
mod watcher;

pub use input::{plan_input, RunOptions};

/// The fds bwrap is given, at their numbers in the jail (`layout`).
const FDS: Fds = Fds {
    seccomp: Some(SECCOMP_FD),
    status: Some(STATUS_FD),
    exec_helper: Some((EXEC_FD, STDERR_FD)),
    gate: Some((READY_FD, GO_FD)),
};

/// `claude-sandbox run`: returns the exit status to exit with.
pub fn run(opts: &RunOptions, env: &HostEnv) -> Result<i32> {
    let Some(cmd) = opts.command.first() else {
        return Err(Error::Usage(
            "run: no COMMAND given; usage: claude-sandbox run [--] COMMAND [ARGS...]".into(),
        ));
    };
    let t_start = std::time::Instant::now();
    // Dropped last (after the session's end and the layers): the lock says it ran until then.
    let mut _lock = None;
    let mut session = placeholders::SessionId::current();
    let (mut input, _config) = plan_input(opts, &session.id, env)?;
    let knobs = input::Knobs::of(env);
    let resolved = crate::host::resolve_command(cmd, &input.path_env, &input.cwd)?;
    // Clean up after dead sessions before planning, so their placeholders are not taken for the
    // human's files (and then pulled away under this session).
    let runtime = if opts.dry_run {
        None
    } else {
        let runtime = crate::runtime_dir::ensure(&input.runtime_dir)?;
        crate::runtime_dir::reserve::keep(&crate::runtime_dir::RuntimeDir::new(&runtime));
        // Held to the end: what says this session is alive (`liveness`), to every other launcher.
        _lock = Some(
            super::liveness::SessionLock::take(&runtime, &mut session)
                .map_err(|e| Error::io("taking the session's lock", e))?,
        );
        // Made before planning, so that the plan hides it in the jail (`layers::prepare` says why
        // when it cannot be made).
        let _ = super::layers::ensure_store(&super::layers::store_dir(&input.home, env));
        // The same for the audit trail: hidden in the jail, so it must exist to be hidden.
        crate::audit::ensure(&crate::audit::dir(&input.home, env));
        placeholders::sweep(&runtime)?;
        home::sweep_dead(&runtime, session_alive, &input.home);
        if super::liveness::sweep(&runtime) {
            // A launcher died: what its bwrap left before it could start is ended (`orphans`).
            super::orphans::end_stuck(&input.bwrap);
        }
        // What live sessions hold: this one holds it too (their end must not pull it away).
        input.held = placeholders::held(&runtime);
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
    for w in plan.warnings.iter().chain(&plan.gaps) {
        tracing::warn!("{w}");
    }
    let withheld = &plan.withheld_env;
    if !withheld.is_empty() && runtime.is_some() {
        // By name only, one line before the command starts: the value never reaches a terminal.
        eprintln!(
            "claude-sandbox: withheld from the jail (secrets by name or value): {}",
            withheld.join(" ")
        );
    }
    let Some(runtime) = runtime else {
        // `--dry-run` prints the jail as bwrap alone would build it: the same mounts, one argv,
        // no gate.
        let args = bwrap_args(&plan.policy, Fds { gate: None, ..FDS }, Sealing::InBwrap);
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
    let installed =
        super::layers::installed::Installed::before(&plan.policy.home, &plan.policy.layers);
    super::ownfiles::prepare(&store, &plan.policy.own_files)?;
    let pending = seals_pending.then_some(PendingSeals {
        input: &input,
        command: cmd,
        resolved: &resolved,
        session: &session.id,
    });
    let launch = Launch {
        input: &input,
        knobs,
        runtime: &runtime,
        session: &session,
        installed: &installed,
    };
    let audit = record_launch(&plan, &input, &session.id, env, !seals_pending)?;
    let t_run = std::time::Instant::now();
    let result = execute(plan, pending, &launch);
    let _ = crate::audit::record_in(
        &audit,
        crate::audit::end_event(&result, t_run.elapsed(), &session.id),
    );
    result
}

/// bwrap's setup failure, with the cause and the choice where the container refuses a network
/// namespace and the policy asks for one.
fn setup_failure(e: Error, policy: &crate::jail::policy::Policy) -> Error {
    match e {
        Error::Jail(m)
            if policy.network.mode.unshares() && crate::net::netns_refused(&policy.bwrap) =>
        {
            Error::Jail(format!("{m}; {}", crate::net::NO_NETNS_FIX))
        }
        e => e,
    }
}

/// Steps 5 to 10: the session, bwrap, the seals and the watcher, the gate, the end. The exit status
/// to exit with.
fn execute(mut plan: Plan, mut pending: Option<PendingSeals>, launch: &Launch) -> Result<i32> {
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let (runtime, session) = (launch.runtime, launch.session);
    let mut sealing = launch.knobs.sealing;
    // With the launcher sealing, the jail's own state directories are made beside the placeholders
    // while bwrap starts (`BeforeGate::seal_and_watch`); bwrap needs them before it starts.
    let states_now = sealing == Sealing::InBwrap || pending.is_none();
    let session_home = SessionHome::prepare(&plan, launch, states_now)?;
    let session_dir = session_home.dir.clone();
    // Allowlist mode: the proxy's socket is bound now (bwrap binds its directory into the jail) and
    // served by a process of its own, forked while the launcher has one thread; `[ssh]`'s and
    // `[containers]`'s filters too (`service`).
    let (net_dir, host) = (plan.policy.net_dir.as_deref(), &launch.input.host);
    let proxy_running =
        crate::net::proxy::for_policy(net_dir, &plan.policy.network, runtime, &session.id, host)?;
    let _services = crate::service::for_policy(&plan.policy, runtime, &session.id)?;
    let (for_bwrap, held_placeholders) = placeholders_before_bwrap(&plan, sealing, launch)?;
    let mut placeholders_made = false;
    let t0 = std::time::Instant::now();
    // Dropped before the placeholders and the session's home on an early return.
    let mut watcher: Option<(watch::Running, Record)> = None;
    let mut retried = false;
    let mut guarded = None;
    // Sockets made in the workspace during the session: the watcher tells, `detached::guard` judges.
    let (tell, judge) = std::sync::mpsc::channel();
    let (mut tell, mut judge) = (Some(tell), Some(judge));
    let result = loop {
        // A socket that went away since planning (a server stopped) cannot be bound over; dropping
        // its mask is safe, since nothing is left to reach.
        plan.policy.masks.retain(|m| exists(&m.path));
        let args = bwrap_args(&plan.policy, FDS, sealing);
        let mut jail = Unopened(Some(Jail::spawn(
            &plan,
            &args,
            sealing,
            launch.knobs.exec_sealer,
        )?));
        tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "bwrap started");
        // The rest of the plan, the baseline and the watcher are made while bwrap builds the jail:
        // the command cannot run before the gate opens, so nothing the agent does can precede them.
        let mut to_copy = None;
        if let Some(p) = pending.take() {
            p.complete(&mut plan)?;
            // Only the sealer can mount a symlink: the jail's own git configs come with it.
            to_copy = Some(gitcopy::choose(&plan.policy, &plan.repos));
        }
        let for_sealer: Vec<_> = plan
            .placeholders
            .iter()
            .filter(|p| !placeholders_made && !for_bwrap.contains(p))
            .cloned()
            .collect();
        let before = BeforeGate {
            plan: &plan,
            launch,
            session_dir: &session_dir,
            t0,
            new_sockets: tell.take(),
        };
        let (held, started, copied) =
            before.seal_and_watch(jail.jail(), &for_sealer, to_copy, watcher.is_none());
        if let Some(copied) = copied {
            plan.policy.git_copies = copied;
        }
        placeholders_made = true;
        if let Some(started) = started {
            tracing::debug!(
                ms = t0.elapsed().as_secs_f64() * 1e3,
                "baseline taken, watcher started"
            );
            watcher = Some(started?);
        }
        let held = held?;
        // The command owns the terminal from here: log lines go to the runtime's log file.
        crate::logfile::divert(runtime, &session.id);
        match jail.take().open_gate(held) {
            Gate::Opened(jail) => {
                tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "gate opened");
                let bwrap = jail.child.as_raw_nonzero().get();
                guarded = Some(super::detached::guard(&plan.policy, bwrap, judge.take()));
                break jail.wait();
            }
            Gate::SealFailed(jail, why) => {
                // Not a weaker jail: the command never ran; the same mounts are now bwrap's.
                tracing::info!(
                    "sealing from outside failed ({why}); bwrap makes the seals instead"
                );
                jail.abort();
                gitcopy::withdraw(&session_dir, &mut plan.policy.git_copies)
                    .map_err(|e| Error::Jail(e.to_string()))?;
                sealing = Sealing::InBwrap;
            }
            Gate::SetupFailed(jail) => {
                let result = jail.wait();
                // One retry when the failure was a mask target vanishing during setup.
                if result.is_err() && !retried && plan.policy.masks.iter().any(|m| !exists(&m.path))
                {
                    retried = true;
                    continue;
                }
                break result.map_err(|e| setup_failure(e, &plan.policy));
            }
        }
    };
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "jail ended");
    if let Some(proxy) = proxy_running {
        for line in proxy.summary() {
            crate::logfile::note(&format!("network: {line}"));
        }
    }
    if let Some(g) = guarded {
        g.finish(&plan.policy, &session_dir);
    }
    end_session(&plan, launch, session_home, held_placeholders, watcher);
    crate::logfile::restore(runtime);
    result
}

/// The session's `launch` record (its shipping configured first); the audit directory for the
/// rest. With `fail_closed`, a launch whose record cannot be written does not start, nor one with
/// a gap in its plan when the plan is whole now (`gaps_known`; else `PendingSeals::complete`
/// judges them): that refusal is the session's end record.
fn record_launch(
    plan: &Plan,
    input: &PlanInput,
    session: &str,
    env: &HostEnv,
    gaps_known: bool,
) -> Result<std::path::PathBuf> {
    let audit = crate::audit::dir(&input.home, env);
    crate::audit::configure_shipping(&input.config.audit);
    let recorded =
        crate::audit::record_in(&audit, crate::audit::launch_event(plan, input, session));
    match recorded {
        Err(e) if input.config.system.fail_closed => Err(Error::FailClosed(
            format!(
                "the audit trail cannot be written ({}: {e})",
                audit.display()
            ),
            system_file(&input.config),
        )),
        _ if gaps_known => match refuse_gaps(plan, &input.config) {
            Err(e) => {
                let refused: Result<i32> = Err(e);
                let _ = crate::audit::record_in(
                    &audit,
                    crate::audit::end_event(&refused, std::time::Duration::ZERO, session),
                );
                refused.map(|_| audit)
            }
            Ok(()) => Ok(audit),
        },
        _ => Ok(audit),
    }
}

/// With `fail_closed`, a plan with a gap (`Plan::gaps`) does not start: the first gap named, the
/// rest counted.
fn refuse_gaps(plan: &Plan, config: &crate::config::Config) -> Result<()> {
    let gaps = &plan.gaps;
    match gaps.first() {
        Some(first) if config.system.fail_closed => Err(Error::FailClosed(
            if gaps.len() > 1 {
                format!("{first} (and {} more)", gaps.len() - 1)
            } else {
                first.clone()
            },
            system_file(config),
        )),
        _ => Ok(()),
    }
}

/// The system file the configuration read, for messages about what it decides.
fn system_file(config: &crate::config::Config) -> String {
    config.sources.first().map_or_else(
        || crate::config::SYSTEM_FILE.into(),
        |p| p.display().to_string(),
    )
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
        // `plan_jail`'s warnings and gaps, already shown.
        let shown = plan.warnings.len();
        let gaps_shown = plan.gaps.len();
        // The hard-link scan walks the same roots: side by side (it only reads `$HOME`'s holes,
        // which `plan_jail` fixed, and renames nothing `add_seals` looks for). The workspace's
        // share is done by the entry-point walk, which hands it what it does not descend into.
        let roots = plan.writable_roots();
        let ws = plan.policy.workspace.clone();
        let (feed, intake) = if roots.contains(&ws) {
            let (feed, intake) = super::hardlinks::feed(&ws);
            (Some(feed), Some(intake))
        } else {
            (None, None)
        };
        let links = std::thread::scope(|s| {
            let links =
                s.spawn(|| super::hardlinks::timed(&roots, &self.input.runtime_dir, intake));
            super::plan::add_seals_fed(plan, self.input, feed);
            tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "seals planned");
            links.join()
        })
        .map_err(|_| Error::Jail("the hard-link scan panicked".into()))?;
        super::hardlinks::record(plan, &links, &self.input.runtime_dir, self.session);
        // The jail's own files planned with the seals: their copies before the sealer binds them.
        let store = super::layers::store_dir(&self.input.home, &self.input.host);
        super::ownfiles::prepare(&store, &plan.policy.own_files)?;
        for w in plan.warnings[shown..]
            .iter()
            .chain(&plan.gaps[gaps_shown..])
        {
            tracing::warn!("{w}");
        }
        refuse_gaps(plan, &self.input.config)?;
        refuse_masked_command(plan, self.command, self.resolved)
    }
}

fn session_alive(record: &[u8]) -> bool {
    serde_json::from_slice::<placeholders::SessionId>(record).is_ok_and(|s| s.alive())
}
