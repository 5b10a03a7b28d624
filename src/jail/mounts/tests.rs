//! The order of the jail's mounts, and bwrap's arguments and the sealer's mounts held against each
//! other: the same jail whoever makes it, but for what bwrap cannot make.

use super::*;
use crate::jail::args::bwrap_args;
use crate::jail::policy::{Fds, Sealed, Sealing};

fn bind(src: &str, dst: &str, writable: bool) -> Mount {
    Mount::Bind {
        src: src.into(),
        dst: dst.into(),
        writable,
    }
}

fn layer(path: &str, overlay: bool, human: bool) -> Layer {
    Layer {
        name: path.into(),
        path: path.into(),
        lower: "/l".into(),
        upper: format!("/store{path}/upper").into(),
        work: "/w".into(),
        under: None,
        own: format!("/store{path}/own").into(),
        overlay,
        human,
        data: true,
    }
}

#[test]
fn the_order_is_written_once() {
    assert_eq!(
        mounts(&Policy::example(), &[]),
        vec![
            Mount::Tmpfs("/tmp".into()),
            Mount::Stage,
            Mount::Tmpfs("/run".into()),
            bind("/run/lock", "/run/lock", false),
            Mount::Tmpfs("/run/user/1".into()),
            Mount::RemountReadOnly("/run".into()),
            Mount::Tmpfs("/tmp/.claude-sandbox".into()),
            bind(
                "/usr/local/bin/claude-sandbox",
                "/tmp/.claude-sandbox/claude-sandbox",
                false
            ),
            Mount::RemountReadOnly("/tmp/.claude-sandbox".into()),
            bind("/run/cs/1/s/home", "/h", true),
            bind("/h/.bashrc", "/h/.bashrc", false),
            bind("/h/.claude", "/h/.claude", true),
            Mount::Tmpfs("/h/.ssh".into()),
            bind("/h/.ssh/config", "/h/.ssh/config", false),
            bind("/h/.ssh/known_hosts", "/h/.ssh/known_hosts", false),
            Mount::RemountReadOnly("/h/.ssh".into()),
            Mount::Symlink {
                target: "dot/vimrc".into(),
                dst: "/h/.vimrc".into()
            },
            bind("/w", "/w", true),
            Mount::Unstage,
            Mount::Anchor("/w/.git".into()),
            Mount::Hide("/run/cs".into()),
            Mount::ReadOnly("/w/.git/hooks".into()),
            Mount::ReadOnly("/w/.envrc".into()),
            Mount::MaskFile("/run/docker.sock".into()),
            Mount::MaskDir("/run/podman".into()),
        ]
    );
}

#[test]
fn a_git_copy_is_bound_before_unstaging_and_linked_over_the_config() {
    let mut p = Policy::example();
    p.sealed.push(Sealed {
        path: "/w/.git/config".into(),
        runs: "git".into(),
        placeholder: false,
    });
    let copies = [GitCopy {
        real: "/w/.git/config".into(),
        index: 0,
        divert: true,
    }];
    let ops = mounts(&p, &copies);
    let at = |op: &Mount| ops.iter().position(|o| o == op).unwrap();
    let link = Mount::LinkOver {
        target: "/tmp/.claude-sandbox-git/0.config".into(),
        dst: "/w/.git/config".into(),
    };
    let copies_dir = bind("/run/cs/1/s/git", "/tmp/.claude-sandbox-git", true);
    assert!(at(&copies_dir) < at(&Mount::Unstage));
    assert!(at(&Mount::Anchor("/w/.git".into())) < at(&link));
    assert!(at(&Mount::ReadOnly("/w/.git/claude-sandbox".into())) < at(&link));
    assert!(!ops.contains(&Mount::ReadOnly("/w/.git/config".into())));
}

#[test]
fn layers_go_parents_first_and_overlays_first_at_each_depth() {
    let mut p = Policy::example();
    p.layers = vec![
        layer("/h/.local/share/pnpm", true, true),
        layer("/h/.cache", false, true),
        layer("/h/.local", true, true),
    ];
    let all = mounts(&p, &[]);
    let got: Vec<&str> = all
        .iter()
        .filter_map(|m| match m {
            Mount::Layer(l) => l.path.to_str(),
            _ => None,
        })
        .collect();
    assert_eq!(got, ["/h/.local", "/h/.cache", "/h/.local/share/pnpm"]);
}

/// bwrap's arguments as the mounts they make: `(flag, source, destination)`, in order.
fn bwraps(args: &[std::ffi::OsString]) -> Vec<(String, String, String)> {
    let a: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut out = Vec::new();
    let mut i = a.iter().position(|f| f == "/proc").unwrap() + 1;
    while i < a.len() {
        let f = a[i].trim_start_matches("--").to_string();
        match f.as_str() {
            "bind" | "ro-bind" | "symlink" => {
                out.push((f, a[i + 1].clone(), a[i + 2].clone()));
                i += 3;
            }
            "tmpfs" | "remount-ro" => {
                out.push((f, String::new(), a[i + 1].clone()));
                i += 2;
            }
            _ => break,
        }
    }
    out
}

