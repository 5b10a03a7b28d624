//! Claude Code's "don't ask again" (issue 33 item 4): the project's `.claude/settings.local.json` is
//! the jail's own (`jail::ownfiles`). The save works in the jail and the next jailed session reads
//! it; your file is never written, so your unjailed Claude Code never reads what the jail saved.

use crate::common::*;
use std::path::{Path, PathBuf};

/// A stand-in `claude` that saves a settings file as Claude Code 2.1.197's `writeFileSyncAndFlush`
/// does for local settings: a temporary file beside it, a rename, and in place when the rename
/// fails with EXDEV, EPERM, EEXIST or EBUSY. `claude FILE save JSON` / `claude FILE show`.
fn stand_in(f: &Fixture) -> PathBuf {
    let bin = f.root.join("agent-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        r#"#!/usr/bin/python3
import errno, os, secrets, sys
p, what = sys.argv[1], sys.argv[2]
if what == "show":
    print(open(p).read(), end="")
    sys.exit(0)
data = sys.argv[3].encode()
tmp = "%s.tmp.%d.%s" % (p, os.getpid(), secrets.token_hex(6))
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
os.write(fd, data); os.fsync(fd); os.close(fd)
try:
    os.rename(tmp, p)
    print("renamed")
except OSError as e:
    if e.errno not in (errno.EXDEV, errno.EPERM, errno.EEXIST, errno.EBUSY):
        raise
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW)
    finally:
        os.unlink(tmp)
    os.write(fd, data); os.fsync(fd); os.close(fd)
    print("in place")
"#,
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

fn claude(f: &Fixture, bin: &Path, seal: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut c = f.cmd(["run", "--", "claude"]);
    c.args(args).env(
        "PATH",
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    );
    if let Some(s) = seal {
        c.env("CLAUDE_SANDBOX_SEAL", s);
    }
    c.output().unwrap()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn dont_ask_again_is_saved_in_the_jails_own_settings_local_json() {
    const LOCAL: &str = ".claude/settings.local.json";
    // Sealed from outside (the default) and by bwrap alone: the same.
    for seal in [None, Some("bwrap")] {
        let f = Fixture::new();
        let bin = stand_in(&f);
        let yours = "{\"permissions\":{\"allow\":[\"Bash(ls)\"]}}\n";
        std::fs::create_dir_all(f.ws.join(".claude")).unwrap();
        std::fs::write(f.ws.join(".claude/settings.json"), "{}\n").unwrap();
        std::fs::write(f.ws.join(LOCAL), yours).unwrap();
        // The jail starts from your rules.
        assert_eq!(ok(&claude(&f, &bin, seal, &[LOCAL, "show"])), yours);
        let one = "{\"permissions\":{\"allow\":[\"Bash(ls)\",\"Bash(npm test)\"]}}\n";
        let two = "{\"permissions\":{\"allow\":[\"Bash(ls)\",\"Bash(npm test)\",\"Bash(make)\"]},\"hooks\":{\"Stop\":[]}}\n";
        // The rename meets the jail's copy (a mount point): Claude Code writes it in place.
        assert_eq!(
            ok(&claude(&f, &bin, seal, &[LOCAL, "save", one])),
            "in place\n",
            "[{seal:?}]"
        );
        assert_eq!(
            ok(&claude(&f, &bin, seal, &[LOCAL, "save", two])),
            "in place\n"
        );
        // The next jailed session reads the jail's rules; yours is unchanged, nothing was left in
        // your `.claude` (the temporary files were the view's), and no alert or held item.
        assert_eq!(ok(&claude(&f, &bin, seal, &[LOCAL, "show"])), two);
        assert_eq!(std::fs::read_to_string(f.ws.join(LOCAL)).unwrap(), yours);
        // Where it lives: the layer store, one copy per workspace.
        let copies = f.root.join("layers/project-files");
        let key = names(&copies);
        assert_eq!(key.len(), 1, "{key:?}");
        let copy = copies.join(&key[0]).join("settings.local.json");
        assert_eq!(std::fs::read_to_string(copy).unwrap(), two);
        assert_eq!(
            names(&f.ws.join(".claude")),
            ["settings.json", "settings.local.json"]
        );
        let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
        assert!(!alerts.contains("settings.local"), "{alerts}");
        // Your `.claude/settings.json` stays sealed: the same save fails there.
        let sealed = claude(
            &f,
            &bin,
            seal,
            &[".claude/settings.json", "save", "{\"hooks\":1}"],
        );
        assert!(!sealed.status.success(), "[{seal:?}] {}", stdout(&sealed));
        assert_eq!(
            std::fs::read_to_string(f.ws.join(".claude/settings.json")).unwrap(),
            "{}\n"
        );
    }
}

/// Without a `.claude` of yours: the jail's copy starts empty, the save works, and after the
/// session the workspace has no `.claude` (the session's placeholder is gone).
#[test]
fn dont_ask_again_works_without_a_claude_directory_and_leaves_none() {
    const LOCAL: &str = ".claude/settings.local.json";
    let f = Fixture::new();
    let bin = stand_in(&f);
    assert_eq!(ok(&claude(&f, &bin, None, &[LOCAL, "show"])), "{}\n");
    let rule = "{\"permissions\":{\"allow\":[\"Bash(npm test)\"]}}\n";
    assert_eq!(
        ok(&claude(&f, &bin, None, &[LOCAL, "save", rule])),
        "in place\n"
    );
    assert!(
        !f.ws.join(".claude").exists(),
        "{:?}",
        names(&f.ws.join(".claude"))
    );
    assert_eq!(ok(&claude(&f, &bin, None, &[LOCAL, "show"])), rule);
}

/// With `claude` launched, `.claude` is a view: `claude -w NAME`'s `git worktree add
/// .claude/worktrees/NAME` still lands in your workspace (made writable in the view), and a new file
/// beside it stays the session's.
#[test]
fn claude_worktrees_still_reach_your_workspace_through_the_view() {
    for seal in [None, Some("bwrap")] {
        let f = Fixture::new();
        let bin = f.root.join("agent-bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("claude"), "#!/bin/sh\nexec bash -c \"$1\"\n").unwrap();
        std::fs::set_permissions(
            bin.join("claude"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        std::fs::create_dir_all(f.ws.join(".claude")).unwrap();
        std::fs::write(f.ws.join(".claude/settings.json"), "{}\n").unwrap();
        let out = claude(
            &f,
            &bin,
            seal,
            &[
                "set -e; git worktree add -q -b wt .claude/worktrees/x; cd .claude/worktrees/x; \
               echo w > w && git add w && git commit -qm in-wt; echo new > ../../new-file; \
               (echo x > ../../settings.json) 2>/dev/null && echo WROTE; echo done",
            ],
        );
        assert_eq!(ok(&out), "done\n", "[{seal:?}]");
        assert!(f.ws.join(".claude/worktrees/x/w").is_file(), "[{seal:?}]");
        assert_eq!(
            names(&f.ws.join(".claude")),
            ["settings.json", "worktrees"],
            "[{seal:?}]"
        );
        assert_eq!(
            std::fs::read_to_string(f.ws.join(".claude/settings.json")).unwrap(),
            "{}\n"
        );
    }
}
