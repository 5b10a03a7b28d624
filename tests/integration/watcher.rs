//! Baseline, watcher and quarantine with a real jail, real inotify and real files, in both watch
//! modes (inotify, and the one-second sweep forced with `CLAUDE_SANDBOX_WATCH=poll`).

use crate::common::*;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const MODES: [&str; 2] = ["inotify", "poll"];

/// Run a jailed script in the given watch mode with `~/.local/bin` (and extra dirs) on PATH.
fn jail_in(f: &Fixture, mode: &str, extra_path: &[&Path], script: &str) -> std::process::Output {
    let mut path: Vec<String> = extra_path.iter().map(|p| p.display().to_string()).collect();
    path.push(f.home.join(".local/bin").display().to_string());
    path.push("/usr/local/bin:/usr/bin:/bin".into());
    let mut c = f.cmd(["run", "--", "bash", "-c", script]);
    c.env("PATH", path.join(":"));
    if mode == "poll" {
        c.env("CLAUDE_SANDBOX_WATCH", "poll");
    }
    c.output().unwrap()
}

fn alerts(f: &Fixture) -> Vec<serde_json::Value> {
    let out = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        stderr(&out)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
}

fn alerts_for<'a>(all: &'a [serde_json::Value], path: &Path) -> Vec<&'a serde_json::Value> {
    all.iter()
        .filter(|a| a["path"].as_str() == path.to_str())
        .collect()
}

/// Inside the jail: wait until `path` is gone (quarantined live), print GONE or STILL-THERE.
fn wait_gone(path: &str) -> String {
    format!("for i in $(seq 1 100); do [ -e {path} ] || [ -L {path} ] || {{ echo GONE; break; }}; sleep 0.05; done; [ -e {path} ] && echo STILL-THERE; true")
}