/// What the sealer makes, as bwrap's flags would (`Unstage`: nothing of the jail).
fn the_sealers_as_bwraps(ops: &[Mount]) -> Vec<(String, String, String)> {
    let row =
        |f: &str, s: &Path, d: &Path| (f.into(), s.display().to_string(), d.display().to_string());
    let none = Path::new("");
    let mut out = Vec::new();
    for op in ops {
        match op {
            Mount::Bind { src, dst, writable } => {
                out.push(row(if *writable { "bind" } else { "ro-bind" }, src, dst));
            }
            Mount::Symlink { target, dst } => out.push(row("symlink", target, dst)),
            Mount::Layer(l) => match l.mount() {
                LayerMount::Overlay => out.push(row("overlay", &l.lower, &l.path)),
                LayerMount::Own => out.push(row("bind", l.own_dir(), &l.path)),
                LayerMount::Yours => out.push(row("ro-bind", &l.path, &l.path)),
            },
            Mount::LinkOver { target, dst } => out.push(row("link-over", target, dst)),
            Mount::Tmpfs(p) => out.push(row("tmpfs", none, p)),
            Mount::RemountReadOnly(p) => out.push(row("remount-ro", none, p)),
            Mount::Anchor(p) | Mount::Writable(p) => out.push(row("bind", p, p)),
            Mount::ReadOnly(p) => out.push(row("ro-bind", p, p)),
            Mount::MaskFile(p) => out.push(row("ro-bind", Path::new("/dev/null"), p)),
            Mount::Hide(p) | Mount::MaskDir(p) => {
                out.push(row("tmpfs", none, p));
                out.push(row("remount-ro", none, p));
            }
            Mount::Stage | Mount::Unstage => {}
        }
    }
    out
}

/// The jail bwrap makes alone (`Sealing::InBwrap`) and the one bwrap and the sealer make together
/// (`Sealing::ByLauncher`: bwrap's arguments up to the staging tree, then the sealer's mounts) are
/// one list of mounts in one order. They differ only where bwrap cannot: no overlay (a layer is the
/// jail's own directory, and nothing of yours inside it needs a seal) and no symlink mounted over a
/// git config (it keeps its read-only seal).
#[test]
fn bwrap_and_the_sealer_make_the_same_jail() {
    let mut p = Policy::example();
    p.net_dir = Some("/run/cs/1/s/net".into());
    p.state_views = vec![("/h/.claude/skills".into(), vec!["mine".into()])];
    p.state_private = vec!["/h/.claude/shell-snapshots".into()];
    // A directory of work inside a seal, with a seal and an anchor of its own below it.
    p.sealed.push(Sealed {
        path: "/w/.claude".into(),
        runs: String::new(),
        placeholder: false,
    });
    p.sealed.push(Sealed {
        path: "/w/.claude/worktrees/x/.envrc".into(),
        runs: String::new(),
        placeholder: false,
    });
    p.anchors.push("/w/.claude/worktrees/x".into());
    p.work_in_seals = vec!["/w/.claude/worktrees".into()];
    let full = |p: &Policy, copies: &[GitCopy]| {
        let mut p = p.clone();
        p.git_copies = copies.to_vec();
        let bwrap_alone = bwraps(&bwrap_args(&p, Fds::default(), Sealing::InBwrap));
        let mut together = bwraps(&bwrap_args(&p, Fds::default(), Sealing::ByLauncher));
        let staged = together.pop();
        assert_eq!(
            staged,
            Some(("bind".into(), "/".into(), crate::jail::layout::STAGE.into()))
        );
        together.extend(the_sealers_as_bwraps(the_sealers(&mounts(&p, copies))));
        (bwrap_alone, together)
    };
    // Without overlays or git copies: the same jail, mount for mount.
    p.layers = vec![
        layer("/h/.cache", false, true),
        layer("/h/.local", false, true),
    ];
    let (alone, together) = full(&p, &[]);
    assert_eq!(alone, together);
    assert!(alone
        .iter()
        .any(|(_, _, d)| d == "/h/.claude/shell-snapshots"));

    // Overlays, a layer you do not have, a seal inside the jail's own layer, a git copy.
    p.layers = vec![
        layer("/h/.cache", true, false),
        layer("/h/.local", true, true),
    ];
    p.sealed.push(Sealed {
        path: "/h/.cache/x/.envrc".into(),
        runs: "direnv".into(),
        placeholder: false,
    });
    p.sealed.push(Sealed {
        path: "/w/.git/config".into(),
        runs: "git".into(),
        placeholder: false,
    });
    let copies = [GitCopy {
        real: "/w/.git/config".into(),
        index: 0,
        divert: true,
    }];
    let (alone, together) = full(&p, &copies);
    let row = |f: &str, s: &str, d: &str| (f.to_string(), s.to_string(), d.to_string());
    // `~/.local`: an overlay to the sealer, yours read-only to bwrap (no overlay); `~/.cache`, which
    // you do not have: the upper directory to the sealer (an overlay would show it alone), the
    // jail's own directory to bwrap; a seal inside it: nothing of yours to cover to bwrap; the
    // config: the link to the jail's copy to the sealer, its read-only seal to bwrap.
    let bwraps_alone = [
        row("ro-bind", "/h/.local", "/h/.local"),
        row("bind", "/store/h/.cache/own", "/h/.cache"),
        row("ro-bind", "/w/.git/config", "/w/.git/config"),
    ];
    let the_sealers = [
        row("overlay", "/l", "/h/.local"),
        row("bind", "/store/h/.cache/upper", "/h/.cache"),
        row("ro-bind", "/h/.cache/x/.envrc", "/h/.cache/x/.envrc"),
        row(
            "link-over",
            "/tmp/.claude-sandbox-git/0.config",
            "/w/.git/config",
        ),
    ];
    let at = |v: &[(String, String, String)], r: &(String, String, String)| {
        v.iter()
            .position(|x| x == r)
            .unwrap_or_else(|| panic!("{r:?} not in {v:?}"))
    };
    // The layers in one place in both.
    for (a, s) in bwraps_alone.iter().zip(&the_sealers).take(2) {
        assert_eq!(
            at(&alone, a),
            at(&together, s),
            "{a:?} and {s:?} in one place"
        );
    }
    let without = |v: &[(String, String, String)], out: &[(String, String, String)]| {
        v.iter()
            .filter(|r| !out.contains(r))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        without(&alone, &bwraps_alone),
        without(&together, &the_sealers)
    );
}

