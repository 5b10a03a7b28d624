//! A repository's `.git/config` in the jail is the jail's own copy: everyday git that writes config
//! (`git config`, `git remote add`, `git push -u`, `git branch --set-upstream-to`) works inside and
//! is there outside afterwards, while a key that makes git run a program is never live outside,
//! neither during the session (the human's `git status` runs meanwhile) nor after it. Real bwrap,
//! real git.

use crate::common::*;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn get(f: &Fixture, key: &str) -> String {
    get_in(f, &f.ws, key)
}

/// `key` in the local config of the repository at `dir`, as the human's git reads it.
fn get_in(f: &Fixture, dir: &Path, key: &str) -> String {
    let out = std::process::Command::new("git")
        .args(["config", "--local", "--get-all", key])
        .current_dir(dir)
        .envs(f.env())
        .output()
        .unwrap();
    stdout(&out).trim().to_string()
}

fn alerts_json(f: &Fixture) -> String {
    stdout(&f.cmd(["alerts", "--json"]).output().unwrap())
}

fn wait_for(p: &Path, what: &str) {
    let t0 = Instant::now();
    while !p.exists() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn everyday_git_writes_config_inside_and_it_is_there_outside_afterwards() {
    let f = Fixture::new();
    f.git(&f.ws, &["init", "-q", "--bare", "remote.git"]);
    let out = ok(&f.jail(
        "set -e
         git config user.email agent@example.invalid
         git remote add origin https://example.invalid/r.git
         git remote add local ./remote.git
         git push -q -u local main
         git config --get branch.main.remote
         git update-ref refs/remotes/origin/main HEAD
         git branch -q --set-upstream-to=origin/main main
         git config alias.st status
         git config --get branch.main.remote",
    ));
    assert_eq!(out.trim(), "local\norigin");
    assert_eq!(get(&f, "user.email"), "agent@example.invalid");
    assert_eq!(
        get(&f, "remote.origin.url"),
        "https://example.invalid/r.git"
    );
    assert_eq!(
        get(&f, "remote.origin.fetch"),
        "+refs/heads/*:refs/remotes/origin/*"
    );
    assert_eq!(get(&f, "branch.main.remote"), "origin");
    assert_eq!(get(&f, "branch.main.merge"), "refs/heads/main");
    // A plain alias is data and comes back; a remote that is a local repository in the workspace
    // (the human's push would run the hooks the agent could write there) is held for review.
    assert_eq!(get(&f, "alias.st"), "status");
    assert_eq!(get(&f, "remote.local.url"), "");
    let held = stdout(&f.cmd(["review", "--json"]).output().unwrap());
    assert!(
        held.contains("remote.local.url") && held.contains("names a path or host"),
        "{held}"
    );
    // And a removal is carried out too.
    ok(&f.jail("git remote remove origin"));
    assert_eq!(get(&f, "remote.origin.url"), "");
    assert_eq!(get(&f, "user.email"), "agent@example.invalid");
    assert!(
        !alerts_json(&f).contains("git-config"),
        "ordinary keys raise no alert"
    );
}

#[test]
fn an_exec_capable_key_is_never_live_outside_during_or_after_the_session() {
    let f = Fixture::new();
    let pwned = f.root.join("pwned");
    let (ready, go) = (f.ws.join("ready"), f.ws.join("go"));
    let before = std::fs::read(f.ws.join(".git/config")).unwrap();
    let script = format!(
        "set -e
         git config core.fsmonitor 'touch {p}'
         git config alias.x '!touch {p}'
         git config --add include.path ../evil
         printf '[core]\\n\\tpager = touch {p}\\n' >> .git/config
         printf '[core \"fsmonitor\\0\"]\\n\\tx = touch {p}.nul\\n' >> .git/config
         git config user.email agent@example.invalid
         git config --get core.fsmonitor >/dev/null
         touch ready
         while [ ! -e go ]; do sleep 0.05; done",
        p = pwned.display()
    );
    let child = f
        .cmd(["run", "--", "bash", "-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = Running(Some(child));
    wait_for(&ready, "the jail's git config");
    // The human's git, meanwhile (VS Code runs `git status` on its own).
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&f.ws)
        .envs(f.env())
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", stderr(&status));
    assert_eq!(
        std::fs::read(f.ws.join(".git/config")).unwrap(),
        before,
        "the human's config changed while the jail ran"
    );
    std::fs::write(&go, "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    for key in ["core.fsmonitor", "alias.x", "include.path", "core.pager"] {
        assert_eq!(get(&f, key), "", "{key} is live outside");
    }
    // The ordinary key of the same session is carried out.
    assert_eq!(get(&f, "user.email"), "agent@example.invalid");
    // The human's git afterwards: status (fsmonitor, pager) and the alias.
    for args in [&["status"][..], &["-p", "log", "-1"], &["x"]] {
        let _ = std::process::Command::new("git")
            .args(args)
            .current_dir(&f.ws)
            .envs(f.env())
            .output()
            .unwrap();
    }
    assert!(!pwned.exists(), "the human's git ran the jail's key");
    // `core.fsmonitor` to git, behind a NUL in a subsection (docs/reliability.md).
    assert!(
        !f.root.join("pwned.nul").exists(),
        "the human's git ran the fsmonitor behind a NUL"
    );
    let alerts = alerts_json(&f);
    assert!(
        alerts.contains("\"held\"") && alerts.contains("core.fsmonitor"),
        "the attempt is held and alerted: {alerts}"
    );
}

#[test]
fn a_copy_the_agent_replaced_is_not_merged_and_is_alerted() {
    let f = Fixture::new();
    std::fs::write(f.home.join("secret"), "[user]\n\temail = secret\n").unwrap();
    let before = std::fs::read(f.ws.join(".git/config")).unwrap();
    let link = std::fs::read_link(f.ws.join(".git/config"));
    assert!(link.is_err(), "outside, the config is the human's file");
    ok(&f.jail(&format!(
        "set -e; t=$(readlink .git/config); git config user.email x@y; \
         rm \"$t\"; ln -s {} \"$t\"",
        f.home.join("secret").display()
    )));
    assert_eq!(std::fs::read(f.ws.join(".git/config")).unwrap(), before);
    let alerts = alerts_json(&f);
    assert!(alerts.contains("git-config-refused"), "{alerts}");
}

/// The human's own `git config` renames `.git/config` during the session (a mount on a file is
/// detached by a rename from outside): the human's config is diverted for the session, so the pin in
/// the jail holds. The agent writes in a tight loop throughout; nothing it wrote is ever in the
/// human's file, and each of the human's changes is kept.
#[test]
fn the_humans_git_config_during_the_session_does_not_unseal_the_jail() {
    let f = Fixture::new();
    let (ready, go) = (f.ws.join("ready"), f.ws.join("go"));
    let script = "touch ready
        while [ ! -e go ]; do
          git config core.fsmonitor 'touch /var/tmp/pwned-AGENTMARK' 2>/dev/null
          echo '[alias] x = !AGENTMARK' >> .git/config 2>/dev/null
          echo '[alias] y = !AGENTMARK' >> .git/claude-sandbox/config 2>/dev/null
          rm -f .git/config 2>/dev/null
          git config user.email agent@example.invalid
        done
        git config --get-all alias.x | grep -q AGENTMARK";
    let child = f
        .cmd(["run", "--", "bash", "-c", script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = Running(Some(child));
    wait_for(&ready, "the jail's loop");
    let config = f.ws.join(".git/config");
    assert_eq!(
        std::fs::read_link(&config).unwrap(),
        Path::new("claude-sandbox/config"),
        "diverted while the session runs"
    );
    for i in 0..40 {
        f.git(&f.ws, &["config", "user.name", &format!("human{i}")]);
        let text = std::fs::read_to_string(&config).unwrap();
        assert!(
            !text.contains("AGENTMARK") && !text.contains("agent@"),
            "after the human's rename {i}, the human's file holds the agent's bytes:\n{text}"
        );
        f.git(&f.ws, &["status", "--porcelain"]);
    }
    std::fs::write(&go, "").unwrap();
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let meta = std::fs::symlink_metadata(&config).unwrap();
    assert!(meta.file_type().is_file(), "put back as a file");
    assert!(!f.ws.join(".git/claude-sandbox").exists(), "nothing left");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains("AGENTMARK"), "{text}");
    assert_eq!(
        get(&f, "user.name"),
        "human39",
        "the human's changes are kept"
    );
    assert_eq!(get(&f, "user.email"), "agent@example.invalid");
    assert!(!Path::new("/var/tmp/pwned-AGENTMARK").exists());
}

/// A launcher killed outright leaves the config diverted (git still reads and writes it through
/// the symlink); the next launch merges the dead session's copy and puts the file back.
#[test]
fn a_killed_launcher_leaves_a_working_config_and_the_next_launch_restores_it() {
    let f = Fixture::new();
    let ready = f.ws.join("ready");
    let mut child = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "git config user.email agent@example.invalid && touch ready && sleep 60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&ready, "the jail");
    signal(child.id(), nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let config = f.ws.join(".git/config");
    // bwrap dies with its parent; give the kernel a moment to tear the jail down.
    std::thread::sleep(Duration::from_millis(300));
    assert!(std::fs::read_link(&config).is_ok(), "still diverted");
    f.git(&f.ws, &["config", "user.name", "after-crash"]);
    assert_eq!(get(&f, "user.name"), "after-crash");
    ok(&f.jail("true"));
    assert!(std::fs::symlink_metadata(&config)
        .unwrap()
        .file_type()
        .is_file());
    assert!(!f.ws.join(".git/claude-sandbox").exists());
    assert_eq!(get(&f, "user.name"), "after-crash");
    assert_eq!(get(&f, "user.email"), "agent@example.invalid");
}

/// `git config --global` (an agent in a fresh container setting its identity) works on the jail's
/// copy of `~/.gitconfig`; ordinary keys are carried out, keys that run programs are not.
#[test]
fn the_global_config_is_the_jails_own_copy_too() {
    let f = Fixture::new();
    ok(&f.jail(
        "set -e
         git config --global user.email agent@example.invalid
         git config --global core.pager 'touch /var/tmp/pwned-global'
         git config --global --get user.email",
    ));
    let global = std::fs::read_to_string(f.home.join(".gitconfig")).unwrap();
    assert!(global.contains("agent@example.invalid"), "{global}");
    assert!(!global.contains("pwned"), "{global}");
    assert!(std::fs::symlink_metadata(f.home.join(".gitconfig"))
        .unwrap()
        .file_type()
        .is_file());
    assert!(alerts_json(&f).contains("core.pager"));
}

/// With bwrap making every mount (`CLAUDE_SANDBOX_SEAL=bwrap`), a config another live session keeps
/// diverted is a symlink bwrap cannot pin: the launch is refused, and the other session still puts
/// the human's config back.
#[test]
fn bwrap_sealing_beside_a_live_diversion_is_refused() {
    let f = Fixture::new();
    f.git(&f.ws, &["config", "credential.helper", "human-helper"]);
    let (ready, go) = (f.ws.join("ready"), f.ws.join("go"));
    let child = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "touch ready; while [ ! -e go ]; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let child = Running(Some(child));
    wait_for(&ready, "the first session");
    let out = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "rm .git/config; printf '[core]\\n\\tfsmonitor = x\\n' > .git/config",
        ])
        .env("CLAUDE_SANDBOX_SEAL", "bwrap")
        .output()
        .unwrap();
    assert!(!out.status.success(), "must be refused");
    assert!(
        stderr(&out).contains("bwrap alone cannot seal"),
        "{}",
        stderr(&out)
    );
    assert_eq!(get(&f, "core.fsmonitor"), "");
    std::fs::write(&go, "").unwrap();
    assert!(child.wait().status.success());
    assert_eq!(get(&f, "credential.helper"), "human-helper");
    assert!(!f.ws.join(".git/claude-sandbox").exists());
}

/// A `claude-sandbox/` planted in a repository's git directory by an earlier session (here a FIFO as
/// its lock, and its registry a symlink) neither hangs the next launch nor is written through.
#[test]
fn a_planted_diversion_directory_is_a_leftover_not_a_trap() {
    let f = Fixture::new();
    let lib = f.ws.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    f.git(&lib, &["init", "-q"]);
    let planted = lib.join(".git/claude-sandbox");
    std::fs::create_dir_all(&planted).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(planted.join("lock"))
        .status()
        .unwrap();
    assert!(made.success());
    let elsewhere = f.root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, planted.join("sessions")).unwrap();
    let child = f
        .cmd([
            "run",
            "--",
            "git",
            "-C",
            "lib",
            "config",
            "user.email",
            "a@b",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Running(Some(child));
    let t0 = Instant::now();
    while child.0.as_mut().unwrap().try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the launch hangs");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "written through the symlink"
    );
    assert!(!planted.exists(), "the leftover is gone after the session");
    assert_eq!(get_in(&f, &lib, "user.email"), "a@b");
}

/// A repository whose config cannot be diverted (here: registered to a live session, but not
/// diverted any more) keeps its read-only seal, and the other repositories still get their own
/// copies merged back: each copy is merged into its own config (a gap in the copies' numbers once
/// made the ones after it read the wrong copy, and their changes were lost).
#[test]
fn a_config_that_cannot_be_diverted_leaves_the_other_repositories_merged() {
    let f = Fixture::new();
    let lib = f.ws.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    f.git(&lib, &["init", "-q"]);
    // `lib`'s copy comes before the workspace's: a live session (this test) in its registry.
    let proc_stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let start: u64 = proc_stat[proc_stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let held = lib.join(".git/claude-sandbox");
    std::fs::create_dir_all(&held).unwrap();
    let record = format!(
        "+{{\"id\":\"held\",\"pid\":{},\"start\":{start}}}\n",
        std::process::id()
    );
    std::fs::write(held.join("lock"), record).unwrap();
    let out = f
        .cmd([
            "run",
            "--",
            "sh",
            "-c",
            "git config user.email ws@example.invalid && \
             ! git -C lib config user.email lib@example.invalid 2>/dev/null",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("keeps its read-only seal"),
        "{}",
        stderr(&out)
    );
    assert_eq!(get(&f, "user.email"), "ws@example.invalid");
    assert_eq!(get_in(&f, &lib, "user.email"), "");
    assert!(
        held.join("lock").exists(),
        "another session's registry is left alone"
    );
}
