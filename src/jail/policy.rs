//! The resolved jail policy: plain data, every path absolute and already resolved, so that turning it
//! into bwrap arguments needs no filesystem access (see `args`).

use serde::Serialize;
use std::ffi::OsString;
use std::path::PathBuf;

/// How one top-level entry of the real `$HOME` appears in the jail's `$HOME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how", content = "target")]
pub enum HomeBind {
    /// Bound read-only (the default).
    ReadOnly,
    /// Bound writable: agent state and caches.
    Writable,
    /// Recreated as the same symlink (its target is reached through the rest of the policy).
    Symlink(PathBuf),
    /// A read-only tmpfs holding read-only binds of these children only, as they were at launch: a
    /// directory where sockets appear later (`~/.ssh`, `~/.gnupg`; see `sockets`).
    Filtered(Vec<OsString>),
    /// A measured agent state directory: a directory of the jail's own in the session's `$HOME`,
    /// holding these (see `statedir`).
    State(Vec<super::statedir::StateBind>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HomeEntry {
    #[serde(serialize_with = "lossy")]
    pub name: OsString,
    pub bind: HomeBind,
}

/// A path bound read-only over itself: an existing entry point, or a placeholder we created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sealed {
    pub path: PathBuf,
    pub runs: String,
    /// True when the launcher created it for this session (removed afterwards).
    pub placeholder: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MaskKind {
    /// A file or socket: `/dev/null` bound read-only over it.
    File,
    /// A directory: an empty read-only tmpfs over it.
    Dir,
}

/// An escape hatch hidden from the jail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mask {
    pub path: PathBuf,
    pub kind: MaskKind,
    pub why: String,
}

/// Everything the argv builder needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub bwrap: PathBuf,
    pub workspace: PathBuf,
    /// The human's `$HOME` (the path the jail sees).
    pub home: PathBuf,
    /// The session's private directory bound at `home`; top-level files made there are discarded.
    pub session_home: PathBuf,
    pub home_entries: Vec<HomeEntry>,
    /// Writable paths: the workspace, writable `$HOME` holes below top level, configured extras.
    pub writable: Vec<PathBuf>,
    /// Directories bound writable over themselves so they cannot be renamed or replaced
    /// (a mount point refuses `rename`/`rmdir` with EBUSY): `.git` dirs and nested repos' ancestors.
    pub anchors: Vec<PathBuf>,
    pub sealed: Vec<Sealed>,
    pub masks: Vec<Mask>,
    /// Private writable tmpfs mounts (`/tmp`, `$XDG_RUNTIME_DIR`).
    pub private: Vec<PathBuf>,
    /// `/run` as a read-only view of what the jail may see (made by bwrap before the private
    /// directories, in both sealing modes; see `sockets`).
    pub run_view: Option<crate::jail::sockets::RunView>,
    /// Directories replaced by an empty read-only tmpfs (the runtime directory).
    pub hidden: Vec<PathBuf>,
    /// The claude-sandbox binary, bound read-only at a jail-only path for agent-runtime hooks
    /// (its own path stays masked).
    pub hook_bin: Option<PathBuf>,
    pub setenv: Vec<(String, String)>,
    pub unsetenv: Vec<String>,
    pub chdir: PathBuf,
    #[serde(serialize_with = "lossy_all")]
    pub command: Vec<OsString>,
    /// Caches: the jail's own layer over the human's read-only directory (see `layers`); mounted
    /// after the writable roots.
    pub layers: Vec<super::layers::Layer>,
    /// What an agent writes in its state directory and runs later itself (shell snapshots, bundled
    /// skills): an empty writable tmpfs each, for this session only (`runtimes`); mounted after the
    /// seals, so that one inside a read-only directory (`~/.codex/skills/.system`) stays writable.
    pub state_private: Vec<PathBuf>,
    /// Directories of agent state seen through a view (`runtimes::View`): a writable tmpfs for the
    /// session holding read-only binds of these entries of the human's directory; mounted with the
    /// writable roots.
    pub state_views: Vec<(PathBuf, Vec<OsString>)>,
    /// The network mode and lists (see `net`).
    pub network: crate::net::NetPolicy,
    /// Allowlist mode: the host directory holding the proxy's socket, bound at `layout::NET_DIR`.
    pub net_dir: Option<PathBuf>,
    /// Repository configs the jail sees as its own copy (see `gitcopy`); with the launcher sealing
    /// only (bwrap cannot mount a symlink: its fallback keeps them read-only).
    pub git_copies: Vec<super::gitcopy::GitCopy>,
}

