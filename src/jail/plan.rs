//! Planning: read the workspace, `$HOME`, the configuration and the host's sockets, and resolve them
//! into a `Policy` plus the placeholders the launcher must create. Reads the filesystem, never writes.
//!
//! `$HOME` inside the jail is a session-private directory whose top-level entries are the real ones,
//! bound read-only, except the writable holes (agent state) and the jail's layers. So nothing can be
//! *added* to the real `$HOME` top level (a new `~/.bash_profile`, `~/.zshenv`, `~/.inputrc` lands in
//! the private directory and is discarded) without placing stubs in the human's home, and Claude Code
//! can still save `~/.claude.json` by rename: it gets a private copy that is merged back afterwards.

use super::policy::{HomeBind, HomeEntry, Mask, MaskKind, Policy, Sealed};
use crate::catalogue::Stub;
use crate::config::{Config, ConfigPaths};
use crate::entrypoints::{self, Finding};
use crate::error::{Error, Result};
use crate::host::{self, HostEnv};
use serde::Serialize;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

mod inject;
mod masks;
pub(crate) mod readers;
mod roots;
mod seals;
mod secrets;
mod state;
use masks::{hidden_dirs, masks, private_dirs};
use roots::{discover, writable_to_us};
pub use seals::add_seals;
pub(crate) use seals::add_seals_fed;
use state::{keep_work_in_views, link_holes, present_runtimes, state_private, views_and_own_files};

/// The writable holes in `$HOME`, relative to it: every runtime's state directories (`runtimes`).
/// Each is writable only if it exists (or the agent being launched owns it). Caches, installed
/// tools' data and the home PATH directories are not holes: they are the jail's own layers
/// (`layers::CACHES`, `layers::DATA`, `layers::PATH_DIRS`).
pub fn home_holes() -> impl Iterator<Item = &'static str> {
    crate::runtimes::state_dirs().map(|s| s.path)
}

/// Environment variables that lead to escape hatches (unset inside the jail).
pub const UNSET_ENV: &[&str] = &[
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "VSCODE_IPC_HOOK_CLI",
    "REMOTE_CONTAINERS_IPC",
    "VSCODE_GIT_IPC_HANDLE",
    "VSCODE_GIT_ASKPASS_NODE",
    "VSCODE_GIT_ASKPASS_MAIN",
    "VSCODE_GIT_ASKPASS_EXTRA_ARGS",
    "GIT_ASKPASS",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "DBUS_SESSION_BUS_ADDRESS",
    "BROWSER",
    host::RUNTIME_DIR,
];

/// Set in the jail: installers copy instead of linking from their stores into the workspace
/// (`hardlinks`).
/// pnpm 12 reads `pnpm_config_*`; older ones `npm_config_*`, which npm warns of at every command
/// (an unknown name to it), so that one is set only for an installed pnpm before 12 (`OLD_PNPM_COPY`).
pub(crate) const COPY_ENV: &[(&str, &str)] = &[
    ("pnpm_config_package_import_method", "copy"),
    ("UV_LINK_MODE", "copy"),
];
pub(crate) const OLD_PNPM_COPY: (&str, &str) = ("npm_config_package_import_method", "copy");

/// Privileged programs masked inside the jail (bwrap's `no_new_privs` already makes them useless;
/// masking makes the failure immediate and obvious).
pub const PRIVILEGED: &[&str] = &["sudo", "su", "doas", "pkexec"];

/// Where the installer puts the prompt hook.
pub const PROFILE_HOOK: &str = "/etc/profile.d/claude-sandbox.sh";

/// Known escape-hatch sockets, checked whether or not they are listed in `/proc/net/unix`.
pub const KNOWN_SOCKETS: &[(&str, &str)] = &[
    ("/var/run/docker.sock", "Docker API: root on the host"),
    ("/run/docker.sock", "Docker API: root on the host"),
    ("/run/podman/podman.sock", "Podman API"),
    ("/run/containerd/containerd.sock", "containerd API"),
    ("/run/buildkit/buildkitd.sock", "BuildKit API"),
];

/// What the launcher must create before bwrap starts, and remove afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placeholder {
    pub path: PathBuf,
    pub stub: Stub,
    /// A writable state directory (e.g. `~/.claude` for `claude`) rather than a sealed stub.
    pub state_dir: bool,
}

