//! Sessions are concurrent by design: several sessions of one user at once, in one workspace and in
//! worktrees of one repository, each committing and installing, starting and ending over each
//! other. Judged by outcome: no alert, nothing lost (every commit in the repository, every install
//! there for the next session), nothing left (no placeholder in a workspace, `.git/config` a regular
//! file again, no diversion), no log line on a jailed command's terminal, and a session that starts
//! while another ends finds a whole jail (a writable `~/.local`, a readable git config); ten at
//! once, each planting in a shared PATH directory all ten watch, quarantine each plant exactly once
//! (issue 38, item 4). Real bwrap, real git, real pip.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < timeout, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn alerts(f: &Fixture) -> String {
    stdout(&f.cmd(["alerts", "--json"]).output().unwrap())
        .trim()
        .to_string()
}

/// What is left after every session ended: a workspace entry that is not the human's (`keep`),
/// the common git directory not as it was, an entry in the placeholder registry.
fn left_behind(f: &Fixture, workspaces: &[&Path], keep: &[&str]) -> Vec<String> {
    let mut left = Vec::new();
    for ws in workspaces {
        for e in std::fs::read_dir(ws).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if !keep.contains(&n.as_str()) {
                left.push(format!("{}: {n}", ws.display()));
            }
        }
    }
    let git = f.ws.join(".git");
    if !std::fs::symlink_metadata(git.join("config")).is_ok_and(|m| m.file_type().is_file()) {
        left.push(".git/config is not a regular file".into());
    }
    let mut git_dirs = vec![git.clone()];
    git_dirs.extend(
        std::fs::read_dir(git.join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path()),
    );
    for d in &git_dirs {
        for n in ["claude-sandbox", "config.worktree"] {
            if std::fs::symlink_metadata(d.join(n)).is_ok() {
                left.push(format!("{}/{n}", d.display()));
            }
        }
    }
    let reg = std::fs::read_to_string(f.rt.join("placeholders.json")).unwrap_or_default();
    if reg.contains("\"path\"") {
        left.push(format!("registry: {reg}"));
    }
    left
}

/// What a jailed command must never see on its terminal: a log line of the launcher or a
/// read-only `~/.local`.
fn assert_quiet(what: &str, out: &std::process::Output) {
    let err = stderr(out);
    assert!(
        !err.contains("WARN") && !err.contains("ERROR") && !err.contains("Read-only"),
        "{what}: on the jailed command's terminal:\n{err}"
    );
}

/// Three sessions in one workspace and two in worktrees of its repository, started 0.4 s apart
/// and lasting 1 to 3 s, so that starts and ends overlap: each commits (retrying while another
/// holds the index's lock, as a human would) and installs its own wheel with `pip --user` (a
/// library: a new executable on PATH is rightly alerted, `installs` has that case).
#[test]
fn five_overlapping_sessions_commit_and_install_and_leave_nothing() {
    if !pip_or_say("five_overlapping_sessions_commit_and_install_and_leave_nothing") {
        return;
    }
    let f = Fixture::new();
    let wts: Vec<PathBuf> = ["wt-a", "wt-b"].iter().map(|n| f.root.join(n)).collect();
    for w in &wts {
        f.git(&f.ws, &["worktree", "add", "-q", w.to_str().unwrap()]);
    }
    let wheels: Vec<PathBuf> = (0..5)
        .map(|i| {
            wheel(
                &f.root,
                &format!("hello_cs{i}"),
                &format!("hello {i}"),
                false,
            )
        })
        .collect();
    let places: Vec<&Path> = vec![&f.ws, &f.ws, &f.ws, &wts[0], &wts[1]];
    let mut running = Vec::new();
    for (i, dir) in places.iter().enumerate() {
        let script = format!(
            "set -e
             mkdir -p ~/.local/share/s{i}
             PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install -q --user --no-index \
                 --no-warn-script-location {whl} 2>&1 | grep -v '^WARNING' >&2 || true
             echo {i} > f{i}
             for t in $(seq 100); do
                 git add f{i} 2>/dev/null && git commit -qm s{i} -- f{i} 2>/dev/null && break
                 sleep 0.05
             done
             git log -1 --format=%s | grep -qx s{i}
             rm f{i}
             sleep {pause}
             echo done",
            whl = wheels[i].display(),
            // The first started lasts longest: ends fall among the later starts.
            pause = ["1.5", "1.25", "1", "0.75", "0.5"][i],
        );
        let child = f
            .cmd(["run", "--", "bash", "-c", &script])
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        running.push(Running(Some(child)));
        std::thread::sleep(Duration::from_millis(400));
    }
    for (i, r) in running.into_iter().enumerate() {
        let out = r.wait();
        assert_eq!(stdout(&out), "done\n", "session {i}: {}", stderr(&out));
        assert!(out.status.success(), "session {i}: {}", stderr(&out));
        assert_quiet(&format!("session {i}"), &out);
    }
    assert_eq!(alerts(&f), "[]");
    // Nothing lost: every commit, on its branch; every install, for the next session.
    let log = stdout(&f.git(&f.ws, &["log", "--all", "--format=%s"]));
    for i in 0..5 {
        assert!(
            log.lines().any(|l| l == format!("s{i}")),
            "s{i} lost: {log}"
        );
    }
    let imports = (0..5)
        .map(|i| format!("import hello_cs{i}; hello_cs{i}.main()"))
        .collect::<Vec<_>>()
        .join("; ");
    let said = ok(&f.jail(&format!(
        "/usr/bin/python3 -c '{imports}'; ls ~/.local/share | grep -c '^s[0-4]$'"
    )));
    assert_eq!(
        said, "hello 0\nhello 1\nhello 2\nhello 3\nhello 4\n5\n",
        "an install was lost"
    );
    let mut dirs: Vec<&Path> = vec![&f.ws];
    dirs.extend(wts.iter().map(PathBuf::as_path));
    assert_eq!(
        left_behind(&f, &dirs, &[".git", "README"]),
        Vec::<String>::new()
    );
    assert_eq!(alerts(&f), "[]");
}

