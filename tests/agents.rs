//! The real agents start inside the jail and write their state where it belongs. These need the npm
//! packages `@anthropic-ai/claude-code`, `@openai/codex`, `@google/gemini-cli` and `opencode-ai`
//! installed, so they are `#[ignore]`d by default (cargo reports them as ignored); `.ci/run`
//! installs them twice — the versions the allowlists were measured with (`.ci/agents-pinned`,
//! gating) and the latest releases (drift, reported by name) — and runs these with `--ignored`.
//! No network is needed: each agent only starts, finds it is not logged in, and saves its state.
//!
//! What they assert is what the guard guarantees, not what one release happens to write: the
//! agent does in the jail what it does outside (the same start, compared with a run of the same
//! release in a home of its own), what it writes comes back, what it may not write does not, and
//! its state is there in the next session. Every failure names the agent, its version and the
//! channel it was installed from.

mod common;
#[path = "agents/harness.rs"]
mod harness;
#[path = "agents/own_settings.rs"]
mod own_settings;
#[path = "agents/tui.rs"]
mod tui;
use common::*;
use harness::*;
use std::collections::BTreeSet;

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn claude_code_starts_and_saves_its_state() {
    agent_test("claude", |a| {
        // The same logged-out start outside any jail, in a home of its own: what this release writes.
        let reference = Fixture::new();
        let bare = a.bare(&reference, &["-p", "hello"]);
        let f = Fixture::new();
        let out = with_agents(&f, &["run", "--", "claude", "--version"]);
        assert_eq!(ok(&out).lines().next().unwrap_or("").trim(), a.version);
        let before_ws: Vec<_> = std::fs::read_dir(&f.ws)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        let out = with_agents(&f, &["run", "--", "claude", "-p", "hello"]);
        // It does in the jail what it does outside: the same exit status and the same first line
        // (logged out: it says so).
        assert_eq!(
            out.status.code(),
            bare.status.code(),
            "exit status in the jail vs outside\njail: {}\noutside: {}",
            text(&out),
            text(&bare)
        );
        let first = |o: &std::process::Output| text(o).lines().next().unwrap_or("").to_string();
        assert_eq!(
            first(&out),
            first(&bare),
            "what it said in the jail vs outside"
        );
        // What it wrote to ~/.claude.json came back: every key it writes outside, no key it
        // does not.
        let want = json_keys(&reference.home.join(".claude.json"));
        let got = json_keys(&f.home.join(".claude.json"));
        assert_eq!(got, want, "~/.claude.json after the session vs outside");
        // ~/.claude: nothing appears in yours that the agent does not write itself; what it
        // writes is in yours (the allowlisted files) or the jail's own (the rest, kept for its next
        // session); a name it writes outside but finds in neither is said, not failed (a view of
        // the session's, or a write the jail refused: the drift test is another test).
        let want = tree(&reference.home.join(".claude"), 2, &reference.root);
        let yours = tree(&f.home.join(".claude"), 2, &f.root);
        let own = tree(&f.root.join("state/claude"), 2, &f.root);
        let extra: Vec<_> = yours.difference(&want).collect();
        assert!(
            extra.is_empty(),
            "~/.claude has names the agent does not write: {extra:?}\n(outside: {want:?})"
        );
        let either: BTreeSet<String> = yours.union(&own).cloned().collect();
        let neither: Vec<_> = want.difference(&either).collect();
        if !neither.is_empty() {
            eprintln!("{a}: written outside, in the jail neither yours nor kept: {neither:?}");
        }
        // Its transcripts for this project: the jail's own, never yours.
        let project = "projects/ROOT-ws/".to_string();
        if want.contains(&project) {
            assert!(
                own.contains(&project),
                "{project} not kept in the jail: {own:?}"
            );
            assert!(
                !yours.contains(&project),
                "{project} reached you: {yours:?}"
            );
        }
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
    });
}

