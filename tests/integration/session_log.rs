//! The agent's terminal is the agent's: the watcher's diagnostics during a session go to the runtime
//! directory's log file, while the alert is stored for the human's prompt; `-v` shows them live.

use crate::common::*;

/// A session that plants `~/.local/bin/cat` and waits until the watcher has quarantined it, with the
/// launcher's (and so the command's) stderr captured without a terminal.
fn planting_session(f: &Fixture, verbose: bool) -> std::process::Output {
    let mut c = f.cmd(if verbose {
        vec!["-v", "run"]
    } else {
        vec!["run"]
    });
    c.args([
        "--",
        "bash",
        "-c",
        "cp /bin/true ~/.local/bin/cat; for i in $(seq 200); do [ -e ~/.local/bin/cat ] || break; sleep 0.05; done; \
         [ -e ~/.local/bin/cat ] && echo NOT-QUARANTINED; echo done >&2",
    ]);
    c.output().unwrap()
}

#[test]
fn watcher_warnings_go_to_the_log_not_into_the_agents_terminal() {
    let f = Fixture::sharing_local_bin();
    let out = planting_session(&f, false);
    let (o, e) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{o}{e}");
    assert!(!o.contains("NOT-QUARANTINED"), "{o}");
    // The command's own stderr still reaches it; no log line came before its end.
    let (during, after) = e.split_once("done\n").unwrap_or_else(|| panic!("{e}"));
    assert!(
        !during.contains("WARN") && !during.contains("shadows"),
        "{during}"
    );
    assert!(!after.contains("WARN"), "{after}");
    assert!(
        after.contains("claude-sandbox.log (-v shows them live)"),
        "{after}"
    );
    // The alert is stored (and shown at the prompt), the diagnostics are in the log.
    let listed = f.cmd(["alerts", "--json"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(1), "an unacknowledged alert");
    assert!(
        stdout(&listed).contains("/.local/bin/cat"),
        "{}",
        stdout(&listed)
    );
    let log = std::fs::read_to_string(f.rt.join("claude-sandbox.log")).unwrap();
    assert!(
        log.contains("WARN") && log.contains(".local/bin/cat"),
        "{log}"
    );
}

#[test]
fn with_v_the_warnings_are_live() {
    let f = Fixture::sharing_local_bin();
    let out = planting_session(&f, true);
    let e = stderr(&out);
    assert!(out.status.success(), "{e}");
    assert!(
        e.lines()
            .any(|l| l.contains("WARN") && l.contains(".local/bin/cat")),
        "{e}"
    );
    assert!(!e.contains("claude-sandbox.log"), "{e}");
}

#[test]
fn a_restored_quarantine_no_longer_offers_restore() {
    let f = Fixture::sharing_local_bin();
    assert!(planting_session(&f, false).status.success());
    let table = stdout(&f.cmd(["alerts"]).output().unwrap());
    let q = table
        .split("restore with: claude-sandbox restore ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{table}"))
        .to_string();
    ok(&f.cmd(["restore", &q]).output().unwrap());
    let table = stdout(&f.cmd(["alerts"]).output().unwrap());
    assert!(!table.contains("restore with"), "{table}");
    assert!(table.contains(&format!("restored ({q})")), "{table}");
}
