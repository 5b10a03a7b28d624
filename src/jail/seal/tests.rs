use super::*;

#[test]
fn ops_follow_bwraps_order() {
    // The same order as `bwrap_args` with `Sealing::InBwrap`: `/run`'s view, `$HOME`, its entries
    // and the writable roots, then (with the host's tree out of reach) anchors, hidden, seals, masks.
    assert_eq!(
        seal_ops(&Policy::example(), &[]),
        vec![
            SealOp::Tmpfs("/run".into()),
            SealOp::Bind {
                src: "/run/lock".into(),
                dst: "/run/lock".into(),
                writable: false
            },
            SealOp::Tmpfs("/run/user/1".into()),
            SealOp::RemountReadOnly("/run".into()),
            SealOp::Tmpfs("/tmp/.claude-sandbox".into()),
            SealOp::Bind {
                src: "/usr/local/bin/claude-sandbox".into(),
                dst: "/tmp/.claude-sandbox/claude-sandbox".into(),
                writable: false
            },
            SealOp::RemountReadOnly("/tmp/.claude-sandbox".into()),
            SealOp::Bind {
                src: "/run/cs/1/s/home".into(),
                dst: "/h".into(),
                writable: true
            },
            SealOp::Bind {
                src: "/h/.bashrc".into(),
                dst: "/h/.bashrc".into(),
                writable: false
            },
            SealOp::Bind {
                src: "/h/.claude".into(),
                dst: "/h/.claude".into(),
                writable: true
            },
            SealOp::Tmpfs("/h/.ssh".into()),
            SealOp::Bind {
                src: "/h/.ssh/config".into(),
                dst: "/h/.ssh/config".into(),
                writable: false
            },
            SealOp::Bind {
                src: "/h/.ssh/known_hosts".into(),
                dst: "/h/.ssh/known_hosts".into(),
                writable: false
            },
            SealOp::RemountReadOnly("/h/.ssh".into()),
            SealOp::Symlink {
                target: "dot/vimrc".into(),
                dst: "/h/.vimrc".into()
            },
            SealOp::Bind {
                src: "/w".into(),
                dst: "/w".into(),
                writable: true
            },
            SealOp::Unstage,
            SealOp::Anchor("/w/.git".into()),
            SealOp::Hide("/run/cs".into()),
            SealOp::ReadOnly("/w/.git/hooks".into()),
            SealOp::ReadOnly("/w/.envrc".into()),
            SealOp::MaskFile("/run/docker.sock".into()),
            SealOp::MaskDir("/run/podman".into()),
        ]
    );
}

#[test]
fn a_git_copy_is_bound_before_unstaging_and_linked_over_the_config() {
    let mut p = Policy::example();
    p.sealed.push(crate::jail::policy::Sealed {
        path: "/w/.git/config".into(),
        runs: "git".into(),
        placeholder: false,
    });
    p.git_copies.push(crate::jail::policy::GitCopy {
        real: "/w/.git/config".into(),
        index: 0,
        divert: true,
    });
    let ops = seal_ops(&p, &p.git_copies);
    let at = |op: &SealOp| ops.iter().position(|o| o == op).unwrap();
    let bind = SealOp::Bind {
        src: "/run/cs/1/s/git".into(),
        dst: "/tmp/.claude-sandbox-git".into(),
        writable: true,
    };
    let link = SealOp::LinkOver {
        target: "/tmp/.claude-sandbox-git/0.config".into(),
        dst: "/w/.git/config".into(),
    };
    assert!(at(&bind) < at(&SealOp::Unstage));
    assert!(at(&SealOp::Anchor("/w/.git".into())) < at(&link));
    assert!(!ops.contains(&SealOp::ReadOnly("/w/.git/config".into())));
}
