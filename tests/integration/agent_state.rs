//! Agent state, tried inside a real jail: in `~/.claude`, `~/.codex` and `~/.gemini` the agent
//! writes freely into the jail's own directory, but never your instructions, settings, the scripts
//! settings name, skills, rules or `~/.codex/.env`; what an agent runs later itself is the session's
//! own; what comes back at the end is the allowlisted files, judged (a new login is held), and the
//! history (docs/runtimes.md).

use crate::common::*;
use std::path::Path;

/// One line per path: `W path` if appending to it (creating it and its directory if needed)
/// succeeded inside the jail, `R path` if it was refused.
const TRY_WRITE: &str = r#"
for f in "$@"; do
  if (mkdir -p "$(dirname "$f")" && echo planted >> "$f") 2>/dev/null; then echo "W $f"; else echo "R $f"; fi
done
"#;

/// `seal`: `CLAUDE_SANDBOX_SEAL` (`bwrap`: every mount made by bwrap, not the sealer).
fn try_writes(f: &Fixture, seal: Option<&str>, paths: &[&str]) -> String {
    let mut args = vec!["run", "--", "bash", "-c", TRY_WRITE, "try"];
    args.extend(paths);
    let mut cmd = f.cmd(&args);
    if let Some(mode) = seal {
        cmd.env("CLAUDE_SANDBOX_SEAL", mode);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

fn verdict(out: &str, path: &Path) -> char {
    let line = out
        .lines()
        .find(|l| l.get(2..) == Some(path.to_str().unwrap()))
        .unwrap_or_else(|| panic!("no verdict for {}: {out}", path.display()));
    line.chars().next().unwrap()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn agent_state_is_writable_by_allowlist_only() {
    allowlist_in_a_real_jail(None);
}

#[test]
fn agent_state_is_writable_by_allowlist_only_when_bwrap_makes_every_mount() {
    allowlist_in_a_real_jail(Some("bwrap"));
}

// One scenario: every runtime's allowlist tried in the same jail.
#[allow(clippy::too_many_lines)]
fn allowlist_in_a_real_jail(seal: Option<&str>) {
    let f = Fixture::new();
    let (claude, codex) = (f.home.join(".claude"), f.home.join(".codex"));
    let gemini = f.home.join(".gemini");
    write(&gemini.join("GEMINI.md"), "Be brief.\n");
    write(&gemini.join("tmp/bin/rg"), "#!/bin/sh\n");
    let settings = r#"{"statusLine":{"type":"command","command":"bash ~/.claude/statusline.sh"},
        "hooks":{"Stop":[{"hooks":[{"type":"command","command":"~/.claude/hooks/stop.sh"}]}]}}"#;
    write(&claude.join("settings.json"), settings);
    write(&claude.join("statusline.sh"), "echo status\n");
    write(&claude.join("skills/a/SKILL.md"), "# a\n");
    write(&claude.join("keybindings.json"), "{}\n");
    // This workspace's project (Claude Code's name for it); other projects are not in the jail.
    let slug = f.claude_project();
    let project = claude.join("projects").join(slug);
    write(&project.join("s.jsonl"), "{}\n");
    write(&codex.join(".env"), "X=1\n");
    write(&codex.join("AGENTS.md"), "Be brief.\n");
    write(&codex.join("rules/default.rules"), "\n");
    write(&codex.join("skills/mine/SKILL.md"), "# mine\n");
    write(&codex.join("state_5.sqlite"), "");
    let before_ro: Vec<_> = [
        "settings.json",
        "statusline.sh",
        "skills/a/SKILL.md",
        "keybindings.json",
    ]
    .iter()
    .map(|r| claude.join(r))
    .chain(
        [
            ".env",
            "AGENTS.md",
            "rules/default.rules",
            "skills/mine/SKILL.md",
        ]
        .iter()
        .map(|r| codex.join(r)),
    )
    .map(|p| (std::fs::read(&p).unwrap(), p))
    .collect();

    let refused = [
        claude.join("CLAUDE.md"), // missing: a placeholder
        claude.join("settings.json"),
        claude.join("statusline.sh"), // named by settings, and not on the allowlist
        claude.join("hooks/stop.sh"), // named by settings, missing
        claude.join("skills/a/SKILL.md"), // your skill
        claude.join("skills/new/SKILL.md"), // a new skill
        claude.join("commands/x.md"), // a new command
        claude.join("rules/x.md"),    // new rules
        claude.join("output-styles/x.md"), // a new output style
        claude.join("keybindings.json"), // existing, unknown: not on the allowlist
        codex.join(".env"),
        codex.join("AGENTS.md"),
        codex.join("AGENTS.override.md"),
        codex.join("rules/default.rules"),
        codex.join("state_5.sqlite"), // yours: the jail's stores are its own (`CODEX_SQLITE_HOME`)
        codex.join("prompts/x.md"),
        codex.join("skills/mine/SKILL.md"),
        gemini.join("GEMINI.md"),
        gemini.join("system.md"),
        gemini.join("policies/auto-saved.toml"),
        gemini.join("trusted_hooks.json"),
        gemini.join("tmp/bin/rg"), // yours, in the view: read-only
    ];
    let allowed = [
        project.join("s.jsonl"),
        claude.join("history.jsonl"),
        claude.join(".credentials.json"),
        claude.join("todos/t.json"),
        claude.join("plugins/store/x.json"), // a view: 2.1.332 writes it at every start
        claude.join("mcp-discovery-cache/x"), // a name of a newer release
        codex.join("sessions/2026/rollout.jsonl"),
        codex.join("auth.json"),
        codex.join("tmp/arg0-linux/codex-arg0ab/git"), // its live helper directory: the jail's
        gemini.join("tmp/ws/chats/session.jsonl"),
        gemini.join("oauth_creds.json"),
        gemini.join("projects.json"),
    ];
    let private = [
        claude.join("shell-snapshots/snapshot.sh"),
        codex.join("shell_snapshots/s.sh"),
        codex.join(".tmp/plugins/x"),
        codex.join("skills/new/SKILL.md"),
        codex.join("skills/.system/x/SKILL.md"),
        gemini.join("tmp/bin/fd"),
    ];
    let all: Vec<&str> = refused
        .iter()
        .chain(&allowed)
        .chain(&private)
        .map(|p| p.to_str().unwrap())
        .collect();
    let out = try_writes(&f, seal, &all);
    for p in &refused {
        assert_eq!(verdict(&out, p), 'R', "{} was written: {out}", p.display());
    }
    for p in allowed.iter().chain(&private) {
        assert_eq!(verdict(&out, p), 'W', "{} was refused: {out}", p.display());
    }
    // After the session: the history and the allowlisted data files come back; the logins (new
    // ones: you had none) are held for review; everything else stays the jail's own.
    for p in [claude.join("history.jsonl"), gemini.join("projects.json")] {
        assert!(
            std::fs::read_to_string(&p).unwrap().ends_with("planted\n"),
            "{} not kept",
            p.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(project.join("s.jsonl")).unwrap(),
        "{}\n",
        "your transcript"
    );
    for p in [
        claude.join("todos"),
        claude.join("plugins"),
        claude.join("mcp-discovery-cache"),
        codex.join("sessions"),
        codex.join("tmp"),
        gemini.join("tmp/ws"),
        claude.join(".credentials.json"),
        codex.join("auth.json"),
        gemini.join("oauth_creds.json"),
    ] {
        assert!(!p.exists(), "{} reached your home", p.display());
    }
    let held = stdout(&f.cmd(["review", "--json"]).output().unwrap());
    for login in [".credentials.json", "auth.json", "oauth_creds.json"] {
        assert!(
            held.contains(&format!("\"what\": \"{login}\"")),
            "{login} not held: {held}"
        );
    }
    for p in &private {
        assert!(!p.exists(), "{} reached your home", p.display());
    }
    for (bytes, p) in &before_ro {
        assert_eq!(&std::fs::read(p).unwrap(), bytes, "{} changed", p.display());
    }
    for missing in ["CLAUDE.md", "hooks", "commands", "rules", "output-styles"] {
        assert!(!claude.join(missing).exists(), "placeholder {missing} left");
    }
    assert!(!codex.join("prompts").exists() && !codex.join("AGENTS.override.md").exists());
}

#[test]
fn agents_save_state_as_they_do_inside_the_jail() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    std::fs::create_dir_all(f.home.join(".codex")).unwrap();
    // Claude Code: temporary file + rename, mkdir locks; Codex: SQLite journal beside its store.
    let out = f.jail(
        "set -e; cd ~/.claude; echo '{}' > .credentials.json.tmp.0a1b2c3d; \
         mv .credentials.json.tmp.0a1b2c3d .credentials.json; mkdir .oauth_refresh.lock; \
         rmdir .oauth_refresh.lock; mkdir history.jsonl.lock; echo '{}' >> history.jsonl; \
         rmdir history.jsonl.lock; cd \"$CODEX_SQLITE_HOME\"; echo j > state_5.sqlite-journal; \
         echo d > state_5.sqlite; rm state_5.sqlite-journal; cd ~/.codex; echo '{}' > .tmpAbC123; \
         mv .tmpAbC123 auth.json; echo SAVED",
    );
    assert!(stdout(&out).contains("SAVED"), "{}", stderr(&out));
    assert!(f.home.join(".claude/history.jsonl").is_file());
    // New logins (you had none): held for your review, not lost.
    assert!(!f.home.join(".claude/.credentials.json").exists());
    assert!(!f.home.join(".codex/auth.json").exists());
    assert_eq!(crate::common::held_count(&f), 2);
    assert!(
        !f.home.join(".codex/state_5.sqlite").exists(),
        "the jail's own store"
    );
}

#[test]
fn a_new_name_is_the_jails_own_and_never_yours() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    // Claude Code reads ~/.claude/.config.json, if it exists, instead of ~/.claude.json.
    let out = f.jail(
        "echo '{\"mcpServers\":{\"x\":{\"command\":\"sh\"}}}' > ~/.claude/.config.json && \
         mkdir ~/.claude/sessions && echo WROTE",
    );
    assert!(stdout(&out).contains("WROTE"), "{}", stderr(&out));
    assert!(
        !f.home.join(".claude/.config.json").exists(),
        "a new name reached you"
    );
    assert!(
        !f.home.join(".claude/sessions").exists(),
        "agent state reached you"
    );
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert_eq!(
        alerts.trim(),
        "[]",
        "nothing of yours, nothing to alert: {alerts}"
    );
    let out = f.jail("cat ~/.claude/.config.json && test -d ~/.claude/sessions && echo KEPT");
    assert!(
        stdout(&out).ends_with("KEPT\n"),
        "the jail's next session: {}",
        stderr(&out)
    );
}

#[test]
fn a_state_directory_made_for_its_agent_is_private_to_you() {
    let f = Fixture::sharing_local_bin();
    // A stand-in for each agent command (the launcher knows the agent by its name), which reports
    // the mode of the state directories made for it.
    for (cmd, dirs) in [
        (
            "opencode",
            vec![".local/share/opencode", ".local/state/opencode"],
        ),
        ("gemini", vec![".gemini"]),
    ] {
        let script = f.home.join(".local/bin").join(cmd);
        let body = dirs.iter().fold(String::new(), |s, d| {
            s + &format!("stat -c '%a {d}' ~/{d}\n")
        });
        std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let out = ok(&f.cmd(["run", "--", cmd]).output().unwrap());
        for d in &dirs {
            assert!(out.contains(&format!("700 {d}")), "{cmd}: {out}");
        }
    }
}
