//! The resolved jail policy: plain data, every path absolute and already resolved, so that turning it
//! into mounts (`mounts`) and bwrap arguments (`args`) needs no filesystem access. The jail's
//! protocol: its types live here, and nothing here reads or writes a file.

use crate::catalogue::Stub;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
    /// A measured agent state directory: a directory of the jail's own (`own`, persistent, beside
    /// the layer store), holding these (see `statedir`).
    State { own: PathBuf, binds: Vec<StateBind> },
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

/// A config seen through a masked view: `copy` (in the session directory, which the jail cannot
/// see) over `path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretView {
    pub path: PathBuf,
    pub copy: PathBuf,
    pub format: crate::secrets::views::Format,
    /// The view's text when it is not the masked file (`[secrets] inject`: placeholders where the
    /// credentials were).
    #[serde(skip)]
    pub text: Option<String>,
}

/// Everything the argv builder needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    pub bwrap: PathBuf,
    pub workspace: PathBuf,
    /// The workspace is read-only to the user (its mode, its owner or its filesystem): bound
    /// read-only, so nothing in it can be created and nothing in it needs a seal (`plan`).
    pub read_only_workspace: bool,
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
    /// Directories inside a sealed one bound writable again after it, where a tool makes the human's
    /// work (`runtimes::Runtime::project_work`: `.claude/worktrees`); what is sealed or anchored
    /// below them is mounted after them.
    pub work_in_seals: Vec<PathBuf>,
    pub masks: Vec<Mask>,
    /// Private writable tmpfs mounts (`/tmp`, `$XDG_RUNTIME_DIR`).
    pub private: Vec<PathBuf>,
    /// `/run` as a read-only view of what the jail may see (made by bwrap before the private
    /// directories, in both sealing modes; see `sockets`).
    pub run_view: Option<RunView>,
    /// Directories replaced by an empty read-only tmpfs (the runtime directory).
    pub hidden: Vec<PathBuf>,
    /// Configs the jail reads through a masked view (`secrets::views`): the session's copy, bound
    /// read-only over each after the writable roots (so one in a writable place is covered too).
    pub views: Vec<SecretView>,
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
    pub layers: Vec<Layer>,
    /// What an agent writes in its state directory and runs later itself (shell snapshots, bundled
    /// skills): an empty writable tmpfs each, for this session only (`runtimes`); mounted after the
    /// seals, so that one inside a read-only directory (`~/.codex/skills/.system`) stays writable.
    pub state_private: Vec<PathBuf>,
    /// Directories of agent state seen through a view (`runtimes::View`): a writable tmpfs for the
    /// session holding read-only binds of these entries of the human's directory; mounted with the
    /// writable roots.
    pub state_views: Vec<(PathBuf, Vec<OsString>)>,
    /// The jail's own files in a view (`ownfiles`): `(copy in the layer store, path)`, bound
    /// writable after the views.
    #[serde(default)]
    pub own_files: Vec<(PathBuf, PathBuf)>,
    /// The network mode and lists (see `net`).
    pub network: crate::net::NetPolicy,
    /// Allowlist mode: the host directory holding the proxy's socket, bound at `layout::NET_DIR`.
    pub net_dir: Option<PathBuf>,
    /// The filtering ssh agent (`ssh_agent`): its socket's directory is bound at `layout::SSH_DIR`.
    pub ssh: Option<crate::ssh_agent::Filter>,
    /// The Docker filter (`docker`): its socket's directory is bound at `layout::DOCKER_DIR`.
    #[serde(default)]
    pub docker: Option<crate::docker::Filter>,
    /// Repository configs the jail sees as its own copy (see `gitcopy`); with the launcher sealing
    /// only (bwrap cannot mount a symlink: its fallback keeps them read-only).
    pub git_copies: Vec<GitCopy>,
    /// What the seccomp filter refuses beyond what it always refuses (`seccomp`).
    pub seccomp: super::seccomp::Options,
    /// Device nodes bound into the jail's `/dev` (host node, where the jail sees it): the GPU's
    /// with `[devices] gpu = true` (`devices`), none otherwise.
    pub devices: Vec<(PathBuf, PathBuf)>,
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

/// How one top-level name of a state directory appears in the jail's own directory (`statedir`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "how", content = "with")]
pub(crate) enum How {
    /// Yours, bound writable: a history appended in place.
    Writable,
    /// Yours, bound read-only: not on the allowlist, or a script your settings run.
    ReadOnly,
    /// A file on the allowlist: the jail's copy, carried back at the end.
    Copied,
    /// A missing entry point: an empty stub of the jail's own, read-only.
    Stub(Stub),
    /// The same symbolic link.
    Symlink(PathBuf),
    /// An empty directory where a private tmpfs or a view is mounted (`runtimes::StateDir`).
    MountPoint,
    /// The jail's own persistent store (`runtimes::JailStore`), bound writable from here.
    Store(PathBuf),
    /// An entry point the agent saves its choices in (`runtimes::StateEntry::jails_own`): a copy
    /// of the jail's own seeded from yours (`ownfiles`), with its record in this layer store.
    Own(PathBuf),
}

/// One top-level name of the jail's own state directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct StateBind {
    #[serde(serialize_with = "lossy")]
    pub name: OsString,
    pub how: How,
}

