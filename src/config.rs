//! Configuration: system, user and workspace TOML files.
//!
//! Guards against a policy loosened behind the human's back: the workspace file
//! (`.claude-sandbox.toml`) is writable by the agent between sessions, so it may only *tighten* the
//! policy (more read-only paths, more masks); a key that would loosen it is refused with an error that
//! names the file, the line and the key. Unknown keys are errors everywhere, so a typo never silently
//! weakens the jail. All three files are themselves entry points (sealed by the jail).

use crate::error::{Error, Result};
use crate::host::{self, HostEnv};
use serde::Deserialize;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// The system-wide configuration file.
pub const SYSTEM_FILE: &str = "/etc/claude-sandbox/config.toml";

/// Which file a setting came from; decides what it may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    System,
    User,
    Workspace,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    writable: Option<Spanned<Vec<String>>>,
    read_only: Option<Vec<String>>,
    masked: Option<Vec<String>>,
    allow_ssh_agent: Option<Spanned<bool>>,
    allow_user_namespaces: Option<Spanned<bool>>,
    quarantine_new_executables: Option<bool>,
    hidden: Option<Vec<String>>,
    reveal: Option<Spanned<Vec<String>>>,
    reveal_env: Option<Spanned<Vec<String>>>,
    network: Option<Spanned<crate::net::NetTable>>,
    devices: Option<Spanned<crate::jail::devices::DevicesTable>>,
    audit: Option<Spanned<crate::audit::ShipTable>>,
    locked: Option<Spanned<bool>>,
    fail_closed: Option<Spanned<bool>>,
    ssh: Option<Spanned<crate::ssh_agent::SshTable>>,
    containers: Option<Spanned<crate::docker::ContainersTable>>,
    secrets: Option<Spanned<crate::secrets::inject::SecretsTable>>,
}

/// The merged configuration, paths already expanded to absolute paths.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Config {
    /// Extra writable paths (system and user files only).
    pub writable: Vec<PathBuf>,
    /// Extra read-only paths inside writable areas.
    pub read_only: Vec<PathBuf>,
    /// Extra paths masked with `/dev/null` (files, sockets) or an empty read-only dir.
    pub masked: Vec<PathBuf>,
    /// Deprecated: the filtering ssh agent with every host `known_hosts` names, every key and
    /// commit signing (`ssh_agent::plan`); off by default.
    pub allow_ssh_agent: bool,
    /// Let the jail create nested user namespaces (refused by the seccomp filter by default).
    pub allow_user_namespaces: bool,
    /// Quarantine new executables on PATH that shadow nothing too (default: alert only).
    pub quarantine_new_executables: bool,
    /// Secrets hidden from every tool in the jail: absolute paths or glob patterns (`*`, `?`, `**`).
    pub hidden: Vec<String>,
    /// Default hidden paths to show after all (system and user files only).
    pub reveal: Vec<PathBuf>,
    /// Variables withheld as secrets by default to keep in the jail after all (system and user
    /// files only): a false positive of the name rules, or a credential the agent needs that its
    /// runtime's row does not name (`secrets::env`).
    pub reveal_env: Vec<String>,
    /// `[network]`: mode, allow and deny lists (the command line adds to it).
    pub network: crate::net::NetConfig,
    /// `[devices]`: device nodes asked for by name (`jail::devices`); none by default, system and
    /// user files only.
    pub devices: crate::jail::devices::Devices,
    /// `[audit]`: where audit records are shipped (system file only).
    pub audit: crate::audit::Ship,
    /// `locked` and `fail_closed` (system file only).
    pub system: SystemPolicy,
    /// `[ssh]`: the filtering ssh agent's hosts, keys and commit signing (`ssh_agent`).
    pub ssh: crate::ssh_agent::SshConfig,
    /// `[containers] docker`: the Docker filter (`docker`); off by default, system and user files
    /// only.
    pub containers: crate::docker::Containers,
    /// `[secrets] inject`: hosts (`host[:port]`) whose credential the jail uses without reading it
    /// (`secrets::inject`); system and user files only, allowlist mode only.
    pub inject: Vec<String>,
    /// The files that were read, in order.
    pub sources: Vec<PathBuf>,
}

