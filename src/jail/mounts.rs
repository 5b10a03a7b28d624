//! The jail's mounts, in order: one list, made from the policy alone (`mounts`), and made by bwrap
//! from its arguments (`args` renders each) or, when the launcher seals, by bwrap up to
//! `Mount::Stage` and by the sealer (`seal`) from there on.
//!
//! Guards against the two makers drifting apart: the order is written once, here, and each maker
//! only says how it makes one kind of mount (what bwrap cannot make is said once, per kind, in
//! `args`). Later mounts win, so the order is:
//! 1. the private tmpfs (`/tmp`, `$XDG_RUNTIME_DIR`) outside `/run`'s view — always bwrap's, since
//!    the staging tree lies in `/tmp` — then `Stage`;
//! 2. `/run` as a read-only view (`sockets`) with the private directories inside it, the proxy's
//!    directory, the hook binary's read-only directory;
//! 3. the session's `$HOME`, then its top-level entries (read-only, writable holes, symlinks,
//!    filtered views of directories where sockets appear, the jail's own state directories);
//! 4. the layers (`layers`), parents first and at each depth the overlays first, then the writable
//!    roots (the workspace, holes that may lie in a layer: `~/.local/share/opencode`), the git copies'
//!    directory, the agents' views (`runtimes::View`), then `Unstage`;
//! 5. anchors (writable self-binds that make `.git` and nested repositories' ancestors impossible
//!    to rename), hidden directories (the runtime directory), after every writable bind so that
//!    none can re-expose them;
//! 6. sealed entry points, read-only over themselves, after the writable roots so that they win (a
//!    diverted git config: its directory read-only and the link to the jail's copy over it); each
//!    directory of the human's work inside a seal (`.claude/worktrees`) writable again, with the
//!    anchors and seals below it after it; then the agents' private state (a tmpfs each: `runtimes`), after the seals that hold them;
//! 7. masks (`/dev/null` over sockets and privileged binaries, empty dirs over socket dirs): last,
//!    so nothing can re-expose them.

