//! The git directory is part of the workspace wherever it lives: a linked worktree as the
//! workspace, a workspace below a repository's root, a submodule's working tree, and the
//! worktrees the agent makes (`.claude/worktrees/NAME`, `git worktree add` elsewhere). Judged by
//! outcome: the commit lands, the worktree survives, what runs later (hooks, config, `info/`) stays
//! sealed, the working tree around the workspace stays read-only, nothing is left. Real bwrap,
//! real git, both sealing paths where they differ.

use crate::common::*;
use std::path::{Path, PathBuf};

/// `claude-sandbox run -- bash -c SCRIPT` from `dir` (its default workspace), with `env` added.
fn jail_in(f: &Fixture, dir: &Path, env: &[(&str, &str)], script: &str) -> std::process::Output {
    f.cmd(["run", "--", "bash", "-c", script])
        .current_dir(dir)
        .envs(env.iter().copied())
        .output()
        .expect("spawn claude-sandbox")
}

/// A shell function for the scripts: run `$@`, and say `WROTE` if it succeeded (it must not).
const TRY: &str = "try() { if \"$@\" 2>/dev/null; then echo \"WROTE: $*\"; fi; }\n";

fn git_out(f: &Fixture, dir: &Path, args: &[&str]) -> String {
    stdout(&f.git(dir, args)).trim().to_string()
}

fn alerts(f: &Fixture) -> String {
    stdout(&f.cmd(["alerts", "--json"]).output().unwrap())
        .trim()
        .to_string()
}

/// The repository's git directory as the human had it: the config a regular file again, no
/// diversion and no placeholder left, the hooks as they were.
fn assert_git_dir_as_before(git_dir: &Path, hooks_before: &[PathBuf]) {
    let config = std::fs::symlink_metadata(git_dir.join("config")).unwrap();
    assert!(
        config.file_type().is_file(),
        "{}/config is not a file again",
        git_dir.display()
    );
    for left in ["claude-sandbox", "commondir", "config.worktree"] {
        assert!(
            std::fs::symlink_metadata(git_dir.join(left)).is_err(),
            "{}/{left} was left behind",
            git_dir.display()
        );
    }
    assert_eq!(listing(&git_dir.join("hooks")), hooks_before);
}

