//! The hook adapter: captured payloads of each host's documented format, and the exact answer for
//! each case — deny (with the host's shape), pass-through (nothing at all), malformed (fail closed).

use crate::common::*;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};

/// Run `claude-sandbox hook pre-tool-use --host H` with `payload` on stdin.
fn hook(f: &Fixture, host: &str, payload: &Value) -> (Option<i32>, String, String) {
    hook_raw(f, host, payload.to_string().as_bytes())
}

/// The same with arbitrary bytes on stdin.
fn hook_raw(f: &Fixture, host: &str, input: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(bin())
        .args(["hook", "pre-tool-use", "--host", host])
        .env_clear()
        .envs(f.env())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), stdout(&out), stderr(&out))
}

fn sealed_reason(path: &str, runs: &str) -> String {
    format!(
        "{path} is sealed by claude-sandbox: {runs}; it runs outside the sandbox, so the agent may not change it. \
         Ask the user to make this change themselves."
    )
}

fn claude_deny(reason: &str) -> Value {
    json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}})
}

fn assert_json(out: &str, want: &Value) {
    let got: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(&got, want);
    assert_eq!(
        out.trim().lines().count(),
        1,
        "one line of JSON, nothing else: {out:?}"
    );
}

#[test]
fn claude_and_codex_deny_sealed_writes_and_stay_silent_otherwise() {
    let f = Fixture::new();
    let ws = f.ws.display().to_string();
    let hookfile = format!("{ws}/.git/hooks/pre-commit");
    let git_runs = "git runs hooks and config on commit, checkout and status";
    let p = json!({"session_id": "s", "cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "Write",
                   "tool_input": {"file_path": hookfile, "content": "#!/bin/sh"}});
    let (code, out, _) = hook(&f, "claude", &p);
    assert_eq!(code, Some(0));
    assert_json(&out, &claude_deny(&sealed_reason(&hookfile, git_runs)));

    let bashrc = f.home.join(".bashrc").display().to_string();
    let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "echo evil >> ~/.bashrc"}});
    let (_, out, _) = hook(&f, "claude", &p);
    let dot = "programs outside read your home's dotfiles (shell startup, git, ssh, tool config)";
    assert_json(&out, &claude_deny(&sealed_reason(&bashrc, dot)));

    // Ordinary work: no opinion at all (empty stdout, exit 0), never "allow".
    for (tool, input) in [
        (
            "Write",
            json!({"file_path": format!("{ws}/src/main.rs"), "content": "fn main(){}"}),
        ),
        (
            "Edit",
            json!({"file_path": format!("{ws}/README"), "old_string": "a", "new_string": "b"}),
        ),
        (
            "Bash",
            json!({"command": "cargo test && git commit -am wip"}),
        ),
        ("Read", json!({"file_path": format!("{ws}/README")})),
        ("mcp__github__create_issue", json!({"title": "x"})),
    ] {
        let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input});
        let (code, out, err) = hook(&f, "claude", &p);
        assert_eq!((code, out.as_str()), (Some(0), ""), "{tool}: {err}");
    }

    // Codex: apply_patch names its files in the patch; shell commands come as argv.
    let patch = "*** Begin Patch\n*** Update File: .vscode/tasks.json\n@@\n-a\n+b\n*** End Patch\n";
    let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "apply_patch", "tool_input": {"input": patch}});
    let (_, out, _) = hook(&f, "codex", &p);
    let tasks = format!("{ws}/.vscode/tasks.json");
    let vscode_runs =
        "VS Code: tasks.json folderOpen tasks, settings naming executables, launch.json";
    assert_json(&out, &claude_deny(&sealed_reason(&tasks, vscode_runs)));
    let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "shell", "tool_input": {"command": ["bash", "-lc", "ls -la"]}});
    assert_eq!(hook(&f, "codex", &p).1, "");
}

/// What the jail lets the agent write and judges at the session's end (an instruction file, a
/// `pnpm-workspace.yaml`: held when made or changed; a missing `opencode.json`: held when made) is
/// not refused; an existing `opencode.json` is sealed, so writing it is.
#[test]
fn names_held_at_the_end_are_not_refused_while_sealed_ones_are() {
    let f = Fixture::new();
    let ws = f.ws.display().to_string();
    let write = |name: &str| {
        let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "Write",
                       "tool_input": {"file_path": format!("{ws}/{name}"), "content": "x"}});
        hook(&f, "claude", &p).1
    };
    for name in [
        "CLAUDE.md",
        "AGENTS.md",
        "pnpm-workspace.yaml",
        "opencode.json",
    ] {
        assert_eq!(write(name), "", "{name}");
    }
    std::fs::write(f.ws.join("opencode.json"), "{}").unwrap();
    let runs = "OpenCode: plugins and MCP commands";
    let path = format!("{ws}/opencode.json");
    assert_json(
        &write("opencode.json"),
        &claude_deny(&sealed_reason(&path, runs)),
    );
    let mcp = format!("{ws}/.mcp.json");
    let runs = "Claude Code: stdio MCP server commands";
    assert_json(
        &write(".mcp.json"),
        &claude_deny(&sealed_reason(&mcp, runs)),
    );
}