use super::layout;
use super::policy::{copy_name, diverted_dir, GitCopy, How, Layer, LayerMount, Policy, StateBind};
use super::policy::{HomeBind, MaskKind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One mount made into the jail, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op", content = "path")]
pub(crate) enum Mount {
    /// Where the sealer takes over when the launcher seals: bwrap binds the host's tree at
    /// `layout::STAGE` for it and makes nothing below.
    Stage,
    /// A bind of a host path at `dst`, recursively, nosuid and nodev, read-only unless `writable`;
    /// the mount point is made (a directory or an empty file, like the source) when missing. The
    /// sealer reaches `src` through `layout::STAGE`, symlinks resolved as on the host, as bwrap does.
    Bind {
        src: PathBuf,
        dst: PathBuf,
        writable: bool,
    },
    /// A symbolic link in the session's `$HOME` (as bwrap's `--symlink`).
    Symlink { target: PathBuf, dst: PathBuf },
    /// A cache or tools' data as the jail's own layer (`layers`): an overlay of the jail's `upper`
    /// over your read-only directory, the jail's own directory alone, or yours read-only, as
    /// `Layer::mount` says (nosuid, nodev). The mount point is made when missing.
    Layer(Layer),
    /// A symbolic link to `target`, mounted over the file `dst` (see `gitcopy`): programs that
    /// resolve the link write beside the target, and the link itself cannot be removed or replaced.
    LinkOver { target: PathBuf, dst: PathBuf },
    /// The end of the host's tree: from here on nothing of it is reachable but what was bound.
    Unstage,
    /// A writable tmpfs (nosuid, nodev, mode 0755), its mount point made when missing.
    Tmpfs(PathBuf),
    /// Make one mount read-only (not the ones on top of it), as bwrap's `--remount-ro`.
    RemountReadOnly(PathBuf),
    /// A writable bind over itself (a mount point cannot be renamed or removed).
    Anchor(PathBuf),
    /// A directory inside a seal bound writable again (`Policy::work_in_seals`): the host's
    /// directory, writable, over the sealed one's copy of it.
    Writable(PathBuf),
    /// An empty read-only tmpfs (the runtime directory); nothing when it is not there.
    Hide(PathBuf),
    /// A read-only bind over itself, recursively: a sealed entry point.
    ReadOnly(PathBuf),
    /// `/dev/null`, read-only, over a file or socket (skipped when it is gone).
    MaskFile(PathBuf),
    /// An empty read-only tmpfs over a directory (skipped when it is gone).
    MaskDir(PathBuf),
}

/// The jail's mounts for `policy`, in order; `git_copies`: the configs the jail has its own copy
/// of (the launcher makes them while bwrap starts; none when bwrap makes every mount).
pub(crate) fn mounts(policy: &Policy, git_copies: &[GitCopy]) -> Vec<Mount> {
    let mut out = Vec::new();
    let in_run_view = |p: &PathBuf| policy.run_view.as_ref().is_some_and(|r| r.dirs.contains(p));
    out.extend(
        policy
            .private
            .iter()
            .filter(|p| !in_run_view(p))
            .cloned()
            .map(Mount::Tmpfs),
    );
    out.push(Mount::Stage);
    if let Some(run) = &policy.run_view {
        // A read-only tmpfs with read-only binds of what the jail may see, and the private
        // directories' tmpfs in it (writable).
        let dir = Path::new(layout::RUN);
        out.push(Mount::Tmpfs(dir.to_path_buf()));
        out.extend(run.keep.iter().map(|k| bind(k, k, false)));
        out.extend(run.dirs.iter().cloned().map(Mount::Tmpfs));
        out.push(Mount::RemountReadOnly(dir.to_path_buf()));
    }
    if let Some(dir) = &policy.net_dir {
        // The proxy's socket: the jail's only way out in allowlist mode (in the private `/tmp`).
        out.push(bind(dir, Path::new(layout::NET_DIR), true));
    }
    if let Some(ssh) = &policy.ssh {
        // The filtering ssh agent's socket (in the private `/tmp`), read-only: `$SSH_AUTH_SOCK`.
        out.push(bind(&ssh.dir, Path::new(layout::SSH_DIR), false));
    }
    if let Some(docker) = &policy.docker {
        // The Docker filter's socket (in the private `/tmp`), read-only: `$DOCKER_HOST`.
        out.push(bind(&docker.dir, Path::new(layout::DOCKER_DIR), false));
    }
    if let Some(bin) = &policy.hook_bin {
        // A read-only tmpfs mount point holding only a read-only bind: neither can be replaced.
        let dir = Path::new(layout::HOOK_BIN_DIR);
        out.push(Mount::Tmpfs(dir.to_path_buf()));
        out.push(bind(bin, Path::new(layout::HOOK_BIN), false));
        out.push(Mount::RemountReadOnly(dir.to_path_buf()));
    }
    home(&mut out, policy, git_copies);
    // Parents first, and at each depth the overlays first, so that they form one run the sealer
    // mounts side by side (`seal::overlay`). A hole inside a layer (`~/.local/share/opencode`) is bound over it.
    let mut layers: Vec<&Layer> = policy.layers.iter().collect();
    layers.sort_by_key(|l| {
        (
            l.path.components().count(),
            l.mount() != LayerMount::Overlay,
        )
    });
    out.extend(layers.into_iter().cloned().map(Mount::Layer));
    if policy.read_only_workspace {
        out.push(bind(&policy.workspace, &policy.workspace, false));
    }
    out.extend(policy.writable.iter().map(|p| bind(p, p, true)));
    if !git_copies.is_empty() {
        let copies = crate::runtime_dir::SessionDir::of_home(&policy.session_home).git_copies();
        out.push(bind(&copies, Path::new(layout::GIT_COPIES), true));
    }
    for (dir, keep) in &policy.state_views {
        out.push(Mount::Tmpfs(dir.clone()));
        out.extend(keep.iter().map(|n| bind(&dir.join(n), &dir.join(n), false)));
    }
    // The jail's own files, in their views (`ownfiles`).
    out.extend(policy.own_files.iter().map(|(copy, p)| bind(copy, p, true)));
    // Masked views last of the binds: over a config wherever it is bound (`secrets::views`).
    out.extend(policy.views.iter().map(|v| bind(&v.copy, &v.path, false)));
    out.push(Mount::Unstage);
    let inside_work = |p: &Path| policy.work_in_seals.iter().any(|w| p.starts_with(w));
    out.extend(
        policy
            .anchors
            .iter()
            .filter(|a| !inside_work(a))
            .cloned()
            .map(Mount::Anchor),
    );
    out.extend(policy.hidden.iter().cloned().map(Mount::Hide));
    seals(&mut out, policy, git_copies, None);
    for w in &policy.work_in_seals {
        out.push(Mount::Writable(w.clone()));
        let below = |p: &Path| p.starts_with(w) && p != w;
        out.extend(
            policy
                .anchors
                .iter()
                .filter(|a| below(a))
                .cloned()
                .map(Mount::Anchor),
        );
        seals(&mut out, policy, git_copies, Some(w));
    }
    out.extend(policy.state_private.iter().cloned().map(Mount::Tmpfs));
    out.extend(policy.masks.iter().map(|m| match m.kind {
        MaskKind::File => Mount::MaskFile(m.path.clone()),
        MaskKind::Dir => Mount::MaskDir(m.path.clone()),
    }));
    out
}

fn bind(src: &Path, dst: &Path, writable: bool) -> Mount {
    Mount::Bind {
        src: src.to_path_buf(),
        dst: dst.to_path_buf(),
        writable,
    }
}

/// Step 3: the session's `$HOME` and its entries.
fn home(out: &mut Vec<Mount>, policy: &Policy, git_copies: &[GitCopy]) {
    out.push(bind(&policy.session_home, &policy.home, true));
    for e in &policy.home_entries {
        let dst = policy.home.join(&e.name);
        match &e.bind {
            // `~/.gitconfig` as the jail's own copy: a symlink in the private `$HOME` (`gitcopy`).
            HomeBind::ReadOnly => match git_copies.iter().find(|c| c.real == dst && !c.divert) {
                Some(c) => out.push(Mount::Symlink {
                    target: copy_in_jail(c),
                    dst,
                }),
                None => out.push(bind(&dst, &dst, false)),
            },
            HomeBind::Writable => out.push(bind(&dst, &dst, true)),
            HomeBind::Symlink(target) => out.push(Mount::Symlink {
                target: target.clone(),
                dst,
            }),
            HomeBind::Filtered(keep) => {
                out.push(Mount::Tmpfs(dst.clone()));
                out.extend(keep.iter().map(|n| bind(&dst.join(n), &dst.join(n), false)));
                out.push(Mount::RemountReadOnly(dst));
            }
            HomeBind::State { own, binds } => state_dir(out, &dst, own, binds),
        }
    }
}

/// The mounts of one of the jail's own state directories (`statedir`; `real`: the human's, which
/// is also its path in the jail; `own`: the jail's own directory on the host).
pub(crate) fn state_dir(out: &mut Vec<Mount>, real: &Path, own: &Path, binds: &[StateBind]) {
    // Over itself first: a mount point cannot be renamed or replaced, so the directory the
    // session ends with is the one made for it.
    out.push(bind(own, real, true));
    for b in binds {
        let (yours, jail) = (real.join(&b.name), real.join(&b.name));
        match &b.how {
            How::Writable => out.push(bind(&yours, &jail, true)),
            How::ReadOnly => out.push(bind(&yours, &jail, false)),
            How::Stub(_) => out.push(bind(&own.join(&b.name), &jail, false)),
            How::Store(dir) => out.push(bind(dir, &jail, true)),
            // A file of the jail's own directory, writable with it.
            How::Copied | How::Symlink(_) | How::MountPoint | How::Own(_) => {}
        }
    }
}

/// Step 6, the seals: each read-only over itself, but a repository config the jail has its own
/// copy of: its diverted directory read-only, and the link to the copy pinned over `.git/config`
/// (`gitcopy`). `under`: only the seals below this directory of `Policy::work_in_seals` (else only
/// those below none).
fn seals(out: &mut Vec<Mount>, policy: &Policy, git_copies: &[GitCopy], under: Option<&Path>) {
    let here = |p: &Path| match under {
        Some(w) => p.starts_with(w) && p != w,
        None => !policy.work_in_seals.iter().any(|w| p.starts_with(w)),
    };
    let diverted: Vec<&GitCopy> = git_copies
        .iter()
        .filter(|c| c.divert && here(&c.real))
        .collect();
    // A seal a copy replaces: the config itself, or in its diverted directory. Looked up, not
    // compared with every copy: 100 repositories seal ~800 paths, and comparing each with each
    // copy's directory was 40 ms of the launch (perf).
    let reals: std::collections::HashSet<&Path> = diverted.iter().map(|c| &*c.real).collect();
    let dirs: std::collections::HashSet<PathBuf> =
        diverted.iter().map(|c| diverted_dir(&c.real)).collect();
    let copied = |p: &Path| reals.contains(p) || p.ancestors().any(|a| dirs.contains(a));
    out.extend(
        policy
            .sealed
            .iter()
            .filter(|s| !copied(&s.path) && here(&s.path))
            .map(|s| Mount::ReadOnly(s.path.clone())),
    );
    for c in diverted {
        out.push(Mount::ReadOnly(diverted_dir(&c.real)));
        out.push(Mount::LinkOver {
            target: copy_in_jail(c),
            dst: c.real.clone(),
        });
    }
}

/// A git config's copy as the jail sees it: what the symlink in its place points at.
fn copy_in_jail(c: &GitCopy) -> PathBuf {
    Path::new(layout::GIT_COPIES).join(copy_name(c.index))
}

/// The mounts the sealer makes: those after `Mount::Stage`.
pub(crate) fn the_sealers(mounts: &[Mount]) -> &[Mount] {
    match mounts.iter().position(|m| *m == Mount::Stage) {
        Some(i) => &mounts[i + 1..],
        None => &[],
    }
}

#[cfg(test)]
mod tests;
