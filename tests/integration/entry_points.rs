//! Every class of entry point: creating, modifying, renaming or deleting it from inside the jail fails,
//! and the file outside is unchanged. Real bwrap, real git, real files.

use crate::common::*;
use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt;

/// Run `attempts` (one shell command per line) inside the jail; each one that succeeds prints
/// `ESCAPED: <line>`. Returns the escaped lines.
fn attempt(f: &Fixture, attempts: &str) -> Vec<String> {
    let mut script = String::new();
    for line in attempts.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let _ = writeln!(
            script,
            "( {line} ) 2>/dev/null && echo 'ESCAPED: {}'",
            line.replace('\'', "")
        );
    }
    script.push_str("echo DONE\n");
    let out = f.jail(&script);
    let text = ok(&out);
    assert!(text.contains("DONE"), "the script did not finish: {text}");
    text.lines()
        .filter(|l| l.starts_with("ESCAPED"))
        .map(String::from)
        .collect()
}

fn assert_sealed(f: &Fixture, attempts: &str) {
    let before = f.snapshot();
    let escaped = attempt(f, attempts);
    assert!(
        escaped.is_empty(),
        "writes that should have failed succeeded:\n{}",
        escaped.join("\n")
    );
    assert_same(
        &before,
        &f.snapshot(),
        "the host changed although every write failed",
    );
}

/// (`git config` itself succeeds: the jail writes its own copy, see tests/integration/gitconfig.rs.)
#[test]
fn git_hooks_config_and_git_dir_are_sealed() {
    let f = Fixture::new();
    assert_sealed(
        &f,
        r"
        printf '#!/bin/sh\ntouch /var/tmp/pwned\n' > .git/hooks/pre-commit
        chmod +x .git/hooks/pre-commit.sample
        mv .git/hooks/pre-commit.sample .git/hooks/pre-commit
        rm -rf .git/hooks
        mv .git/hooks .git/hooks.old
        mv .git/config .git/config.old
        rm -f .git/config
        ln -sf /var/tmp/x .git/config
        echo '[core] fsmonitor = x' > .git/config.worktree
        echo /var/tmp > .git/commondir
        mv .git .git.old
        rmdir .git
        ",
    );
}

#[test]
fn commits_branches_and_add_all_still_work() {
    let f = Fixture::new();
    let out = ok(&f.jail(
        "echo change >> README && echo new > new.txt && git add -A && git commit -qm work && \
         git checkout -qb feature && git status --porcelain && git log --oneline | wc -l",
    ));
    assert_eq!(
        out.trim(),
        "2",
        "git status must be clean (no placeholder tripped `git add -A`): {out}"
    );
    let files = f.git(&f.ws, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(stdout(&files).trim(), "README\nnew.txt");
}

#[test]
fn nested_repo_submodule_and_worktree_are_sealed() {
    let f = Fixture::new();
    let nested = f.ws.join("libs/inner");
    std::fs::create_dir_all(&nested).unwrap();
    f.git(&nested, &["init", "-q"]);
    // A submodule from a local repository outside the workspace.
    let upstream = f.root.join("upstream");
    std::fs::create_dir_all(&upstream).unwrap();
    f.git(&upstream, &["init", "-q"]);
    std::fs::write(upstream.join("x"), "x").unwrap();
    f.git(&upstream, &["add", "x"]);
    f.git(&upstream, &["commit", "-qm", "x"]);
    f.git(
        &f.ws,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            upstream.to_str().unwrap(),
            "sub",
        ],
    );
    f.git(&f.ws, &["commit", "-qm", "sub"]);
    f.git(&f.ws, &["worktree", "add", "-q", "wt"]);
    assert_sealed(
        &f,
        r"
        echo x > libs/inner/.git/hooks/pre-commit
        mv libs/inner/.git/config libs/inner/.git/config.old
        mv libs libs.old
        mv libs/inner libs/inner.old
        echo x > .git/modules/sub/hooks/post-checkout
        rm .git/modules/sub/config
        echo 'gitdir: /var/tmp' > sub/.git
        echo 'gitdir: /var/tmp' > wt/.git
        mv wt/.git wt/git.old
        echo /var/tmp > .git/worktrees/wt/commondir
        echo x > .git/worktrees/wt/config.worktree
        git -C wt config --worktree core.fsmonitor x
        ",
    );
}

