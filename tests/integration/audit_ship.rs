//! Issue 39, parts 2 and 3: audit records shipped through a real syslog daemon (rsyslog, over UDP,
//! TCP and a local socket) and to an OTLP/HTTP receiver that decodes them with the protocol's own
//! definitions; a dead collector costs the launch nothing and the trail counts what was dropped;
//! the system file alone names the pipeline, locks the policy and makes a launch fail closed.

use crate::common::*;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn system_config(f: &Fixture, text: &str) {
    let dir = f.etc().join("claude-sandbox");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn trail(f: &Fixture) -> Vec<serde_json::Value> {
    std::fs::read_to_string(f.root.join("audit/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn trail_lines(f: &Fixture) -> Vec<String> {
    std::fs::read_to_string(f.root.join("audit/audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// rsyslogd, which Debian puts in /usr/sbin; missing: said loudly, and a failure under CI.
fn rsyslogd_or_say(test: &str) -> Option<PathBuf> {
    let p = PathBuf::from("/usr/sbin/rsyslogd");
    if p.is_file() {
        return Some(p);
    }
    assert!(
        std::env::var_os("CLAUDE_SANDBOX_CI").is_none(),
        "{test}: rsyslogd is missing, and .ci/run installs rsyslog"
    );
    eprintln!("\n*** {test}: NOT RUN here — apt-get install rsyslog ***\n");
    None
}

#[test]
fn records_reach_a_real_syslog_daemon_over_udp_tcp_and_a_local_socket() {
    let Some(rsyslogd) = rsyslogd_or_say("syslog") else {
        return;
    };
    let f = Fixture::new();
    let dir = f.root.join("rsyslog");
    std::fs::create_dir_all(&dir).unwrap();
    let (udp, tcp) = (free_port(), free_port());
    let d = dir.display();
    std::fs::write(
        dir.join("rsyslog.conf"),
        format!(
            "global(workDirectory=\"{d}\" maxMessageSize=\"64k\")\n\
             module(load=\"imudp\")\ninput(type=\"imudp\" address=\"127.0.0.1\" port=\"{udp}\")\n\
             module(load=\"imtcp\")\ninput(type=\"imtcp\" address=\"127.0.0.1\" port=\"{tcp}\")\n\
             module(load=\"imuxsock\" SysSock.Use=\"off\")\n\
             input(type=\"imuxsock\" Socket=\"{d}/log\" useSpecialParser=\"off\" parseHostname=\"on\")\n\
             template(name=\"fields\" type=\"list\") {{ property(name=\"inputname\") constant(value=\"|\") \
             property(name=\"syslogfacility-text\") constant(value=\"|\") property(name=\"app-name\") \
             constant(value=\"|\") property(name=\"msgid\") constant(value=\"|\") \
             property(name=\"structured-data\") constant(value=\"|\") property(name=\"msg\" droplastlf=\"on\") \
             constant(value=\"\\n\") }}\n\
             *.* action(type=\"omfile\" file=\"{d}/out\" template=\"fields\")\n"
        ),
    )
    .unwrap();
    let _daemon = Daemon(
        Command::new(rsyslogd)
            .args(["-n", "-f"])
            .arg(dir.join("rsyslog.conf"))
            .arg("-i")
            .arg(dir.join("pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for("rsyslog's listeners", || {
        dir.join("log").exists() && std::net::TcpStream::connect(("127.0.0.1", tcp)).is_ok()
    });
    let targets = [
        ("imudp", format!("udp:127.0.0.1:{udp}")),
        ("imtcp", format!("tcp:127.0.0.1:{tcp}")),
        ("imuxsock", format!("unix:{d}/log")),
    ];
    for (_, target) in &targets {
        system_config(
            &f,
            &format!("[audit]\nsyslog = \"{target}\"\nsyslog_facility = \"local3\"\n"),
        );
        ok(&f.cmd(["run", "--", "true"]).output().unwrap());
    }
    let lines = trail_lines(&f);
    assert_eq!(
        lines.len(),
        6,
        "a launch and an end per session: {lines:#?}"
    );
    let out = dir.join("out");
    wait_for("six messages", || {
        std::fs::read_to_string(&out).is_ok_and(|t| t.lines().count() >= 6)
    });
    let got = std::fs::read_to_string(&out).unwrap();
    let got: Vec<&str> = got.lines().collect();
    for (i, (input, _)) in targets.iter().enumerate() {
        for j in 0..2 {
            let line = &lines[2 * i + j];
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            let event = r["event"].as_str().unwrap();
            let want_sd = format!(
                "[audit@32473 v=\"1\" seq=\"{}\" event=\"{event}\" session=\"{}\" hash=\"{}\"]",
                r["seq"],
                r["session"].as_str().unwrap(),
                r["hash"].as_str().unwrap()
            );
            // The message is the trail's line byte for byte; the header names who and what.
            let want = format!("{input}|local3|claude-sandbox|{event}|{want_sd}|{line}");
            assert!(got.contains(&want.as_str()), "missing {want}\nin {got:#?}");
        }
    }
}

/// The Python that has opentelemetry-proto (.ci/run makes the venv); missing: said loudly, and a
/// failure under CI.
fn otlp_python_or_say(test: &str) -> Option<PathBuf> {
    let p = std::env::var_os("CLAUDE_SANDBOX_TEST_OTLP_PYTHON").map_or_else(
        || PathBuf::from("/opt/claude-sandbox-otlp-venv/bin/python"),
        PathBuf::from,
    );
    let works = Command::new(&p)
        .args([
            "-c",
            "import opentelemetry.proto.collector.logs.v1.logs_service_pb2",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        return Some(p);
    }
    assert!(
        std::env::var_os("CLAUDE_SANDBOX_CI").is_none(),
        "{test}: {} has no opentelemetry-proto, and .ci/run installs it",
        p.display()
    );
    eprintln!(
        "\n*** {test}: NOT RUN here — python3 -m venv /opt/claude-sandbox-otlp-venv && \
         /opt/claude-sandbox-otlp-venv/bin/pip install opentelemetry-proto ***\n"
    );
    None
}

/// The receiver's script, carried in the test binary (CI runs it staged, without the source tree).
const RECEIVER: &str = include_str!("../fixtures/otlp_receiver.py");

fn receiver(python: &Path, out: &Path) -> (Daemon, u16) {
    let script = out.with_file_name("otlp_receiver.py");
    std::fs::write(&script, RECEIVER).unwrap();
    let mut child = Command::new(python)
        .arg(&script)
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    (Daemon(child), port)
}

#[test]
fn records_reach_an_otlp_receiver_that_decodes_them_with_the_protocols_definitions() {
    let Some(python) = otlp_python_or_say("otlp") else {
        return;
    };
    let f = Fixture::new();
    let out = f.root.join("otlp.jsonl");
    let (_receiver, port) = receiver(&python, &out);
    system_config(
        &f,
        &format!("[audit]\notlp = \"http://127.0.0.1:{port}\"\n"),
    );
    // A session that plants a hook in a repository it makes: a high alert among its records.
    let script =
        "git init -q fresh && printf '#!/bin/sh\\necho hooked\\n' > fresh/.git/hooks/pre-commit \
        && chmod +x fresh/.git/hooks/pre-commit; \
        for i in $(seq 100); do test -e fresh/.git/hooks/pre-commit || break; sleep 0.1; done";
    ok(&f.cmd(["run", "--", "sh", "-c", script]).output().unwrap());
    let lines = trail_lines(&f);
    let got = || -> Vec<serde_json::Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_for("every record at the receiver", || {
        got().len() >= lines.len()
    });
    let got = got();
    assert!(got.iter().all(|g| g.get("error").is_none()), "{got:#?}");
    assert_eq!(got.len(), lines.len(), "{got:#?}");
    for (g, line) in got.iter().zip(&lines) {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            g["body"],
            line.as_str(),
            "the body is the trail's line as written"
        );
        assert_eq!(g["resource"]["service.name"], "claude-sandbox");
        assert_eq!(g["scope"], "claude-sandbox.audit");
        let a = &g["attributes"];
        assert_eq!(a["event.name"]["stringValue"], r["event"]);
        assert_eq!(a["claude_sandbox.hash"]["stringValue"], r["hash"]);
        assert_eq!(a["claude_sandbox.seq"]["intValue"], r["seq"].to_string());
        assert!(g["time_unix_nano"].as_u64().unwrap() > 1_700_000_000_000_000_000);
    }
    let hook = got
        .iter()
        .find(|g| g["attributes"]["claude_sandbox.kind"]["stringValue"] == "git-hook")
        .unwrap_or_else(|| panic!("no git-hook alert shipped: {got:#?}"));
    // A hook planted in a repository is critical: FATAL in OpenTelemetry's numbers.
    assert_eq!(
        hook["attributes"]["claude_sandbox.severity"]["stringValue"],
        "critical"
    );
    assert_eq!(hook["severity_number"], 21, "{hook}");
    assert_eq!(hook["severity_text"], "critical", "{hook}");
    assert_eq!(
        hook["attributes"]["claude_sandbox.action"]["stringValue"],
        "quarantined"
    );
    // The human's decision ships too, from a command outside any session.
    let qid = hook["attributes"]["claude_sandbox.quarantine_id"]["stringValue"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&f.cmd(["restore", &qid]).output().unwrap());
    let restored = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("\"stringValue\": \"restore\"")
    };
    wait_for("the restore record", restored);
}

#[test]
fn a_dead_collector_costs_the_launch_nothing_and_the_trail_counts_what_was_dropped() {
    let f = Fixture::new();
    let dead = free_port();
    system_config(
        &f,
        &format!(
            "[audit]\notlp = \"http://127.0.0.1:{dead}\"\nsyslog = \"tcp:127.0.0.1:{dead}\"\n"
        ),
    );
    let ran = f
        .cmd(["run", "--", "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    assert_eq!(ok(&ran), "ran\n");
    let records = trail(&f);
    let events: Vec<&str> = records
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        ["launch", "session-end", "ship-dropped"],
        "{records:#?}"
    );
    // Both records were dropped: counted on the next record, or at exit (which depends on how soon
    // the thread met the refusal), never lost from the count.
    let counted =
        records[1]["ship_dropped"].as_u64().unwrap_or(0) + records[2]["count"].as_u64().unwrap();
    assert_eq!(counted, 2, "{records:#?}");
    let verify = f.cmd(["audit", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", stdout(&verify));
    // doctor names the unreachable target.
    let doctor = f.cmd(["doctor", "--json"]).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let ship: Vec<&serde_json::Value> = checks
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "audit shipping")
        .collect();
    assert_eq!(ship.len(), 2, "{checks:#}");
    assert!(ship.iter().all(|c| c["mark"] == "warn"), "{ship:#?}");
}

#[test]
fn only_the_system_file_names_the_pipeline_and_a_locked_policy_cannot_be_loosened() {
    let f = Fixture::new();
    let user = f.home.join(".config/claude-sandbox/config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    for (text, key) in [
        ("[audit]\nsyslog = \"udp:127.0.0.1:514\"\n", "`[audit]`"),
        ("locked = false\n", "`locked`"),
        ("fail_closed = false\n", "`fail_closed`"),
    ] {
        std::fs::write(&user, text).unwrap();
        let o = f.cmd(["run", "--", "true"]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "{}:1: {key} is read only from the system configuration",
                user.display()
            )),
            "{}",
            stderr(&o)
        );
    }
    std::fs::remove_file(&user).unwrap();
    system_config(&f, "locked = true\n[network]\nmode = \"allowlist\"\n");
    ok(&f.cmd(["run", "--", "true"]).output().unwrap());
    std::fs::write(&user, "read_only = [\"~/x\"]\n[network]\nmode = \"host\"\n").unwrap();
    let o = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "{}:2: `network.mode` loosens the policy, which the system configuration locks",
            user.display()
        )),
        "{}",
        stderr(&o)
    );
    std::fs::write(&user, "read_only = [\"~/x\"]\n[network]\nmode = \"none\"\n").unwrap();
    ok(&f.cmd(["run", "--", "true"]).output().unwrap());
    std::fs::remove_file(&user).unwrap();
    for args in [
        vec!["run", "--network", "host", "--", "true"],
        vec!["run", "--allow-domain", "example.com", "--", "true"],
        vec!["run", "--writable", "/tmp", "--", "true"],
        vec!["allow", "example.com"],
    ] {
        let o = f.cmd(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("loosens the policy, which the system configuration locks"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
    assert!(!user.exists(), "allow wrote the user file");
    ok(&f
        .cmd(["run", "--network", "none", "--", "true"])
        .output()
        .unwrap());
}

#[test]
fn fail_closed_refuses_a_launch_with_a_gap_or_without_its_audit_record_and_nothing_runs() {
    let f = Fixture::new();
    // An entry point that is a dangling symlink: its target cannot be sealed before it exists.
    std::os::unix::fs::symlink("nowhere/envrc", f.ws.join(".envrc")).unwrap();
    let marker = f.ws.join("ran");
    let script = format!("touch {}", marker.display());
    let o = f.cmd(["run", "--", "sh", "-c", &script]).output().unwrap();
    ok(&o);
    assert!(marker.exists(), "without fail_closed the gap is a warning");
    assert!(stderr(&o).contains("dangling symlink"), "{}", stderr(&o));
    std::fs::remove_file(&marker).unwrap();
    system_config(&f, "fail_closed = true\n");
    let o = f.cmd(["run", "--", "sh", "-c", &script]).output().unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("not started: ") && err.contains("dangling symlink"),
        "{err}"
    );
    assert!(err.contains("fail_closed = true"), "{err}");
    assert!(!marker.exists(), "the command ran");
    // The refusal is in the trail: the launch, and its end as a setup that failed. The same when
    // bwrap makes every mount (the whole plan is known before the launch record).
    let o = f
        .cmd(["run", "--", "sh", "-c", &script])
        .env("CLAUDE_SANDBOX_SEAL", "bwrap")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(!marker.exists(), "the command ran");
    let records = trail(&f);
    let ends: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["event"] == "session-end")
        .collect();
    assert_eq!(ends.len(), 3, "{records:#?}");
    for end in &ends[1..] {
        assert_eq!(end["how"], "setup-failed", "{end}");
        assert!(
            end["error"].as_str().unwrap().contains("dangling symlink"),
            "{end}"
        );
    }
    let e = f.cmd(["explain"]).output().unwrap();
    assert!(
        stdout(&e).contains("System policy: fail_closed"),
        "{}",
        stdout(&e)
    );
    assert!(stdout(&e).contains("gap: "), "{}", stdout(&e));
    // Without the gap it starts; without its audit record it does not.
    std::fs::remove_file(f.ws.join(".envrc")).unwrap();
    ok(&f.cmd(["run", "--", "sh", "-c", &script]).output().unwrap());
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    let blocked = f.root.join("not-a-dir");
    std::fs::write(&blocked, "").unwrap();
    let o = f
        .cmd(["run", "--", "sh", "-c", &script])
        .env("CLAUDE_SANDBOX_AUDIT_DIR", &blocked)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the audit trail cannot be written"),
        "{}",
        stderr(&o)
    );
    assert!(!marker.exists(), "the command ran without its audit record");
    // Nothing of the refused launches is left.
    let d = f.cmd(["doctor", "--json"]).output().unwrap();
    let checks: serde_json::Value = serde_json::from_slice(&d.stdout).unwrap();
    let left = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "leftovers")
        .unwrap();
    assert_eq!(left["mark"], "pass", "{left}");
}

/// Security review h41r: records written by the network proxy (forked from the launcher while
/// shipping was configured and held back) are never shipped and never counted: the jail's
/// network denials, its exfiltration attempts, are missing from the team's copy without a
/// `ship_dropped` or a `ship-dropped` record. A plain HTTP collector that answers 200 at once.
#[test]
fn a_network_denial_recorded_by_the_proxy_reaches_the_collector_or_is_counted() {
    use std::io::{Read, Write};
    let f = Fixture::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u64>::new()));
    let g = std::sync::Arc::clone(&got);
    std::thread::spawn(move || {
        for c in listener.incoming() {
            let Ok(mut c) = c else { continue };
            let mut data = Vec::new();
            let mut buf = vec![0u8; 65536];
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let body = loop {
                let Ok(n) = c.read(&mut buf) else { break None };
                if n == 0 {
                    break None;
                }
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data).to_string();
                let Some((head, body)) = text.split_once("\r\n\r\n") else {
                    continue;
                };
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap();
                if body.len() >= len {
                    break Some(body.to_string());
                }
            };
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            if let Some(b) = body {
                let v: serde_json::Value = serde_json::from_str(&b).unwrap();
                for r in v["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
                    .as_array()
                    .unwrap()
                {
                    let line: serde_json::Value =
                        serde_json::from_str(r["body"]["stringValue"].as_str().unwrap()).unwrap();
                    g.lock().unwrap().push(line["seq"].as_u64().unwrap());
                }
            }
        }
    });
    system_config(
        &f,
        &format!("[audit]\notlp = \"http://127.0.0.1:{port}\"\n"),
    );
    // The session lasts: the proxy has every chance to send.
    let out = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "curl -s -m 3 http://evil.example.com/ >/dev/null; sleep 2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let records = trail(&f);
    let denial = records
        .iter()
        .find(|r| r["event"] == "alert" && r["kind"] == "network-denied")
        .unwrap_or_else(|| panic!("no network-denied record: {records:#?}"))["seq"]
        .as_u64()
        .unwrap();
    let last = records.last().unwrap()["seq"].as_u64().unwrap();
    wait_for("the session's end shipped", || {
        got.lock().unwrap().contains(&last)
    });
    let counted = records
        .iter()
        .any(|r| r.get("ship_dropped").is_some() || r["event"] == "ship-dropped");
    assert!(
        got.lock().unwrap().contains(&denial) || counted,
        "record {denial} (the network denial) was neither shipped nor counted: shipped {:?}, trail {records:#?}",
        got.lock().unwrap()
    );
}