/// What only the image's system file decides about the others and about the launch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SystemPolicy {
    /// `locked = true`: the user file and the command line may only tighten, as the workspace
    /// file.
    pub locked: bool,
    /// `fail_closed = true`: a launch whose guard would be less than the policy says (a gap in the
    /// plan, no audit record) does not start.
    pub fail_closed: bool,
}

/// Where the three files live for this user and workspace.
#[derive(Debug, Clone)]
pub struct ConfigPaths {
    pub system: PathBuf,
    pub user: PathBuf,
    pub workspace: PathBuf,
}

impl ConfigPaths {
    pub fn new(home: &Path, workspace: &Path, env: &HostEnv) -> Self {
        let xdg = env
            .get(host::XDG_CONFIG_HOME)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"));
        ConfigPaths {
            system: env
                .get(host::SYSTEM_CONFIG)
                .map_or_else(|| PathBuf::from(SYSTEM_FILE), PathBuf::from),
            user: xdg.join("claude-sandbox/config.toml"),
            workspace: workspace.join(crate::catalogue::WORKSPACE_FILE),
        }
    }

    /// Every configuration path, existing or not (they are all entry points).
    pub fn all(&self) -> [&Path; 3] {
        [&self.system, &self.user, &self.workspace]
    }
}

impl Config {
    /// Load and merge the system, user and workspace files; `explicit` replaces the user file.
    pub fn load(
        paths: &ConfigPaths,
        explicit: Option<&Path>,
        home: &Path,
        ws: &Path,
    ) -> Result<Self> {
        let mut config = Config::default();
        config.merge_file(&paths.system, Scope::System, home, ws)?;
        match explicit {
            Some(file) => {
                if !file.is_file() {
                    return Err(Error::Usage(format!(
                        "--config {}: no such file; give the path of a TOML file",
                        file.display()
                    )));
                }
                config.merge_file(file, Scope::User, home, ws)?;
            }
            None => config.merge_file(&paths.user, Scope::User, home, ws)?,
        }
        config.merge_file(&paths.workspace, Scope::Workspace, home, ws)?;
        Ok(config)
    }

