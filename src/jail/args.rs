//! The bwrap argument vector: a pure function of a `Policy`.
//!
//! Mount order matters, because a later mount hides what an earlier one put at the same place:
//! 1. namespaces and process options (`--die-with-parent`, new user, PID and IPC namespaces, no caps);
//! 2. the whole root read-only, fresh `/dev` and `/proc`;
//! 3. `/run` as a read-only view (`sockets`), then private tmpfs (`/tmp`, `$XDG_RUNTIME_DIR`);
//! 4. the session's `$HOME`, then its top-level entries (read-only, writable holes, symlinks,
//!    filtered views of directories where sockets appear);
//! 5. the layers (`layers`), then the writable roots (the workspace, holes that may lie in a layer),
//!    then anchors (writable self-binds that make `.git` and nested
//!    repositories' ancestors impossible to rename); then hidden directories (the runtime directory),
//!    after every writable bind so that none can re-expose it;
//! 6. sealed entry points, read-only over themselves: after the writable roots, so they win; then
//!    the agents' private state (a tmpfs each: `runtimes`), after the seals that hold them;
//! 7. masks (`/dev/null` over sockets and privileged binaries, empty dirs over socket dirs): last, so
//!    nothing can re-expose them;
//! 8. seccomp, status fd, environment, working directory, the command (through the exec helper, see
//!    `exec`).

use super::layout;
use super::policy::{Fds, HomeBind, MaskKind, Policy, Sealing};
use std::ffi::OsString;
use std::path::Path;

struct Argv(Vec<OsString>);

impl Argv {
    fn flag(&mut self, f: &str) -> &mut Self {
        self.0.push(f.into());
        self
    }
    fn path(&mut self, p: &Path) -> &mut Self {
        self.0.push(p.as_os_str().to_owned());
        self
    }
    fn same(&mut self, f: &str, p: &Path) -> &mut Self {
        self.flag(f).path(p).path(p)
    }
}

/// Build bwrap's arguments (without the program name). With `Sealing::ByLauncher`, `/run`'s view
/// and the private directories in it (step 3), and steps 4 to 7 are left to `seal::seal_ops`.
pub fn bwrap_args(policy: &Policy, fds: Fds, sealing: Sealing) -> Vec<OsString> {
    let mut a = Argv(Vec::new());
    a.flag("--die-with-parent")
        .flag("--unshare-user")
        .flag("--unshare-pid")
        .flag("--unshare-ipc");
    if policy.network.mode.unshares() {
        // Only `lo`, which bwrap brings up; abstract unix sockets live here too.
        a.flag("--unshare-net");
    }
    a.flag("--cap-drop").flag("ALL");
    a.flag("--ro-bind").flag("/").flag("/");
    a.flag("--dev").flag("/dev").flag("--proc").flag("/proc");
    // With the launcher sealing, the sealer makes `/run`'s view: bwrap re-reads the mount table for
    // each bind it makes and each `--remount-ro` (1.4 ms of its set-up here, on the launch's
    // critical path), the sealer does not. The command is still held at the gate until it is in.
    let run_view = policy
        .run_view
        .as_ref()
        .filter(|_| sealing == Sealing::InBwrap);
    if let Some(run) = run_view {
        let dir = Path::new(layout::RUN);
        a.flag("--tmpfs").path(dir);
        for d in &run.dirs {
            a.flag("--dir").path(d);
        }
        for k in &run.keep {
            a.same("--ro-bind", k);
        }
        a.flag("--remount-ro").path(dir);
    }
    // A private directory inside `/run`'s view is made with the view, by whoever makes the view.
    let sealer_makes = |p: &std::path::PathBuf| {
        run_view.is_none() && policy.run_view.as_ref().is_some_and(|r| r.dirs.contains(p))
    };
    for p in policy.private.iter().filter(|p| !sealer_makes(p)) {
        a.flag("--tmpfs").path(p);
    }
    if let (Some(dir), Sealing::InBwrap) = (&policy.net_dir, sealing) {
        // The proxy's socket: the jail's only way out in allowlist mode (in the private `/tmp`).
        // With the launcher sealing, the sealer binds it (a bind costs bwrap a re-read of the
        // mount table).
        a.flag("--bind").path(dir).path(Path::new(layout::NET_DIR));
    }
    if let (Some(bin), Sealing::InBwrap) = (&policy.hook_bin, sealing) {
        // A read-only tmpfs mount point holding only a read-only bind: neither can be replaced.
        let dir = Path::new(layout::HOOK_BIN_DIR);
        a.flag("--tmpfs").path(dir);
        a.flag("--ro-bind")
            .path(bin)
            .path(Path::new(layout::HOOK_BIN));
        a.flag("--remount-ro").path(dir);
    }
    if sealing == Sealing::ByLauncher {
        // `$HOME` and the writable roots are the sealer's: bwrap only shows it the host's tree.
        a.flag("--bind").flag("/").flag(layout::STAGE);
    } else {
        home_and_writable(&mut a, policy);
        seals(&mut a, policy);
    }
    if let Some(fd) = fds.seccomp {
        a.flag("--seccomp").flag(&fd.to_string());
    }
    if let Some(fd) = fds.status {
        a.flag("--json-status-fd").flag(&fd.to_string());
    }
    for k in &policy.unsetenv {
        a.flag("--unsetenv").flag(k);
    }
    for (k, v) in &policy.setenv {
        a.flag("--setenv").flag(k).flag(v);
    }
    // With the launcher sealing, the working directory may not exist in the jail yet (the workspace
    // is bound by the sealer): bwrap starts in `/`, the exec helper enters it after the gate.
    let bwrap_cwd = match sealing {
        Sealing::ByLauncher => Path::new("/"),
        Sealing::InBwrap => policy.chdir.as_path(),
    };
    a.flag("--chdir").path(bwrap_cwd);
    a.flag("--");
    if let Some((exe, stderr)) = fds.exec_helper {
        a.flag(&format!("/proc/self/fd/{exe}")).flag(layout::HELPER);
        a.flag(&exe.to_string()).flag(&stderr.to_string());
        if let Some((ready, go)) = fds.gate {
            a.flag(&ready.to_string())
                .flag(&go.to_string())
                .path(&policy.chdir);
        }
        a.flag("--");
    }
    a.0.extend(policy.command.iter().cloned());
    a.0
}