#[test]
fn hooks_path_and_include_targets_are_sealed() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join(".husky/_")).unwrap();
    f.git(&f.ws, &["config", "core.hooksPath", ".husky/_"]);
    std::fs::write(f.ws.join("shared.gitconfig"), "[alias]\n\tst = status\n").unwrap();
    f.git(&f.ws, &["config", "include.path", "../shared.gitconfig"]);
    f.git(
        &f.ws,
        &["config", "includeIf.gitdir:/.path", "../missing.gitconfig"],
    );
    assert_sealed(
        &f,
        r"
        printf '#!/bin/sh\n' > .husky/_/pre-commit
        printf '[core]\nfsmonitor = x\n' >> shared.gitconfig
        mv shared.gitconfig other
        printf '[core]\nfsmonitor = x\n' > missing.gitconfig
        ",
    );
}

/// (`~/.gitconfig` is the jail's own copy, merged back without keys that run programs:
/// tests/integration/gitconfig.rs.)
#[test]
fn shell_startup_files_cannot_be_changed_or_created() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".ssh")).unwrap();
    assert_sealed(
        &f,
        r"
        echo 'touch /var/tmp/pwned' >> ~/.bashrc
        mv ~/.bashrc ~/.bashrc.old
        echo x >> ~/.profile
        mkdir -p ~/.config/fish && echo x > ~/.config/fish/config.fish
        mkdir -p ~/.ssh && echo 'Host *' > ~/.ssh/config
        mkdir -p ~/.config/systemd/user
        ",
    );
    // New top-level files land in the session's private home and are discarded.
    let out = ok(&f.jail("echo x > ~/.bash_profile && echo x > ~/.zshenv && echo x > ~/.inputrc && cat ~/.bash_profile"));
    assert_eq!(out.trim(), "x");
    for name in [".bash_profile", ".zshenv", ".inputrc"] {
        assert!(
            !f.home.join(name).exists(),
            "~/{name} reached the real home"
        );
    }
}

#[test]
fn workspace_tool_configs_cannot_be_created() {
    let f = Fixture::new();
    // The human has the tools that read them (a name nothing installed reads is not blocked:
    // `an_unread_entry_point_is_alerted_not_blocked`).
    for tool in ["direnv", "cargo", "npm", "mise"] {
        let p = f.home.join(".local/bin").join(tool);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::create_dir_all(f.ws.join("pkg")).unwrap();
    std::fs::write(f.ws.join("pkg/.envrc"), "export A=1\n").unwrap();
    assert_sealed(
        &f,
        r#"
        echo 'touch /var/tmp/pwned' > .envrc
        mkdir -p .vscode && echo '{}' > .vscode/tasks.json
        mkdir -p .devcontainer && echo '{}' > .devcontainer/devcontainer.json
        mkdir -p .claude && echo '{"hooks":{}}' > .claude/settings.json
        echo '{"mcpServers":{"x":{"command":"sh"}}}' > .mcp.json
        mkdir -p .codex && echo x > .codex/config.toml
        mkdir -p .cargo && echo '[build]' > .cargo/config.toml
        echo 'writable = ["/"]' > .claude-sandbox.toml
        echo 'node-options=--require /x' > .npmrc
        echo '[hooks]' > mise.toml
        echo 'path = "/x"' > rust-toolchain.toml
        echo 'x' >> pkg/.envrc
        mv pkg/.envrc pkg/envrc.old
        mv pkg pkg.old
        echo x > libs/.envrc
        "#,
    );
}

#[test]
fn agent_settings_in_writable_state_dirs_are_sealed_but_state_is_writable() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    std::fs::write(f.home.join(".claude/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(f.home.join(".codex")).unwrap();
    assert_sealed(
        &f,
        r#"
        echo '{"hooks":{"SessionStart":[]}}' > ~/.claude/settings.json
        mv ~/.claude/settings.json ~/.claude/s.old
        echo '{}' > ~/.claude/settings.local.json
        mkdir -p ~/.claude/commands/x
        echo '{}' > ~/.codex/hooks.json
        mv ~/.claude ~/.claude.old
        "#,
    );
    ok(&f.jail("mkdir -p ~/.claude/todos && echo state > ~/.claude/todos/s && echo c > ~/.cache-test 2>/dev/null; true"));
    // Agent state is writable, and the jail's own: there for its next session, never yours.
    assert!(!f.home.join(".claude/todos").exists());
    assert_eq!(stdout(&f.jail("cat ~/.claude/todos/s")), "state\n");
    // Codex's `config.toml` is the jail's own copy (`own_settings`): written there, never yours.
    ok(&f.jail("echo 'notify = [\"sh\"]' > ~/.codex/config.toml"));
    assert!(!f.home.join(".codex/config.toml").exists());
}

/// A tool the agent puts in `~/.local/bin` is the jail's: it runs in the next session, your
/// directory never has it, and `adopt` brings it over (bytes and mode) when you want it.
#[test]
fn a_tool_installed_in_local_bin_is_the_jails_until_adopted() {
    let f = Fixture::new();
    ok(&f.jail("python3 -m venv .venv && printf '#!/bin/sh\\necho tool-ran\\n' > ~/.local/bin/mytool && chmod +x ~/.local/bin/mytool"));
    let tool = f.home.join(".local/bin/mytool");
    assert!(
        std::fs::symlink_metadata(&tool).is_err(),
        "the jail's tool is in your ~/.local/bin"
    );
    assert_eq!(ok(&f.jail("mytool")), "tool-ran\n");
    assert!(
        f.ws.join(".venv/bin/python").exists(),
        "venv was not created"
    );
    ok(&f.cmd(["adopt", "mytool"]).output().unwrap());
    assert!(std::fs::metadata(&tool).unwrap().permissions().mode() & 0o111 != 0);
    let out = std::process::Command::new(&tool).output().unwrap();
    assert_eq!(stdout(&out).trim(), "tool-ran");
}

/// Without a `~/.local` of yours the jail has one of its own (empty at first: `pip` makes its `bin`):
/// writable, kept for its next session, and nothing is made in your home.
#[test]
fn a_missing_local_bin_is_the_jails_own_and_nothing_is_made_in_your_home() {
    let f = Fixture::new();
    std::fs::remove_dir_all(f.home.join(".local")).unwrap();
    ok(&f.jail("mkdir -p ~/.local/bin && echo x > ~/.local/bin/kept"));
    assert!(
        !f.home.join(".local").exists(),
        "a ~/.local was made in your home"
    );
    assert_eq!(ok(&f.jail("cat ~/.local/bin/kept")), "x\n");
}

#[test]
fn configured_read_only_and_masked_paths_apply_and_workspace_file_cannot_loosen() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("docs")).unwrap();
    std::fs::write(f.ws.join("secret.txt"), "s3cret\n").unwrap();
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "read_only = [\"docs\"]\nmasked = [\"secret.txt\"]\n",
    )
    .unwrap();
    f.git(&f.ws, &["add", "-A"]);
    f.git(&f.ws, &["commit", "-qm", "cfg"]);
    let out = ok(&f.jail("touch docs/x 2>/dev/null && echo WROTE; cat secret.txt; echo END"));
    assert_eq!(
        out.trim(),
        "END",
        "docs/ must be read-only and secret.txt masked: {out}"
    );
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "read_only = []\nwritable = [\"/etc\"]\n",
    )
    .unwrap();
    let out = f.jail("echo STARTED");
    assert_eq!(out.status.code(), Some(2));
    assert!(!stdout(&out).contains("STARTED"));
    let err = stderr(&out);
    assert!(
        err.contains(".claude-sandbox.toml:2:") && err.contains("`writable`"),
        "{err}"
    );
}

