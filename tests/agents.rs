//! The real agents start inside the jail and write their state where it belongs. These need the npm
//! packages `@anthropic-ai/claude-code` and `@openai/codex` installed, so they are `#[ignore]`d by
//! default (cargo reports them as ignored); `.ci/run` installs both and runs them with `--ignored`.
//! No network is needed: each agent only starts, finds it is not logged in, and saves its state.

mod common;
use common::*;

fn require(program: &str) {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    assert!(found.status.success(), "\n*** {program} is not installed: npm install -g @anthropic-ai/claude-code @openai/codex ***\n");
}

/// PATH for the agents: the fixture's plus wherever npm put them.
fn with_agents(f: &Fixture, args: &[&str]) -> std::process::Output {
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        f.home.join(".local/bin").display()
    );
    f.cmd(args).env("PATH", path).output().unwrap()
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn claude_code_starts_and_saves_its_state() {
    require("claude");
    let f = Fixture::new();
    let out = with_agents(&f, &["run", "--", "claude", "--version"]);
    assert!(ok(&out).contains("Claude Code"), "{}", stdout(&out));
    let before_ws: Vec<_> = std::fs::read_dir(&f.ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    // Not logged in: it starts, says so, and saves ~/.claude.json by temp-file-and-rename.
    let out = with_agents(&f, &["run", "--", "claude", "-p", "hello"]);
    assert!(
        stdout(&out).contains("Not logged in") || stderr(&out).contains("Not logged in"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(f.home.join(".claude.json")).expect("~/.claude.json saved"),
    )
    .unwrap();
    assert!(state.get("firstStartTime").is_some(), "{state}");
    assert!(
        state["projects"].get(f.ws.to_str().unwrap()).is_some(),
        "project state merged back: {state}"
    );
    assert!(
        f.home.join(".claude").is_dir(),
        "~/.claude created and kept"
    );
    let after_ws: Vec<_> = std::fs::read_dir(&f.ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        before_ws, after_ws,
        "the agent's run left files in the workspace"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&f.home)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn codex_starts_and_saves_its_state() {
    require("codex");
    let f = Fixture::new();
    let out = with_agents(&f, &["run", "--", "codex", "--version"]);
    assert!(ok(&out).contains("codex-cli"), "{}", stdout(&out));
    let out = with_agents(&f, &["run", "--", "codex", "login", "status"]);
    assert!(format!("{}{}", stdout(&out), stderr(&out)).contains("Not logged in"));
    assert!(f.home.join(".codex").is_dir(), "~/.codex created and kept");
    assert!(
        std::fs::read_dir(f.home.join(".codex")).unwrap().count() > 0,
        "codex wrote its state"
    );
    // Its config stays sealed.
    let out = with_agents(
        &f,
        &[
            "run",
            "--",
            "bash",
            "-c",
            "echo 'notify = [\"sh\"]' > ~/.codex/config.toml && echo WROTE; true",
        ],
    );
    assert!(!stdout(&out).contains("WROTE"));
}