/// Twenty rounds of a session B starting while A ends, B's start moved across A's end round by
/// round: B always finds a whole jail (`~/.local` writable, the git config readable, a commit
/// possible), and when both ended nothing is left and nothing was alerted.
#[test]
fn a_session_starting_while_another_ends_finds_a_whole_jail() {
    let f = Fixture::new();
    let mut bad = Vec::new();
    let mut overlapped = 0;
    for round in 0..20 {
        let started = f.ws.join("a-started");
        let _ = std::fs::remove_file(&started);
        let a = f
            .cmd(["run", "--", "bash", "-c", "touch a-started; sleep 0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut a = Running(Some(a));
        wait_for("session A", Duration::from_secs(20), || started.exists());
        // A's end takes some tens of milliseconds after its command's 0.2 s: B starts from just
        // before to just after it.
        std::thread::sleep(Duration::from_millis(150 + 10 * round));
        let b = f
            .cmd([
                "run",
                "--",
                "bash",
                "-c",
                &format!(
                    "set -e; rm -f a-started
                     mkdir -p ~/.local/share/b{round} && touch ~/.local/share/b{round}/x
                     git config --get user.name >/dev/null
                     echo {round} > r && git add r && git commit -qm r{round} && echo ok"
                ),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // A still running or ending when B started (its launcher not exited yet).
        if a.0.as_mut().unwrap().try_wait().unwrap().is_none() {
            overlapped += 1;
        }
        let b = Running(Some(b)).wait();
        let a = a.wait();
        if stdout(&b) != "ok\n" || !b.status.success() {
            bad.push(format!("round {round}: B failed: {}", stderr(&b)));
        }
        for (who, out) in [("A", &a), ("B", &b)] {
            let err = stderr(out);
            if err.contains("WARN") || err.contains("ERROR") {
                bad.push(format!("round {round}: on {who}'s terminal: {err}"));
            }
        }
        let left = left_behind(&f, &[&f.ws], &[".git", "README", "r"]);
        if !left.is_empty() {
            bad.push(format!("round {round}: left {left:?}"));
        }
        let alerted = alerts(&f);
        if alerted != "[]" {
            bad.push(format!("round {round}: alerts {alerted}"));
            let _ = f.cmd(["alerts", "ack", "--all"]).output();
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
    assert!(
        overlapped > 0,
        "no round's B started before A's launcher exited"
    );
    eprintln!("{overlapped} of 20 rounds: B started before A's launcher exited");
}

/// The commands the ten sessions shadow, one each.
const NAMES: [&str; 10] = [
    "ls", "cat", "env", "grep", "sed", "sort", "head", "tail", "wc", "tr",
];

/// Each plant alerted once, as quarantined, off PATH, and restored byte for byte from its record;
/// no other alert.
fn each_plant_quarantined_once_and_restored(f: &Fixture) {
    let listed: serde_json::Value = serde_json::from_str(&alerts(f)).unwrap();
    let listed = listed.as_array().unwrap();
    for (i, name) in NAMES.iter().enumerate() {
        let plant = f.home.join(".local/bin").join(name);
        let about: Vec<_> = listed
            .iter()
            .filter(|a| a["path"] == plant.to_str().unwrap())
            .collect();
        assert_eq!(
            about.len(),
            1,
            "{name}: not alerted exactly once: {about:#?}"
        );
        let a = about[0];
        assert_eq!(a["action"], "quarantined", "{a}");
        assert!(!plant.exists(), "{name}: still on PATH");
        let id = a["quarantine_id"].as_str().expect("a quarantine record");
        let back = f.cmd(["restore", id]).output().unwrap();
        assert!(back.status.success(), "{name}: {}", stderr(&back));
        assert_eq!(
            std::fs::read_to_string(&plant).unwrap(),
            format!("#!/bin/sh\necho plant {i}\n"),
            "{name}: restored other bytes"
        );
    }
    assert_eq!(
        listed.len(),
        NAMES.len(),
        "alerts besides one per plant: {listed:#?}"
    );
}

/// Ten sessions of one user at once (four in one workspace, three in each of two other
/// repositories), each churning files in its workspace and planting its own executable that
/// shadows a system command in the shared `~/.local/bin`, which every one of the ten watches: each
/// plant is quarantined exactly once (ten watchers race for it), its record restores it byte for
/// byte, nothing is left in a workspace, and no other alert is raised (no seal taken for detached
/// by another session's placeholders, no diversion left).
#[test]
fn ten_sessions_at_once_quarantine_every_plant_once_and_lose_nothing() {
    let f = Fixture::sharing_local_bin();
    let others: Vec<PathBuf> = ["ws-b", "ws-c"].iter().map(|n| f.root.join(n)).collect();
    for w in &others {
        std::fs::create_dir_all(w).unwrap();
        f.git(w, &["init", "-q"]);
        std::fs::write(w.join("README"), "hello\n").unwrap();
        f.git(w, &["add", "README"]);
        f.git(w, &["commit", "-qm", "init"]);
        // An entry point in each: sealed by every session there, so each start and end of one
        // happens around the others' seals.
        std::fs::write(w.join(".envrc"), "export A=1\n").unwrap();
    }
    std::fs::write(f.ws.join(".envrc"), "export A=1\n").unwrap();
    let places: Vec<&Path> = (0..10)
        .map(|i| match i % 3 {
            0 => f.ws.as_path(),
            1 => others[0].as_path(),
            _ => others[1].as_path(),
        })
        .collect();
    let t0 = Instant::now();
    let mut running = Vec::new();
    for (i, dir) in places.iter().enumerate() {
        // Churn before and after the plant; the plant at a different round in each session. The
        // sealed `.envrc` must stay sealed whatever the others do.
        let script = format!(
            "for r in 1 2 3 4 5 6; do
               mkdir -p churn{i}/$r
               for j in $(seq 30); do echo $j > churn{i}/$r/f$j; done
               rm -r churn{i}/$r
               if [ $r = {at} ]; then
                 printf '#!/bin/sh\\necho plant {i}\\n' > ~/.local/bin/{name}
                 chmod +x ~/.local/bin/{name}
               fi
             done
             rmdir churn{i}
             echo x >> .envrc 2>/dev/null && echo ENVRC-WRITTEN
             sleep 1.5; echo done",
            at = 1 + i % 6,
            name = NAMES[i],
        );
        let child = f
            .cmd(["run", "--", "sh", "-c", &script])
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        running.push(Running(Some(child)));
        std::thread::sleep(Duration::from_millis(50));
    }
    for (i, r) in running.into_iter().enumerate() {
        let out = r.wait();
        assert_eq!(stdout(&out), "done\n", "session {i}: {}", stderr(&out));
        assert!(out.status.success(), "session {i}: {}", stderr(&out));
    }
    let took = t0.elapsed();
    each_plant_quarantined_once_and_restored(&f);
    for w in std::iter::once(&f.ws).chain(&others) {
        assert_eq!(
            std::fs::read_to_string(w.join(".envrc")).unwrap(),
            "export A=1\n"
        );
    }
    let mut dirs: Vec<&Path> = vec![&f.ws];
    dirs.extend(others.iter().map(PathBuf::as_path));
    assert_eq!(
        left_behind(&f, &dirs, &[".git", "README", ".envrc"]),
        Vec::<String>::new()
    );
    for w in &others {
        let cfg = w.join(".git/config");
        assert!(std::fs::symlink_metadata(&cfg)
            .unwrap()
            .file_type()
            .is_file());
        assert!(std::fs::symlink_metadata(w.join(".git/claude-sandbox")).is_err());
    }
    eprintln!(
        "ten sessions at once: {} plants quarantined once each, restored; {:.1} s",
        NAMES.len(),
        took.as_secs_f64()
    );
}