/// A missing workspace-root name whose readers are none of them installed gets no placeholder (no
/// `hk.pkl/` directory in the human's editor when nothing here runs hk); one created during the
/// session is held at its end (a tool installed later would run it). Once a reader is installed
/// (here in `~/.local/bin`, where the next login shell looks), the name is blocked again.
#[test]
fn an_unread_entry_point_is_alerted_not_blocked() {
    let f = Fixture::new();
    let on_path =
        std::env::split_paths("/usr/local/bin:/usr/bin:/bin").any(|d| d.join("hk").exists());
    assert!(
        !on_path,
        "this test needs a machine without `hk` in /usr/local/bin, /usr/bin or /bin"
    );
    let out = ok(&f.jail("[ -e hk.pkl ] && echo PLACEHOLDER; echo 'x' > hk.pkl && echo MADE"));
    assert_eq!(out.trim(), "MADE", "no placeholder, and the write works");
    let held = stdout(&f.cmd(["review", "--json"]).output().unwrap());
    assert!(held.contains("hk.pkl"), "{held}");
    assert!(!f.ws.join("hk.pkl").exists(), "left in the workspace");
    let hk = f.home.join(".local/bin/hk");
    std::fs::write(&hk, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&hk, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ok(&f.jail("echo 'x' > hk.pkl 2>/dev/null && echo MADE; echo DONE"));
    assert_eq!(out.trim(), "DONE", "blocked once hk is installed");
    assert!(!f.ws.join("hk.pkl").exists(), "the placeholder is gone");
}

/// pnpm `require`s `.pnpmfile.cjs` and fails on the placeholder directory; the jail points its
/// pnpm at `/dev/null` instead while the name is a placeholder.
#[test]
fn pnpm_install_works_beside_the_pnpmfile_placeholder() {
    let f = Fixture::new();
    let pnpm =
        std::env::split_paths("/usr/local/bin:/usr/bin:/bin").find(|d| d.join("pnpm").exists());
    let Some(dir) = pnpm else {
        eprintln!("\n*** pnpm_install_works_beside_the_pnpmfile_placeholder: NOT RUN — pnpm is not installed here\n");
        return;
    };
    let link = f.home.join(".local/bin/pnpm");
    std::os::unix::fs::symlink(dir.join("pnpm"), &link).unwrap();
    // pnpm's store (the jail's own cache layer over it).
    std::fs::create_dir_all(f.home.join(".local/share/pnpm")).unwrap();
    std::fs::write(
        f.ws.join("package.json"),
        r#"{"name":"x","version":"1.0.0"}"#,
    )
    .unwrap();
    let out = ok(&f.jail("[ -d .pnpmfile.cjs ] && echo PLACEHOLDER; pnpm install --offline >/dev/null && echo INSTALLED"));
    assert_eq!(out.trim(), "PLACEHOLDER\nINSTALLED");
}

/// A name whose reader fails on a directory placeholder (`OpenCode`'s `opencode.json`) gets none: the
/// agent may make one, and at the session's end it is held for the review, out of the workspace;
/// accepting it puts it back byte for byte.
#[test]
fn a_config_made_where_no_placeholder_can_be_is_held_and_accepted_in_one_step() {
    let f = Fixture::new();
    let out = f.jail(
        "test -e opencode.json && echo PLACEHOLDER; \
         printf '{\"mcp\":{\"x\":{\"type\":\"local\",\"command\":[\"sh\",\"-c\",\"id\"]}}}\\n' > opencode.json && echo MADE",
    );
    let so = stdout(&out);
    assert!(
        so.contains("MADE") && !so.contains("PLACEHOLDER"),
        "{so}\n{}",
        stderr(&out)
    );
    let path = f.ws.join("opencode.json");
    assert!(
        !path.exists(),
        "left in the workspace for your OpenCode to run"
    );
    assert!(
        stderr(&out).contains("held for `claude-sandbox review`"),
        "{}",
        stderr(&out)
    );
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    let item = items
        .iter()
        .find(|i| i["target"] == path.to_str().unwrap())
        .unwrap_or_else(|| panic!("not held: {items:?}"));
    let id = item["id"].as_str().unwrap();
    let accepted = f.cmd(["review", "accept", id]).output().unwrap();
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"mcp\":{\"x\":{\"type\":\"local\",\"command\":[\"sh\",\"-c\",\"id\"]}}}\n"
    );
}

