//! Allow in one step (issue 34, item 3): a denied host's refusal and alert name `claude-sandbox
//! allow HOST`; that command, run outside, adds it to the user's configuration (its comments kept),
//! and the next session reaches it; run inside the jail it refuses.

use crate::common::*;
use crate::network::{allowlist, Server, SENTENCE};

#[test]
fn a_denial_names_claude_sandbox_allow_which_lets_the_next_session_through() {
    let f = Fixture::new();
    let srv = Server::start();
    let p = srv.port;
    let cfg = f.home.join(".config/claude-sandbox/config.toml");
    std::fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    std::fs::write(
        &cfg,
        "# the team's settings\n[network]\nmode = \"allowlist\"\nallow = [\"127.0.0.1\"] # loopback for the test\n",
    )
    .unwrap();
    let script = format!(
        "curl -sS -m 10 http://denied.test:{p}/first; echo
         $CLAUDE_SANDBOX_HOOK allow denied.test 2>&1; echo \" rc=$?\""
    );
    let out = ok(&allowlist(&f, &[], &script));
    assert!(out.contains(SENTENCE), "{out}");
    assert!(
        out.contains("they run `claude-sandbox allow denied.test` outside the sandbox"),
        "{out}"
    );
    // The agent cannot allow it itself.
    assert!(
        out.contains("is for the human, outside the sandbox"),
        "{out}"
    );
    assert!(out.contains(" rc=2"), "{out}");
    let alerts = f.cmd(["alerts", "--json"]).output().unwrap();
    let text = String::from_utf8_lossy(&alerts.stdout).into_owned();
    assert!(
        text.contains("network-denied") && text.contains("claude-sandbox allow denied.test"),
        "{text}"
    );

    // Outside: one step, the rest of the file kept.
    let o = f.cmd(["allow", "Denied.Test."]).output().unwrap();
    let said = ok(&o);
    assert!(said.contains("allowed denied.test in"), "{said}");
    let now = std::fs::read_to_string(&cfg).unwrap();
    assert_eq!(
        now,
        "# the team's settings\n[network]\nmode = \"allowlist\"\nallow = [\"denied.test\", \"127.0.0.1\"] # loopback for the test\n"
    );
    let again = ok(&f.cmd(["allow", "denied.test"]).output().unwrap());
    assert!(again.contains("already allowed"), "{again}");
    let out = ok(&allowlist(
        &f,
        &[],
        &format!("curl -sS -m 10 http://denied.test:{p}/second"),
    ));
    assert_eq!(out.trim(), "outside:/second");
    assert!(
        !srv.seen().contains(&"GET /first HTTP/1.1".to_string()),
        "{:?}",
        srv.seen()
    );

    // What is not a host pattern is refused, the file untouched.
    let o = f.cmd(["allow", "a.test;id"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not a host pattern"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), now);
}

#[test]
fn allow_writes_a_new_file_and_says_when_the_mode_does_not_use_the_list() {
    let f = Fixture::new();
    let cfg = f.home.join(".config/claude-sandbox/config.toml");
    // The default mode uses the list: nothing to add.
    let said = ok(&f.cmd(["allow", "*.example.org"]).output().unwrap());
    assert!(said.contains("allowed *.example.org in"), "{said}");
    assert!(!said.contains("network mode here"), "{said}");
    assert_eq!(
        std::fs::read_to_string(&cfg).unwrap(),
        "[network]\nallow = [\"*.example.org\"]\n"
    );
    let out = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(out.contains("Network: allowlist"), "{out}");
    assert!(out.contains("*.example.org"), "{out}");
    // In host mode the entry is written all the same, and the note says it does not apply yet.
    std::fs::write(&cfg, "[network]\nmode = \"host\"\n").unwrap();
    let said = ok(&f.cmd(["allow", "*.example.net"]).output().unwrap());
    assert!(said.contains("the network mode here is `host`"), "{said}");
    assert!(std::fs::read_to_string(&cfg)
        .unwrap()
        .contains("\"*.example.net\""));
}
