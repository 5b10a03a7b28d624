//! Catalogued names made in the workspace during the session are alerted while it runs (issue 31
//! item 1: "alerted at once"), with a real jail, real inotify and real git; the session's end
//! still holds them (`entry_points::new_entry_points_below_the_root_are_held_at_the_end_...`).

use crate::common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn alerts(f: &Fixture) -> Vec<serde_json::Value> {
    let out = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap_or_default()
}

/// A new `pkg/.npmrc` and a new `lib/.vscode/` are alerted while the session still runs (the
/// agent waits for the test to have seen the alerts); a tracked `docs/AGENTS.md` the session
/// checks out again is the work and is not alerted; the `.npmrc` is still held at the end.
#[test]
fn a_catalogued_name_made_below_the_root_is_alerted_while_the_session_runs() {
    made_below_the_root_is_alerted_live("inotify");
}

/// The same with the one-second sweep (no inotify): the tick's listing of the directories that
/// changed finds the names.
#[test]
fn a_catalogued_name_made_below_the_root_is_alerted_while_the_session_runs_in_poll_mode() {
    made_below_the_root_is_alerted_live("poll");
}

fn made_below_the_root_is_alerted_live(mode: &str) {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("docs")).unwrap();
    std::fs::write(f.ws.join("docs/AGENTS.md"), "Be brief.\n").unwrap();
    f.git(&f.ws, &["add", "docs/AGENTS.md"]);
    f.git(&f.ws, &["commit", "-qm", "agents"]);
    std::fs::remove_file(f.ws.join("docs/AGENTS.md")).unwrap();
    let go = f.root.join("go");
    let script = format!(
        "mkdir -p pkg && printf 'script-shell=/tmp/x\\n' > pkg/.npmrc && \
         mkdir -p lib/.vscode && echo '{{}}' > lib/.vscode/tasks.json && \
         git checkout -q -- docs/AGENTS.md && echo MADE; \
         for i in $(seq 1 300); do [ -e {go} ] && break; sleep 0.05; done; echo DONE",
        go = go.display()
    );
    let mut child = f
        .cmd(["run", "--", "bash", "-c", &script])
        .env("CLAUDE_SANDBOX_WATCH", mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wanted = [f.ws.join("pkg/.npmrc"), f.ws.join("lib/.vscode")];
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(12) {
        seen = alerts(&f);
        let all_there = wanted.iter().all(|p| {
            seen.iter()
                .any(|a| a["path"].as_str() == p.to_str() && a["kind"] == "entry-point-created")
        });
        if all_there {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = child.try_wait().unwrap().is_none();
    std::fs::write(&go, "").unwrap();
    let out = child.wait_with_output().unwrap();
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(so.contains("MADE") && so.contains("DONE"), "{so}\n{se}");
    assert!(
        running,
        "{mode}: the session ended before the alerts were seen: {se}"
    );
    for p in &wanted {
        let a: Vec<_> = seen
            .iter()
            .filter(|a| a["path"].as_str() == p.to_str())
            .collect();
        assert_eq!(a.len(), 1, "{mode}: {}: {seen:#?}", p.display());
        assert_eq!(a[0]["severity"], "high");
        assert!(
            a[0]["detail"]
                .as_str()
                .unwrap()
                .contains("during the session ("),
            "{}",
            a[0]["detail"]
        );
    }
    let agents = f.ws.join("docs/AGENTS.md");
    assert!(
        !seen.iter().any(|a| a["path"].as_str() == agents.to_str()),
        "a tracked file checked out is the work: {seen:#?}"
    );
    assert!(agents.exists());
    assert!(!f.ws.join("pkg/.npmrc").exists(), "held at the end: {se}");
}
