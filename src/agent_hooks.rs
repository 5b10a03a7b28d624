//! The hook adapter: defense in depth for agent runtimes' own hooks, never a permission grant.
//!
//! Guards against an agent wasting turns on writes the jail will refuse anyway, or reading a secret
//! through a tool the jail happens not to cover — and against the classic hook bug of answering
//! "allow" when it meant "no opinion". For a tool call that would write a sealed entry point or read
//! a hidden path, it answers with the host's *deny* and a reason the agent can act on. For anything
//! else it writes nothing and exits 0, so the host's own permission flow runs unchanged. It never
//! emits allow. Malformed or unknown input fails closed: a message on stderr and exit 2 (which every
//! host treats as "block").
//!
//! Hosts and their formats: Claude Code and Codex (`PreToolUse`, `hookSpecificOutput` with
//! `permissionDecision: deny`), Gemini CLI (`BeforeTool`, `decision: deny`), Cursor (`preToolUse`,
//! `beforeShellExecution`, `beforeReadFile`, `permission: deny`). Tool names are translated to Claude
//! Code's vocabulary in one table.

use crate::host::HOOK_BIN;
use crate::runtimes::{Hooks, Protocol};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Each host's tool names → Claude Code's (the canonical vocabulary). MCP tools pass verbatim.
pub const TOOL_NAMES: &[(&str, &str)] = &[
    ("Bash", "Bash"),
    ("bash", "Bash"),
    ("shell", "Bash"),
    ("Shell", "Bash"),
    ("local_shell", "Bash"),
    ("exec_command", "Bash"),
    ("run_shell_command", "Bash"),
    ("Write", "Write"),
    ("write_file", "Write"),
    ("Edit", "Edit"),
    ("MultiEdit", "Edit"),
    ("replace", "Edit"),
    ("apply_patch", "Edit"),
    ("NotebookEdit", "Edit"),
    ("Read", "Read"),
    ("read_file", "Read"),
    ("read_many_files", "Read"),
];

/// What a tool call would touch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Targets {
    pub writes: Vec<PathBuf>,
    pub reads: Vec<PathBuf>,
}

/// Why the tool call is refused, or nothing (no opinion).
pub(crate) fn refusal(targets: &Targets, cwd: &Path, home: &Path) -> Option<String> {
    let abs = |p: &Path| {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            cwd.join(p)
        }
    };
    for w in &targets.writes {
        let p = abs(w);
        if let Some(why) = sealed(&p, cwd, home) {
            return Some(format!(
                "{} is sealed by claude-sandbox: {why}; it runs outside the sandbox, so the agent may not change it. \
                 Ask the user to make this change themselves.",
                p.display()
            ));
        }
    }
    // The hook has no launcher environment: the default kinds and the stores of the configs.
    let hidden = crate::secrets::resolve(home, &crate::host::HostEnv::default(), &[], &[]);
    for r in &targets.reads {
        let p = abs(r);
        if hidden.iter().any(|h| p.starts_with(h)) {
            return Some(format!(
                "{} is hidden by claude-sandbox: it holds credentials no tool in the sandbox may read. \
                 Ask the user if the task really needs it.",
                p.display()
            ));
        }
    }
    None
}

/// Whether writing `p` would touch an entry point, and who runs it.
pub fn sealed(p: &Path, cwd: &Path, home: &Path) -> Option<String> {
    if crate::catalogue::git::written_file(p) {
        return Some(crate::catalogue::git::RUNS.into());
    }
    let ws = crate::host::default_workspace(cwd);
    for c in crate::entrypoints::per_directory() {
        // The jail lets the agent write these (judged at the session's end, `Catalogued::held`):
        // refusing them here would stop work the jail allows.
        let written_in_the_jail =
            c.edits_held || (c.held && std::fs::symlink_metadata(ws.join(c.name)).is_err());
        if !written_in_the_jail && p.starts_with(ws.join(c.name)) {
            return Some(c.runs.to_string());
        }
    }
    if let Some(why) = state_sealed(p, home) {
        return Some(why);
    }
    if let Ok(rel) = p.strip_prefix(home) {
        let first = rel
            .components()
            .next()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .unwrap_or_default();
        let caches = crate::jail::layers::all().map(|(rel, _)| *rel);
        let in_hole = crate::jail::plan::home_holes()
            .chain(caches)
            .any(|h| p.starts_with(home.join(h)));
        if first.starts_with('.') && !in_hole && first != crate::runtimes::CLAUDE_JSON {
            return Some(
                "programs outside read your home's dotfiles (shell startup, git, ssh, tool config)"
                    .into(),
            );
        }
    }
    None
}

