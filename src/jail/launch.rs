//! The launcher: plan, create placeholders, start bwrap, forward signals, propagate the exit status,
//! clean up.
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
use super::plan::{add_seals, plan, plan_jail, Plan, PlanInput};
use super::policy::{Fds, Sealing};
use super::{home, placeholders, seal, seccomp};
use crate::config::{Config, ConfigPaths};
use crate::error::{Error, Result, EXIT_JAIL};
use crate::{baseline, watch};
use signal_hook::consts::signal::*;
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod supervise;
use supervise::*;

/// Where bwrap may be; the first that exists is used. `CLAUDE_SANDBOX_BWRAP` overrides (an absolute
/// path), for tests and unusual installs.
pub const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The fd numbers bwrap receives (fixed so that `--dry-run` prints the exact argv).
const SECCOMP_FD: i32 = 3;
const STATUS_FD: i32 = 4;
const EXEC_FD: i32 = 5;
const STDERR_FD: i32 = 6;
const READY_FD: i32 = 7;
const GO_FD: i32 = 8;

/// `CLAUDE_SANDBOX_SEAL=bwrap` has bwrap make every mount (slower; the way to compare, and a way
/// around a kernel without `mount_setattr`, though that is also detected and handled).
pub const ENV_SEAL: &str = "CLAUDE_SANDBOX_SEAL";

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

/// Find bwrap by absolute path.
pub fn find_bwrap() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("CLAUDE_SANDBOX_BWRAP") {
        let p = PathBuf::from(p);
        if p.is_absolute() && p.is_file() {
            return Ok(p);
        }
        return Err(Error::BwrapMissing(format!(
            "CLAUDE_SANDBOX_BWRAP={} is not an absolute path to a file",
            p.display()
        )));
    }
    BWRAP_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| Error::BwrapMissing(format!("looked in {}", BWRAP_PATHS.join(", "))))
}

/// The workspace: the git top level of `cwd`, else `cwd`.
pub fn default_workspace(cwd: &Path) -> PathBuf {
    let mut cur = Some(cwd);
    while let Some(dir) = cur {
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
        cur = dir.parent();
    }
    cwd.to_path_buf()
}

/// `$HOME`, required absolute and existing.
pub fn home_dir() -> Result<PathBuf> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.is_dir())
        .ok_or_else(|| {
            Error::Usage("$HOME is not set to an existing absolute directory; set it".into())
        })?;
    std::fs::canonicalize(&home).map_err(|e| Error::io("resolving $HOME", e))
}

/// Resolve COMMAND like `execvp` would: 127 if not found, 126 if found but not executable.
pub fn resolve_command(
    cmd: &std::ffi::OsStr,
    path_env: &std::ffi::OsStr,
    cwd: &Path,
) -> Result<PathBuf> {
    let name = cmd.to_string_lossy().into_owned();
    let candidates: Vec<PathBuf> = if name.contains('/') {
        vec![cwd.join(cmd)]
    } else {
        std::env::split_paths(path_env)
            .map(|d| {
                if d.as_os_str().is_empty() {
                    cwd.to_path_buf()
                } else {
                    cwd.join(d)
                }
                .join(cmd)
            })
            .collect()
    };
    let mut found_unexecutable = None;
    for c in candidates {
        let Ok(meta) = std::fs::metadata(&c) else {
            continue;
        };
        if meta.is_file() && rustix::fs::access(&c, rustix::fs::Access::EXEC_OK).is_ok() {
            return Ok(c);
        }
        found_unexecutable.get_or_insert(c);
    }
    match found_unexecutable {
        Some(p) => Err(Error::NotExecutable(name, format!(" ({})", p.display()))),
        None => Err(Error::CommandNotFound(name)),
    }
}