/// Below the workspace root only existing names are sealed: a new `pkg/.npmrc` (`script-shell`
/// runs on your `npm run` there) and a new `sub/.claude/settings.json` (a `SessionStart` hook for
/// `claude` in `sub/`) work inside the session, and at its end each is held for the review, out of
/// the workspace; one the session committed is the work (in the index): noted and left. Accepting
/// puts a held one back byte for byte.
#[test]
fn new_entry_points_below_the_root_are_held_at_the_end_and_committed_ones_are_the_work() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("pkg")).unwrap();
    std::fs::create_dir_all(f.ws.join("lib")).unwrap();
    let out = f.jail(
        "printf 'script-shell=/tmp/x\\n' > pkg/.npmrc && \
         mkdir -p sub/.claude && echo '{\"hooks\":{}}' > sub/.claude/settings.json && \
         mkdir -p lib/.vscode && echo '{}' > lib/.vscode/settings.json && \
         git add lib/.vscode/settings.json && git commit -qm vscode && \
         cat pkg/.npmrc sub/.claude/settings.json && echo WORKED",
    );
    assert!(
        stdout(&out).contains("WORKED"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let se = stderr(&out);
    for held in ["pkg/.npmrc", "sub/.claude/settings.json"] {
        assert!(
            !f.ws.join(held).exists(),
            "{held} left in the workspace:\n{se}"
        );
    }
    assert!(
        f.ws.join("lib/.vscode/settings.json").exists(),
        "the committed one was moved"
    );
    assert!(se.contains("in its repository's index"), "{se}");
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(items.len(), 2, "{items:#?}");
    let npmrc = f.ws.join("pkg/.npmrc");
    let id = items
        .iter()
        .find(|i| i["target"] == npmrc.to_str().unwrap())
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("{items:#?}"));
    assert!(f
        .cmd(["review", "accept", id])
        .output()
        .unwrap()
        .status
        .success());
    assert_eq!(
        std::fs::read_to_string(&npmrc).unwrap(),
        "script-shell=/tmp/x\n"
    );
}