/// Whether writing `p` inside an agent's state directory is refused: a catalogued entry point, or
/// a name a measured runtime's allowlist does not give (the jail makes existing ones read-only).
fn state_sealed(p: &Path, home: &Path) -> Option<String> {
    use crate::runtimes::{state_dirs, Access};
    for sd in state_dirs() {
        let dir = home.join(sd.path);
        let Ok(rel) = p.strip_prefix(&dir) else {
            continue;
        };
        if let Some(e) = sd
            .entry_points
            .iter()
            .find(|e| p.starts_with(home.join(e.rel)))
        {
            // The jail's own copy (`jail::ownfiles`): writing it changes nothing of yours.
            return e.sealed().then(|| e.runs.to_string());
        }
        let first = rel.components().next()?.as_os_str().to_string_lossy();
        if sd.access(&first) == Access::ReadOnly {
            return Some(format!(
                "{} is not agent state this runtime was measured writing (docs/runtimes.md); \
                 what the agent saves there would steer the next session outside the sandbox",
                dir.join(&*first).display()
            ));
        }
    }
    None
}

/// Extract the targets from a tool call (name already canonical).
pub fn targets(tool: &str, input: &Value) -> Targets {
    let mut t = Targets::default();
    let str_field = |k: &str| input.get(k).and_then(Value::as_str).map(PathBuf::from);
    match tool {
        "Write" | "Edit" => {
            for k in ["file_path", "path", "notebook_path", "absolute_path"] {
                if let Some(p) = str_field(k) {
                    t.writes.push(p);
                }
            }
            // apply_patch: the paths are in the patch text.
            let patch = input
                .get("input")
                .or_else(|| input.get("patch"))
                .or_else(|| input.get("command"));
            if let Some(text) = patch.and_then(|v| {
                v.as_str().map(String::from).or_else(|| {
                    v.as_array().map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                })
            }) {
                for line in text.lines() {
                    for prefix in [
                        "*** Add File: ",
                        "*** Update File: ",
                        "*** Delete File: ",
                        "*** Move to: ",
                    ] {
                        if let Some(p) = line.strip_prefix(prefix) {
                            t.writes.push(PathBuf::from(p.trim()));
                        }
                    }
                }
            }
        }
        "Read" => {
            for k in ["file_path", "path", "absolute_path"] {
                if let Some(p) = str_field(k) {
                    t.reads.push(p);
                }
            }
            if let Some(paths) = input.get("paths").and_then(Value::as_array) {
                t.reads
                    .extend(paths.iter().filter_map(Value::as_str).map(PathBuf::from));
            }
        }
        "Bash" => {
            let cmd = match input.get("command") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
                _ => String::new(),
            };
            shell_targets(&cmd, &mut t);
        }
        _ => {}
    }
    t
}

