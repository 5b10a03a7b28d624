//! The audit trail (issue 39, part 1): a session's launch, its quarantine, the human's restore and
//! acknowledgement, and its end are records of one hash chain in `~/.local/state/claude-sandbox/audit`,
//! which the jail can neither read nor write; `audit verify` finds a removed and an edited line.

use crate::common::*;

fn records(f: &Fixture) -> Vec<serde_json::Value> {
    std::fs::read_to_string(f.home.join(".local/state/claude-sandbox/audit/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `f.cmd` with the trail where it is by default (the fixture moves it out of the home).
fn cmd<const N: usize>(f: &Fixture, args: [&str; N]) -> std::process::Command {
    let mut c = f.cmd(args);
    c.env_remove("CLAUDE_SANDBOX_AUDIT_DIR");
    c
}

#[test]
fn a_session_its_quarantine_and_the_humans_decisions_are_one_chain_the_jail_cannot_touch() {
    let f = Fixture::new();
    let script = "a=~/.local/state/claude-sandbox/audit; \
        ls -A $a | wc -l; echo tamper >> $a/audit.jsonl 2>/dev/null || echo NOWRITE; \
        git init -q fresh && printf '#!/bin/sh\\necho hooked\\n' > fresh/.git/hooks/pre-commit \
        && chmod +x fresh/.git/hooks/pre-commit; \
        for i in $(seq 100); do test -e fresh/.git/hooks/pre-commit || break; sleep 0.1; done; exit 3";
    let out = cmd(&f, ["run", "--", "sh", "-c", script]).output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // In the jail the directory is empty and read-only.
    assert_eq!(stdout(&out), "0\nNOWRITE\n", "{}", stderr(&out));
    let r = records(&f);
    let events: Vec<&str> = r.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"launch"), "{events:?}");
    assert_eq!(events.last(), Some(&"session-end"), "{events:?}");
    let launch = &r[0];
    assert_eq!(launch["v"], 1);
    assert_eq!(launch["network"], "allowlist");
    assert_eq!(launch["policy_digest"].as_str().unwrap().len(), 64);
    let end = r.last().unwrap();
    assert_eq!(
        (end["status"].as_i64(), end["how"].as_str()),
        (Some(3), Some("exit-nonzero"))
    );
    assert_eq!(end["session"], launch["session"]);
    let hook = r
        .iter()
        .find(|r| r["event"] == "alert" && r["kind"] == "git-hook")
        .unwrap_or_else(|| panic!("no git-hook alert record: {r:#?}"));
    assert_eq!(hook["action"], "quarantined", "{hook}");
    let qid = hook["quarantine_id"].as_str().unwrap().to_string();
    // The human's decisions are records too.
    ok(&cmd(&f, ["restore", &qid]).output().unwrap());
    ok(&cmd(&f, ["alerts", "ack", "--all"]).output().unwrap());
    let r = records(&f);
    assert!(
        r.iter()
            .any(|r| r["event"] == "restore" && r["id"] == qid.as_str()),
        "{r:#?}"
    );
    assert!(r.iter().any(|r| r["event"] == "ack"), "{r:#?}");
    // The alert store keeps the same records, not a second list: each line of its alerts and its
    // acknowledgements is a line of the trail, byte for byte.
    let trail =
        std::fs::read_to_string(f.home.join(".local/state/claude-sandbox/audit/audit.jsonl"))
            .unwrap();
    let trail: Vec<&str> = trail.lines().collect();
    for store in ["alerts.jsonl", "alerts.acks"] {
        let text = std::fs::read_to_string(f.rt.join(store)).unwrap();
        assert!(!text.is_empty(), "{store} is empty");
        for line in text.lines() {
            assert!(trail.contains(&line), "{store}: {line} is not in the trail");
        }
    }
    // One chain: seq counts up by one, each prev is the last hash.
    for w in r.windows(2) {
        assert_eq!(
            w[1]["seq"].as_u64().unwrap(),
            w[0]["seq"].as_u64().unwrap() + 1
        );
        assert_eq!(w[1]["prev"], w[0]["hash"]);
    }
    let verify = cmd(&f, ["audit", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    assert!(
        stdout(&verify).starts_with(&format!("whole: {} records", r.len())),
        "{}",
        stdout(&verify)
    );
    // A line removed, then a line edited: each is found, named by its line.
    let file = f.home.join(".local/state/claude-sandbox/audit/audit.jsonl");
    let good = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let removed: Vec<&str> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| *l)
        .collect();
    std::fs::write(&file, removed.join("\n") + "\n").unwrap();
    let v = cmd(&f, ["audit", "verify"]).output().unwrap();
    assert_eq!(v.status.code(), Some(1));
    assert!(
        stdout(&v).contains("audit.jsonl:2: the chain is cut"),
        "{}",
        stdout(&v)
    );
    let edited = good.replacen("\"status\":3", "\"status\":0", 1);
    assert_ne!(edited, good);
    std::fs::write(&file, &edited).unwrap();
    let v = cmd(&f, ["audit", "verify", "--json"]).output().unwrap();
    assert_eq!(v.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(j["ok"], false);
    assert!(j["error"].as_str().unwrap().contains("edited"), "{j}");
}

/// Security review h41r: a git config value the jail chose is copied whole into the alert's record
/// (its fingerprint and its detail); a record past the 256 KiB the appender reads back from the
/// file's end makes the next record start a new chain (seq 1, the genesis prev), and `audit verify`
/// then says a line was removed: a false tamper alarm the jail raises at will, and the shipped
/// copy's seq numbers start again.
#[test]
fn a_huge_value_the_jail_planted_does_not_cut_the_chain() {
    let f = Fixture::new();
    let script = "git init -q sub && { printf '[core]\\n\\tfsmonitor = '; \
        head -c 300000 /dev/zero | tr '\\0' a; printf '\\n'; } >> sub/.git/config; sleep 2";
    let out = f.jail(script);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(f.root.join("audit/audit.jsonl")).unwrap();
    let seqs: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert!(seqs.len() >= 3, "launch, the alert, the end: {seqs:?}");
    let verify = f.cmd(["audit", "verify"]).output().unwrap();
    assert!(
        verify.status.success(),
        "seqs {seqs:?}: {}{}",
        stdout(&verify),
        stderr(&verify)
    );
}