/// Gather the planning input from the environment of this process.
pub fn plan_input(opts: &RunOptions, session_id: &str) -> Result<(PlanInput, Config)> {
    let home = home_dir()?;
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    let workspace = match &opts.workspace {
        Some(w) if w.is_dir() => w.clone(),
        Some(w) => {
            return Err(Error::Usage(format!(
                "--workspace {}: not a directory",
                w.display()
            )))
        }
        None => default_workspace(&cwd),
    };
    let workspace =
        std::fs::canonicalize(&workspace).map_err(|e| Error::io("resolving the workspace", e))?;
    let config_paths = ConfigPaths::new(&home, &workspace);
    let mut config = Config::load(&config_paths, opts.config.as_deref(), &home, &workspace)?;
    crate::net::apply_cli(&mut config.network, opts.network, &opts.allow_domains)?;
    let runtime_dir = crate::runtime::locate();
    let session_home = crate::runtime::RuntimeDir::new(&runtime_dir)
        .session(session_id)
        .home();
    let input = PlanInput {
        workspace,
        home,
        cwd,
        runtime_dir,
        session_home,
        bwrap: find_bwrap()?,
        self_exe: std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok()),
        config: config.clone(),
        config_paths,
        command: opts.command.clone(),
        path_env: std::env::var_os("PATH").unwrap_or_default(),
        env: std::env::vars().collect(),
        uid: rustix::process::getuid().as_raw(),
    };
    Ok((input, config))
}