/// Targets that are evident in a shell command: redirections, `tee`, the destination of `cp`, `mv`,
/// `ln`, `install`, and files given to `cat`, `less`, `head`, `tail`, `cp` (reads).
fn shell_targets(cmd: &str, t: &mut Targets) {
    for segment in cmd.split(['\n', ';', '|', '&']) {
        let words: Vec<&str> = segment
            .split_whitespace()
            .map(|w| w.trim_matches(['"', '\'']))
            .collect();
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            if let Some(rest) = w.strip_prefix(">>").or_else(|| w.strip_prefix('>')) {
                let target = if rest.is_empty() {
                    words.get(i + 1).copied()
                } else {
                    Some(rest)
                };
                if let Some(p) = target.filter(|p| !p.starts_with('&')) {
                    t.writes.push(PathBuf::from(p));
                }
            }
            i += 1;
        }
        let args: Vec<&str> = words
            .iter()
            .skip(1)
            .copied()
            .filter(|a| !a.starts_with('-') && !a.starts_with('>'))
            .collect();
        match words.first().copied() {
            Some("tee") => t.writes.extend(args.iter().map(PathBuf::from)),
            Some("cp" | "mv" | "ln" | "install") if args.len() >= 2 => {
                t.writes.push(PathBuf::from(args[args.len() - 1]));
                t.reads
                    .extend(args[..args.len() - 1].iter().map(PathBuf::from));
            }
            Some("cat" | "less" | "more" | "head" | "tail" | "base64" | "xxd" | "strings") => {
                t.reads.extend(args.iter().map(PathBuf::from));
            }
            _ => {}
        }
    }
}

fn expand_home(p: PathBuf, home: &Path) -> PathBuf {
    match p.to_str().and_then(|s| s.strip_prefix("~/")) {
        Some(rest) => home.join(rest),
        None => p,
    }
}

/// `claude-sandbox hook pre-tool-use --host H`: the denial to print, if any; `Err`: blocking, why.
pub(crate) fn pre_tool_use(
    host: Hooks,
    stdin: &str,
    home: &Path,
) -> Result<Option<String>, String> {
    let v: Value = serde_json::from_str(stdin)
        .map_err(|e| format!("claude-sandbox hook: input is not JSON ({e}); blocking"))?;
    let event = v
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let cwd = v
        .get("cwd")
        .and_then(Value::as_str)
        .or_else(|| {
            v.get("workspace_roots")
                .and_then(|r| r.get(0))
                .and_then(Value::as_str)
        })
        .map(PathBuf::from)
        .ok_or("claude-sandbox hook: no cwd in the input; blocking")?;
    let (tool, input) = match (host.protocol, event) {
        (Protocol::Cursor, "beforeShellExecution") => (
            "Bash".to_string(),
            json!({"command": v.get("command").cloned().unwrap_or(Value::Null)}),
        ),
        (Protocol::Cursor, "beforeReadFile") => (
            "Read".to_string(),
            json!({"file_path": v.get("file_path").cloned().unwrap_or(Value::Null)}),
        ),
        (Protocol::ClaudeCode, "PreToolUse")
        | (Protocol::Gemini, "BeforeTool")
        | (Protocol::Cursor, "preToolUse") => {
            let name = v
                .get("tool_name")
                .and_then(Value::as_str)
                .ok_or("claude-sandbox hook: no tool_name; blocking")?;
            let canonical = TOOL_NAMES
                .iter()
                .find(|(n, _)| *n == name)
                .map_or_else(|| name.to_string(), |(_, c)| (*c).to_string());
            let mut input = v.get("tool_input").cloned().unwrap_or(Value::Null);
            if let Value::String(s) = &input {
                input = serde_json::from_str(s).unwrap_or(Value::Null);
            }
            (canonical, input)
        }
        (_, other) => {
            return Err(format!(
                "claude-sandbox hook: unexpected event {other:?} for --host {}; blocking",
                host.name
            ))
        }
    };
    let mut t = targets(&tool, &input);
    t.writes = t.writes.into_iter().map(|p| expand_home(p, home)).collect();
    t.reads = t.reads.into_iter().map(|p| expand_home(p, home)).collect();
    Ok(refusal(&t, &cwd, home).map(|reason| deny(host.protocol, &reason)))
}

fn deny(protocol: Protocol, reason: &str) -> String {
    let v = match protocol {
        Protocol::ClaudeCode => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": reason}}),
        Protocol::Gemini => json!({"decision": "deny", "reason": reason}),
        Protocol::Cursor => {
            json!({"permission": "deny", "user_message": reason, "agent_message": reason})
        }
    };
    v.to_string()
}