    fn merge_file(&mut self, path: &Path, scope: Scope, home: &Path, ws: &Path) -> Result<()> {
        // A directory here is a placeholder of ours (or garbage): it holds no settings.
        if !path.is_file() {
            return Ok(());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        self.merge_text(&text, path, scope, home, ws)?;
        self.sources.push(path.to_path_buf());
        Ok(())
    }

    /// Merge one file's text; `path` is used for error messages and relative paths.
    // One short branch per key of the file: split, the keys' rules would be read in two places.
    #[allow(clippy::too_many_lines)]
    pub fn merge_text(
        &mut self,
        text: &str,
        path: &Path,
        scope: Scope,
        home: &Path,
        ws: &Path,
    ) -> Result<()> {
        let raw = parse(text, path)?;
        let base = if scope == Scope::Workspace { ws } else { home };
        self.merge_system_only(&raw, path, text, scope)?;
        // The workspace file may only tighten; so may the user file when the system file locks.
        let tighten_only =
            scope == Scope::Workspace || (scope == Scope::User && self.system.locked);
        let loosening = |span, key: &str| loosening(path, text, span, key, scope);
        if let Some(writable) = raw.writable {
            if tighten_only {
                return Err(loosening(writable.span(), "writable"));
            }
            self.writable
                .extend(writable.into_inner().iter().map(|p| expand(p, home, base)));
        }
        if let Some(allow) = raw.allow_ssh_agent {
            if tighten_only && *allow.get_ref() {
                return Err(loosening(allow.span(), "allow_ssh_agent"));
            }
            // Later files win, but the workspace can only turn it off.
            self.allow_ssh_agent = *allow.get_ref();
        }
        if let Some(allow) = raw.allow_user_namespaces {
            if tighten_only && *allow.get_ref() {
                return Err(loosening(allow.span(), "allow_user_namespaces"));
            }
            self.allow_user_namespaces = *allow.get_ref();
        }
        for h in raw.hidden.unwrap_or_default() {
            self.hidden
                .push(expand(&h, home, base).to_string_lossy().into_owned());
        }
        if let Some(reveal) = raw.reveal {
            if tighten_only {
                return Err(loosening(reveal.span(), "reveal"));
            }
            self.reveal
                .extend(reveal.into_inner().iter().map(|p| expand(p, home, base)));
        }
        if let Some(reveal) = raw.reveal_env {
            if tighten_only {
                return Err(loosening(reveal.span(), "reveal_env"));
            }
            self.reveal_env.extend(reveal.into_inner());
        }
        if let Some(q) = raw.quarantine_new_executables {
            // Stricter is always allowed; the workspace file cannot turn it off once on.
            if !tighten_only || q {
                self.quarantine_new_executables = q;
            }
        }
        if let Some(net) = raw.network {
            use crate::net::MergeError;
            let span = net.span();
            let net = net.into_inner();
            crate::net::merge(&mut self.network, net, tighten_only).map_err(|e| match e {
                MergeError::Loosens(key) => loosening(span, &format!("network.{key}")),
                MergeError::BadMode => Error::Config {
                    path: path.to_path_buf(),
                    line: line_of(text, Some(span)),
                    message: "[network] mode must be \"host\", \"allowlist\" or \"none\"".into(),
                },
                MergeError::BadLoopback(m) => Error::Config {
                    path: path.to_path_buf(),
                    line: line_of(text, Some(span)),
                    message: format!("[network] {m}"),
                },
                MergeError::BadPattern(m) => Error::Config {
                    path: path.to_path_buf(),
                    line: line_of(text, Some(span)),
                    message: format!("[network] {m}"),
                },
            })?;
        }
        if let Some(devices) = raw.devices {
            let span = devices.span();
            if let Some(gpu) = devices.into_inner().gpu {
                if tighten_only && gpu {
                    return Err(loosening(span, "devices.gpu"));
                }
                self.devices.gpu = gpu;
            }
        }
        if let Some(ssh) = raw.ssh {
            let span = ssh.span();
            crate::ssh_agent::merge(&mut self.ssh, ssh.into_inner(), tighten_only)
                .map_err(|e| ssh_error(path, text, span, e, scope))?;
        }
        if let Some(c) = raw.containers {
            let span = c.span();
            if let Some(on) = c.into_inner().docker {
                if tighten_only && on {
                    return Err(loosening(span, "containers.docker"));
                }
                self.containers.docker = on;
            }
        }
        self.merge_secrets(raw.secrets, tighten_only, path, text, scope)?;
        for p in raw.read_only.unwrap_or_default() {
            self.read_only.push(expand(&p, home, base));
        }
        for p in raw.masked.unwrap_or_default() {
            self.masked.push(expand(&p, home, base));
        }
        Ok(())
    }

    /// `[secrets]`: `inject` loosens (a listed host's credential becomes usable from the jail), so
    /// it is refused where the file may only tighten.
    fn merge_secrets(
        &mut self,
        table: Option<Spanned<crate::secrets::inject::SecretsTable>>,
        tighten_only: bool,
        path: &Path,
        text: &str,
        scope: Scope,
    ) -> Result<()> {
        let Some(t) = table else {
            return Ok(());
        };
        let span = t.span();
        let hosts = t.into_inner().inject.unwrap_or_default();
        if tighten_only && !hosts.is_empty() {
            return Err(loosening(path, text, span, "secrets.inject", scope));
        }
        if let Some(bad) = hosts
            .iter()
            .find(|h| crate::secrets::inject::target(h).is_none())
        {
            return Err(Error::Config {
                path: path.to_path_buf(),
                line: line_of(text, Some(span)),
                message: format!(
                    "[secrets] inject: `{bad}` is not a host[:port]; give a name such as \
                     github.com or git.example.com:8443"
                ),
            });
        }
        self.inject.extend(hosts);
        Ok(())
    }

    /// The keys only the system file may hold: the audit pipeline, `locked`, `fail_closed`. In a
    /// user's or a workspace's file each is refused, named: neither may redirect the team's trail
    /// or unlock the image's policy.
    fn merge_system_only(
        &mut self,
        raw: &RawConfig,
        path: &Path,
        text: &str,
        scope: Scope,
    ) -> Result<()> {
        let at = |span: Range<usize>, message: String| Error::Config {
            path: path.to_path_buf(),
            line: line_of(text, Some(span)),
            message,
        };
        let only = |span: Range<usize>, key: &str| {
            at(
                span,
                format!("`{key}` is read only from the system configuration ({SYSTEM_FILE}): a user's or a workspace's file may not set it"),
            )
        };
        for (key, value, slot) in [
            ("locked", &raw.locked, &mut self.system.locked),
            (
                "fail_closed",
                &raw.fail_closed,
                &mut self.system.fail_closed,
            ),
        ] {
            if let Some(v) = value {
                if scope != Scope::System {
                    return Err(only(v.span(), key));
                }
                *slot = *v.get_ref();
            }
        }
        if let Some(t) = &raw.audit {
            if scope != Scope::System {
                return Err(only(t.span(), "[audit]"));
            }
            self.audit =
                crate::audit::Ship::from_table(t.get_ref()).map_err(|m| at(t.span(), m))?;
        }
        Ok(())
    }
}

fn loosening(path: &Path, text: &str, span: Range<usize>, key: &str, scope: Scope) -> Error {
    Error::Config {
        path: path.to_path_buf(),
        line: line_of(text, Some(span)),
        message: if scope == Scope::Workspace {
            format!(
                "`{key}` loosens the policy, which a workspace file may not do (the agent can edit \
                 it); move it to ~/.config/claude-sandbox/config.toml"
            )
        } else {
            format!(
                "{}, or remove the line",
                locked_refusal(&format!("`{key}`"))
            )
        },
    }
}

/// The sentence for `what` (a key, a flag, a command) refused because the system file locks the
/// policy.
pub(crate) fn locked_refusal(what: &str) -> String {
    format!(
        "{what} loosens the policy, which the system configuration locks (`locked = true` in \
         {SYSTEM_FILE}): ask whoever builds the image"
    )
}

/// The system file's own keys alone (`[audit]`, `locked`, `fail_closed`), for a command that does
/// not load the whole configuration: the human's `ack` and `restore` ship their records, `allow`
/// is refused under a lock.
pub(crate) fn system_only(env: &HostEnv) -> Result<Config> {
    let path = ConfigPaths::new(Path::new("/"), Path::new("/"), env).system;
    let mut c = Config::default();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(c);
    };
    c.merge_system_only(&parse(&text, &path)?, &path, &text, Scope::System)?;
    Ok(c)
}