/// `claude-sandbox run`: returns the exit status to exit with.
pub fn run(opts: &RunOptions) -> Result<i32> {
    let Some(cmd) = opts.command.first() else {
        return Err(Error::Usage(
            "run: no COMMAND given; usage: claude-sandbox run [--] COMMAND [ARGS...]".into(),
        ));
    };
    let t_start = std::time::Instant::now();
    let session = placeholders::SessionId::current();
    let (input, _config) = plan_input(opts, &session.id)?;
    let resolved = resolve_command(cmd, &input.path_env, &input.cwd)?;
    // Clean up after dead sessions before planning, so their placeholders are not taken for the
    // human's files (and then pulled away under this session).
    let runtime = if opts.dry_run {
        None
    } else {
        let runtime = crate::runtime::ensure(&input.runtime_dir)?;
        // Made before planning, so that the plan hides it in the jail (`layers::prepare` says why
        // when it cannot be made).
        let _ = super::layers::ensure_store(&super::layers::store_dir(&input.home, &input.env));
        placeholders::sweep(&runtime)?;
        home::sweep_dead(&runtime, session_alive, &input.home);
        Some(runtime)
    };
    tracing::debug!(
        ms = t_start.elapsed().as_secs_f64() * 1e3,
        "resolved, dead sessions swept"
    );
    let sealing = match std::env::var(ENV_SEAL).as_deref() {
        Ok("bwrap") => Sealing::InBwrap,
        _ => Sealing::ByLauncher,
    };
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
            super::gitcopy::refuse_unpinnable(&plan.repos).map_err(Error::Jail)?;
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
    let store = super::layers::store_dir(&input.home, &input.env);
    let _layers = super::layers::prepare(&store, &mut plan.policy.layers)?;
    let pending = seals_pending.then_some(PendingSeals {
        input: &input,
        command: cmd,
        resolved: &resolved,
        session: &session.id,
    });
    execute(plan, pending, sealing, fds, &runtime, &session)
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
        let shown = plan.warnings.len(); // `plan_jail`'s, already shown
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

fn execute(
    mut plan: Plan,
    mut pending: Option<PendingSeals>,
    mut sealing: Sealing,
    fds: Fds,
    runtime: &Path,
    session: &placeholders::SessionId,
) -> Result<i32> {
    let exists = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let session_dir = home::session_dir(runtime, &session.id);
    let record = serde_json::json!({
        "id": session.id, "pid": session.pid, "start": session.start,
        "workspace": plan.policy.workspace,
    });
    home::prepare(
        &session_dir,
        &plan.policy.home,
        record.to_string().as_bytes(),
    )?;
    // Allowlist mode: the proxy's socket is bound now (bwrap binds its directory into the jail) and
    // served once bwrap has started (the sealer is forked while the launcher has one thread).
    let mut proxy = match crate::net::proxy::for_policy(&plan.policy, runtime, &session.id) {
        Ok(p) => p,
        Err(e) => {
            home::finish(&session_dir, &plan.policy.home, &plan.policy.workspace);
            return Err(e);
        }
    };
    let mut proxy_running = None;
    // The state directories (bound writable) are made before bwrap starts, and every placeholder
    // too when bwrap makes the seals. The sealer needs the seals' placeholders only once the jail
    // is up, so those are made while bwrap sets up (making an inode can wait on the disk: 2 to 50 ms
    // for 40 of them here).
    let for_bwrap: Vec<_> = plan
        .placeholders
        .iter()
        .filter(|p| p.state_dir || sealing == Sealing::InBwrap)
        .cloned()
        .collect();
    let make_placeholders = |which: &[super::plan::Placeholder]| {
        let t0 = std::time::Instant::now();
        let made = placeholders::acquire(runtime, session, which);
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            n = which.len(),
            "placeholders created"
        );
        made
    };
    let made = if for_bwrap.is_empty() {
        Ok(())
    } else {
        make_placeholders(&for_bwrap)
    };
    if let Err(e) = made {
        home::finish(&session_dir, &plan.policy.home, &plan.policy.workspace);
        return Err(e);
    }
    let mut placeholders_made = false;
    let cleanup = |plan: &Plan| {
        let _ = placeholders::release(runtime, session);
        home::finish(&session_dir, &plan.policy.home, &plan.policy.workspace);
    };
    let t0 = std::time::Instant::now();
    let mut watcher: Option<(watch::Running, Record)> = None;
    let mut retried = false;
    let result = loop {
        // A socket that went away since planning (a server stopped) cannot be bound over; dropping
        // its mask is safe, since nothing is left to reach.
        plan.policy.masks.retain(|m| exists(&m.path));
        let args = bwrap_args(&plan.policy, fds, sealing);
        let mut jail = match Jail::spawn(&plan, &args, sealing) {
            Ok(j) => j,
            Err(e) => {
                drop(watcher);
                cleanup(&plan);
                return Err(e);
            }
        };
        tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "bwrap started");
        if let Some(p) = proxy.take() {
            proxy_running = Some(p.start());
        }
        // The rest of the plan, the baseline and the watcher are made while bwrap builds the jail:
        // the command cannot run before the gate opens, so nothing the agent does can precede them.
        let mut to_copy = None;
        if let Some(p) = pending.take() {
            if let Err(e) = p.complete(&mut plan) {
                jail.abort();
                cleanup(&plan);
                return Err(e);
            }
            // Only the sealer can mount a symlink: the jail's own git configs come with it.
            to_copy = Some(super::gitcopy::choose(&plan.policy, &plan.repos));
        }
        let for_sealer: Vec<_> = plan
            .placeholders
            .iter()
            .filter(|p| !placeholders_made && !for_bwrap.contains(p))
            .cloned()
            .collect();
        // Two things before the gate opens, side by side: the watcher (baseline and watches), and
        // the jail's seals (their placeholders and git configs first, then the mounts, once bwrap
        // is ready). The git copies and the mount points in the session's `$HOME` are made beside
        // the placeholders: all mostly wait on the disk (new inodes), none touches what the others
        // make, and all are done before the sealer runs.
        let (held, started, copied) = std::thread::scope(|scope| {
            let copying = to_copy.map(|mut copies| {
                let (session_dir, home) = (&session_dir, &plan.policy.session_home);
                let policy = &plan.policy;
                scope.spawn(move || {
                    if sealing == Sealing::ByLauncher {
                        let n = seal::premake_mount_points(policy);
                        tracing::debug!(n, "mount points made in the session's $HOME");
                    }
                    let t_git = std::time::Instant::now();
                    let warnings = super::gitcopy::prepare(session_dir, home, session, &mut copies);
                    tracing::debug!(
                        ms = t_git.elapsed().as_secs_f64() * 1e3,
                        n = copies.len(),
                        "git configs copied and diverted"
                    );
                    (copies, warnings)
                })
            });
            let sealing = scope.spawn(|| -> (Result<Held>, Option<Vec<_>>) {
                let made = match for_sealer.is_empty() {
                    true => Ok(()),
                    false => make_placeholders(&for_sealer),
                };
                // Joined before anything fails: the copies' diversions are withdrawn with them.
                let copied = match copying.map(|c| c.join()).transpose() {
                    Ok(c) => c,
                    Err(_) => {
                        return (
                            Err(Error::Jail("copying git configs panicked".into())),
                            None,
                        )
                    }
                };
                let (copied, warnings) = copied.map_or((None, Vec::new()), |(c, w)| (Some(c), w));
                if let Err(e) = made {
                    return (Err(e), copied);
                }
                // Shown only now: a launch stopped above says one line, its error.
                for w in warnings {
                    tracing::warn!("{w}");
                }
                let copies = copied.as_deref().unwrap_or(&plan.policy.git_copies);
                let ops = seal::seal_ops(&plan.policy, copies);
                (Ok(jail.hold_and_seal(&ops, t0)), copied)
            });
            let started = watcher
                .is_none()
                .then(|| start_watcher(&plan, runtime, session, &session_dir));
            let (held, copied) = sealing
                .join()
                .unwrap_or_else(|_| (Err(Error::Jail("sealing panicked".into())), None));
            (held, started, copied)
        });
        if let Some(copied) = copied {
            plan.policy.git_copies = copied;
        }
        placeholders_made = true;
        if let Some(started) = started {
            tracing::debug!(
                ms = t0.elapsed().as_secs_f64() * 1e3,
                "baseline taken, watcher started"
            );
            match started {
                Ok(w) => watcher = Some(w),
                Err(e) => {
                    jail.abort();
                    cleanup(&plan);
                    return Err(e);
                }
            }
        }
        let held = match held {
            Ok(held) => held,
            Err(e) => {
                jail.abort();
                drop(watcher);
                cleanup(&plan);
                return Err(e);
            }
        };
        // The command owns the terminal from here: log lines go to the runtime's log file.
        crate::logfile::divert(runtime, &session.id);
        match jail.open_gate(held) {
            Gate::Opened(jail) => {
                tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "gate opened");
                break jail.wait();
            }
            Gate::SealFailed(jail, why) => {
                // Not a weaker jail: the command never ran; the same mounts are now bwrap's.
                tracing::info!(
                    "sealing from outside failed ({why}); bwrap makes the seals instead"
                );
                jail.abort();
                if let Err(e) = super::gitcopy::withdraw(&session_dir, &mut plan.policy.git_copies)
                {
                    drop(watcher);
                    cleanup(&plan);
                    return Err(Error::Jail(e));
                }
                sealing = Sealing::InBwrap;
                continue;
            }
            Gate::SetupFailed(jail) => {
                let result = jail.wait();
                // One retry when the failure was a mask target vanishing during setup.
                if result.is_err() && !retried && plan.policy.masks.iter().any(|m| !exists(&m.path))
                {
                    retried = true;
                    continue;
                }
                break result;
            }
        }
    };
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "jail ended");
    for line in proxy_running.iter().flat_map(|p| p.summary()) {
        eprintln!("claude-sandbox: network: {line}");
    }
    end_session(&plan, runtime, session, &session_dir, watcher);
    crate::logfile::restore(runtime);
    result
}