/// File descriptors the launcher passes to bwrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fds {
    pub seccomp: Option<i32>,
    pub status: Option<i32>,
    /// An fd open on the claude-sandbox binary: the command is started through it (`__exec`), which
    /// closes it and restores the default action of the signals bwrap must ignore.
    /// With it, the fd where the real stderr waits for the command (bwrap's own is captured).
    pub exec_helper: Option<(i32, i32)>,
    /// The helper's gate: it writes one byte on the first fd when bwrap's setup is done, then waits
    /// for one byte on the second before running the command (see `exec`).
    pub gate: Option<(i32, i32)>,
}

/// Who makes the anchors, hidden directories, seals and masks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sealing {
    /// bwrap, from its arguments (slower: ~0.4 ms per mount).
    #[default]
    InBwrap,
    /// The launcher, through `__seal`, while the gate is shut (see `seal`).
    ByLauncher,
}

#[cfg(test)]
impl Policy {
    /// The policy the argv and seal unit tests are written against.
    pub fn example() -> Policy {
        Policy {
            bwrap: "/usr/bin/bwrap".into(),
            workspace: "/w".into(),
            home: "/h".into(),
            session_home: "/run/cs/1/s/home".into(),
            home_entries: vec![
                HomeEntry {
                    name: ".bashrc".into(),
                    bind: HomeBind::ReadOnly,
                },
                HomeEntry {
                    name: ".claude".into(),
                    bind: HomeBind::Writable,
                },
                HomeEntry {
                    name: ".ssh".into(),
                    bind: HomeBind::Filtered(vec!["config".into(), "known_hosts".into()]),
                },
                HomeEntry {
                    name: ".vimrc".into(),
                    bind: HomeBind::Symlink("dot/vimrc".into()),
                },
            ],
            writable: vec!["/w".into()],
            anchors: vec!["/w/.git".into()],
            sealed: vec![
                Sealed {
                    path: "/w/.git/hooks".into(),
                    runs: "git".into(),
                    placeholder: false,
                },
                Sealed {
                    path: "/w/.envrc".into(),
                    runs: "direnv".into(),
                    placeholder: true,
                },
            ],
            masks: vec![
                Mask {
                    path: "/run/docker.sock".into(),
                    kind: MaskKind::File,
                    why: "docker".into(),
                },
                Mask {
                    path: "/run/podman".into(),
                    kind: MaskKind::Dir,
                    why: "podman".into(),
                },
            ],
            private: vec!["/tmp".into(), "/run/user/1".into()],
            run_view: Some(crate::jail::sockets::RunView {
                keep: vec!["/run/lock".into()],
                dirs: vec!["/run/user/1".into()],
            }),
            hook_bin: Some("/usr/local/bin/claude-sandbox".into()),
            hidden: vec!["/run/cs".into()],
            setenv: vec![("CLAUDE_SANDBOX".into(), "1".into())],
            unsetenv: vec!["SSH_AUTH_SOCK".into()],
            chdir: "/w/sub".into(),
            command: vec!["claude".into(), "--flag with space".into()],
            layers: Vec::new(),
            state_private: Vec::new(),
            state_views: Vec::new(),
            network: crate::net::NetPolicy::default(),
            net_dir: None,
            git_copies: Vec::new(),
        }
    }
}

/// Names and arguments as strings in JSON (`explain --json`), not serde's `{"Unix": [bytes]}`; a
/// non-UTF-8 byte shows as U+FFFD.
fn lossy<S: serde::Serializer>(v: &OsString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string_lossy())
}

fn lossy_all<S: serde::Serializer>(v: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|a| a.to_string_lossy()))
}