#[test]
fn secrets_are_denied_to_read_tools() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".aws")).unwrap();
    std::fs::write(f.home.join(".aws/credentials"), "x").unwrap();
    let creds = f.home.join(".aws/credentials").display().to_string();
    let reason = format!(
        "{creds} is hidden by claude-sandbox: it holds credentials no tool in the sandbox may read. Ask the user if the task really needs it."
    );
    let p = json!({"cwd": f.ws, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {"file_path": creds}});
    assert_json(&hook(&f, "claude", &p).1, &claude_deny(&reason));
    // Gemini: BeforeTool, decision/reason.
    let p = json!({"cwd": f.ws, "hook_event_name": "BeforeTool", "tool_name": "read_file", "tool_input": {"absolute_path": creds}});
    assert_json(
        &hook(&f, "gemini", &p).1,
        &json!({"decision": "deny", "reason": reason}),
    );
    // Cursor: beforeShellExecution with the command at the top level.
    let p = json!({"hook_event_name": "beforeShellExecution", "command": format!("cat {creds}"), "cwd": f.ws, "workspace_roots": [f.ws]});
    assert_json(
        &hook(&f, "cursor", &p).1,
        &json!({"permission": "deny", "user_message": reason, "agent_message": reason}),
    );
}

#[test]
fn gemini_and_cursor_writes() {
    let f = Fixture::new();
    let ws = f.ws.display().to_string();
    let envrc = format!("{ws}/.envrc");
    let reason = sealed_reason(&envrc, "direnv: shell code run on cd");
    let p = json!({"cwd": ws, "hook_event_name": "BeforeTool", "tool_name": "write_file", "tool_input": {"file_path": envrc, "content": "x"}});
    assert_json(
        &hook(&f, "gemini", &p).1,
        &json!({"decision": "deny", "reason": reason}),
    );
    let p = json!({"cwd": ws, "hook_event_name": "BeforeTool", "tool_name": "run_shell_command", "tool_input": {"command": "npm test"}});
    assert_eq!(hook(&f, "gemini", &p).1, "");
    let p = json!({"hook_event_name": "preToolUse", "tool_name": "Write", "tool_input": {"file_path": envrc}, "workspace_roots": [ws]});
    assert_json(
        &hook(&f, "cursor", &p).1,
        &json!({"permission": "deny", "user_message": reason, "agent_message": reason}),
    );
    let p = json!({"hook_event_name": "preToolUse", "tool_name": "SomeNewTool", "tool_input": {}, "workspace_roots": [ws]});
    assert_eq!(
        hook(&f, "cursor", &p).1,
        "",
        "an unknown tool gets no opinion"
    );
}

#[test]
fn malformed_or_unknown_input_fails_closed() {
    let f = Fixture::new();
    for (host, payload) in [
        ("claude", Value::String("not an object".into())),
        (
            "claude",
            json!({"cwd": "/w", "hook_event_name": "PostToolUse", "tool_name": "Write"}),
        ),
        (
            "claude",
            json!({"hook_event_name": "PreToolUse", "tool_name": "Write"}),
        ),
        (
            "gemini",
            json!({"cwd": "/w", "hook_event_name": "PreToolUse", "tool_name": "write_file"}),
        ),
    ] {
        let (code, out, err) = hook(&f, host, &payload);
        assert_eq!(code, Some(2), "{payload}");
        assert_eq!(out, "");
        assert!(
            err.starts_with("claude-sandbox hook:") && err.contains("blocking"),
            "{err}"
        );
    }
    let (code, out, _) = hook_raw(&f, "codex", b"{truncated");
    assert_eq!((code, out.as_str()), (Some(2), ""));
}