/// Everything `run` and `explain` need from the environment.
#[derive(Debug, Clone)]
pub struct PlanInput {
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub cwd: PathBuf,
    pub runtime_dir: PathBuf,
    pub session_home: PathBuf,
    pub bwrap: PathBuf,
    pub self_exe: Option<PathBuf>,
    pub config: Config,
    pub config_paths: ConfigPaths,
    pub command: Vec<OsString>,
    pub path_env: OsString,
    /// The host's environment, as the launch found it.
    pub host: HostEnv,
    pub uid: u32,
    /// The placeholders other sessions hold now (`placeholders::held`): what the plan finds there
    /// it holds too instead of taking it for yours, so that their end does not pull it away.
    pub held: std::collections::HashSet<PathBuf>,
}

impl PlanInput {
    /// Whether `p` is there as a placeholder another session holds.
    pub(super) fn held(&self, p: &Path) -> bool {
        self.held.contains(p)
    }
}

/// A plan: the policy, the placeholders to create, and notes for `explain`.
#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub policy: Policy,
    pub placeholders: Vec<Placeholder>,
    /// Notes for the human: a configured path that does not exist, an entry point nothing can
    /// create, a git config that keeps its read-only seal.
    pub warnings: Vec<String>,
    /// Where the guard is less than the plan: an entry point left unsealed (a symlink that can be
    /// replaced, a path that cannot be worked out), state left shared, a scan cut short. Said
    /// like the warnings; with `fail_closed` the launch refuses to start (`launch::refuse_gaps`).
    pub gaps: Vec<String>,
    pub repos: Vec<entrypoints::Repo>,
    /// From the configuration: quarantine new executables that shadow nothing too.
    pub quarantine_new: bool,
    /// Configured `hidden` glob patterns (for the watcher).
    pub hidden_globs: Vec<String>,
    /// Variables withheld as secrets (`secrets::env`), by name: said at the start and by `explain`.
    pub withheld_env: Vec<String>,
    /// The workspace's directories, as discovery walked them (for the watcher).
    #[serde(skip)]
    pub workspace_dirs: Vec<PathBuf>,
    /// The workspace's repository when git writes outside the workspace to commit in it.
    #[serde(skip)]
    pub own_repo: Option<entrypoints::OwnRepo>,
    /// Its directories outside the workspace: writable roots, sealed like a `.git` inside.
    pub git_roots: Vec<PathBuf>,
    /// Files of the workspace's `.git` left without a placeholder because the launched agent
    /// refuses one there (`runtimes::Runtime::refuses_in_git_dir`): the watcher takes a new one out.
    pub watched_not_sealed: Vec<PathBuf>,
    /// The worktrees registered at launch in each repository the jail can write (`worktrees`).
    #[serde(skip)]
    pub worktree_listings: Vec<super::worktrees::Listing>,
    /// `$HOME`'s writable holes (top-level or deeper, plus configured writable paths).
    #[serde(skip)]
    pub holes: Vec<PathBuf>,
    /// Missing workspace-root entry points nothing installed reads: no placeholder (`readers`).
    pub unread: Vec<PathBuf>,
    /// The entry points there at launch, at any depth (`launch::created`: one made during the
    /// session is held at its end).
    #[serde(skip)]
    pub existing_entry_points: std::collections::HashSet<PathBuf>,
    /// When the launch was planned (ns since the epoch): a cache tag or `pyvenv.cfg` younger than
    /// this, less a second, is not honoured by the session's end walk (`launch::created`).
    #[serde(skip)]
    pub planned_ns: i64,
    /// The measured agent-state directories' top level at launch (`statesweep`).
    #[serde(skip)]
    pub state_listings: Vec<super::statesweep::Listing>,
    /// Files whose edits are held, as they were at launch (`launch::edited`): the `.env` files an
    /// `.envrc` exports, the existing catalogued names held when changed.
    #[serde(skip)]
    pub edited: Vec<super::launch::edited::Before>,
    /// The directories an `.envrc` puts on PATH: first on the human's shell's PATH there.
    pub envrc_path_dirs: Vec<PathBuf>,
}

impl Plan {
    /// The places the jail can write on the host (`Policy::writable_roots`).
    pub fn writable_roots(&self) -> Vec<PathBuf> {
        self.policy.writable_roots()
    }

    /// Whether the jail could write `path` (existing or not).
    pub fn jail_can_write(&self, path: &Path) -> bool {
        self.writable_roots().iter().any(|r| path.starts_with(r))
    }
}

/// Resolve the policy for one launch.
pub fn plan(input: &PlanInput) -> Result<Plan> {
    let mut plan = plan_jail(input)?;
    add_seals(&mut plan, input);
    Ok(plan)
}