fn listing(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn linked_worktree_commits(seal: &str) {
    let f = Fixture::new();
    let wt = f.root.join("feature");
    f.git(&f.ws, &["worktree", "add", "-q", wt.to_str().unwrap()]);
    let common = f.ws.join(".git");
    let hooks = listing(&common.join("hooks"));
    let script = format!(
        "{TRY}set -e
         echo b > b && git add b && git commit -qm 'from the jail'
         [ \"$CLAUDE_SANDBOX_SEAL_MODE\" = bwrap ] || git config user.email agent@example.invalid
         c=$(git rev-parse --path-format=absolute --git-common-dir)
         try sh -c \"echo x > $c/hooks/pre-commit\"
         try sh -c \"echo x >> $c/info/exclude\"
         try sh -c \"echo x > $c/commondir\"
         try sh -c \"echo x > $c/worktrees/feature/commondir\"
         try sh -c \"echo x > $c/worktrees/feature/gitdir\"
         try mv \"$c/worktrees/feature\" \"$c/worktrees/moved\"
         try mv \"$c/hooks\" \"$c/hooks.old\"
         try touch {ws}/from-the-jail
         echo done",
        ws = f.ws.display()
    );
    // (bwrap alone keeps the config read-only: `git config` fails there, as docs/entry-points.md says.)
    let script = script.replace("$CLAUDE_SANDBOX_SEAL_MODE", seal);
    let out = jail_in(&f, &wt, &[("CLAUDE_SANDBOX_SEAL", seal)], &script);
    let said = ok(&out);
    assert!(said.contains("done") && !said.contains("WROTE"), "{said}");
    assert_eq!(
        git_out(&f, &f.ws, &["log", "-1", "--format=%s", "feature"]),
        "from the jail"
    );
    assert!(!f.ws.join("from-the-jail").exists());
    assert_git_dir_as_before(&common, &hooks);
    if seal != "bwrap" {
        // The jail's own copy of the config, merged back (bwrap alone keeps it read-only).
        assert_eq!(
            git_out(&f, &f.ws, &["config", "--local", "user.email"]),
            "agent@example.invalid"
        );
    }
    assert_eq!(alerts(&f), "[]");
}

/// `git worktree add ../feature` and the agent started there: its git directory and the common
/// directory are the main repository's, outside the workspace.
#[test]
fn a_linked_worktree_as_the_workspace_commits_and_its_common_dir_is_sealed() {
    linked_worktree_commits("");
}

#[test]
fn a_linked_worktree_as_the_workspace_commits_when_bwrap_makes_the_seals() {
    linked_worktree_commits("bwrap");
}

/// One package of a monorepo opened alone (`--workspace pkg`): the repository's `.git` is above
/// the workspace; the rest of its working tree stays read-only.
#[test]
fn a_workspace_below_the_repository_root_commits_and_the_rest_stays_read_only() {
    let f = Fixture::new();
    let pkg = f.ws.join("pkg");
    std::fs::create_dir(&pkg).unwrap();
    let hooks = listing(&f.ws.join(".git/hooks"));
    let out = f
        .cmd([
            "run",
            "--workspace",
            pkg.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &format!(
                "{TRY}set -e
                 echo p > p && git add p && git commit -qm 'in pkg'
                 try sh -c 'echo x > ../README'
                 try sh -c 'echo x > ../.git/hooks/post-commit'
                 try sh -c 'echo x >> ../.git/info/exclude'
                 echo done"
            ),
        ])
        .current_dir(&pkg)
        .output()
        .unwrap();
    let said = ok(&out);
    assert!(said.contains("done") && !said.contains("WROTE"), "{said}");
    assert_eq!(git_out(&f, &f.ws, &["log", "-1", "--format=%s"]), "in pkg");
    assert_eq!(
        std::fs::read_to_string(f.ws.join("README")).unwrap(),
        "hello\n"
    );
    assert_git_dir_as_before(&f.ws.join(".git"), &hooks);
    assert_eq!(alerts(&f), "[]");
}

/// A submodule's working tree as the workspace: its git directory is the superproject's
/// `.git/modules/lib`, sealed there.
#[test]
fn a_submodule_as_the_workspace_commits_and_its_module_dir_is_sealed() {
    let f = Fixture::new();
    let lib = f.root.join("lib");
    std::fs::create_dir(&lib).unwrap();
    f.git(&lib, &["init", "-q"]);
    std::fs::write(lib.join("l"), "l\n").unwrap();
    f.git(&lib, &["add", "l"]);
    f.git(&lib, &["commit", "-qm", "lib"]);
    f.git(
        &f.ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().unwrap(),
            "lib",
        ],
    );
    f.git(&f.ws, &["commit", "-qm", "with lib"]);
    let module = f.ws.join(".git/modules/lib");
    let hooks = listing(&module.join("hooks"));
    let said = ok(&jail_in(
        &f,
        &f.ws.join("lib"),
        &[],
        &format!(
            "{TRY}set -e
             echo m > m && git add m && git commit -qm 'in the submodule'
             d=$(git rev-parse --absolute-git-dir)
             try sh -c \"echo x > $d/hooks/pre-commit\"
             git config core.hooksPath /elsewhere
             try sh -c 'echo x > ../README'
             echo done"
        ),
    ));
    assert!(said.contains("done") && !said.contains("WROTE"), "{said}");
    assert_eq!(
        git_out(&f, &f.ws.join("lib"), &["log", "-1", "--format=%s"]),
        "in the submodule"
    );
    assert_git_dir_as_before(&module, &hooks);
    // The module's config is the jail's own copy: a key that runs something is not carried out,
    // it waits in the review (`held`).
    assert!(!std::fs::read_to_string(module.join("config"))
        .unwrap()
        .contains("elsewhere"));
    let alerts = alerts(&f);
    assert!(
        alerts.contains("\"held\"") && alerts.contains("core.hookspath"),
        "{alerts}"
    );
    assert_eq!(held_count(&f), 1);
}

fn claude_worktrees(seal: &str) {
    let f = Fixture::new();
    let env = [("CLAUDE_SANDBOX_SEAL", seal)];
    let said = ok(&jail_in(
        &f,
        &f.ws,
        &env,
        &format!(
            "{TRY}set -e
             git worktree add -q -b worktree-x .claude/worktrees/x
             cd .claude/worktrees/x
             echo w > w && git add w && git commit -qm 'in the worktree'
             try sh -c 'echo {{}} > ../../settings.json'
             try mkdir ../../commands
             echo done"
        ),
    ));
    assert!(said.contains("done") && !said.contains("WROTE"), "{said}");
    let wt = f.ws.join(".claude/worktrees/x");
    assert_eq!(
        git_out(&f, &wt, &["log", "-1", "--format=%s"]),
        "in the worktree"
    );
    assert!(git_out(&f, &f.ws, &["worktree", "list"]).contains(".claude/worktrees/x"));
    assert_eq!(
        listing(&f.ws.join(".claude")),
        [f.ws.join(".claude/worktrees")],
        "only the worktrees are left in .claude"
    );
    // The next session works in it, and its own entry points are sealed now.
    std::fs::write(wt.join(".envrc"), "# mine\n").unwrap();
    let said = ok(&jail_in(
        &f,
        &wt,
        &env,
        &format!(
            "{TRY}set -e
             echo v > v && git add v && git commit -qm again
             try sh -c 'echo evil >> .envrc'
             try mv .envrc .envrc.old
             echo done"
        ),
    ));
    assert!(said.contains("done") && !said.contains("WROTE"), "{said}");
    assert_eq!(git_out(&f, &wt, &["log", "-1", "--format=%s"]), "again");
    assert_eq!(
        std::fs::read_to_string(wt.join(".envrc")).unwrap(),
        "# mine\n"
    );
    assert_eq!(alerts(&f), "[]");
}

/// `claude -w NAME` makes `git worktree add .claude/worktrees/NAME`: writable inside the sealed
/// `.claude/`, kept afterwards; `.claude`'s own entry points stay sealed.
#[test]
fn claude_worktrees_are_made_inside_the_sealed_claude_dir_and_kept() {
    claude_worktrees("");
}

#[test]
fn claude_worktrees_are_made_when_bwrap_makes_the_seals() {
    claude_worktrees("bwrap");
}

/// A worktree outside the writable roots is refused; one in the jail's private `/tmp` is gone
/// with it: its registration is removed, its branch kept, and the end note says so.
#[test]
fn a_worktree_outside_is_refused_and_one_in_the_private_tmp_leaves_its_branch_only() {
    let f = Fixture::new();
    let out = jail_in(
        &f,
        &f.ws,
        &[],
        "git worktree add -q ../outside 2>&1 | grep -q 'Read-only file system' && echo refused
         git worktree add -q /tmp/y && cd /tmp/y && git commit -q --allow-empty -m 'in tmp' && echo made",
    );
    let said = ok(&out);
    assert!(said.contains("refused") && said.contains("made"), "{said}");
    assert!(!f.root.join("outside").exists());
    let list = git_out(&f, &f.ws, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains("/tmp/y"), "{list}");
    assert_eq!(
        git_out(&f, &f.ws, &["log", "-1", "--format=%s", "y"]),
        "in tmp"
    );
    let err = stderr(&out);
    assert!(
        err.contains("the worktree /tmp/y") && err.contains("branch `y` is kept"),
        "{err}"
    );
}

/// A stand-in `claude` on the fixture's PATH running `script` (the launched command's name is what
/// the plan reads: Claude Code refuses a `.git` holding `commondir`).
fn fake_claude(f: &Fixture, script: &str) {
    let p = f.home.join(".local/bin/claude");
    std::fs::write(&p, format!("#!/bin/bash\n{script}\n")).unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// When Claude Code is launched, its repository's `.git` has no `commondir` placeholder (2.1.332
/// stops `claude -w` at one); another command gets it. A `commondir` the agent makes there is
/// taken out at once by the watcher, so the human's git never takes hooks from elsewhere.
#[test]
fn no_commondir_placeholder_for_claude_code_and_a_planted_one_is_taken_out() {
    let f = Fixture::new();
    let saw = |out: &std::process::Output| ok(out).trim().to_string();
    let probe = "test -e .git/commondir && echo placeholder || echo none";
    assert_eq!(saw(&f.jail(probe)), "placeholder");
    fake_claude(&f, probe);
    assert_eq!(
        saw(&f.cmd(["run", "--", "claude"]).output().unwrap()),
        "none"
    );
    // The plant: another directory with a hook, named by a new `commondir`.
    let evil = f.ws.join("evil");
    std::fs::create_dir_all(evil.join("hooks")).unwrap();
    fake_claude(
        &f,
        &format!(
            "printf '#!/bin/sh\\ntouch {m}\\n' > {e}/hooks/pre-commit; chmod +x {e}/hooks/pre-commit
             printf '{e}\\n' > .git/commondir
             for i in $(seq 100); do test -e .git/commondir || {{ echo taken; exit 0; }}; sleep 0.05; done
             echo still there",
            e = evil.display(),
            m = f.root.join("PWNED").display()
        ),
    );
    assert_eq!(
        saw(&f.cmd(["run", "--", "claude"]).output().unwrap()),
        "taken"
    );
    assert!(!f.ws.join(".git/commondir").exists());
    f.git(
        &f.ws,
        &["commit", "-q", "--allow-empty", "-m", "by the human"],
    );
    assert!(!f.root.join("PWNED").exists(), "the planted hook ran");
    let alerts = alerts(&f);
    assert!(
        alerts.contains("commondir") && alerts.contains("quarantined"),
        "{alerts}"
    );
}
