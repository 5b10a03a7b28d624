//! Reading the launch's input, once: `$HOME`, the workspace, bwrap, the command on `PATH`, the
//! configuration, and the environment's switches (`Knobs`). Nothing later reads the environment,
//! `PATH` or the working directory again.
//!
//! Guards against a jail planned from one view of the environment and run from another, and against
//! a bwrap or command found through a `PATH` the agent can write (bwrap by absolute path only).

use super::{RunOptions, BWRAP_PATHS, ENV_SEAL};
use crate::config::{Config, ConfigPaths};
use crate::error::{Error, Result};
use crate::jail::plan::PlanInput;
use crate::jail::policy::Sealing;
use crate::watch;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
}

impl Knobs {
    /// From the environment `PlanInput` captured.
    pub(super) fn of(input: &PlanInput) -> Knobs {
        let var = |name: &str| {
            input
                .env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        Knobs {
            sealing: match var(ENV_SEAL) {
                Some("bwrap") => Sealing::InBwrap,
                _ => Sealing::ByLauncher,
            },
            exec_sealer: var(ENV_SEAL) == Some("exec"),
            force_poll: var(watch::ENV_MODE) == Some("poll"),
            resolve_delay: var(watch::ENV_RESOLVE_DELAY)
                .and_then(|v| v.parse().ok())
                .map_or(watch::RESOLVE_DELAY, Duration::from_millis),
        }
    }
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
