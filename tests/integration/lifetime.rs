//! A session's end when its terminal goes away or its launcher dies: a hang-up ends the jail within
//! a bounded time (SIGHUP, then SIGTERM, then SIGKILL) and the usual end of a session follows; a
//! killed launcher is recognised as dead by its lock (not by its pid, which a zombie keeps) and the
//! next `run` finishes what it left at once. Judged by what is left: nothing. Real bwrap, real
//! signals, a real terminal (tmux).

use crate::common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < timeout, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A jailed command that ignores SIGHUP and SIGTERM: only the last step of a hang-up ends it.
const STUBBORN: &str = "trap '' HUP TERM; touch started; while :; do sleep 0.1; done";

/// What a session leaves when it did not end well: placeholders in the workspace, the diverted
/// `.git/config`, its directory and lock in the runtime directory. Empty when all is finished.
fn left_behind(f: &Fixture) -> Vec<String> {
    let mut left = Vec::new();
    for e in std::fs::read_dir(&f.ws).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if ![".git", "README", "started"].contains(&n.as_str()) {
            left.push(format!("workspace: {n}"));
        }
    }
    let git = f.ws.join(".git");
    if !std::fs::symlink_metadata(git.join("config")).is_ok_and(|m| m.file_type().is_file()) {
        left.push(".git/config is not a regular file".into());
    }
    for n in ["claude-sandbox", "commondir", "config.worktree"] {
        if std::fs::symlink_metadata(git.join(n)).is_ok() {
            left.push(format!(".git/{n}"));
        }
    }
    for d in ["sessions", "locks"] {
        for e in std::fs::read_dir(f.rt.join(d))
            .into_iter()
            .flatten()
            .flatten()
        {
            left.push(format!("runtime: {d}/{}", e.file_name().to_string_lossy()));
        }
    }
    let reg = std::fs::read_to_string(f.rt.join("placeholders.json")).unwrap_or_default();
    if reg.contains("\"path\"") {
        left.push(format!("registry: {reg}"));
    }
    left
}

fn pid_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// SIGHUP to the launcher: the command (which ignores SIGHUP and SIGTERM) is ended within the
/// hang-up's bounded steps, the launcher exits 128+1, and the session is finished: nothing left,
/// no alert.
#[test]
fn a_hang_up_ends_a_session_that_ignores_it_and_finishes_it() {
    let f = Fixture::new();
    let child = f
        .cmd(["run", "--", "bash", "-c", STUBBORN])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let running = Running(Some(child));
    wait_for("the jailed command", Duration::from_secs(20), || {
        f.ws.join("started").exists()
    });
    assert!(
        !left_behind(&f).is_empty(),
        "the session shows nothing while it runs"
    );
    signal(
        running.0.as_ref().unwrap().id(),
        nix::sys::signal::Signal::SIGHUP,
    );
    let out = running.wait();
    assert_eq!(out.status.code(), Some(129), "{}", stderr(&out));
    assert_eq!(left_behind(&f), Vec::<String>::new());
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert_eq!(alerts.trim(), "[]");
}

/// The terminal closed (tmux's server killed: the pty's master goes): the session ends and is
/// finished, whether the launcher is the terminal's session leader (SIGHUP from the kernel) or in
/// a session of its own (no signal at all: the terminal is found hung up).
#[test]
fn closing_the_terminal_ends_the_session_and_finishes_it() {
    for setsid in ["", "setsid -w"] {
        let f = Fixture::new();
        let pid_file = f.root.join("launcher.pid");
        let script = f.root.join("stubborn.sh");
        std::fs::write(&script, STUBBORN).unwrap();
        let env = f
            .env()
            .iter()
            .map(|(k, v)| format!("{k}='{v}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let line = format!(
            "cd '{ws}' && env -i {env} {setsid} sh -c 'echo $$ > {pid}; exec {bin} run -- bash {script}'",
            ws = f.ws.display(),
            pid = pid_file.display(),
            bin = bin().display(),
            script = script.display(),
        );
        let tmux = Tmux::start(&f.root, &line);
        let t0 = Instant::now();
        while !f.ws.join("started").exists() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the jailed command did not start; screen:\n{}",
                tmux.screen()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        drop(tmux);
        wait_for(
            &format!("the launcher's end ({setsid:?})"),
            Duration::from_secs(30),
            || pid_gone(pid),
        );
        assert_eq!(left_behind(&f), Vec::<String>::new(), "{setsid:?}");
    }
}

/// The launcher killed (SIGKILL) and a session started 0.3 s later, before the dead launcher is
/// reaped (its pid and start time still answer for it): the new session finishes what the dead
/// one left, at once, and leaves nothing itself. Ten rounds, ten clean.
#[test]
fn a_killed_launcher_is_finished_by_the_next_run_at_once() {
    let f = Fixture::new();
    let mut clean = 0;
    let mut dirty = Vec::new();
    for round in 0..10 {
        let _ = std::fs::remove_file(f.ws.join("started"));
        let mut child = f
            .cmd(["run", "--", "bash", "-c", "touch started; sleep 60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = f.ws.join("started");
        wait_for("the jailed command", Duration::from_secs(20), || {
            started.exists()
        });
        signal(child.id(), nix::sys::signal::Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(300));
        // Not reaped yet: a zombie with the same pid and start time.
        assert!(Path::new(&format!("/proc/{}", child.id())).exists());
        ok(&f.jail("true"));
        let _ = child.wait();
        let left = left_behind(&f);
        if left.is_empty() {
            clean += 1;
        } else {
            dirty.push(format!("round {round}: {left:?}"));
        }
    }
    assert_eq!(clean, 10, "{dirty:#?}");
}