/// Steps 4 and 5 (to the writable roots): the session's `$HOME`, its entries, the writable roots.
fn home_and_writable(a: &mut Argv, policy: &Policy) {
    a.flag("--bind")
        .path(&policy.session_home)
        .path(&policy.home);
    for e in &policy.home_entries {
        let dest = policy.home.join(&e.name);
        match &e.bind {
            HomeBind::ReadOnly => a.same("--ro-bind", &dest),
            HomeBind::Writable => a.same("--bind", &dest),
            HomeBind::Symlink(target) => a.flag("--symlink").path(target).path(&dest),
            HomeBind::Filtered(keep) => {
                a.flag("--tmpfs").path(&dest);
                for name in keep {
                    a.same("--ro-bind", &dest.join(name));
                }
                a.flag("--remount-ro").path(&dest)
            }
            HomeBind::State(binds) => {
                let home = &policy.home;
                for m in super::statedir::entry_mounts(home, &policy.session_home, &e.name, binds) {
                    let how = if m.writable { "--bind" } else { "--ro-bind" };
                    a.flag(how).path(&m.src).path(&m.dst);
                }
                continue;
            }
        };
    }
    // bwrap 0.8 has no overlay: each cache is the jail's own directory, never the human's; a data
    // layer you have is your directory, read-only. Before the writable roots, which may lie inside.
    for l in super::layers::without_overlay(&policy.layers) {
        match l.mount() {
            super::policy::LayerMount::Yours => a.same("--ro-bind", &l.path),
            _ => a.flag("--bind").path(&l.own).path(&l.path),
        };
    }
    for p in &policy.writable {
        a.same("--bind", p);
    }
    for (dir, keep) in &policy.state_views {
        a.flag("--tmpfs").path(dir);
        for name in keep {
            a.same("--ro-bind", &dir.join(name));
        }
    }
}

/// Steps 5 (after the writable roots) to 7: anchors, hidden directories, seals, masks.
fn seals(a: &mut Argv, policy: &Policy) {
    for p in &policy.anchors {
        a.same("--bind", p);
    }
    for p in &policy.hidden {
        a.flag("--tmpfs").path(p).flag("--remount-ro").path(p);
    }
    // Inside a layer bwrap binds the jail's own directory: the human's files there are not in the
    // jail, and a mount point made for them would be left in the layer.
    let outside_layers = |p: &Path| !super::layers::hides(policy, p);
    for s in policy.sealed.iter().filter(|s| outside_layers(&s.path)) {
        a.same("--ro-bind", &s.path);
    }
    for p in &policy.state_private {
        a.flag("--tmpfs").path(p);
    }
    for m in policy.masks.iter().filter(|m| outside_layers(&m.path)) {
        match m.kind {
            MaskKind::File => a.flag("--ro-bind").flag("/dev/null").path(&m.path),
            MaskKind::Dir => a
                .flag("--tmpfs")
                .path(&m.path)
                .flag("--remount-ro")
                .path(&m.path),
        };
    }
}

