//! The watcher judges by what the human's next `git` and next shell will do (issue 16): configs git
//! reads that a naive reader would not, with a real jail, real inotify and real git.

use crate::common::*;

fn alerts(f: &Fixture) -> Vec<serde_json::Value> {
    let out = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        stderr(&out)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
}

/// The `core.fsmonitor` line of a config, as text.
fn gitconfig_fsmonitor(bytes: &[u8]) -> Option<String> {
    String::from_utf8_lossy(bytes)
        .lines()
        .find_map(|l| l.trim().strip_prefix("fsmonitor = ").map(String::from))
}

/// A new repository whose config starts with a byte-order mark, another whose config has a
/// non-UTF-8 byte before the key, and a third git itself refuses: git runs the first two's
/// `core.fsmonitor` (checked unguarded first), so the watcher must see them; the third is an alert.
#[test]
fn bom_and_non_utf8_configs_in_a_new_repository_are_seen() {
    for mode in ["inotify", "poll"] {
        let f = Fixture::sharing_local_bin();
        let marker = f.root.join("pwned");
        let script = format!(
            "set -e\n\
             git init -q bom && printf '\\357\\273\\277[core]\\n\\tfsmonitor = touch {m}\\n' > bom/.git/config\n\
             git init -q latin && printf '[core]\\n\\tx = \\377\\n\\tfsmonitor = touch {m}\\n' >> latin/.git/config\n\
             git init -q broken && printf '[core\\n' >> broken/.git/config\n",
            m = marker.display()
        );
        let mut c = f.cmd(["run", "--", "bash", "-c", &script]);
        if mode == "poll" {
            c.env("CLAUDE_SANDBOX_WATCH", "poll");
        }
        ok(&c.output().unwrap());
        let all = alerts(&f);
        // What the human's prompt shows.
        let prompt = ok(&f.cmd(["alerts", "--prompt"]).output().unwrap());
        for repo in ["bom", "latin"] {
            let cfg = f.ws.join(repo).join(".git/config");
            let found: Vec<_> = all
                .iter()
                .filter(|a| a["path"].as_str() == cfg.to_str())
                .filter(|a| {
                    a["detail"]
                        .as_str()
                        .unwrap()
                        .contains("core.fsmonitor = touch")
                })
                .collect();
            assert_eq!(found.len(), 1, "[{mode}] {repo}: {all:#?}");
            // Taken out of the config: the human's `git status` runs nothing.
            assert_eq!(found[0]["action"], "neutralised", "[{mode}] {repo}");
            let _ = std::process::Command::new("git")
                .args(["status"])
                .current_dir(f.ws.join(repo))
                .envs(f.env())
                .output()
                .unwrap();
            assert!(
                !marker.exists(),
                "[{mode}] {repo}: git status ran core.fsmonitor"
            );
            // And put back byte for byte by the command the prompt shows.
            let before = std::fs::read(&cfg).unwrap();
            let id = found[0]["quarantine_id"].as_str().unwrap();
            assert!(
                prompt
                    .lines()
                    .any(|l| l.contains(&format!("{repo}/.git/config"))
                        && l.contains("neutralised")
                        && l.ends_with(&format!("(undo: claude-sandbox restore {id})"))),
                "[{mode}] {repo}: the prompt does not show how to undo it:\n{prompt}"
            );
            ok(&f.cmd(["restore", id]).output().unwrap());
            let restored = std::fs::read(&cfg).unwrap();
            assert!(restored.len() > before.len(), "[{mode}] {repo}");
            assert_eq!(
                gitconfig_fsmonitor(&restored),
                Some(format!("touch {}", marker.display())),
                "[{mode}] {repo}"
            );
        }
        let broken = f.ws.join("broken/.git/config");
        assert!(
            all.iter().any(|a| a["path"].as_str() == broken.to_str()
                && a["detail"]
                    .as_str()
                    .unwrap()
                    .contains("git refuses to read")),
            "[{mode}] a config git refuses passed silently: {all:#?}"
        );
    }
}

/// Debian's `~/.profile` snippet: the two directories first in every later login shell, once they
/// exist.
const DEBIAN_PROFILE: &str = "if [ -d \"$HOME/bin\" ] ; then\n    PATH=\"$HOME/bin:$PATH\"\nfi\n\
if [ -d \"$HOME/.local/bin\" ] ; then\n    PATH=\"$HOME/.local/bin:$PATH\"\nfi\n";