/// A directory of the human's work inside a seal (`.claude/worktrees`) is bound writable after
/// the seal it lies in, and what is anchored or sealed below it comes after it: the seal does not
/// cover the work, and the work does not uncover its own seals.
#[test]
fn work_inside_a_seal_is_writable_and_its_own_seals_come_after_it() {
    let mut p = Policy::example();
    let seal = |path: &str| Sealed {
        path: path.into(),
        runs: String::new(),
        placeholder: false,
    };
    p.sealed.push(seal("/w/.claude"));
    p.sealed.push(seal("/w/.claude/worktrees/x/.envrc"));
    p.anchors.push("/w/.claude/worktrees/x".into());
    p.work_in_seals = vec!["/w/.claude/worktrees".into()];
    let ops = mounts(&p, &[]);
    let at = |m: &Mount| {
        ops.iter()
            .position(|o| o == m)
            .unwrap_or_else(|| panic!("{m:?} missing in {ops:#?}"))
    };
    let sealed = at(&Mount::ReadOnly("/w/.claude".into()));
    let work = at(&Mount::Writable("/w/.claude/worktrees".into()));
    let anchor = at(&Mount::Anchor("/w/.claude/worktrees/x".into()));
    let inner = at(&Mount::ReadOnly("/w/.claude/worktrees/x/.envrc".into()));
    assert!(sealed < work && work < anchor && anchor < inner, "{ops:#?}");
    assert_eq!(
        ops.iter()
            .filter(|o| matches!(o, Mount::Anchor(a) if a.starts_with("/w/.claude")))
            .count(),
        1
    );
}

#[test]
fn a_read_only_workspace_is_bound_read_only_and_nothing_over_it_is_writable() {
    let mut p = Policy::example();
    p.read_only_workspace = true;
    p.writable.retain(|w| *w != p.workspace);
    let m = mounts(&p, &[]);
    assert!(m.contains(&bind("/w", "/w", false)), "{m:?}");
    assert!(!m.contains(&bind("/w", "/w", true)), "{m:?}");
}

#[test]
fn a_masked_view_is_bound_after_every_writable_root_and_before_the_host_tree_goes() {
    let mut p = Policy::example();
    let npmrc = p.workspace.join(".npmrc");
    p.views.push(crate::jail::policy::SecretView {
        path: npmrc.clone(),
        copy: "/run/cs/1/s/views/0".into(),
        format: crate::secrets::views::Format::Ini,
        text: None,
    });
    let m = mounts(&p, &[]);
    let at = |want: &Mount| m.iter().position(|x| x == want).unwrap();
    let view = at(&Mount::Bind {
        src: "/run/cs/1/s/views/0".into(),
        dst: npmrc.clone(),
        writable: false,
    });
    let last_writable = m
        .iter()
        .rposition(|x| matches!(x, Mount::Bind { writable: true, .. }))
        .unwrap();
    assert!(last_writable < view && view < at(&Mount::Unstage), "{m:?}");
    // bwrap alone makes the same bind: the copy read-only over the file.
    let args: Vec<String> = bwrap_args(&p, Fds::default(), Sealing::InBwrap)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let text = args.join(" ");
    assert!(
        text.contains(&format!(
            "--ro-bind /run/cs/1/s/views/0 {}",
            npmrc.display()
        )),
        "{text}"
    );
}