#[test]
fn session_start_and_hooks_install() {
    let f = Fixture::new();
    let out = ok(&f
        .cmd(["hook", "session-start", "--host", "claude"])
        .output()
        .unwrap());
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    assert!(v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap()
        .contains("ask the user"));
    let cursor: Value = serde_json::from_str(&ok(&f
        .cmd(["hook", "session-start", "--host", "cursor"])
        .output()
        .unwrap()))
    .unwrap();
    assert!(cursor["additional_context"].is_string());

    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    std::fs::write(f.home.join(".claude/settings.json"), r#"{"model":"opus","hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"mine"}]}]}}"#).unwrap();
    let printed = ok(&f
        .cmd(["hooks", "install", "--runtime", "claude", "--print"])
        .output()
        .unwrap());
    assert!(printed.contains("${CLAUDE_SANDBOX_HOOK:-"), "{printed}");
    assert!(
        std::fs::read_to_string(f.home.join(".claude/settings.json"))
            .unwrap()
            .len()
            < 120,
        "--print wrote nothing"
    );
    for _ in 0..2 {
        ok(&f
            .cmd(["hooks", "install", "--runtime", "claude"])
            .output()
            .unwrap());
    }
    let v: Value = serde_json::from_str(
        &std::fs::read_to_string(f.home.join(".claude/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["model"], "opus", "other settings kept");
    let pre = v["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "the user's own hook kept, ours once: {pre:?}");
    assert_eq!(pre[0]["hooks"][0]["command"], "mine");
    ok(&f
        .cmd(["hooks", "install", "--runtime", "gemini"])
        .output()
        .unwrap());
    let g: Value = serde_json::from_str(
        &std::fs::read_to_string(f.home.join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    assert!(g["hooks"]["BeforeTool"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .contains("--host gemini"));
}

/// Hooks run inside the jail, where the binary's own path is masked: the read-only copy named by
/// $`CLAUDE_SANDBOX_HOOK` answers, and cannot be replaced or renamed away.
#[test]
fn the_hook_works_inside_the_jail_and_its_binary_cannot_be_replaced() {
    let f = Fixture::new();
    let payload = json!({"cwd": f.ws, "hook_event_name": "PreToolUse", "tool_name": "Write",
                         "tool_input": {"file_path": f.ws.join(".envrc")}})
    .to_string();
    std::fs::write(f.ws.join("payload.json"), payload).unwrap();
    let script = "\"$CLAUDE_SANDBOX_HOOK\" hook pre-tool-use --host claude < payload.json; \
                  echo x > \"$CLAUDE_SANDBOX_HOOK\" 2>/dev/null && echo REPLACED; \
                  mv /tmp/.claude-sandbox /tmp/moved 2>/dev/null && echo MOVED; \
                  rm -f \"$CLAUDE_SANDBOX_HOOK\" 2>/dev/null && echo REMOVED; true";
    let out = ok(&f.jail(script));
    let first: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(first["hookSpecificOutput"]["permissionDecision"], "deny");
    assert_eq!(out.lines().count(), 1, "{out}");
}

#[test]
fn agent_state_writes_are_denied_by_the_allowlist_with_the_reason() {
    let f = Fixture::new();
    let ws = f.ws.display().to_string();
    let home = f.home.display().to_string();
    let write = |path: &str| {
        let p = json!({"cwd": ws, "hook_event_name": "PreToolUse", "tool_name": "Edit",
                       "tool_input": {"file_path": path, "old_string": "a", "new_string": "b"}});
        hook(&f, "claude", &p)
    };
    // The user memory: a catalogued entry point.
    let memory = format!("{home}/.claude/CLAUDE.md");
    let runs = "Claude Code: the user's instructions, read by every session";
    assert_json(
        &write(&memory).1,
        &claude_deny(&sealed_reason(&memory, runs)),
    );
    // A script nobody catalogued, off the allowlist.
    let script = format!("{home}/.claude/statusline.sh");
    let (_, out, _) = write(&script);
    assert!(
        out.contains("permissionDecision\":\"deny")
            && out.contains("not agent state this runtime was measured writing"),
        "{out}"
    );
    // ~/.codex/.env.
    let env = format!("{home}/.codex/.env");
    assert!(write(&env).1.contains("LD_PRELOAD"));
    // The agent's own state (its transcripts and auto memory are the jail's own, never read by your
    // unjailed agent), and what is private to the session: no opinion.
    for path in [
        format!("{home}/.claude/projects/p/memory/MEMORY.md"),
        format!("{home}/.claude/projects/p/session.jsonl"),
        format!("{home}/.claude/todos/t.json"),
        format!("{home}/.codex/sessions/r.jsonl"),
        format!("{home}/.codex/skills/new/SKILL.md"),
        format!("{home}/.codex/shell_snapshots/s.sh"),
    ] {
        let (code, out, err) = write(&path);
        assert_eq!((code, out.as_str()), (Some(0), ""), "{path}: {err}");
    }
}