/// Quote one argument for a POSIX shell (used by `--dry-run`).
pub fn shell_quote(arg: &std::ffi::OsStr) -> String {
    let s = arg.to_string_lossy();
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if safe {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy::*;
    use super::*;

    fn policy() -> Policy {
        Policy::example()
    }

    #[test]
    fn exact_argument_vector() {
        let got: Vec<String> = bwrap_args(
            &policy(),
            Fds {
                seccomp: Some(3),
                status: Some(4),
                exec_helper: Some((5, 6)),
                gate: None,
            },
            Sealing::InBwrap,
        )
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect();
        let want = "--die-with-parent --unshare-user --unshare-pid --unshare-ipc --cap-drop ALL \
            --ro-bind / / --dev /dev --proc /proc \
            --tmpfs /run --dir /run/user/1 --ro-bind /run/lock /run/lock --remount-ro /run \
            --tmpfs /tmp --tmpfs /run/user/1 \
            --tmpfs /tmp/.claude-sandbox --ro-bind /usr/local/bin/claude-sandbox /tmp/.claude-sandbox/claude-sandbox \
            --remount-ro /tmp/.claude-sandbox \
            --bind /run/cs/1/s/home /h --ro-bind /h/.bashrc /h/.bashrc --bind /h/.claude /h/.claude \
            --tmpfs /h/.ssh --ro-bind /h/.ssh/config /h/.ssh/config \
            --ro-bind /h/.ssh/known_hosts /h/.ssh/known_hosts --remount-ro /h/.ssh \
            --symlink dot/vimrc /h/.vimrc --bind /w /w --bind /w/.git /w/.git \
            --tmpfs /run/cs --remount-ro /run/cs \
            --ro-bind /w/.git/hooks /w/.git/hooks --ro-bind /w/.envrc /w/.envrc \
            --ro-bind /dev/null /run/docker.sock --tmpfs /run/podman --remount-ro /run/podman \
            --seccomp 3 --json-status-fd 4 --unsetenv SSH_AUTH_SOCK --setenv CLAUDE_SANDBOX 1 \
            --chdir /w/sub -- /proc/self/fd/5 __exec 5 6 --";
        let mut want: Vec<String> = want.split_whitespace().map(String::from).collect();
        want.push("claude".into());
        want.push("--flag with space".into());
        assert_eq!(got, want);
    }

    #[test]
    fn seals_come_after_writable_roots_and_masks_last() {
        let args = bwrap_args(&policy(), Fds::default(), Sealing::InBwrap);
        let pos = |s: &str| args.iter().position(|a| a == s).unwrap();
        assert!(pos("/w/.git/hooks") > pos("/w"));
        assert!(pos("/run/docker.sock") > pos("/w/.envrc"));
        assert!(!args.iter().any(|a| a == "--seccomp"));
    }

    #[test]
    fn launcher_sealing_leaves_seals_out_and_gates_the_helper() {
        let args: Vec<String> = bwrap_args(
            &policy(),
            Fds {
                seccomp: Some(3),
                status: Some(4),
                exec_helper: Some((5, 6)),
                gate: Some((7, 8)),
            },
            Sealing::ByLauncher,
        )
        .into_iter()
        .map(|s| s.into_string().unwrap())
        .collect();
        let text = args.join(" ");
        // bwrap shows the sealer the host's tree; `$HOME`, the workspace and the seals are its.
        assert!(
            text.contains(
                "--proc /proc --tmpfs /tmp --bind / /tmp/.claude-sandbox-host --seccomp 3"
            ),
            "{text}"
        );
        assert!(text.contains("--chdir / --"), "{text}");
        for gone in [
            "/tmp/.claude-sandbox",
            "/h",
            "/h/.bashrc",
            "/h/.ssh",
            "/w",
            "/w/.git/hooks",
            "/run/docker.sock",
            "/run/podman",
            "/run/cs",
            // `/run`'s view is the sealer's too.
            "/run",
            "/run/lock",
            "/run/user/1",
        ] {
            assert!(!args.iter().any(|a| a == gone), "{gone} in {text}");
        }
        assert!(
            text.ends_with("-- /proc/self/fd/5 __exec 5 6 7 8 /w/sub -- claude --flag with space")
        );
    }

    #[test]
    fn network_modes() {
        let mut p = policy();
        let text = |p: &Policy, s| {
            bwrap_args(p, Fds::default(), s)
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(!text(&p, Sealing::InBwrap).contains("--unshare-net"));
        p.network.mode = crate::net::Mode::None;
        for s in [Sealing::InBwrap, Sealing::ByLauncher] {
            let t = text(&p, s);
            assert!(t.starts_with("--die-with-parent --unshare-user --unshare-pid --unshare-ipc --unshare-net --cap-drop ALL"), "{t}");
            assert!(!t.contains(layout::NET_DIR), "{t}");
        }
        p.network.mode = crate::net::Mode::Allowlist;
        p.net_dir = Some("/run/cs/1/s/net".into());
        let net = "--bind /run/cs/1/s/net /tmp/.claude-sandbox-net ";
        for s in [Sealing::InBwrap, Sealing::ByLauncher] {
            let t = text(&p, s);
            assert!(t.contains("--unshare-net"), "{t}");
            // bwrap binds the proxy's directory into the private `/tmp`, or the sealer does.
            match s {
                Sealing::InBwrap => assert!(t.find("--tmpfs /tmp ") < t.find(net), "{t}"),
                Sealing::ByLauncher => assert!(!t.contains(net), "{t}"),
            }
        }
        let ops = crate::jail::seal::seal_ops(&p, &[]);
        assert!(ops.contains(&crate::jail::seal::SealOp::Bind {
            src: "/run/cs/1/s/net".into(),
            dst: layout::NET_DIR.into(),
            writable: true,
        }));
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a/b".as_ref()), "a/b");
        assert_eq!(shell_quote("it's".as_ref()), "'it'\\''s'");
        assert_eq!(shell_quote("".as_ref()), "''");
    }
}