/// `claude -w NAME` in the jail: its worktree is made in `.claude/worktrees/NAME` (writable inside
/// the sealed `.claude/`), registered in the repository, and kept after the session; nothing
/// else of `.claude/` is left and no alert is raised.
#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn claude_code_makes_its_worktree_in_the_jail_and_it_survives() {
    agent_test("claude", |_| {
        let f = Fixture::new();
        let out = with_agents(&f, &["run", "--", "claude", "-w", "wt1", "-p", "hello"]);
        let wt = f.ws.join(".claude/worktrees/wt1");
        assert!(
            wt.join(".git").is_file(),
            "no worktree at {}: {}",
            wt.display(),
            text(&out)
        );
        let list = stdout(&f.git(&f.ws, &["worktree", "list"]));
        assert!(list.contains(".claude/worktrees/wt1"), "{list}");
        assert!(
            !f.ws.join(".git/commondir").exists(),
            "a placeholder was left in .git"
        );
        assert_eq!(alerts(&f).trim(), "[]");
    });
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn codex_starts_and_saves_its_state() {
    agent_test("codex", |a| {
        let f = Fixture::new();
        let out = with_agents(&f, &["run", "--", "codex", "--version"]);
        assert!(ok(&out).contains("codex-cli"), "{}", stdout(&out));
        // Its login check says in the jail what it says outside, in a home of its own.
        let reference = Fixture::new();
        let bare = a.bare(&reference, &["login", "status"]);
        let out = with_agents(&f, &["run", "--", "codex", "login", "status"]);
        assert_eq!(
            out.status.code(),
            bare.status.code(),
            "jail: {}\noutside: {}",
            text(&out),
            text(&bare)
        );
        assert_eq!(
            text(&out).lines().next(),
            text(&bare).lines().next(),
            "what `codex login status` said in the jail vs outside"
        );
        // It wrote its state into the jail's own directory, kept for its next session.
        let own = f.root.join("state/codex");
        assert!(
            std::fs::read_dir(&own).is_ok_and(|d| d.count() > 0),
            "codex wrote no state in {}",
            own.display()
        );
        // Its config is the jail's own copy: written there, never yours (`own_settings`). (With
        // no `~/.codex` of yours a shell's jail has none: nothing is added to your home's top.)
        std::fs::create_dir_all(f.home.join(".codex")).unwrap();
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
        assert!(stdout(&out).contains("WROTE"), "{}", text(&out));
        assert!(!f.home.join(".codex/config.toml").exists());
    });
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
    agent_test("claude", |_a| {
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
                serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap())
                    .unwrap();
            let t = state["firstStartTime"].clone();
            assert!(t.is_string(), "{state}");
            match &first_start {
                None => first_start = Some(t),
                Some(first) => assert_eq!(first, &t, "the second session started from scratch"),
            }
            // Its session log is kept for the jail's next session, one per session, and is
            // never yours (your `claude --continue` would resume it).
            assert_eq!(
                count_files(&f.root.join("state/claude/projects"), ".jsonl"),
                session,
                "session {session}'s log"
            );
            assert_eq!(
                count_files(&dir.join("projects"), ".jsonl"),
                0,
                "a transcript reached you"
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
        // A clean session: nothing alerted, nothing held.
        let a = alerts(&f);
        assert_eq!(a.trim(), "[]", "{a}");
        // Its credentials are saved as it saves them (a temporary file, then rename); a login you
        // did not have is held for your review, and accepted it is yours byte for byte.
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
        assert!(
            !dir.join(".credentials.json").exists(),
            "a new login came back unreviewed"
        );
        let review: serde_json::Value =
            serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
        assert_eq!(review[0]["what"], ".credentials.json", "{review}");
        let id = review[0]["id"].as_str().unwrap().to_string();
        ok(&f.cmd(["review", "accept", &id]).output().unwrap());
        assert_eq!(
            std::fs::read_to_string(dir.join(".credentials.json")).unwrap(),
            "{\"claudeAiOauth\":{}}"
        );
    });
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
    agent_test("codex", |_a| {
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
            let now =
                std::fs::read_to_string(dir.join("installation_id")).expect("installation_id");
            match &id {
                None => id = Some(now),
                Some(first) => assert_eq!(first, &now, "the second session started from scratch"),
            }
            assert_eq!(
                count_files(&f.root.join("state/codex/sessions"), ".jsonl"),
                session,
                "session {session}'s rollout, the jail's own"
            );
            assert_eq!(
                count_files(&dir.join("sessions"), ".jsonl"),
                0,
                "a rollout reached you"
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
    });
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn gemini_keeps_its_state_and_your_settings_across_two_sessions() {
    agent_test("gemini", |_a| {
        let f = Fixture::new();
        let dir = f.home.join(".gemini");
        std::fs::create_dir_all(&dir).unwrap();
        let settings = "{\"general\":{\"vimMode\":true}}\n";
        std::fs::write(dir.join("settings.json"), settings).unwrap();
        std::fs::write(dir.join("GEMINI.md"), "Be brief.\n").unwrap();
        // A key that no API accepts, and no network: it starts a real session (project registry,
        // chat log, history) and retries until it is interrupted — here once its chat log of this
        // session is written (at most 60 s), so a loaded machine does not cut it short; the
        // interrupt goes to its process group (it runs itself again as a child). Then the
        // script lists the chat logs as the jail sees them. (Outside a jail too, a new session
        // removes the last one's log when that holds no answer: compare with what the jail left,
        // not with a count.)
        let script = format!(
            "set -m; cd {ws} && touch /tmp/start && \
             GEMINI_API_KEY=none GEMINI_CLI_TRUST_WORKSPACE=true gemini -p hello </dev/null >/dev/null 2>&1 & pid=$!; \
             for _ in $(seq 120); do \
               find ~/.gemini/tmp -name '*.jsonl' -newer /tmp/start 2>/dev/null | grep -q . && {{ sleep 2; break; }}; sleep 0.5; \
             done; kill -INT -- -$pid; wait $pid; \
             find ~/.gemini/tmp -name '*.jsonl' -printf 'CHAT %P\\n' | sort",
            ws = f.ws.display()
        );
        let mut id = None;
        for session in 1..=2 {
            let out = with_agents(&f, &["run", "--", "bash", "-c", &script]);
            assert!(out.status.success(), "session {session}: {}", stderr(&out));
            let now =
                std::fs::read_to_string(dir.join("installation_id")).expect("installation_id");
            match &id {
                None => id = Some(now),
                Some(first) => assert_eq!(first, &now, "the second session started from scratch"),
            }
            // Its chat logs are the jail's own as it left them (never yours: `gemini --resume`
            // would load them).
            let inside: Vec<String> = stdout(&out)
                .lines()
                .filter_map(|l| l.strip_prefix("CHAT "))
                .map(String::from)
                .collect();
            assert!(
                !inside.is_empty(),
                "session {session} wrote no chat log: {}",
                text(&out)
            );
            let own = f.root.join("state/gemini/tmp");
            let mut outside: Vec<String> = walkdir::WalkDir::new(&own)
                .into_iter()
                .flatten()
                .filter(|e| {
                    e.file_type().is_file() && e.file_name().to_string_lossy().ends_with(".jsonl")
                })
                .map(|e| {
                    e.path()
                        .strip_prefix(&own)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            outside.sort();
            assert_eq!(
                outside, inside,
                "session {session}: chat logs kept vs in the jail"
            );
            assert!(!dir.join("tmp").join("ws").exists(), "a chat reached you");
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
    });
}

/// `OpenCode` starts in the jail in a project without its `opencode.json` and `opencode.jsonc` (no
/// placeholder stands there: it cannot read a directory as either): it writes `.opencode/` and
/// `~/.config/opencode/` at every start (views for the session: nothing of it reaches you); its
/// database is kept in your state directory; nothing is held or left in the project.
#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn opencode_starts_and_keeps_its_state() {
    agent_test("opencode", |_a| {
        let f = Fixture::new();
        // Launched as the command (its views and state directories are made for it). No provider is
        // reachable: it starts a session and waits for the model until it is interrupted; the
        // launcher forwards the interrupt and ends the session as usual.
        // An interrupt once it has started (its prompt echoed), or after 90 s; then, if OpenCode is
        // still running, a TERM 20 s later and a KILL only 40 s after that (a launcher killed
        // outright cannot clean up). A fixed interrupt time was too early on a loaded machine.
        let log = f.root.join("opencode.out");
        let file = std::fs::File::create(&log).unwrap();
        let mut child = std::process::Command::new(bin())
            .args(["run", "--", "opencode", "run", "hello"])
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .env("PATH", agents_path(&f.home.join(".local/bin")))
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap();
        let started = std::time::Instant::now();
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        let mut sent = None;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            let elapsed = started.elapsed();
            let next = match sent {
                None if said().contains("> build")
                    || elapsed > std::time::Duration::from_secs(90) =>
                {
                    Some((nix::sys::signal::Signal::SIGINT, elapsed))
                }
                Some((nix::sys::signal::Signal::SIGINT, at))
                    if elapsed.saturating_sub(at) > std::time::Duration::from_secs(20) =>
                {
                    Some((nix::sys::signal::Signal::SIGTERM, elapsed))
                }
                Some((nix::sys::signal::Signal::SIGTERM, at))
                    if elapsed.saturating_sub(at) > std::time::Duration::from_secs(40) =>
                {
                    Some((nix::sys::signal::Signal::SIGKILL, elapsed))
                }
                _ => None,
            };
            if let Some((sig, at)) = next {
                signal(child.id(), sig);
                sent = Some((sig, at));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        let text = said();
        assert!(
            !matches!(sent, Some((nix::sys::signal::Signal::SIGKILL, _))),
            "it had to be killed: {text}"
        );
        assert!(!text.contains("Unexpected error"), "{text}");
        assert!(text.contains("> build"), "it did not start: {text}");
        assert!(
            f.home.join(".local/share/opencode/opencode.db").is_file(),
            "no database kept: {text}"
        );
        for name in ["opencode.json", "opencode.jsonc"] {
            assert!(!f.ws.join(name).exists(), "{name} left in the workspace");
        }
        let held = stdout(&f.cmd(["review", "--json"]).output().unwrap());
        assert_eq!(held.trim(), "[]", "held after a clean session: {held}");
        assert!(
            !f.ws.join(".opencode").exists(),
            ".opencode left in the workspace ({status}): {text}"
        );
        assert!(
            !f.home.join(".config/opencode").exists(),
            "its view's mount point left in ~/.config"
        );
    });
}

/// The real Claude Code saves the project's local settings in the jail (issue 33 item 4): its
/// `plugin disable --scope local` goes through the same settings writer as "don't ask again"
/// (`updateSettingsForSource("localSettings")`), and works offline. The save lands in the jail's
/// own copy (`jail::ownfiles`), the next jailed session changes it again, and yours is never written.
#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn claude_code_saves_local_settings_in_the_jails_own_copy() {
    agent_test("claude", |_a| {
        let f = Fixture::new();
        let dir = f.ws.join(".claude");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("settings.json"),
            r#"{"enabledPlugins":{"x@y":true}}"#,
        )
        .unwrap();
        let run = |args: &[&str]| {
            let mut all = vec!["run", "--", "claude", "plugin"];
            all.extend_from_slice(args);
            with_agents(&f, &all)
        };
        let copies = f.root.join("layers/project-files");
        let copy = || {
            let key = std::fs::read_dir(&copies)
                .unwrap()
                .flatten()
                .next()
                .unwrap();
            std::fs::read_to_string(key.path().join("settings.local.json")).unwrap()
        };
        let out = run(&["disable", "x@y", "--scope", "local"]);
        assert!(out.status.success(), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_str(&copy()).unwrap();
        assert_eq!(v["enabledPlugins"]["x@y"], false, "{v}");
        let out = run(&["enable", "x@y", "--scope", "local"]);
        assert!(out.status.success(), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_str(&copy()).unwrap();
        assert_eq!(v["enabledPlugins"]["x@y"], true, "{v}");
        // Yours: no settings.local.json was made, nothing but your settings is in `.claude`.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, ["settings.json"], "your .claude after the sessions");
    });
}
