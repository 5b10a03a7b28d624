//! The session in a real terminal: tmux gives it one, as a human's shell would.
//!
//! Guards against terminal injection that only a real terminal shows: what the session leaves in
//! the terminal's input queue is read by the outer shell when it returns. tmux's server runs on a
//! socket inside the scene, so `kill-server` ends that server and no other.

use super::{Scene, PLANTED};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The session in a real terminal: an outer bash in tmux starts it, and reads whatever the session
/// leaves in the terminal's input queue when it returns.
pub(super) fn run_tty(script: &str, s: &Scene, bin: &Path, unguarded: bool) -> (bool, String) {
    let sock = s.root.join("tmux.sock");
    let script_file = s.root.join("payload.sh");
    if std::fs::write(&script_file, script).is_err() {
        return (false, "cannot write the payload".into());
    }
    let env: Vec<String> = s.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let shell = format!(
        "cd {} && env -i {} bash --norc --noprofile",
        s.ws.display(),
        env.join(" ")
    );
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(args)
            .output()
    };
    if tmux(&[
        "new-session",
        "-d",
        "-s",
        "b",
        "-x",
        "120",
        "-y",
        "30",
        &shell,
    ])
    .is_err()
    {
        return (false, "tmux failed".into());
    }
    let launch = if unguarded {
        format!(
            "bash {} > {}/tty.out 2>&1",
            script_file.display(),
            s.root.display()
        )
    } else {
        format!(
            "{} run -- bash {} > {}/tty.out 2>&1",
            bin.display(),
            script_file.display(),
            s.root.display()
        )
    };
    let _ = tmux(&[
        "send-keys",
        "-t",
        "b",
        "-l",
        &format!("{launch}; echo SESSION-ENDED"),
    ]);
    let _ = tmux(&["send-keys", "-t", "b", "Enter"]);
    let t0 = Instant::now();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-t", "b"])
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        if screen.contains("SESSION-ENDED\n")
            || screen.lines().any(|l| l.trim() == "SESSION-ENDED")
            || t0.elapsed() > Duration::from_secs(20)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(700)); // let the outer shell run what was injected
                                                    // The server and the outer shell (which writes its history as it exits) must be gone before
                                                    // the scene is removed: wait for them, bounded.
    let pids: Vec<u32> = tmux(&["display-message", "-p", "-t", "b", "#{pid} #{pane_pid}"])
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let _ = tmux(&["kill-server"]);
    // The pane is a session led by its first process (pids[1]): wait for all of it, since a shell
    // that process started writes its history last.
    let t0 = Instant::now();
    while pids
        .first()
        .is_some_and(|server| alive(*server, &pids[1..]))
        && t0.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = std::fs::read_to_string(s.root.join("tty.out")).unwrap_or_default();
    (out.contains(PLANTED), out)
}

/// Whether the process `server`, or any live member of the sessions `sessions`, still runs.
fn alive(server: u32, sessions: &[u32]) -> bool {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return false;
    };
    rd.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            return false;
        };
        let f: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        // Fields after the command: state, ppid, pgrp, session.
        let sid = f.get(3).and_then(|s| s.parse::<u32>().ok());
        f.first() != Some(&"Z") && (pid == server || sid.is_some_and(|s| sessions.contains(&s)))
    })
}
