//! The bwrap argument vector: a pure function of a `Policy`.
//!
//! 1. namespaces and process options (`--die-with-parent`, new user, PID and IPC namespaces, no caps);
//! 2. the whole root read-only, fresh `/dev` and `/proc`;
//! 3. the jail's mounts (`mounts`, in their order), each as bwrap makes it; with the launcher
//!    sealing, only those before `Mount::Stage`, and the host's tree bound for the sealer;
//! 4. seccomp, status fd, environment, working directory, the command (through the exec helper, see
//!    `exec`).

use super::layout;
use super::mounts::{mounts, Mount};
use super::policy::{Fds, LayerMount, Policy, Sealing};
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

/// Build bwrap's arguments (without the program name). With `Sealing::ByLauncher`, the mounts from
/// `Mount::Stage` on are the sealer's (`seal`).
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
    for (node, at) in &policy.devices {
        a.flag("--dev-bind").path(node).path(at);
    }
    for m in &mounts(policy, &policy.git_copies) {
        if *m == Mount::Stage && sealing == Sealing::ByLauncher {
            // The rest is the sealer's: bwrap re-reads the mount table for each bind it makes and
            // each `--remount-ro` (~0.4 ms apiece, on the launch's critical path), the sealer does
            // not. bwrap only shows it the host's tree; the command waits at the gate meanwhile.
            a.flag("--bind").flag("/").flag(layout::STAGE);
            break;
        }
        mount(&mut a, policy, m);
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

/// One mount as bwrap makes it, and what it makes instead of what it cannot.
fn mount(a: &mut Argv, policy: &Policy, m: &Mount) {
    match m {
        // bwrap's own view is the host's tree already.
        Mount::Stage | Mount::Unstage => {}
        Mount::Bind { src, dst, writable } => {
            let how = if *writable { "--bind" } else { "--ro-bind" };
            a.flag(how).path(src).path(dst);
        }
        Mount::Symlink { target, dst } => {
            a.flag("--symlink").path(target).path(dst);
        }
        // bubblewrap 0.8 has no overlay: each cache is the jail's own directory, never the human's;
        // a data layer you have is your directory, read-only.
        Mount::Layer(l) => match l.without_overlay().mount() {
            LayerMount::Yours => {
                a.same("--ro-bind", &l.path);
            }
            LayerMount::Own | LayerMount::Overlay => {
                a.flag("--bind").path(&l.own).path(&l.path);
            }
        },
        // bwrap cannot mount a symlink: the config keeps its read-only seal.
        Mount::LinkOver { dst, .. } => {
            a.same("--ro-bind", dst);
        }
        Mount::Tmpfs(p) => {
            a.flag("--tmpfs").path(p);
        }
        Mount::RemountReadOnly(p) => {
            a.flag("--remount-ro").path(p);
        }
        // bwrap binds from the host: the directory writable, as it is there.
        Mount::Anchor(p) | Mount::Writable(p) => {
            a.same("--bind", p);
        }
        // Inside a layer bwrap binds the jail's own directory: the human's files there are not in
        // the jail, and a mount point made for a seal or a mask would be left in the layer.
        Mount::ReadOnly(p) | Mount::MaskFile(p) | Mount::MaskDir(p) if in_own_layer(policy, p) => {}
        Mount::ReadOnly(p) => {
            a.same("--ro-bind", p);
        }
        Mount::MaskFile(p) => {
            a.flag("--ro-bind").flag("/dev/null").path(p);
        }
        Mount::Hide(p) | Mount::MaskDir(p) => {
            a.flag("--tmpfs").path(p).flag("--remount-ro").path(p);
        }
    }
}

/// Whether bwrap's view of `path` is the jail's own directory of a layer (none of your files are
/// there), and not a writable root bound over it.
fn in_own_layer(policy: &Policy, path: &Path) -> bool {
    let own = |l: &super::policy::Layer| l.without_overlay().mount() == LayerMount::Own;
    policy
        .layers
        .iter()
        .any(|l| own(l) && path.starts_with(&l.path))
        && !policy.writable.iter().any(|w| path.starts_with(w))
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
            --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
            --tmpfs /run --ro-bind /run/lock /run/lock --tmpfs /run/user/1 --remount-ro /run \
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
        let ops = mounts(&p, &[]);
        assert!(
            crate::jail::mounts::the_sealers(&ops).contains(&Mount::Bind {
                src: "/run/cs/1/s/net".into(),
                dst: layout::NET_DIR.into(),
                writable: true,
            })
        );
    }

    #[test]
    fn gpu_devices_are_bound_after_the_fresh_dev_and_only_they() {
        let mut p = policy();
        p.devices = vec![("/d/dri/renderD128".into(), "/dev/dri/renderD128".into())];
        for s in [Sealing::InBwrap, Sealing::ByLauncher] {
            let t: Vec<String> = bwrap_args(&p, Fds::default(), s)
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect();
            let t = t.join(" ");
            let dev = t.find("--dev /dev --proc /proc").unwrap();
            let bind = t
                .find("--dev-bind /d/dri/renderD128 /dev/dri/renderD128")
                .unwrap();
            assert!(dev < bind, "{t}");
            assert_eq!(t.matches("--dev-bind").count(), 1, "{t}");
        }
        assert!(!text_of(&policy()).contains("--dev-bind"));
    }

    fn text_of(p: &Policy) -> String {
        bwrap_args(p, Fds::default(), Sealing::InBwrap)
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a/b".as_ref()), "a/b");
        assert_eq!(shell_quote("it's".as_ref()), "'it'\\''s'");
        assert_eq!(shell_quote("".as_ref()), "''");
    }
}