/// The part of the plan bwrap itself needs when the launcher seals from outside: `$HOME`, its
/// writable holes, the writable roots, the private directories, the environment. Cheap (no walk of
/// the workspace), so bwrap can start while `add_seals` does the rest. The plan has no seals, anchors,
/// masks or repositories until `add_seals` has run.
// The policy filled in bwrap's mount order, one step after the other.
#[allow(clippy::too_many_lines)]
pub fn plan_jail(input: &PlanInput) -> Result<Plan> {
    let ws = canonical(&input.workspace)?;
    let home = canonical(&input.home)?;
    if ws == Path::new("/") || home.starts_with(&ws) {
        return Err(Error::Usage(format!(
            "workspace {} contains $HOME ({}): run from a project directory or pass --workspace DIR",
            ws.display(),
            home.display()
        )));
    }
    let mut warnings = Vec::new();
    let mut gaps = Vec::new();
    let mut placeholders = Vec::new();

    // Writable holes in $HOME: existing ones, plus the launched agent's own state (created).
    let agent = input
        .command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let launched = crate::runtimes::by_command(&agent);
    let mut holes: Vec<PathBuf> = Vec::new();
    for rel in home_holes() {
        let p = home.join(rel);
        let owned = launched.is_some_and(|r| r.state.iter().any(|s| s.path == rel));
        if p.is_dir() && !is_symlink(&p) {
            if input.held(&p) {
                placeholders.extend(held_dirs(input, &p, &home));
            }
            holes.push(p);
        } else if !p.exists() && !is_symlink(&p) && owned {
            // Create each missing component, so all of them are removed if left empty.
            placeholders.extend(missing_dirs(&p, &home).into_iter().map(|path| Placeholder {
                path,
                stub: Stub::Dir,
                state_dir: true,
            }));
            holes.push(p);
        }
    }
    // What an agent writes and runs later itself: a private tmpfs per session (`runtimes`).
    let (state_private, mut state_views) =
        state_private(input, &home, &holes, &mut placeholders, &mut gaps);
    for rel in present_runtimes(input).iter().flat_map(|r| r.home_views) {
        let p = home.join(rel);
        if input.held(&p) {
            placeholders.extend(held_dirs(input, &p, &home));
        } else if !p.exists() && !is_symlink(&p) {
            placeholders.extend(missing_dirs(&p, &home).into_iter().map(|path| Placeholder {
                path,
                stub: Stub::Dir,
                state_dir: true,
            }));
        }
        state_views.push((p.clone(), super::statedir::names_in(&p)));
    }
    for extra in &input.config.writable {
        match std::fs::canonicalize(extra) {
            Ok(p) => holes.push(p),
            Err(_) => warnings.push(format!(
                "writable path {} does not exist; skipped",
                extra.display()
            )),
        }
    }

    // Caches and installed tools' data: the jail's own layer over the human's directory, which the
    // layer replaces in `$HOME` (a path you configured writable stays yours).
    let store = super::layers::store_dir(&home, &input.host);
    let mut layers = super::layers::plan(&home, &store);
    layers.retain(|l| !holes.iter().any(|h| l.path.starts_with(h)));
    let mut home_entries = home_entries(&home, &holes)?;
    home_entries.retain(|e| !layers.iter().any(|l| l.path == home.join(&e.name)));
    let top_level_holes: Vec<PathBuf> = home_entries
        .iter()
        .filter(|e| e.bind == HomeBind::Writable)
        .map(|e| home.join(&e.name))
        .collect();
    // A workspace you cannot write is the jail's to read only: nothing to seal where nothing can
    // be written, and no placeholder to make where you could not make one either.
    let read_only_workspace = !writable_to_us(&ws);
    let mut writable = if read_only_workspace {
        tracing::debug!("{} is read-only to you: bound read-only", ws.display());
        Vec::new()
    } else {
        vec![ws.clone()]
    };
    // The workspace's git directory where it lies outside (a linked worktree, a submodule, a
    // workspace below the repository's root): git writes there to commit (`entrypoints::own`).
    let own_repo = entrypoints::own_repository(&ws, &home);
    let git_roots: Vec<PathBuf> = own_repo
        .iter()
        .flat_map(|r| r.outside.iter().cloned())
        .collect();
    writable.extend(git_roots.iter().cloned());
    for h in &holes {
        if !top_level_holes.contains(h) && !writable.iter().any(|w| h.starts_with(w)) {
            writable.push(h.clone());
        }
    }
    let private = private_dirs(input);
    let run_view = super::sockets::run_view(&private);
    let mut unsetenv: Vec<String> = UNSET_ENV
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    // The human's agent stays masked; `[ssh]` gets the jail a filtering one of its own instead.
    let ssh = crate::ssh_agent::plan(
        &input.config.ssh,
        input.config.allow_ssh_agent,
        &input.host,
        &input.home,
        &input.session_home,
        &mut warnings,
    );
    if ssh.is_none() {
        unsetenv.insert(0, host::SSH_AUTH_SOCK.into());
    }
    let mut network = input.config.network.policy();
    if network.mode == crate::net::Mode::Allowlist {
        network.upstream = crate::net::proxy::upstream_of(&input.host)
            .map_or_else(|e| Some(format!("unusable: {e}")), |u| u.describe());
        // The IDEs serving now, judged at launch: one started later is not bridged (docs/network.md).
        let ides = crate::net::loopback::ides_for(&input.config.network, &home, &input.host);
        network.loopback = crate::net::loopback::bridged(&input.config.network.loopback, &ides);
    }
    if network.mode.unshares() {
        // The launcher's proxy settings and their credentials stay outside (`net::upstream`).
        unsetenv.extend(crate::net::upstream::withheld(input.host.vars()));
    }
    let (withheld_env, views) = secrets::withheld_and_views(input, &home, &mut unsetenv);
    let mut setenv = vec![
        (host::IN_JAIL.into(), "1".into()),
        (host::HOOK_BIN.into(), super::layout::HOOK_BIN.into()),
    ];
    setenv.extend(ssh.as_ref().map(|_| crate::ssh_agent::jail_env()));
    // The engine stays masked; `[containers] docker` gets the jail a filter of its own instead.
    let isolated = network.mode.unshares();
    let docker = crate::docker::plan(
        input.config.containers.docker,
        &input.host,
        &input.session_home,
        isolated,
        &mut warnings,
    );
    if docker.is_some() {
        unsetenv.retain(|v| v != "DOCKER_HOST");
        setenv.push(crate::docker::jail_env());
    }
    // Decided here (bwrap takes the environment before the seals are planned): a root name that
    // may become a placeholder, missing now, whose reader fails on a directory.
    let search = readers::search_dirs(&input.path_env, &home, &input.host);
    for c in entrypoints::per_directory() {
        if let Some((k, v)) = c.jail_env {
            let needed = c.jail_env_below.is_none_or(|(reader, major)| {
                readers::major(reader, &search).is_none_or(|m| m < major)
            });
            if needed && std::fs::symlink_metadata(ws.join(c.name)).is_err() {
                setenv.push((k.into(), v.into()));
            }
        }
    }
    // New installs copy from their stores instead of linking into the workspace (`hardlinks`).
    setenv.extend(COPY_ENV.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    if readers::installed("pnpm", &search) && readers::major("pnpm", &search).is_none_or(|m| m < 12)
    {
        setenv.push((OLD_PNPM_COPY.0.into(), OLD_PNPM_COPY.1.into()));
    }
    let mut views = views;
    network.inject = inject::plan(input, &home, network.mode, &mut views, &mut setenv)?;
    if !input.config.inject.is_empty() && network.inject.is_empty() {
        warnings.push(
            "[secrets] inject: no credential was found for the listed hosts (git's credential \
             stores, .npmrc); nothing is injected"
                .into(),
        );
    }
    let net_dir = (network.mode == crate::net::Mode::Allowlist).then(|| {
        setenv.extend(crate::net::proxy_env(
            input.self_exe.is_some().then_some(super::layout::HOOK_BIN),
            input.host.get_str("NODE_OPTIONS"),
        ));
        if !network.loopback.is_empty() {
            setenv.push((
                host::NET_LOOPBACK.into(),
                crate::net::loopback::env_value(&network.loopback),
            ));
        }
        input.session_home.with_file_name("net")
    });
    let cwd = std::fs::canonicalize(&input.cwd).unwrap_or_else(|_| ws.clone());
    let chdir = if cwd.starts_with(&ws) || cwd.starts_with(&home) {
        cwd
    } else {
        ws.clone()
    };
    // The measured agent state directories at the top of `$HOME`: the jail's own (`statedir`).
    super::statedir::own_top_levels(&mut home_entries, &home, &input.host, &mut setenv);
    let policy_home = home.clone();
    let policy = Policy {
        bwrap: input.bwrap.clone(),
        workspace: ws,
        read_only_workspace,
        home,
        session_home: input.session_home.clone(),
        home_entries,
        writable,
        anchors: Vec::new(),
        sealed: Vec::new(),
        work_in_seals: Vec::new(),
        masks: Vec::new(),
        private,
        run_view,
        hidden: Vec::new(),
        hook_bin: input.self_exe.clone(),
        setenv,
        unsetenv,
        chdir,
        command: input.command.clone(),
        layers,
        state_private,
        state_views,
        own_files: Vec::new(),
        network,
        net_dir,
        ssh,
        docker,
        git_copies: Vec::new(),
        views,
        seccomp: super::seccomp::Options {
            user_namespaces: input.config.allow_user_namespaces,
        },
        devices: if input.config.devices.gpu {
            super::devices::gpu_nodes(&super::devices::dev_root(&input.host))
        } else {
            Vec::new()
        },
    };
    Ok(Plan {
        policy,
        placeholders,
        warnings,
        gaps,
        repos: Vec::new(),
        quarantine_new: input.config.quarantine_new_executables,
        hidden_globs: input
            .config
            .hidden
            .iter()
            .filter(|h| crate::secrets::is_glob(h))
            .cloned()
            .collect(),
        withheld_env,
        workspace_dirs: Vec::new(),
        own_repo,
        git_roots,
        worktree_listings: Vec::new(),
        watched_not_sealed: Vec::new(),
        state_listings: super::statesweep::listings(&policy_home, &holes),
        holes,
        unread: Vec::new(),
        existing_entry_points: std::collections::HashSet::new(),
        planned_ns: {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
            t.tv_sec * 1_000_000_000 + t.tv_nsec
        },
        edited: Vec::new(),
        envrc_path_dirs: Vec::new(),
    })
}

fn canonical(p: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(p).map_err(|e| {
        Error::named_path(
            e,
            || format!("{}: no such directory; pass --workspace DIR", p.display()),
            || format!("resolving {}", p.display()),
        )
    })
}

/// `p` and its ancestors below `top` that are placeholders another session holds, outermost first,
/// as this session's placeholders (agent state): held by it too (`placeholders::acquire`).
pub(super) fn held_dirs(input: &PlanInput, p: &Path, top: &Path) -> Vec<Placeholder> {
    let mut held: Vec<Placeholder> = p
        .ancestors()
        .take_while(|a| *a != top)
        .filter(|a| input.held(a))
        .map(|a| Placeholder {
            path: a.to_path_buf(),
            stub: Stub::Dir,
            state_dir: true,
        })
        .collect();
    held.reverse();
    held
}

/// `p` and its missing ancestors below `top`, outermost first.
fn missing_dirs(p: &Path, top: &Path) -> Vec<PathBuf> {
    let mut missing: Vec<PathBuf> = p
        .ancestors()
        .take_while(|a| *a != top && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    missing.reverse();
    missing
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// How each top-level entry of `$HOME` appears in the jail.
fn home_entries(home: &Path, holes: &[PathBuf]) -> Result<Vec<HomeEntry>> {
    let rd =
        std::fs::read_dir(home).map_err(|e| Error::io(format!("reading {}", home.display()), e))?;
    let mut names: Vec<OsString> = rd.flatten().map(|e| e.file_name()).collect();
    // Holes whose directory is being created this session are bound too.
    for h in holes {
        if let Ok(rel) = h.strip_prefix(home) {
            if let Some(first) = rel.components().next() {
                let name = first.as_os_str().to_owned();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    names.sort();
    let mut out = Vec::new();
    for name in names {
        if name == crate::runtimes::CLAUDE_JSON {
            continue; // a private copy lives in the session home
        }
        let path = home.join(&name);
        let bind = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => HomeBind::Symlink(
                std::fs::read_link(&path).map_err(|e| Error::io(path.display().to_string(), e))?,
            ),
            Ok(m) if m.file_type().is_socket() => continue, // masked: never bound
            _ if holes.contains(&path) => HomeBind::Writable,
            Ok(m)
                if m.is_dir()
                    && [".ssh", ".gnupg", ".docker"].contains(&name.to_str().unwrap_or("")) =>
            {
                let view = match name.to_str() {
                    Some(".ssh") => super::sockets::ssh_view(home),
                    Some(".gnupg") => super::sockets::gnupg_view(home),
                    _ => super::sockets::docker_view(home),
                };
                view.map_or(HomeBind::ReadOnly, HomeBind::Filtered)
            }
            _ => HomeBind::ReadOnly,
        };
        out.push(HomeEntry { name, bind });
    }
    Ok(out)
}
