//! The real agents start inside the jail and write their state where it belongs. These need the npm
//! packages `@anthropic-ai/claude-code`, `@openai/codex` and `@google/gemini-cli` installed, so they
//! are `#[ignore]`d by default (cargo reports them as ignored); `.ci/run` installs them and runs
//! these with `--ignored`.
//! No network is needed: each agent only starts, finds it is not logged in, and saves its state.

mod common;
use common::*;

fn require(program: &str) {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .unwrap();
    assert!(found.status.success(), "\n*** {program} is not installed: npm install -g @anthropic-ai/claude-code @openai/codex @google/gemini-cli opencode-ai ***\n");
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

/// The alerts of the fixture's runtime directory, as JSON text.
fn alerts(f: &Fixture) -> String {
    stdout(&f.cmd(["alerts", "--json", "--all"]).output().unwrap())
}

/// Files under `dir` (recursively) whose name ends with `suffix`.
fn count_files(dir: &std::path::Path, suffix: &str) -> usize {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(suffix))
        .count()
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn claude_code_keeps_its_state_and_your_settings_across_two_sessions() {
    require("claude");
    let f = Fixture::new();
    let dir = f.home.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = r#"{"model":"opus","statusLine":{"type":"command","command":"bash ~/.claude/statusline.sh"}}"#;
    std::fs::write(dir.join("settings.json"), settings).unwrap();
    std::fs::write(dir.join("statusline.sh"), "echo status\n").unwrap();
    std::fs::write(dir.join("CLAUDE.md"), "Be brief.\n").unwrap();
    let mut first_start = None;
    for session in 1..=2 {
        let out = with_agents(&f, &["run", "--", "claude", "-p", "hello"]);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        assert!(text.contains("Not logged in"), "session {session}: {text}");
        let state: serde_json::Value =
            serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap()).unwrap();
        let t = state["firstStartTime"].clone();
        assert!(t.is_string(), "{state}");
        match &first_start {
            None => first_start = Some(t),
            Some(first) => assert_eq!(first, &t, "the second session started from scratch"),
        }
        // Its session log is kept, one per session.
        assert_eq!(
            count_files(&dir.join("projects"), ".jsonl"),
            session,
            "session {session}'s log"
        );
    }
    // Your settings, the script they name and your instructions are as you left them.
    assert_eq!(
        std::fs::read_to_string(dir.join("settings.json")).unwrap(),
        settings
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("statusline.sh")).unwrap(),
        "echo status\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("CLAUDE.md")).unwrap(),
        "Be brief.\n"
    );
    // Nothing the agent wrote was taken for a plant.
    let a = alerts(&f);
    assert!(!a.contains("agent-state-not-allowed"), "{a}");
    // Its credentials are saved as it saves them (a temporary file, then rename) and persist.
    let out = with_agents(
        &f,
        &[
            "run",
            "--",
            "bash",
            "-c",
            "printf '{\"claudeAiOauth\":{}}' > ~/.claude/.credentials.json.tmp.0a1b2c3d && \
             mv ~/.claude/.credentials.json.tmp.0a1b2c3d ~/.claude/.credentials.json && \
             mkdir ~/.claude/.oauth_refresh.lock && rmdir ~/.claude/.oauth_refresh.lock && echo SAVED",
        ],
    );
    assert!(stdout(&out).contains("SAVED"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join(".credentials.json")).unwrap(),
        "{\"claudeAiOauth\":{}}"
    );
}

