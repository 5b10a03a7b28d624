//! The host as this process found it: its environment, read once (`HostEnv::capture`, in
//! `cli::main`) and handed to every verb, and what is found through it (bwrap, a command on `PATH`,
//! `$HOME`, the workspace of a directory). Every variable the project reads or sets is named here.
//!
//! Guards against a launch planned from one view of the environment and run from another, and
//! against a variable read under two spellings. Only the helpers that run inside the jail (`__exec`,
//! `__connect`, `__seal`) and `cli`'s logging and colour (`RUST_LOG`, `NO_COLOR`, read before any
//! verb runs) read the environment themselves.

use crate::error::{Error, Result};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

// The human's environment.
/// Git expands `~/` with it, shells look in it; the jail's `$HOME` is the same path.
pub(crate) const HOME: &str = "HOME";
pub(crate) const PATH: &str = "PATH";
/// The human's login shell (the PATH of their future shells, `doctor`'s prompt hook check).
pub(crate) const SHELL: &str = "SHELL";
pub(crate) const XDG_RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";
pub(crate) const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
/// npm's global prefix: its `bin/` is on the human's PATH.
pub(crate) const NPM_CONFIG_PREFIX: &str = "NPM_CONFIG_PREFIX";
/// The ssh agent's socket: always masked in the jail; `[ssh]` sets it to the filter's (`ssh_agent`).
pub(crate) const SSH_AUTH_SOCK: &str = "SSH_AUTH_SOCK";
/// Passed on to the login shell that tells the PATH of the human's future shells.
pub(crate) const LOGIN_SHELL_VARS: &[&str] = &["USER", "LOGNAME", "LANG"];

// claude-sandbox's own switches.
/// The per-user runtime directory itself (tests and unusual setups).
pub(crate) const RUNTIME_DIR: &str = "CLAUDE_SANDBOX_RUNTIME_DIR";
/// The jail's layer store instead of `~/.local/state/claude-sandbox/layers`.
pub(crate) const LAYERS_DIR: &str = "CLAUDE_SANDBOX_LAYERS_DIR";
/// bwrap by absolute path instead of `BWRAP_PATHS` (tests and unusual installs).
pub(crate) const BWRAP: &str = "CLAUDE_SANDBOX_BWRAP";
/// `bwrap`: bwrap makes every mount; `exec`: the sealer is executed, never forked; and the tests'
/// `fail-halfway`, `die-halfway` (`jail::seal`).
pub(crate) const SEAL: &str = "CLAUDE_SANDBOX_SEAL";
/// `poll`: the watcher sweeps only.
pub(crate) const WATCH: &str = "CLAUDE_SANDBOX_WATCH";
/// Milliseconds the watcher waits before it resolves what a new name shadows.
pub(crate) const RESOLVE_DELAY_MS: &str = "CLAUDE_SANDBOX_RESOLVE_DELAY_MS";
/// Milliseconds the watcher waits before it watches the workspace tree (tests: the command's
/// first writes come before the watches).
pub(crate) const TREE_DELAY_MS: &str = "CLAUDE_SANDBOX_TREE_DELAY_MS";
/// `0`: the watcher does not ask the login shell for the PATH of future shells.
pub(crate) const LOGIN_PATH: &str = "CLAUDE_SANDBOX_LOGIN_PATH";
/// The system configuration file instead of `/etc/claude-sandbox/config.toml`.
pub(crate) const SYSTEM_CONFIG: &str = "CLAUDE_SANDBOX_SYSTEM_CONFIG";
/// The installed prompt hook instead of `/etc/profile.d/claude-sandbox.sh` (`doctor`).
pub(crate) const PROFILE_HOOK: &str = "CLAUDE_SANDBOX_PROFILE_HOOK";
/// Set by the prompt hook in the shells it runs in (`doctor`).
pub(crate) const PROMPT_HOOK: &str = "CLAUDE_SANDBOX_PROMPT_HOOK";
/// The battery's case files instead of the installed or checked-out `battery/`.
pub(crate) const BATTERY: &str = "CLAUDE_SANDBOX_BATTERY";
/// Where the battery makes its scenes instead of `/var/tmp`.
pub(crate) const TEST_TMP: &str = "CLAUDE_SANDBOX_TEST_TMP";
/// Tests only: `name=ip,name=ip`, resolved by the allowlist proxy instead of DNS.
pub(crate) const TEST_HOSTS: &str = "CLAUDE_SANDBOX_TEST_HOSTS";
/// The audit directory instead of `~/.local/state/claude-sandbox/audit` (an absolute path).
pub(crate) const AUDIT_DIR: &str = "CLAUDE_SANDBOX_AUDIT_DIR";
/// Tests only: a directory of device nodes read instead of `/dev` for `[devices] gpu`.
pub(crate) const TEST_DEV_ROOT: &str = "CLAUDE_SANDBOX_TEST_DEV_ROOT";
/// Tests only: `pending=N,tunnels=N,head_ms=N`, the allowlist proxy's limits instead of the defaults.
pub(crate) const TEST_NET_LIMITS: &str = "CLAUDE_SANDBOX_TEST_NET_LIMITS";