/// The whole system file read as a launch reads it (`__check-system-config`, for the installer).
pub(crate) fn check_system(env: &HostEnv) -> Result<()> {
    let path = ConfigPaths::new(Path::new("/"), Path::new("/"), env).system;
    Config::default().merge_file(&path, Scope::System, Path::new("/"), Path::new("/"))
}

fn parse(text: &str, path: &Path) -> Result<RawConfig> {
    toml::from_str(text).map_err(|e| Error::Config {
        path: path.to_path_buf(),
        line: line_of(text, e.span()),
        message: format!("{}; see docs/config.md", e.message().trim()),
    })
}

fn ssh_error(
    path: &Path,
    text: &str,
    span: Range<usize>,
    e: crate::ssh_agent::MergeError,
    scope: Scope,
) -> Error {
    match e {
        crate::ssh_agent::MergeError::Loosens(key) => {
            loosening(path, text, span, &format!("ssh.{key}"), scope)
        }
        e => Error::Config {
            path: path.to_path_buf(),
            line: line_of(text, Some(span)),
            message: format!("[ssh] {e}; see docs/ssh.md"),
        },
    }
}

/// Expand `~/` to the home directory and make relative paths relative to `base`.
pub fn expand(p: &str, home: &Path, base: &Path) -> PathBuf {
    if p == "~" {
        return home.to_path_buf();
    }
    if let Some(rest) = p.strip_prefix("~/") {
        return home.join(rest);
    }
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// 1-based line number of a byte offset.
fn line_of(text: &str, span: Option<Range<usize>>) -> usize {
    let offset = span.map_or(0, |s| s.start).min(text.len());
    text[..offset].bytes().filter(|b| *b == b'\n').count() + 1
}

#[cfg(test)]
mod tests;