/// `codex exec` against a closed local port: it starts a real session (skills, shell snapshot,
/// rollout, `SQLite` stores) without any network, and gives up within the time-out.
fn codex_session(f: &Fixture, script_after: &str) -> std::process::Output {
    let script = format!(
        "cd {ws} && OPENAI_API_KEY=sk-none timeout -s INT 12 codex exec --skip-git-repo-check hello </dev/null >/dev/null 2>&1; {script_after}",
        ws = f.ws.display()
    );
    with_agents(f, &["run", "--", "bash", "-c", &script])
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn codex_keeps_its_state_and_your_settings_across_two_sessions() {
    require("codex");
    let f = Fixture::new();
    let dir = f.home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    let config = "model_provider = \"local\"\n\n[model_providers.local]\nname = \"local\"\n\
                  base_url = \"http://127.0.0.1:9/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
                  request_max_retries = 0\nstream_max_retries = 0\n";
    std::fs::write(dir.join("config.toml"), config).unwrap();
    std::fs::write(dir.join("AGENTS.md"), "Be brief.\n").unwrap();
    std::fs::create_dir_all(dir.join("skills/mine")).unwrap();
    std::fs::write(dir.join("skills/mine/SKILL.md"), "# mine\n").unwrap();
    let mut id = None;
    for session in 1..=2 {
        // Inside, its bundled skills are written anew (into the session's own view of `skills/`),
        // and your own skill is there, read-only.
        let out = codex_session(
            &f,
            "ls ~/.codex/skills/.system | grep -c . ; cat ~/.codex/skills/mine/SKILL.md",
        );
        let text = stdout(&out);
        let skills: usize = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0);
        assert!(
            skills > 0 && text.contains("# mine"),
            "session {session}: skills inside: {text}{}",
            stderr(&out)
        );
        let now = std::fs::read_to_string(dir.join("installation_id")).expect("installation_id");
        match &id {
            None => id = Some(now),
            Some(first) => assert_eq!(first, &now, "the second session started from scratch"),
        }
        assert_eq!(
            count_files(&dir.join("sessions"), ".jsonl"),
            session,
            "session {session}'s rollout"
        );
    }
    // Its SQLite stores (threads, logs, memories) are the jail's own, never yours.
    let store = f.root.join("state/codex.claude-sandbox-sqlite");
    assert!(
        count_files(&store, ".sqlite") > 0,
        "no store in {}",
        store.display()
    );
    assert_eq!(
        count_files(&dir, ".sqlite"),
        0,
        "a store reached your ~/.codex"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("config.toml")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("AGENTS.md")).unwrap(),
        "Be brief.\n"
    );
    // What it runs later itself never reached your directory.
    assert_eq!(
        count_files(&dir.join("skills"), ".md"),
        1,
        "skills/.system leaked out"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("skills/mine/SKILL.md")).unwrap(),
        "# mine\n"
    );
    assert_eq!(
        count_files(&dir.join("shell_snapshots"), ".sh"),
        0,
        "a snapshot leaked out"
    );
    let a = alerts(&f);
    assert!(!a.contains("agent-state-not-allowed"), "{a}");
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn gemini_keeps_its_state_and_your_settings_across_two_sessions() {
    require("gemini");
    let f = Fixture::new();
    let dir = f.home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    let settings = "{\"general\":{\"vimMode\":true}}\n";
    std::fs::write(dir.join("settings.json"), settings).unwrap();
    std::fs::write(dir.join("GEMINI.md"), "Be brief.\n").unwrap();
    // A key that no API accepts, and no network: it starts a real session (project registry,
    // chat log, history) and gives up within the time-out.
    let script = format!(
        "cd {ws} && GEMINI_API_KEY=none GEMINI_CLI_TRUST_WORKSPACE=true timeout -s INT 15 gemini -p hello </dev/null >/dev/null 2>&1; true",
        ws = f.ws.display()
    );
    let mut id = None;
    for session in 1..=2 {
        let out = with_agents(&f, &["run", "--", "bash", "-c", &script]);
        assert!(out.status.success(), "session {session}: {}", stderr(&out));
        let now = std::fs::read_to_string(dir.join("installation_id")).expect("installation_id");
        match &id {
            None => id = Some(now),
            Some(first) => assert_eq!(first, &now, "the second session started from scratch"),
        }
        // Its chat log is kept (a second session in the same project may append to it).
        assert!(
            count_files(&dir.join("tmp"), ".jsonl") >= 1,
            "session {session}'s chat"
        );
    }
    assert!(dir.join("projects.json").is_file());
    assert_eq!(
        std::fs::read_to_string(dir.join("settings.json")).unwrap(),
        settings
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("GEMINI.md")).unwrap(),
        "Be brief.\n"
    );
    let a = alerts(&f);
    assert!(!a.contains("agent-state-not-allowed"), "{a}");
}

/// `OpenCode` starts in the jail in a project with its `opencode.json` and `opencode.jsonc`: it
/// writes `.opencode/` and `~/.config/opencode/` at every start (views for the session: nothing of
/// it reaches you); its database is kept in your state directory.
#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn opencode_starts_and_keeps_its_state() {
    require("opencode");
    let f = Fixture::new();
    // Without one, the placeholder directory stops it at its first request (docs/runtimes.md).
    for name in ["opencode.json", "opencode.jsonc"] {
        std::fs::write(f.ws.join(name), "{}\n").unwrap();
    }
    // Launched as the command (its views and state directories are made for it). No provider is
    // reachable: it starts a session and waits for the model until it is interrupted; the
    // launcher forwards the interrupt and ends the session as usual.
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        f.home.join(".local/bin").display()
    );
    // An interrupt at 8 s; then, if OpenCode is still running, a TERM at 25 s (both forwarded to
    // the launcher by `timeout`), and a KILL only at 60 s. Run alone it always ends at the
    // interrupt; in the full suite, beside the other agents, OpenCode now and then ignored it for
    // more than 40 s, and a launcher killed outright cannot clean up.
    let out = std::process::Command::new("timeout")
        .args(["-s", "TERM", "-k", "35", "25", "timeout", "-s", "INT", "8"])
        .arg(bin())
        .args(["run", "--", "opencode", "run", "hello"])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!text.contains("Unexpected error"), "{text}");
    assert!(text.contains("> build"), "it did not start: {text}");
    assert!(
        f.home.join(".local/share/opencode/opencode.db").is_file(),
        "no database kept: {text}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("opencode.json")).unwrap(),
        "{}\n"
    );
    assert!(
        !f.ws.join(".opencode").exists(),
        ".opencode left in the workspace ({}): {text}",
        out.status
    );
    assert!(
        !f.home.join(".config/opencode").exists(),
        "its view's mount point left in ~/.config"
    );
}
