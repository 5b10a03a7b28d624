//! The jail's layout: every path and file descriptor number that exists only inside the jail, named
//! once. The launcher, bwrap's arguments (`args`), the sealer (`seal`), the helper (`exec`), the
//! bridge (`net::bridge`) and the hooks' commands (`agent_hooks`) agree on these and on nothing
//! else.
//!
//! Guards against two parts of the launch naming one place two ways (a mount made at one spelling,
//! looked for at another) and against a jail-only path that could collide with one of the human's:
//! each lies in the jail's private `/tmp`, which bwrap makes first and no one outside sees.

/// The jail's private `/tmp`: a tmpfs of the session, made by bwrap before anything below.
pub(crate) const TMP: &str = "/tmp";

/// `/run`, a fixed read-only view of what was there at launch (`sockets`).
pub(crate) const RUN: &str = "/run";

/// Where bwrap binds the host's whole tree for the sealer (`--bind / STAGE`). The sealer takes the
/// sources of `$HOME`'s binds and the writable roots from there (inside the jail they are hidden:
/// under the session's `$HOME`, or under a private tmpfs) and unmounts it before the gate opens.
pub(crate) const STAGE: &str = "/tmp/.claude-sandbox-host";

/// A read-only tmpfs holding only a read-only bind of the claude-sandbox binary (`HOOK_BIN`), for
/// the agents' hook commands: the binary's own path is masked in the jail, and a mount point
/// cannot be renamed away.
pub(crate) const HOOK_BIN_DIR: &str = "/tmp/.claude-sandbox";
/// The binary in `HOOK_BIN_DIR`.
pub(crate) const HOOK_BIN: &str = "/tmp/.claude-sandbox/claude-sandbox";

/// The session's copies of the git configs (`gitcopy`), bound writable.
pub(crate) const GIT_COPIES: &str = "/tmp/.claude-sandbox-git";

/// The directory of the allowlist proxy's socket (`net`), bound from the session directory.
pub(crate) const NET_DIR: &str = "/tmp/.claude-sandbox-net";
/// The proxy's socket in `NET_DIR` (and in the host directory bound there).
pub(crate) const NET_SOCKET: &str = "proxy.sock";

/// The directory of the filtering ssh agent's socket (`ssh_agent`), bound from the session directory.
pub(crate) const SSH_DIR: &str = "/tmp/.claude-sandbox-ssh";
/// The agent's socket in `SSH_DIR`: the jail's `$SSH_AUTH_SOCK`.
pub(crate) const SSH_SOCKET: &str = "agent.sock";

/// The directory of the Docker filter's socket (`docker`), bound from the session directory.
pub(crate) const DOCKER_DIR: &str = "/tmp/.claude-sandbox-docker";
/// The filter's socket in `DOCKER_DIR`: the jail's `$DOCKER_HOST`.
pub(crate) const DOCKER_SOCKET: &str = "docker.sock";

/// Where the sealer makes the symlink it mounts over a git config (`mounts::Mount::LinkOver`),
/// removed once it is mounted.
pub(crate) const LINK_SCRATCH: &str = "/tmp/.claude-sandbox-link";

/// Where the sealer mounts, for a session beside another, the read-only overlay through which it
/// sees a shared upper directory that lies inside the layer's own lower one (`seal::overlay`);
/// unmounted and removed once the layers are attached.
pub(crate) const UNDER_SCRATCH: &str = "/tmp/.claude-sandbox-under";

/// The file descriptors bwrap receives, fixed so that `--dry-run` prints the exact argv: the seccomp
/// program, the status pipe, the claude-sandbox binary (the helper runs from it), the real stderr,
/// and the two ends of the gate (the helper writes "ready" on one, waits for "go" on the other).
pub(crate) const SECCOMP_FD: i32 = 3;
pub(crate) const STATUS_FD: i32 = 4;
pub(crate) const EXEC_FD: i32 = 5;
pub(crate) const STDERR_FD: i32 = 6;
pub(crate) const READY_FD: i32 = 7;
pub(crate) const GO_FD: i32 = 8;

/// argv\[1\] of the helper, the jail's first process (`exec`).
pub(crate) const HELPER: &str = "__exec";

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every jail-only path is in the private `/tmp`, none inside another but the hook's binary,
    /// and every descriptor is one of its own above stderr.
    #[test]
    fn jail_only_paths_lie_apart_in_the_private_tmp() {
        let dirs = [
            STAGE,
            HOOK_BIN_DIR,
            GIT_COPIES,
            NET_DIR,
            SSH_DIR,
            DOCKER_DIR,
            LINK_SCRATCH,
            UNDER_SCRATCH,
        ];
        for (i, d) in dirs.iter().enumerate() {
            assert_eq!(Path::new(d).parent(), Some(Path::new(TMP)), "{d}");
            for other in &dirs[i + 1..] {
                assert_ne!(d, other);
            }
        }
        assert_eq!(Path::new(HOOK_BIN).parent(), Some(Path::new(HOOK_BIN_DIR)));
        let fds = [SECCOMP_FD, STATUS_FD, EXEC_FD, STDERR_FD, READY_FD, GO_FD];
        for (i, fd) in fds.iter().enumerate() {
            assert!(*fd > 2);
            assert!(!fds[i + 1..].contains(fd), "{fd}");
        }
    }
}