// Set in the jail.
/// `1` in the jail: `claude-sandbox run` there runs the command directly (`jail::nested`).
pub(crate) const IN_JAIL: &str = "CLAUDE_SANDBOX";
/// The read-only claude-sandbox binary in the jail, named to the agents' hook commands.
pub(crate) const HOOK_BIN: &str = "CLAUDE_SANDBOX_HOOK";
/// For the exec helper only (removed before the command runs): the proxy's socket to bridge to.
pub(crate) const NET_BRIDGE: &str = "CLAUDE_SANDBOX_NET_BRIDGE";
/// For the exec helper only (removed before the command runs): the loopback ports to bridge.
pub(crate) const NET_LOOPBACK: &str = "CLAUDE_SANDBOX_NET_LOOPBACK";

/// Where bwrap may be; the first that exists is used (`BWRAP` overrides).
pub(crate) const BWRAP_PATHS: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// The environment of this process, as it was when the verb started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostEnv {
    vars: Vec<(OsString, OsString)>,
}

impl HostEnv {
    /// This process's environment: the one read of it.
    #[must_use]
    pub fn capture() -> HostEnv {
        HostEnv {
            vars: std::env::vars_os().collect(),
        }
    }

    /// An environment of these variables only (tests).
    #[cfg(test)]
    pub(crate) fn of(vars: &[(&str, &str)]) -> HostEnv {
        HostEnv {
            vars: vars.iter().map(|(k, v)| (k.into(), v.into())).collect(),
        }
    }

    /// The value of `name`, if it is set.
    pub(crate) fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    /// Every variable, in the order found.
    pub(crate) fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The value of `name`, if it is set and UTF-8.
    pub(crate) fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(OsStr::to_str)
    }

    /// `$PATH` (empty when unset).
    pub(crate) fn path(&self) -> &OsStr {
        self.get(PATH).unwrap_or_default()
    }

    /// `$HOME` as the human's tools read it: unresolved (git's `~/`, a shell's PATH). The jail is
    /// planned from the resolved one (`home_dir`).
    pub(crate) fn home(&self) -> Option<PathBuf> {
        self.get(HOME).map(PathBuf::from)
    }

    /// `$HOME`, required absolute and existing, resolved.
    pub(crate) fn home_dir(&self) -> Result<PathBuf> {
        let home = self
            .home()
            .filter(|h| h.is_absolute() && h.is_dir())
            .ok_or_else(|| {
                Error::Usage("$HOME is not set to an existing absolute directory; set it".into())
            })?;
        std::fs::canonicalize(&home).map_err(|e| Error::io("resolving $HOME", e))
    }

    /// The user's shell: `$SHELL` if it is an absolute path to a file, else `/bin/sh`.
    pub(crate) fn shell(&self) -> PathBuf {
        self.get(SHELL)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file())
            .unwrap_or_else(|| PathBuf::from("/bin/sh"))
    }

    /// bwrap, by absolute path only (never through a `PATH` the agent can write).
    pub(crate) fn find_bwrap(&self) -> Result<PathBuf> {
        if let Some(p) = self.get(BWRAP) {
            let p = PathBuf::from(p);
            if p.is_absolute() && p.is_file() {
                return Ok(p);
            }
            return Err(Error::BwrapMissing(format!(
                "{BWRAP}={} is not an absolute path to a file",
                p.display()
            )));
        }
        BWRAP_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .ok_or_else(|| Error::BwrapMissing(format!("looked in {}", BWRAP_PATHS.join(", "))))
    }
}

/// The workspace of `cwd`: its git top level, else `cwd`.
pub(crate) fn default_workspace(cwd: &Path) -> PathBuf {
    let mut cur = Some(cwd);
    while let Some(dir) = cur {
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
        cur = dir.parent();
    }
    cwd.to_path_buf()
}

/// Resolve COMMAND like `execvp` would: 127 if not found, 126 if found but not executable.
pub(crate) fn resolve_command(cmd: &OsStr, path_env: &OsStr, cwd: &Path) -> Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_read_from_the_captured_environment_only() {
        let env = HostEnv::of(&[(HOME, "/h"), (PATH, "/b:/u"), ("X", "\u{e9}")]);
        assert_eq!(env.home(), Some(PathBuf::from("/h")));
        assert_eq!(env.path(), "/b:/u");
        assert_eq!(env.get_str("X"), Some("\u{e9}"));
        assert_eq!(env.get_str(SHELL), None);
        assert_eq!(env.shell(), PathBuf::from("/bin/sh"));
        assert_eq!(HostEnv::default().path(), "");
    }

    /// Every name is spelled once: no two constants hold the same variable.
    #[test]
    fn every_variable_has_one_name() {
        let mut names = vec![
            HOME,
            PATH,
            SHELL,
            XDG_RUNTIME_DIR,
            XDG_CONFIG_HOME,
            NPM_CONFIG_PREFIX,
            SSH_AUTH_SOCK,
            RUNTIME_DIR,
            LAYERS_DIR,
            BWRAP,
            SEAL,
            WATCH,
            RESOLVE_DELAY_MS,
            TREE_DELAY_MS,
            LOGIN_PATH,
            SYSTEM_CONFIG,
            PROFILE_HOOK,
            PROMPT_HOOK,
            BATTERY,
            TEST_TMP,
            TEST_HOSTS,
            TEST_DEV_ROOT,
            AUDIT_DIR,
            IN_JAIL,
            HOOK_BIN,
            NET_BRIDGE,
            NET_LOOPBACK,
        ];
        names.extend(LOGIN_SHELL_VARS);
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