/// `.pre-commit-config.yaml` is edited in the jail (an agent adds the project's hook as part of
/// its task): a tracked one changed is the work (`git diff` shows it before your next commit runs
/// it), noted and left; an untracked one changed is held for the review with yours put back, and
/// a new one is held as any new name is. Accepting puts the session's bytes in place.
#[test]
fn pre_commit_configs_are_edited_inside_and_held_unless_they_are_the_work() {
    let f = Fixture::new();
    let hooks = "repos: []\n";
    std::fs::write(f.ws.join(".pre-commit-config.yaml"), hooks).unwrap();
    f.git(&f.ws, &["add", ".pre-commit-config.yaml"]);
    f.git(&f.ws, &["commit", "-qm", "pre-commit"]);
    std::fs::create_dir_all(f.ws.join("tools")).unwrap();
    std::fs::write(f.ws.join("tools/.pre-commit-config.yaml"), hooks).unwrap();
    let added = "- repo: local\n  hooks:\n  - id: fmt\n    entry: cargo fmt\n";
    let out = f.jail(&format!(
        "printf 'repos:\\n{a}' > .pre-commit-config.yaml && \
         printf 'repos:\\n{a}' > tools/.pre-commit-config.yaml && \
         mkdir -p web && printf 'repos:\\n{a}' > web/.pre-commit-config.yaml && echo WORKED",
        a = added.replace('\n', "\\n")
    ));
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(so.contains("WORKED"), "{so}\n{se}");
    let edited = format!("repos:\n{added}");
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".pre-commit-config.yaml")).unwrap(),
        edited,
        "the tracked one is the work: {se}"
    );
    assert!(se.contains("its repository tracks it"), "{se}");
    let tools = f.ws.join("tools/.pre-commit-config.yaml");
    assert_eq!(std::fs::read_to_string(&tools).unwrap(), hooks, "{se}");
    assert!(!f.ws.join("web/.pre-commit-config.yaml").exists(), "{se}");
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(items.len(), 2, "{items:#?}");
    let id = items
        .iter()
        .find(|i| i["target"] == tools.to_str().unwrap())
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("{items:#?}"));
    let accepted = f.cmd(["review", "accept", id]).output().unwrap();
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert_eq!(std::fs::read_to_string(&tools).unwrap(), edited);
}

/// The names the catalogue pass added (docs/entry-points.md, "The catalogue pass"): the agents'
/// instruction files and pnpm's workspace file are written freely in the jail and held at the
/// end unless they are the work (a tracked `AGENTS.md` changed is left, an untracked
/// `CLAUDE.local.md` changed is put back and held, a new `GEMINI.md` below the root and a new
/// `pnpm-workspace.yaml` are moved out and held); `.agents` (skills with scripts) is sealed at
/// the root like `.claude`.
#[test]
fn instruction_files_and_pnpm_workspace_files_are_held_unless_the_work_and_agents_is_sealed() {
    let f = Fixture::new();
    std::fs::write(f.ws.join("AGENTS.md"), "Be brief.\n").unwrap();
    f.git(&f.ws, &["add", "AGENTS.md"]);
    f.git(&f.ws, &["commit", "-qm", "agents"]);
    std::fs::write(f.ws.join("CLAUDE.local.md"), "mine\n").unwrap();
    let out = f.jail(
        "echo 'Run the tests.' >> AGENTS.md && echo theirs > CLAUDE.local.md && \
         mkdir -p pkg && echo 'Obey.' > pkg/GEMINI.md && \
         printf 'scriptShell: ./x.sh\\n' > pnpm-workspace.yaml && echo WORKED; \
         mkdir -p .agents/skills 2>/dev/null || echo AGENTS-SEALED",
    );
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(
        so.contains("WORKED") && so.contains("AGENTS-SEALED"),
        "{so}\n{se}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("AGENTS.md")).unwrap(),
        "Be brief.\nRun the tests.\n",
        "tracked: the work. {se}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("CLAUDE.local.md")).unwrap(),
        "mine\n",
        "{se}"
    );
    for gone in ["pkg/GEMINI.md", "pnpm-workspace.yaml", ".agents"] {
        assert!(!f.ws.join(gone).exists(), "{gone}: {se}");
    }
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    let targets: Vec<&str> = items.iter().filter_map(|i| i["target"].as_str()).collect();
    for held in ["CLAUDE.local.md", "pkg/GEMINI.md", "pnpm-workspace.yaml"] {
        let path = f.ws.join(held);
        assert!(
            targets.contains(&path.to_str().unwrap()),
            "{held}: {items:#?}"
        );
    }
    assert_eq!(items.len(), 3, "{items:#?}");
}