#[test]
fn shadowing_plants_are_quarantined_live_in_both_modes() {
    for mode in MODES {
        let f = Fixture::sharing_local_bin();
        std::fs::write(f.root.join("evil"), "#!/bin/sh\necho evil\n").unwrap();
        std::fs::set_permissions(f.root.join("evil"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let evil = f.root.join("evil").display().to_string();
        // cp; mv from another mount (a copy); mv within the directory (a rename: MOVED_TO only);
        // a symlink; write first and chmod +x seconds later (ATTRIB only).
        let script = format!(
            "cp {evil} ~/.local/bin/git; {w1}\n\
             cp {evil} ./stage-ls && mv ./stage-ls ~/.local/bin/ls; {w2}\n\
             cp {evil} ~/.local/bin/.find.tmp && mv ~/.local/bin/.find.tmp ~/.local/bin/find; {w3}\n\
             ln -s /usr/bin/env ~/.local/bin/python3; {w4}\n\
             printf '#!/bin/sh\\n' > ~/.local/bin/sed; sleep 1.2; chmod +x ~/.local/bin/sed; {w5}",
            w1 = wait_gone("~/.local/bin/git"),
            w2 = wait_gone("~/.local/bin/ls"),
            w3 = wait_gone("~/.local/bin/find"),
            w4 = wait_gone("~/.local/bin/python3"),
            w5 = wait_gone("~/.local/bin/sed"),
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert_eq!(
            out.lines().filter(|l| *l == "GONE").count(),
            5,
            "[{mode}] not every plant was quarantined live:\n{out}"
        );
        let all = alerts(&f);
        for name in ["git", "ls", "find", "python3", "sed"] {
            let p = f.home.join(".local/bin").join(name);
            assert!(
                std::fs::symlink_metadata(&p).is_err(),
                "[{mode}] {name} still in place"
            );
            let a = alerts_for(&all, &p);
            assert_eq!(
                a.len(),
                1,
                "[{mode}] exactly one alert for {name}: {all:#?}"
            );
            assert_eq!(a[0]["severity"], "critical");
            assert_eq!(a[0]["kind"], "path-shadow");
            assert!(
                a[0]["detail"].as_str().unwrap().starts_with("shadows /"),
                "{}",
                a[0]["detail"]
            );
            assert!(a[0]["quarantine_id"].is_string());
            for field in ["id", "time", "action", "session"] {
                assert!(a[0][field].is_string(), "{field}");
            }
        }
    }
}

#[test]
fn a_hard_link_and_a_path_dir_created_during_the_session() {
    for mode in MODES {
        let f = Fixture::sharing_local_bin();
        let evil = f.home.join(".local/evil");
        std::fs::write(&evil, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&evil, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A PATH entry that does not exist at launch, inside the workspace.
        let late = f.ws.join("node_modules/.bin");
        let script = format!(
            "ln ~/.local/evil ~/.local/bin/grep 2>/dev/null || echo no-hardlink; {}\n\
             mkdir -p node_modules/.bin && cp /bin/true node_modules/.bin/git; {}",
            wait_gone("~/.local/bin/grep"),
            wait_gone("node_modules/.bin/git")
        );
        let out = ok(&jail_in(&f, mode, &[&late], &script));
        let all = alerts(&f);
        if !out.contains("no-hardlink") {
            let a = alerts_for(&all, &f.home.join(".local/bin/grep"));
            assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
            assert!(a[0]["detail"].as_str().unwrap().contains("hard link"));
            assert_eq!(
                std::fs::metadata(&evil).unwrap().mode() & 0o777,
                0o755,
                "the other link keeps its mode"
            );
        }
        assert!(
            !late.join("git").exists(),
            "[{mode}] plant in a PATH dir made during the session survived:\n{out}"
        );
        assert_eq!(
            alerts_for(&all, &late.join("git")).len(),
            1,
            "[{mode}] {all:#?}"
        );
    }
}

/// A build tree the agent tags during the session (`CACHEDIR.TAG`, as cargo's `target/`) is watched
/// lazily (its files do not wake the watcher each), not left out: a repository made deep inside it
/// after a build's worth of files still has its hook quarantined while the session runs.
#[test]
fn a_hook_in_a_repository_inside_a_tree_tagged_during_the_session_is_quarantined_live() {
    for mode in MODES {
        let f = Fixture::new();
        let script = format!(
            "mkdir target && printf 'Signature: 8a477f597d28d172789f06886806bc55\\n' > target/CACHEDIR.TAG && \
             for d in $(seq 20); do mkdir -p target/debug/d$d; for i in $(seq 50); do echo x > target/debug/d$d/f$i; done; done && \
             git init -q target/debug/build/dep && printf '#!/bin/sh\\nexit 0\\n' > target/debug/build/dep/.git/hooks/pre-commit && \
             chmod +x target/debug/build/dep/.git/hooks/pre-commit; {}",
            wait_gone("target/debug/build/dep/.git/hooks/pre-commit"),
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert!(out.lines().any(|l| l == "GONE"), "[{mode}] {out}");
        let hook = f.ws.join("target/debug/build/dep/.git/hooks/pre-commit");
        let all = alerts(&f);
        let a = alerts_for(&all, &hook);
        assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
        assert_eq!(a[0]["kind"], "git-hook");
    }
}

/// A tree tagged during the session hides nothing below it, however it arrives: a tagged tree
/// holding a repository, made where nothing watches (`node_modules`) and moved in whole, has its
/// hook quarantined live (the watcher's walk of the new directory honours only tags older than the
/// session); and a catalogued directory made in a directory tagged during the session is held at
/// the session's end (its walk likewise), as one in an untagged directory is.
#[test]
fn a_tag_made_during_the_session_hides_no_repository_and_no_entry_point() {
    for mode in MODES {
        let f = Fixture::new();
        let tag = "printf 'Signature: 8a477f597d28d172789f06886806bc55\\n'";
        let script = format!(
            "mkdir -p node_modules/x/cache && {tag} > node_modules/x/cache/CACHEDIR.TAG && \
             git init -q node_modules/x/cache/repo && printf '#!/bin/sh\\nexit 0\\n' > node_modules/x/cache/repo/.git/hooks/post-checkout && \
             chmod +x node_modules/x/cache/repo/.git/hooks/post-checkout && mv node_modules/x/cache moved && {}\n\
             mkdir -p pkg/.vscode && {tag} > pkg/CACHEDIR.TAG && echo '{{}}' > pkg/.vscode/tasks.json && \
             mkdir -p plain/.vscode && echo '{{}}' > plain/.vscode/tasks.json",
            wait_gone("moved/repo/.git/hooks/post-checkout"),
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert!(out.lines().any(|l| l == "GONE"), "[{mode}] {out}");
        for held in ["pkg/.vscode/tasks.json", "plain/.vscode/tasks.json"] {
            assert!(
                !f.ws.join(held).exists(),
                "[{mode}] {held}, made during the session, was left in place"
            );
        }
    }
}

/// What git follows, the guard follows: a `.git` that is a symlink to a git directory kept where
/// nothing is watched (`node_modules`), and a bare repository whose `HEAD` is a symlink (git's
/// older form, still taken), made during the session: their hooks are quarantined live.
#[test]
fn hooks_behind_a_symlinked_git_dir_and_a_symlinked_head_are_quarantined_live() {
    for mode in MODES {
        let f = Fixture::new();
        let hook = "printf '#!/bin/sh\\nexit 0\\n'";
        let script = format!(
            "git init -q node_modules/w && mv node_modules/w/.git node_modules/h && \
             {hook} > node_modules/h/hooks/post-checkout && chmod +x node_modules/h/hooks/post-checkout && \
             mkdir p3 && ln -s ../node_modules/h p3/.git && {}\n\
             git init -q --bare bare.git && {hook} > bare.git/hooks/post-receive && \
             chmod +x bare.git/hooks/post-receive && ln -sf refs/heads/main bare.git/HEAD && {}",
            wait_gone("node_modules/h/hooks/post-checkout"),
            wait_gone("bare.git/hooks/post-receive"),
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert_eq!(
            out.lines().filter(|l| *l == "GONE").count(),
            2,
            "[{mode}] {out}"
        );
    }
}

#[test]
fn hooks_and_exec_config_in_new_and_cloned_repositories() {
    for mode in MODES {
        let f = Fixture::new();
        let upstream = f.root.join("upstream.git");
        f.git(
            &f.root,
            &["init", "-q", "--bare", upstream.to_str().unwrap()],
        );
        let marker = f.root.join("pwned");
        let script = format!(
            "git init -q fresh && printf '#!/bin/sh\\ntouch {m}\\n' > fresh/.git/hooks/pre-commit && chmod +x fresh/.git/hooks/pre-commit; {}\n\
             git clone -q {} cloned 2>/dev/null && ln -s /bin/true cloned/.git/hooks/post-checkout; {}\n\
             git -C fresh config core.fsmonitor 'touch {m}'",
            wait_gone("fresh/.git/hooks/pre-commit"),
            upstream.display(),
            wait_gone("cloned/.git/hooks/post-checkout"),
            m = marker.display(),
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert_eq!(
            out.lines().filter(|l| *l == "GONE").count(),
            2,
            "[{mode}] {out}"
        );
        let all = alerts(&f);
        for hook in [
            "fresh/.git/hooks/pre-commit",
            "cloned/.git/hooks/post-checkout",
        ] {
            let p = f.ws.join(hook);
            assert!(
                std::fs::symlink_metadata(&p).is_err(),
                "[{mode}] {hook} survived"
            );
            let a = alerts_for(&all, &p);
            assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
            assert_eq!(a[0]["kind"], "git-hook");
        }
        let cfg = alerts_for(&all, &f.ws.join("fresh/.git/config"));
        assert_eq!(cfg.len(), 1, "[{mode}] {all:#?}");
        assert_eq!(
            cfg[0]["detail"].as_str().unwrap(),
            format!(
                "exec-capable git config: core.fsmonitor = touch {}",
                marker.display()
            )
        );
        // The human's git outside does not run the quarantined hook. (The fsmonitor key is alerted,
        // not removed: the human reads the alert before using that repository.)
        std::fs::write(f.ws.join("fresh/a"), "a").unwrap();
        f.git(
            &f.ws.join("fresh"),
            &["-c", "core.fsmonitor=false", "add", "a"],
        );
        f.git(
            &f.ws.join("fresh"),
            &["-c", "core.fsmonitor=false", "commit", "-qm", "a"],
        );
        assert!(!marker.exists(), "[{mode}] the planted hook ran");
    }
}

#[test]
fn a_changed_executable_is_quarantined_and_a_harmless_new_one_only_alerted() {
    for mode in MODES {
        let f = Fixture::sharing_local_bin();
        let tool = f.home.join(".local/bin/mytool");
        std::fs::write(&tool, "#!/bin/sh\necho v1\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = format!(
            "echo 'echo pwned' >> ~/.local/bin/mytool; {}\nprintf '#!/bin/sh\\n' > ~/.local/bin/brand-new-tool-xyz; chmod +x ~/.local/bin/brand-new-tool-xyz",
            wait_gone("~/.local/bin/mytool")
        );
        let out = ok(&jail_in(&f, mode, &[], &script));
        assert!(out.contains("GONE"), "[{mode}] {out}");
        let all = alerts(&f);
        let a = alerts_for(&all, &tool);
        assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
        assert_eq!(
            (a[0]["severity"].as_str(), a[0]["kind"].as_str()),
            (Some("high"), Some("path-changed"))
        );
        let new = f.home.join(".local/bin/brand-new-tool-xyz");
        assert!(new.exists(), "a new executable that shadows nothing stays");
        let a = alerts_for(&all, &new);
        assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
        assert_eq!(
            (a[0]["severity"].as_str(), a[0]["action"].as_str()),
            (Some("info"), Some("alerted"))
        );
    }
}

/// The baseline hashes its executables in the background, a quarter of a second in: after that, a
/// `touch` (new times, same bytes) is not a change, in both modes.
#[test]
fn touching_an_executable_is_not_a_change_once_it_is_hashed() {
    for mode in MODES {
        let f = Fixture::sharing_local_bin();
        let tool = f.home.join(".local/bin/mytool");
        std::fs::write(&tool, "#!/bin/sh\necho v1\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = ok(&jail_in(
            &f,
            mode,
            &[],
            "sleep 1; touch ~/.local/bin/mytool; sleep 1.5; echo DONE",
        ));
        assert!(out.contains("DONE"), "[{mode}] {out}");
        assert!(
            tool.exists(),
            "[{mode}] a touched executable was taken away"
        );
        let all = alerts(&f);
        assert!(alerts_for(&all, &tool).is_empty(), "[{mode}] {all:#?}");
    }
}

/// `run` reads the attributes of the PATH directories' entries only once the session runs (here:
/// never, the delay is stretched). A change made before they are read must still count as one: the
/// inotify event queued for it says it happened in the session. An entry nothing touched is left
/// alone.
#[test]
fn changes_before_the_baseline_attributes_are_read_still_count() {
    let f = Fixture::sharing_local_bin();
    let bin = f.home.join(".local/bin");
    for (name, mode) in [
        ("mytool", 0o755),
        ("notes", 0o644),
        ("old-a", 0o755),
        ("old-b", 0o755),
        ("steady", 0o755),
    ] {
        std::fs::write(bin.join(name), format!("#!/bin/sh\necho {name}\n")).unwrap();
        std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut c = f.cmd([
        "run",
        "--",
        "bash",
        "-c",
        "cd ~/.local/bin && echo 'echo pwned' >> mytool && chmod +x notes && mv old-a old-b",
    ]);
    c.env(
        "PATH",
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()),
    )
    .env("CLAUDE_SANDBOX_RESOLVE_DELAY_MS", "600000");
    ok(&c.output().unwrap());
    let all = alerts(&f);
    for name in ["mytool", "notes", "old-b"] {
        let a = alerts_for(&all, &bin.join(name));
        assert_eq!(a.len(), 1, "{name}: {all:#?}");
        assert_eq!(
            (a[0]["kind"].as_str(), a[0]["action"].as_str()),
            (Some("path-changed"), Some("quarantined")),
            "{name}"
        );
        assert!(!bin.join(name).exists(), "{name} is still on PATH");
    }
    assert!(alerts_for(&all, &bin.join("steady")).is_empty(), "{all:#?}");
    assert!(bin.join("steady").exists());
}

#[test]
fn queue_overflow_with_a_plant_in_the_middle() {
    let f = Fixture::sharing_local_bin();
    // Its attributes are not read before the overflow (the delay is stretched): after it, ctime
    // tells that it changed.
    let tool = f.home.join(".local/bin/mytool");
    std::fs::write(&tool, "#!/bin/sh\necho v1\n").unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The launcher (and its watcher thread) is stopped while the jail floods the directory with far
    // more events than fs.inotify.max_queued_events (16384 by default): the queue overflows for sure.
    let script = r"touch ready; while [ ! -e go ]; do sleep 0.02; done
python3 - <<'EOF'
import os, shutil
d = os.path.expanduser('~/.local/bin')
for i in range(12000):
    open(os.path.join(d, f'f{i}'), 'w').close()
    if i == 6000:
        shutil.copy('/bin/true', os.path.join(d, 'git'))
    if i == 7000:
        with open(os.path.join(d, 'mytool'), 'a') as f:
            f.write('echo pwned\\n')
EOF
touch flooded; while [ ! -e done ]; do sleep 0.02; done";
    let mut c = f.cmd(["-v", "run", "--", "bash", "-c", script]);
    c.env("CLAUDE_SANDBOX_RESOLVE_DELAY_MS", "600000");
    c.env(
        "PATH",
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            f.home.join(".local/bin").display()
        ),
    );
    let child = c.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let wait = |name: &str| {
        let t0 = std::time::Instant::now();
        while !f.ws.join(name).exists() {
            assert!(t0.elapsed().as_secs() < 30, "timed out waiting for {name}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    wait("ready");
    signal(child.id(), nix::sys::signal::Signal::SIGSTOP);
    std::fs::write(f.ws.join("go"), "").unwrap();
    wait("flooded");
    signal(child.id(), nix::sys::signal::Signal::SIGCONT);
    let t0 = std::time::Instant::now();
    while f.home.join(".local/bin/git").exists() {
        assert!(
            t0.elapsed().as_secs() < 10,
            "the plant survived an overflow"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::write(f.ws.join("done"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        stderr(&out).contains("inotify queue overflowed"),
        "no overflow happened: {}",
        stderr(&out).lines().last().unwrap_or("")
    );
    let all = alerts(&f);
    assert_eq!(alerts_for(&all, &f.home.join(".local/bin/git")).len(), 1);
    let changed = alerts_for(&all, &tool);
    assert_eq!(changed.len(), 1, "{all:#?}");
    assert_eq!(changed[0]["kind"].as_str(), Some("path-changed"));
    assert!(!tool.exists(), "the changed executable is still on PATH");
}

#[test]
fn a_plant_right_before_exit_is_on_disk_when_run_returns() {
    for mode in MODES {
        let f = Fixture::sharing_local_bin();
        ok(&jail_in(
            &f,
            mode,
            &[],
            "cp /bin/true ~/.local/bin/make; exit 0",
        ));
        // No waiting: the final sweep ran before `run` returned.
        assert!(!f.home.join(".local/bin/make").exists(), "[{mode}]");
        assert_eq!(
            alerts_for(&alerts(&f), &f.home.join(".local/bin/make")).len(),
            1,
            "[{mode}]"
        );
    }
}

#[test]
fn restore_puts_back_bytes_mode_and_mtime() {
    let f = Fixture::sharing_local_bin();
    ok(&jail_in(&f, "inotify", &[], "printf '#!/bin/sh\\necho restored\\n' > stage && chmod 0751 stage && touch -d '2001-02-03 04:05:06 UTC' stage && mv stage ~/.local/bin/git"));
    let all = alerts(&f);
    let a = alerts_for(&all, &f.home.join(".local/bin/git"));
    let qid = a[0]["quarantine_id"].as_str().unwrap().to_string();
    let out = f.cmd(["restore", &qid]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let p = f.home.join(".local/bin/git");
    assert_eq!(
        std::fs::read_to_string(&p).unwrap(),
        "#!/bin/sh\necho restored\n"
    );
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o751);
    assert_eq!(m.mtime(), 981_173_106, "mtime 2001-02-03T04:05:06Z");
    let again = f.cmd(["restore", &qid]).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "a second restore is refused");
}

#[test]
fn concurrent_sessions_make_one_alert_and_one_quarantine() {
    let f = Fixture::sharing_local_bin();
    let long = std::process::Command::new(bin())
        .args([
            "run",
            "--",
            "bash",
            "-c",
            "touch started; while [ ! -e stop ]; do sleep 0.05; done",
        ])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .spawn()
        .unwrap();
    let started = f.ws.join("started");
    let t0 = std::time::Instant::now();
    while !started.exists() {
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    ok(&jail_in(
        &f,
        "inotify",
        &[],
        "cp /bin/true ~/.local/bin/tar; sleep 0.5",
    ));
    std::fs::write(f.ws.join("stop"), "").unwrap();
    let _ = long.wait_with_output();
    let all = alerts(&f);
    assert_eq!(
        alerts_for(&all, &f.home.join(".local/bin/tar")).len(),
        1,
        "{all:#?}"
    );
    let records = std::fs::read_dir(f.rt.join("quarantine"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .count();
    assert_eq!(records, 1);
}

#[test]
fn alerts_exit_status_ack_and_json() {
    let f = Fixture::sharing_local_bin();
    assert_eq!(f.cmd(["alerts"]).output().unwrap().status.code(), Some(0));
    ok(&jail_in(
        &f,
        "inotify",
        &[],
        "cp /bin/true ~/.local/bin/git",
    ));
    let out = f.cmd(["alerts"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("claude-sandbox restore q"),
        "{}",
        stdout(&out)
    );
    assert!(f
        .cmd(["alerts", "ack", "--all"])
        .output()
        .unwrap()
        .status
        .success());
    assert_eq!(f.cmd(["alerts"]).output().unwrap().status.code(), Some(0));
    assert_eq!(alerts(&f).len(), 1, "--all still lists acknowledged alerts");
    assert_eq!(
        f.cmd(["alerts", "ack", "nope"])
            .output()
            .unwrap()
            .status
            .code(),
        Some(2)
    );
    // A corrupt line is reported and skipped, not fatal.
    std::fs::OpenOptions::new()
        .append(true)
        .open(f.rt.join("alerts.jsonl"))
        .unwrap()
        .write_all(b"garbage\n")
        .unwrap();
    let out = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("line 2 is unreadable"),
        "{}",
        stderr(&out)
    );
}

/// The usual devcontainer layout: the runtime directory on tmpfs, the home on another filesystem.
/// The plant cannot be renamed across filesystems, so it is neutralised in place, then restored.
#[test]
fn across_filesystems_a_plant_is_neutralised_in_place() {
    let f = Fixture::sharing_local_bin();
    let rt = tempfile::tempdir_in("/dev/shm").expect("/dev/shm (tmpfs) is needed for this test");
    let rt_dir = rt.path().join("rt");
    let mut c = f.cmd(["run", "--", "bash", "-c", "cp /bin/true ~/.local/bin/git"]);
    c.env(
        "PATH",
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            f.home.join(".local/bin").display()
        ),
    );
    c.env("CLAUDE_SANDBOX_RUNTIME_DIR", &rt_dir);
    ok(&c.output().unwrap());
    let bin = f.home.join(".local/bin");
    assert!(!bin.join("git").exists());
    let hidden: Vec<_> = std::fs::read_dir(&bin)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    let name = hidden[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(name.starts_with(".git.claude-sandbox-q-"), "{name}");
    assert_eq!(
        std::fs::metadata(&hidden[0]).unwrap().mode() & 0o111,
        0,
        "exec bits dropped"
    );
    let out = f
        .cmd(["alerts", "--json"])
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", &rt_dir)
        .output()
        .unwrap();
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all[0]["action"], "neutralised");
    let qid = all[0]["quarantine_id"].as_str().unwrap();
    ok(&f
        .cmd(["restore", qid])
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", &rt_dir)
        .output()
        .unwrap());
    assert_eq!(
        std::fs::read(bin.join("git")).unwrap(),
        std::fs::read("/bin/true").unwrap()
    );
    assert_ne!(
        std::fs::metadata(bin.join("git")).unwrap().mode() & 0o111,
        0
    );
}
