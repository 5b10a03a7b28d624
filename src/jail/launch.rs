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
    let session_home = home::session_dir(&runtime_dir, session_id).join("home");
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
        let plan = plan(&input)?;
        refuse_masked_command(&plan, cmd, &resolved)?;
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
}

impl PendingSeals<'_> {
    fn complete(self, plan: &mut Plan) -> Result<()> {
        let t0 = std::time::Instant::now();
        let shown = plan.warnings.len(); // `plan_jail`'s, already shown
        add_seals(plan, self.input);
        tracing::debug!(ms = t0.elapsed().as_secs_f64() * 1e3, "seals planned");
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
        if let Some(p) = pending.take() {
            if let Err(e) = p.complete(&mut plan) {
                jail.abort();
                cleanup(&plan);
                return Err(e);
            }
        }
        let for_sealer: Vec<_> = plan
            .placeholders
            .iter()
            .filter(|p| !placeholders_made && !for_bwrap.contains(p))
            .cloned()
            .collect();
        let ops = seal::seal_ops(&plan.policy);
        // Two things before the gate opens, side by side: the watcher (baseline and watches), and
        // the jail's seals (their placeholders first, then the mounts, once bwrap is ready).
        let (held, started) = std::thread::scope(|scope| {
            let sealing = scope.spawn(|| -> Result<Held> {
                if !for_sealer.is_empty() {
                    make_placeholders(&for_sealer)?;
                }
                Ok(jail.hold_and_seal(&ops, t0))
            });
            let started = watcher
                .is_none()
                .then(|| start_watcher(&plan, runtime, session, &session_dir));
            let held = sealing
                .join()
                .unwrap_or_else(|_| Err(Error::Jail("sealing panicked".into())));
            (held, started)
        });
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
    let file = session_dir.join("baseline.json");
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

/// What bwrap reported on its status fd.
#[derive(Debug, Default)]
struct Status {
    child_pid: Option<i32>,
    exit_code: Option<i32>,
}

/// Mark every inherited fd above stderr close-on-exec, so that no socket or file the launcher was
/// given (by an IDE terminal, a supervisor) reaches the jail; only the fds placed for bwrap survive.
fn close_inherited_fds() {
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for fd in fds.into_iter().filter(|fd| *fd > 2) {
        // SAFETY: only the flag changes; an fd closed meanwhile (the read_dir's own) gives EBADF.
        let fd = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
        let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::io("creating a pipe", e.into()))
}

/// A started bwrap whose first process waits at the gate.
struct Jail {
    child: rustix::process::Pid,
    status: Arc<Mutex<Status>>,
    reader: std::thread::JoinHandle<()>,
    bwrap_messages: std::thread::JoinHandle<String>,
    forwarder: std::thread::JoinHandle<()>,
    signals: signal_hook::iterator::Handle,
    ready: OwnedFd,
    go: OwnedFd,
    /// The sealer, started with bwrap; waits for its request.
    sealer: Option<Sealer>,
    /// A forked sealer that has answered, to be reaped.
    reap: Option<rustix::process::Pid>,
}

/// `CLAUDE_SANDBOX_SEAL=exec` (tests): execute `__seal` even when the launcher could fork it, so
/// that the path a second attempt takes is tested too.
fn executed_sealer_asked() -> bool {
    std::env::var(ENV_SEAL).is_ok_and(|v| v == "exec")
}

/// A process that seals the jail from outside (see `seal`).
enum Sealer {
    /// Forked from the launcher (the usual case).
    Forked(seal::Forked),
    /// `claude-sandbox __seal`, when the launcher already runs threads and must not fork.
    Executed(std::process::Child),
}

/// Start `program` with `args`, the fds in `map` placed at fixed numbers and `stderr` as its
/// stderr, without waiting for the exec (the launcher has better things to do meanwhile; an exec
/// failure is reported on `stderr` and ends the child with 127, which the gate sees as a failed
/// setup).
fn fork_exec(
    program: &Path,
    args: &[OsString],
    map: &[(i32, i32); 6],
    stderr: OwnedFd,
) -> std::io::Result<rustix::process::Pid> {
    use std::os::unix::ffi::OsStrExt;
    let cstring = |s: &std::ffi::OsStr| {
        std::ffi::CString::new(s.as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let program = cstring(program.as_os_str())?;
    let mut owned = vec![program.clone()];
    for a in args {
        owned.push(cstring(a)?);
    }
    let mut argv: Vec<*const libc::c_char> = owned.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let stderr_fd = stderr.as_raw_fd();
    // SAFETY: between fork and exec the child makes only async-signal-safe calls (fcntl, dup2,
    // sigaction, execv, write, _exit) on memory prepared before the fork.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => unsafe {
            let placed = place_fds(map).is_ok()
                && libc::dup2(stderr_fd, 2) == 2
                && super::exec::ignore_terminal_signals().is_ok();
            if placed {
                libc::execv(program.as_ptr(), argv.as_ptr());
            }
            const MSG: &[u8] = b"claude-sandbox: cannot execute bwrap\n";
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
            libc::_exit(127)
        },
        pid => Ok(rustix::process::Pid::from_raw(pid).expect("fork returns a positive pid")),
    }
}

/// How opening the gate went.
enum Gate {
    /// The command runs.
    Opened(Jail),
    /// bwrap's setup failed before the jail's first process started.
    SetupFailed(Jail),
    /// The jail is up but could not be sealed from outside; the command has not run.
    SealFailed(Jail, String),
}

/// The jail behind a shut gate (see `Jail::hold_and_seal`).
enum Held {
    Ready,
    SetupFailed,
    SealFailed(String),
}

impl Jail {
    fn spawn(plan: &Plan, args: &[OsString], sealing: Sealing) -> Result<Jail> {
        close_inherited_fds();
        let self_exe = std::env::current_exe()
            .map_err(|e| Error::io("finding the claude-sandbox binary", e))?;
        let sealer = match sealing {
            Sealing::InBwrap => None,
            // Forked while this process has one thread (the first attempt); executed otherwise.
            Sealing::ByLauncher if seal::single_threaded() && !executed_sealer_asked() => {
                Some(Sealer::Forked(
                    seal::Forked::start().map_err(|e| Error::io("starting the sealer", e))?,
                ))
            }
            Sealing::ByLauncher => Some(Sealer::Executed(
                std::process::Command::new(&self_exe)
                    .arg(seal::SUBCOMMAND)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| Error::io("starting the sealer", e))?,
            )),
        };
        let (seccomp_r, seccomp_w) = pipe()?;
        let (status_r, status_w) = pipe()?;
        // bwrap's own stderr is captured, so a setup failure becomes one clear line; the command
        // gets the real stderr back from the exec helper.
        let (err_r, err_w) = pipe()?;
        let (ready_r, ready_w) = pipe()?;
        let (go_r, go_w) = pipe()?;
        let real_stderr = rustix::io::fcntl_dupfd_cloexec(std::io::stderr(), 3)
            .map_err(|e| Error::io("duplicating stderr", e.into()))?;
        let helper = std::fs::File::open(&self_exe)
            .map_err(|e| Error::io(format!("opening {}", self_exe.display()), e))?;
        let program = seccomp::program_bytes();
        rustix::io::write(&seccomp_w, &program)
            .map_err(|e| Error::io("writing the seccomp filter", e.into()))?;
        drop(seccomp_w);

        // Register before spawning, so no signal in between kills the launcher with the jail running.
        let mut signals = SignalsInfo::<WithOrigin>::new(FORWARDED)
            .map_err(|e| Error::io("registering signal handlers", e))?;
        let handle = signals.handle();

        let map = [
            (seccomp_r.as_raw_fd(), SECCOMP_FD),
            (status_w.as_raw_fd(), STATUS_FD),
            (helper.as_raw_fd(), EXEC_FD),
            (real_stderr.as_raw_fd(), STDERR_FD),
            (ready_w.as_raw_fd(), READY_FD),
            (go_r.as_raw_fd(), GO_FD),
        ];
        let child = fork_exec(&plan.policy.bwrap, args, &map, err_w).map_err(|e| {
            Error::Jail(format!("cannot start {}: {e}", plan.policy.bwrap.display()))
        })?;
        drop((seccomp_r, status_w, helper, real_stderr, ready_w, go_r));

        let status = Arc::new(Mutex::new(Status::default()));
        let reader = spawn_status_reader(status_r, Arc::clone(&status));
        let bwrap_messages = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::fs::File::from(err_r), &mut text);
            text
        });
        let forwarder = {
            let status = Arc::clone(&status);
            std::thread::spawn(move || {
                for origin in signals.forever() {
                    if origin.cause == Cause::Kernel {
                        continue; // from the terminal: the command, in our process group, got it too
                    }
                    let init = status.lock().map(|s| s.child_pid).unwrap_or(None);
                    if let Some(init) = init {
                        forward(init, origin.signal);
                    }
                }
            })
        };
        Ok(Jail {
            child,
            status,
            reader,
            bwrap_messages,
            forwarder,
            signals: handle,
            ready: ready_r,
            go: go_w,
            sealer,
            reap: None,
        })
    }

    /// Wait until bwrap's setup is done, and seal from outside if asked. The command still waits at
    /// the gate (see `open_gate`).
    fn hold_and_seal(&mut self, ops: &[seal::SealOp], t0: std::time::Instant) -> Held {
        let mut byte = [0u8; 1];
        let ready = loop {
            match rustix::io::read(&self.ready, &mut byte) {
                Err(rustix::io::Errno::INTR) => continue,
                r => break matches!(r, Ok(1)),
            }
        };
        if !ready {
            return Held::SetupFailed;
        }
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "jail set up, held at the gate"
        );
        if let Some(sealer) = self.sealer.take() {
            if let Err(why) = self.seal(sealer, ops) {
                return Held::SealFailed(why);
            }
            tracing::debug!(
                ms = t0.elapsed().as_secs_f64() * 1e3,
                mounts = ops.len(),
                "sealed from outside"
            );
        }
        Held::Ready
    }

    /// Let the command run, if `hold_and_seal` found the jail ready.
    fn open_gate(self, held: Held) -> Gate {
        match held {
            Held::SetupFailed => Gate::SetupFailed(self),
            Held::SealFailed(why) => Gate::SealFailed(self, why),
            Held::Ready => match rustix::io::write(&self.go, &[super::exec::GO]) {
                Ok(1) => Gate::Opened(self),
                _ => Gate::SetupFailed(self),
            },
        }
    }

    /// Hand the jail's init PID and the mounts to the sealer and wait for its answer.
    fn seal(&mut self, sealer: Sealer, ops: &[seal::SealOp]) -> std::result::Result<(), String> {
        let bwrap = self.child.as_raw_nonzero();
        // bwrap's only child is the jail's init; the helper is waiting, so it exists.
        let init = std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children"))
            .ok()
            .and_then(|c| c.split_whitespace().next()?.parse::<i32>().ok())
            .ok_or_else(|| "cannot find the jail's init process".to_string());
        let request = |pid| seal::SealRequest {
            pid,
            ops: ops.to_vec(),
        };
        match sealer {
            Sealer::Forked(forked) => {
                self.reap = Some(forked.pid);
                forked.seal(&request(init?))
            }
            Sealer::Executed(mut child) => {
                let text = serde_json::to_vec(&request(init?)).map_err(|e| e.to_string())?;
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(&text);
                }
                let out = child.wait_with_output().map_err(|e| e.to_string())?;
                if out.status.success() {
                    return Ok(());
                }
                let msg = String::from_utf8_lossy(&out.stderr);
                Err(msg
                    .lines()
                    .next()
                    .unwrap_or("no message")
                    .trim()
                    .to_string())
            }
        }
    }

    /// Shut the gate for good (the command never runs) and wait for bwrap to go.
    fn abort(self) {
        let _ = self.wait();
    }

    /// Wait for bwrap; the command's exit status, or bwrap's setup failure.
    fn wait(self) -> Result<i32> {
        let Jail {
            child,
            status,
            reader,
            bwrap_messages,
            forwarder,
            signals,
            ready,
            go,
            sealer,
            reap,
        } = self;
        // Closing our ends: a helper still at the gate sees end of file and exits.
        drop((ready, go));
        let unused = match sealer {
            Some(Sealer::Forked(f)) => Some(f.pid),
            Some(Sealer::Executed(mut c)) => {
                let _ = c.kill();
                let _ = c.wait();
                None
            }
            None => None,
        };
        if let Some(pid) = unused {
            let _ = crate::process::signal_process(
                pid.as_raw_nonzero().get(),
                rustix::process::Signal::KILL,
            );
        }
        for pid in unused.into_iter().chain(reap) {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        }
        let exit = loop {
            match rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::io("waiting for bwrap", e.into())),
                Ok(None) => continue,
                Ok(Some((_, status))) => break status,
            }
        };
        let _ = reader.join();
        signals.close();
        let _ = forwarder.join();
        let messages = bwrap_messages.join().unwrap_or_default();
        let exit_code = status.lock().map(|s| s.exit_code).unwrap_or(None);
        match (exit_code, exit.terminating_signal()) {
            (Some(code), _) => {
                if !messages.is_empty() {
                    eprint!("{messages}");
                }
                Ok(code)
            }
            (None, Some(sig)) => Ok(128 + sig),
            (None, None) => {
                let first = messages
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no message")
                    .trim();
                Err(Error::Jail(format!(
                    "{first} (bwrap exit status {})",
                    exit.exit_status().unwrap_or(EXIT_JAIL)
                )))
            }
        }
    }
}

