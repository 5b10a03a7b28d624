//! Reading the launch's input, once: `$HOME`, the workspace, bwrap, the command on `PATH`, the
//! configuration, and the environment's switches (`Knobs`). Nothing later reads the environment,
//! `PATH` or the working directory again.
//!
//! Guards against a jail planned from one view of the environment and run from another, and against
//! a bwrap or command found through a `PATH` the agent can write (bwrap by absolute path only).

use crate::config::{Config, ConfigPaths};
use crate::error::{Error, Result};
use crate::host::{self, HostEnv};
use crate::jail::placeholders::SessionId;
use crate::jail::plan::PlanInput;
use crate::jail::policy::Sealing;
use crate::watch;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `run`'s options from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub workspace: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub dry_run: bool,
    /// `--network MODE`: replaces the configured mode.
    pub network: Option<crate::net::Mode>,
    /// `--allow-domain D`: added to the allow list.
    pub allow_domains: Vec<String>,
    /// `--writable PATH`: added to the configured writable paths (the human's own word, as their
    /// configuration file is).
    pub writable: Vec<PathBuf>,
    pub command: Vec<OsString>,
}

/// The environment's switches for a launch (tests, benchmarks, unusual kernels).
#[derive(Debug, Clone, Copy)]
pub(super) struct Knobs {
    /// `CLAUDE_SANDBOX_SEAL=bwrap`: bwrap makes every mount.
    pub(super) sealing: Sealing,
    /// `CLAUDE_SANDBOX_SEAL=exec`: execute `__seal` even when the launcher could fork it.
    pub(super) exec_sealer: bool,
    /// `CLAUDE_SANDBOX_WATCH=poll`: the watcher sweeps only.
    pub(super) force_poll: bool,
    /// `CLAUDE_SANDBOX_RESOLVE_DELAY_MS`.
    pub(super) resolve_delay: Duration,
    /// `CLAUDE_SANDBOX_TREE_DELAY_MS`.
    pub(super) tree_delay: Duration,
}

impl Knobs {
    /// From the host's environment.
    pub(super) fn of(env: &HostEnv) -> Knobs {
        Knobs {
            sealing: match env.get_str(host::SEAL) {
                Some("bwrap") => Sealing::InBwrap,
                _ => Sealing::ByLauncher,
            },
            exec_sealer: env.get_str(host::SEAL) == Some("exec"),
            force_poll: env.get_str(host::WATCH) == Some("poll"),
            resolve_delay: env
                .get_str(host::RESOLVE_DELAY_MS)
                .and_then(|v| v.parse().ok())
                .map_or(watch::RESOLVE_DELAY, Duration::from_millis),
            tree_delay: env
                .get_str(host::TREE_DELAY_MS)
                .and_then(|v| v.parse().ok())
                .map_or(Duration::ZERO, Duration::from_millis),
        }
    }
}

/// Gather the planning input from the host.
pub fn plan_input(
    opts: &RunOptions,
    session_id: &str,
    env: &HostEnv,
) -> Result<(PlanInput, Config)> {
    let home = env.home_dir()?;
    let cwd = std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
    let workspace = match &opts.workspace {
        Some(w) if w.is_dir() => w.clone(),
        Some(w) => {
            return Err(Error::Usage(format!(
                "--workspace {}: not a directory",
                w.display()
            )))
        }
        None => host::default_workspace(&cwd),
    };
    let workspace =
        std::fs::canonicalize(&workspace).map_err(|e| Error::io("resolving the workspace", e))?;
    let config_paths = ConfigPaths::new(&home, &workspace, env);
    let mut config = Config::load(&config_paths, opts.config.as_deref(), &home, &workspace)?;
    crate::net::apply_cli(
        &mut config.network,
        opts.network,
        &opts.allow_domains,
        config.system.locked,
    )?;
    if config.system.locked && !opts.writable.is_empty() {
        return Err(Error::Usage(crate::config::locked_refusal("--writable")));
    }
    for w in &opts.writable {
        config.writable.push(if w.is_absolute() {
            w.clone()
        } else {
            cwd.join(w)
        });
    }
    let runtime_dir = crate::runtime_dir::locate(env);
    let session_home = crate::runtime_dir::RuntimeDir::new(&runtime_dir)
        .session(session_id)
        .home();
    let input = PlanInput {
        workspace,
        home,
        cwd,
        runtime_dir,
        session_home,
        bwrap: env.find_bwrap()?,
        self_exe: std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok()),
        config: config.clone(),
        config_paths,
        command: opts.command.clone(),
        path_env: env.path().to_owned(),
        host: env.clone(),
        uid: rustix::process::getuid().as_raw(),
        held: std::collections::HashSet::new(),
    };
    Ok((input, config))
}

/// What the parts of a launch need of its input, read once.
pub(super) struct Launch<'a> {
    pub(super) input: &'a PlanInput,
    pub(super) knobs: Knobs,
    pub(super) runtime: &'a Path,
    pub(super) session: &'a SessionId,
    /// The home PATH directories' entries at the start, for the summary (`layers::installed`).
    pub(super) installed: &'a crate::jail::layers::installed::Installed,
}