/// After the jail: the final sweep (before `run` returns, so that a script checking right after
/// sees every alert), then the placeholders and the session directory go.
fn end_session(
    plan: &Plan,
    runtime: &Path,
    session: &placeholders::SessionId,
    session_dir: &Path,
    watcher: Option<(watch::Running, Record)>,
) {
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
                eprintln!("claude-sandbox: the baseline's record was not kept: {e}");
            }
            unread_created(plan, session_dir);
            home::finish(session_dir, &plan.policy.home, &plan.policy.workspace)
        });
        let closing = running.map(watch::Running::finish);
        tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "final sweep done");
        for note in merged.join().unwrap_or_default() {
            eprintln!("claude-sandbox: {note}");
        }
        closing
    });
    let t0 = std::time::Instant::now();
    if let Err(e) = placeholders::release(runtime, session) {
        eprintln!("claude-sandbox: {e}");
    }
    tracing::debug!(
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "placeholders removed"
    );
    let placeheld: Vec<PathBuf> = plan.placeholders.iter().map(|p| p.path.clone()).collect();
    let home = &plan.policy.home;
    for note in
        super::statesweep::sweep(runtime, &session.id, home, &plan.state_listings, &placeheld)
    {
        eprintln!("claude-sandbox: {note}");
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

/// A workspace-root entry point left unblocked because nothing here reads it (`plan::readers`) that
/// appeared during the session: alerted, since a tool installed later would run it.
fn unread_created(plan: &Plan, session_dir: &Path) {
    for p in plan
        .unread
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
    {
        let detail = format!(
            "{} was created during the session; nothing installed here reads it, so it was not \
             blocked, but a tool installed later would: review it",
            p.display()
        );
        home::alert(session_dir, p, "entry-point-created", &detail);
    }
}

/// Baseline the writable PATH directories and the repositories, then start the watcher. The
/// baseline's record (`baseline.json` in the session directory, hidden from the jail, removed with
/// it) is for a human looking during the session: nothing reads it back, so a thread of its own
/// writes it, a quarter of a second in, and not at all for a session that is over by then.
fn start_watcher(
    plan: &Plan,
    runtime: &Path,
    session: &placeholders::SessionId,
    session_dir: &Path,
) -> Result<(watch::Running, Record)> {
    let path_env = std::env::var_os("PATH").unwrap_or_default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| plan.policy.workspace.clone());
    let t0 = std::time::Instant::now();
    let base = baseline::take(
        &session.id,
        &path_env,
        &cwd,
        &|p| plan.jail_can_write(p),
        &plan.repos,
        baseline::Depth::Names,
    );
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "baseline taken");
    let cfg = watch::WatchConfig {
        runtime: runtime.to_path_buf(),
        session: session.id.clone(),
        workspace: plan.policy.workspace.clone(),
        force_poll: std::env::var(watch::ENV_MODE).is_ok_and(|v| v == "poll"),
        quarantine_new: plan.quarantine_new,
        hidden_globs: plan.hidden_globs.clone(),
        tree_dirs: plan.workspace_dirs.clone(),
        catch_up: false,
        placeholders: plan.placeholders.iter().map(|p| p.path.clone()).collect(),
        resolve_delay: std::env::var(watch::ENV_RESOLVE_DELAY)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_millis)
            .unwrap_or(watch::RESOLVE_DELAY),
        writable_roots: Some(plan.writable_roots()),
    };
    let t0 = std::time::Instant::now();
    let running =
        watch::Running::start(cfg, &base).map_err(|e| Error::io("starting the watcher", e))?;
    tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "watches added");
    let file = crate::runtime::SessionDir::at(session_dir.to_path_buf()).baseline();
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
struct Record {
    over: std::sync::mpsc::Sender<()>,
    writer: std::thread::JoinHandle<Result<()>>,
}

impl Record {
    /// Wait for the record (written, or not needed: the session ended before it was due).
    fn finish(self) -> Result<()> {
        drop(self.over);
        self.writer
            .join()
            .unwrap_or_else(|_| Err(Error::Jail("writing the baseline's record panicked".into())))
    }
}

fn session_alive(record: &[u8]) -> bool {
    serde_json::from_slice::<placeholders::SessionId>(record)
        .map(|s| s.alive())
        .unwrap_or(false)
}