/// In the child after fork: move fds to fixed numbers without CLOEXEC. No allocation here.
fn place_fds(map: &[(i32, i32); 6]) -> std::io::Result<()> {
    use rustix::fd::BorrowedFd;
    use std::os::fd::FromRawFd;
    // First lift every source above the targets, so no dup2 clobbers a source not yet moved.
    let mut lifted: [Option<OwnedFd>; 6] = Default::default();
    for (i, (src, _)) in map.iter().enumerate() {
        // SAFETY: the fd numbers are open in the parent and inherited by this child.
        lifted[i] = Some(rustix::io::fcntl_dupfd_cloexec(
            unsafe { BorrowedFd::borrow_raw(*src) },
            64,
        )?);
    }
    for (i, (_, dst)) in map.iter().enumerate() {
        let high = lifted[i].as_ref().expect("lifted above");
        // SAFETY: dup2 onto a fixed number is the point; the OwnedFd is forgotten, never closed.
        let mut target = unsafe { OwnedFd::from_raw_fd(*dst) };
        let res = rustix::io::dup2(high, &mut target);
        std::mem::forget(target);
        res?;
    }
    Ok(())
}

fn spawn_status_reader(fd: OwnedFd, status: Arc<Mutex<Status>>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let reader = std::io::BufReader::new(std::fs::File::from(fd));
        for line in reader.lines().map_while(|l| l.ok()) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if let Ok(mut s) = status.lock() {
                if let Some(pid) = v.get("child-pid").and_then(|p| p.as_i64()) {
                    s.child_pid = Some(pid as i32);
                }
                if let Some(code) = v.get("exit-code").and_then(|c| c.as_i64()) {
                    s.exit_code = Some(code as i32);
                }
            }
        }
    })
}

/// Send `sig` to every child of the jail's init (the command, and orphans it adopted).
fn forward(init: i32, sig: i32) {
    let children =
        std::fs::read_to_string(format!("/proc/{init}/task/{init}/children")).unwrap_or_default();
    let Ok(signal) = rustix::process::Signal::from_named_raw(sig).ok_or(()) else {
        return;
    };
    for pid in children
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        let _ = crate::process::signal_process(pid, signal);
    }
}