/// The context given at session start.
pub const SESSION_CONTEXT: &str = "You are running inside claude-sandbox, a bubblewrap jail. The workspace and your own state \
are writable; everything else is read-only. Entry points that would run code outside the sandbox are sealed (git hooks and \
config, shell startup files, .envrc, .vscode/, .devcontainer/, agent settings and MCP configs, .claude-sandbox.toml); \
credentials such as ~/.aws, ~/.kube and ssh private keys read as empty; new executables on PATH and hooks in new \
repositories are quarantined. If a task needs one of these changed, do not work around it: ask the user to make the change \
outside the sandbox. `claude-sandbox explain` (run by the user) lists the exact policy.";

/// `claude-sandbox hook session-start --host H`.
pub(crate) fn session_start(host: Hooks) -> String {
    match host.protocol {
        Protocol::ClaudeCode => {
            json!({"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": SESSION_CONTEXT}})
        }
        Protocol::Gemini => json!({"hookSpecificOutput": {"additionalContext": SESSION_CONTEXT}}),
        Protocol::Cursor => json!({"additional_context": SESSION_CONTEXT}),
    }
    .to_string()
}

/// The hook configuration for a runtime: (file relative to `$HOME`, JSON to merge into it).
pub(crate) fn hook_config(host: Hooks, bin: &Path) -> (PathBuf, Value) {
    let cmd = |sub: &str| {
        format!(
            "\"${{{HOOK_BIN}:-{}}}\" hook {sub} --host {}",
            bin.display(),
            host.name
        )
    };
    let config = match host.protocol {
        Protocol::ClaudeCode => json!({"hooks": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": cmd("pre-tool-use")}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": cmd("session-start")}]}]}}),
        Protocol::Gemini => json!({"hooks": {
            "BeforeTool": [{"matcher": ".*", "hooks": [{"type": "command", "command": cmd("pre-tool-use")}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": cmd("session-start")}]}]}}),
        Protocol::Cursor => json!({"version": 1, "hooks": {
            "preToolUse": [{"command": cmd("pre-tool-use")}],
            "beforeShellExecution": [{"command": cmd("pre-tool-use")}],
            "beforeReadFile": [{"command": cmd("pre-tool-use")}],
            "sessionStart": [{"command": cmd("session-start")}]}}),
    };
    (PathBuf::from(host.file), config)
}

/// Merge `add` into `base`: objects recursively; for an array, our entries replace earlier entries
/// of ours (those whose command mentions `hook pre-tool-use|session-start`) and keep the others.
pub fn merge(base: &mut Value, add: &Value) {
    match (base, add) {
        (Value::Object(b), Value::Object(a)) => {
            for (k, v) in a {
                merge(b.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            b.retain(|e| {
                !e.to_string().contains("claude-sandbox") || !e.to_string().contains(" hook ")
            });
            b.extend(a.iter().cloned());
        }
        (b, a) => *b = a.clone(),
    }
}

/// `claude-sandbox hooks install --runtime R [--print]`.
pub(crate) fn install(host: Hooks, home: &Path, print: bool) -> crate::Result<String> {
    let bin = std::env::current_exe()
        .map_err(|e| crate::Error::io("finding the claude-sandbox binary (/proc mounted?)", e))?;
    let (rel, add) = hook_config(host, &bin);
    let path = home.join(&rel);
    let mut current: Value = match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => serde_json::from_str(&t).map_err(|e| {
            crate::Error::Usage(format!("{}: not JSON ({e}); fix it first", path.display()))
        })?,
        _ => json!({}),
    };
    merge(&mut current, &add);
    let text = serde_json::to_string_pretty(&current).expect("json");
    if print {
        return Ok(format!("# {}\n{text}\n", path.display()));
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::Error::io(format!("creating {}", dir.display()), e))?;
    }
    let tmp = path.with_extension("json.claude-sandbox.tmp");
    std::fs::write(&tmp, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| crate::Error::io(format!("writing {}", path.display()), e))?;
    Ok(format!(
        "wrote the claude-sandbox hooks into {}\n",
        path.display()
    ))
}
