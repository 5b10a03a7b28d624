//! The attack battery, run exactly as a user runs it: every case through the real launcher and
//! watcher, in both watch modes; and `--unguarded`, which must show that every attack really works.

mod common;
use common::*;

fn battery(extra_env: &[(&str, &str)], args: &[&str]) -> (Option<i32>, Vec<serde_json::Value>) {
    require_jail();
    let dir = src_dir().join("battery");
    let mut c = std::process::Command::new(bin());
    c.args(["battery", "--json", "--dir", dir.to_str().unwrap()])
        .args(args);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let results: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}\nstdout: {}\nstderr: {}", stdout(&out), stderr(&out)));
    (out.status.code(), results)
}

fn report(results: &[serde_json::Value], bad: impl Fn(&str) -> bool) -> Vec<String> {
    results
        .iter()
        .filter(|r| bad(r["verdict"].as_str().unwrap()))
        .map(|r| format!("{} [{}]: {}", r["name"], r["verdict"], r["detail"]))
        .collect()
}

fn assert_guarded(mode: &str, env: &[(&str, &str)]) {
    let (code, results) = battery(env, &[]);
    assert!(results.len() >= 40, "{} cases", results.len());
    let failed = report(&results, |v| v == "missed" || v == "alerted");
    assert!(
        failed.is_empty(),
        "[{mode}] attacks that got through:\n{}",
        failed.join("\n")
    );
    for s in report(&results, |v| v == "skipped") {
        eprintln!("[{mode}] SKIPPED (not counted as a pass): {s}");
    }
    assert_eq!(code, Some(0));
}

#[test]
fn every_attack_is_blocked_or_neutralised_with_inotify() {
    assert_guarded("inotify", &[]);
}

#[test]
fn every_attack_is_blocked_or_neutralised_with_the_poll_sweep() {
    assert_guarded("poll", &[("CLAUDE_SANDBOX_WATCH", "poll")]);
}

#[test]
fn unguarded_every_attack_really_works() {
    let (code, results) = battery(&[], &["--unguarded"]);
    let broken = report(&results, |v| v != "missed" && v != "skipped");
    assert!(
        broken.is_empty(),
        "cases that cannot fail (the attack does not work even without the guard):\n{}",
        broken.join("\n")
    );
    assert_eq!(code, Some(0));
}