/// One cache, or the data of installed tools, as the jail sees it (`layers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct Layer {
    pub name: String,
    /// Where the jail sees it (`~/.cache`): the human's directory.
    pub path: PathBuf,
    /// The overlay's lower layer: the human's directory (resolved), or the store's empty directory
    /// when the human has none.
    pub lower: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    /// A session beside another (`layers::slots`): the shared upper directory, read-only between
    /// this session's own upper directory and `lower`, so that it sees what earlier sessions wrote.
    #[serde(default)]
    pub under: Option<PathBuf>,
    /// The directory bound instead when there is no overlay.
    pub own: PathBuf,
    /// Whether the sealer mounts the overlay (else `own` is bound).
    pub overlay: bool,
    /// Whether the human's directory exists. When it does not, the overlay would show `upper`
    /// alone: the sealer binds `upper` instead (an overlay mount costs ~1.5-2.5 ms here).
    pub human: bool,
    /// Data of installed tools (`layers::DATA`): without an overlay, your directory is shown
    /// read-only instead of the jail's own (empty) directory.
    pub data: bool,
}

/// How a layer is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LayerMount {
    /// Your directory read-only beneath the jail's upper directory.
    Overlay,
    /// The jail's own directory alone (the upper directory, or `own` without an overlay).
    Own,
    /// Your directory, read-only (a data layer without an overlay).
    Yours,
}

impl Layer {
    pub(crate) fn mount(&self) -> LayerMount {
        match (self.overlay, self.human, self.data) {
            (true, true, _) => LayerMount::Overlay,
            (true, false, _) if self.under.is_some() => LayerMount::Overlay,
            (false, true, true) => LayerMount::Yours,
            _ => LayerMount::Own,
        }
    }

    /// The directory bound at `path` when there is no overlay.
    pub(crate) fn own_dir(&self) -> &Path {
        if self.overlay {
            &self.upper
        } else {
            &self.own
        }
    }

    /// The layer as bwrap mounts it: bubblewrap 0.8 has no overlay.
    pub(crate) fn without_overlay(&self) -> Layer {
        Layer {
            overlay: false,
            ..self.clone()
        }
    }
}

/// The jail's `/run`: a read-only tmpfs with these read-only binds and empty directories
/// (`sockets`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RunView {
    /// Host paths bound read-only at the same place (each exists at launch).
    pub keep: Vec<PathBuf>,
    /// Empty directories: the mount points of private directories under `/run`.
    pub dirs: Vec<PathBuf>,
}

/// One git config the jail gets its own copy of (`gitcopy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GitCopy {
    /// The human's config (`<common dir>/config`, or `~/.gitconfig`).
    pub real: PathBuf,
    /// Its number in the session (the copy's directory).
    pub index: usize,
    /// A repository's config, diverted while sessions run (`~/.gitconfig` is not: in the jail it is
    /// a symlink in the session's private `$HOME`, which nothing outside renames).
    pub divert: bool,
}

/// The name of copy number `index` in the copies' directory: side by side in one directory (git's
/// lock file for it is `<name>.lock`, beside it), so that a copy costs one inode.
pub(crate) fn copy_name(index: usize) -> String {
    format!("{index}.config")
}

/// The directory beside a repository's config that holds the human's config while sessions run.
pub(crate) const DIVERTED: &str = "claude-sandbox";

/// `<git dir>/claude-sandbox`, for the config `config`: sealed read-only (as a directory) in the
/// jail.
pub(crate) fn diverted_dir(config: &Path) -> PathBuf {
    config.with_file_name(DIVERTED)
}

impl Policy {
    /// The places the jail can write on the host: the writable roots and `$HOME`'s writable holes.
    pub(crate) fn writable_roots(&self) -> Vec<PathBuf> {
        let p = self;
        p.writable
            .iter()
            .cloned()
            .chain(p.home_entries.iter().flat_map(|e| {
                let dir = p.home.join(&e.name);
                match &e.bind {
                    HomeBind::Writable => vec![dir],
                    HomeBind::State { binds, .. } => super::statedir::writable_paths(&dir, binds),
                    _ => Vec::new(),
                }
            }))
            .collect()
    }
}

#[cfg(test)]
impl Policy {
    /// The policy the argv and seal unit tests are written against.
    pub fn example() -> Policy {
        Policy {
            bwrap: "/usr/bin/bwrap".into(),
            workspace: "/w".into(),
            read_only_workspace: false,
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
            work_in_seals: Vec::new(),
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
            run_view: Some(RunView {
                keep: vec!["/run/lock".into()],
                dirs: vec!["/run/user/1".into()],
            }),
            hook_bin: Some("/usr/local/bin/claude-sandbox".into()),
            hidden: vec!["/run/cs".into()],
            setenv: vec![(crate::host::IN_JAIL.into(), "1".into())],
            unsetenv: vec!["SSH_AUTH_SOCK".into()],
            chdir: "/w/sub".into(),
            command: vec!["claude".into(), "--flag with space".into()],
            layers: Vec::new(),
            state_private: Vec::new(),
            state_views: Vec::new(),
            own_files: Vec::new(),
            network: crate::net::NetPolicy::default(),
            net_dir: None,
            ssh: None,
            docker: None,
            git_copies: Vec::new(),
            views: Vec::new(),
            seccomp: super::seccomp::Options::default(),
            devices: Vec::new(),
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