fn jail_with_path(f: &Fixture, mode: &str, path: &str, script: &str) -> std::process::Output {
    let mut c = f.cmd(["run", "--", "bash", "-c", script]);
    c.env("PATH", path);
    if mode == "poll" {
        c.env("CLAUDE_SANDBOX_WATCH", "poll");
    }
    c.output().unwrap()
}

/// `git` as the human's next login shell finds it.
fn login_git(f: &Fixture) {
    let _ = std::process::Command::new("bash")
        .args(["-lc", "git --version"])
        .current_dir(&f.ws)
        .env_clear()
        .env("HOME", &f.home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
}

/// A directory only a login shell puts on PATH, writable by configuration and not on the launcher's
/// PATH: `~/bin` (a conventional one, watched from the start) and `~/tools/bin` (known only from the
/// login shell, which the watcher runs after the gate). A `git` planted there shadows the real one in
/// the human's next terminal.
#[test]
fn a_login_shell_only_directory_is_watched() {
    for (mode, dir) in [
        ("inotify", "bin"),
        ("poll", "bin"),
        ("inotify", "tools/bin"),
        ("poll", "tools/bin"),
    ] {
        let f = Fixture::sharing_local_bin();
        std::fs::write(
            f.home.join(".profile"),
            format!("{DEBIAN_PROFILE}PATH=\"$HOME/tools/bin:$PATH\"\n"),
        )
        .unwrap();
        std::fs::create_dir_all(f.home.join(dir)).unwrap();
        std::fs::create_dir_all(f.home.join(".config/claude-sandbox")).unwrap();
        std::fs::write(
            f.home.join(".config/claude-sandbox/config.toml"),
            format!("writable = [\"~/{dir}\"]\n"),
        )
        .unwrap();
        let marker = f.root.join("pwned");
        let script = format!(
            "sleep 0.3; printf '#!/bin/sh\\ntouch {}\\n' > ~/{dir}/git && chmod +x ~/{dir}/git",
            marker.display()
        );
        ok(&jail_with_path(
            &f,
            mode,
            &format!("{}:/usr/bin:/bin", f.home.join(".local/bin").display()),
            &script,
        ));
        login_git(&f);
        assert!(
            !marker.exists(),
            "[{mode} {dir}] the human's login shell ran the plant"
        );
        let plant = f.home.join(dir).join("git");
        assert!(!plant.exists(), "[{mode} {dir}] the plant is still there");
        let all = alerts(&f);
        let a: Vec<_> = all
            .iter()
            .filter(|a| a["path"].as_str() == plant.to_str())
            .collect();
        assert_eq!(a.len(), 1, "[{mode} {dir}] {all:#?}");
        assert!(
            matches!(a[0]["kind"].as_str(), Some("path-shadow" | "path-changed")),
            "[{mode} {dir}] {all:#?}"
        );
    }
}

/// A directory last on the launcher's PATH (so a `git` there shadows nothing for the launcher) but
/// first in a login shell: judged in the login shell's order.
#[test]
fn a_launcher_last_login_first_directory_is_judged_in_login_order() {
    for mode in ["inotify", "poll"] {
        let f = Fixture::sharing_local_bin();
        std::fs::write(f.home.join(".profile"), DEBIAN_PROFILE).unwrap();
        let marker = f.root.join("pwned");
        let script = format!(
            "printf '#!/bin/sh\\ntouch {}\\n' > ~/.local/bin/git && chmod +x ~/.local/bin/git",
            marker.display()
        );
        ok(&jail_with_path(
            &f,
            mode,
            &format!("/usr/bin:/bin:{}", f.home.join(".local/bin").display()),
            &script,
        ));
        login_git(&f);
        assert!(
            !marker.exists(),
            "[{mode}] the human's login shell ran the plant"
        );
        let plant = f.home.join(".local/bin/git");
        let all = alerts(&f);
        let a: Vec<_> = all
            .iter()
            .filter(|a| a["path"].as_str() == plant.to_str())
            .collect();
        assert_eq!(a.len(), 1, "[{mode}] {all:#?}");
        assert_eq!(a[0]["kind"], "path-shadow", "[{mode}] {all:#?}");
    }
}
