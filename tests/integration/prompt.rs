//! The human's side: the prompt hook in real interactive shells (tmux), the installer end to end, and
//! doctor.

use crate::common::*;
use std::path::Path;

/// An interactive shell with the fixture's environment, no rc files.
fn shell_cmd(f: &Fixture, shell: &str) -> String {
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let args = if shell == "zsh" {
        "zsh -f"
    } else {
        "bash --norc --noprofile"
    };
    format!(
        "cd {} && env -i TERM=xterm {} {args}",
        f.ws.display(),
        env.join(" ")
    )
}

fn plant(f: &Fixture, name: &str) {
    ok(&f.jail(&format!("cp /bin/true ~/.local/bin/{name}")));
}

fn source_line(hook: &Path) -> String {
    format!(
        "__claude_sandbox_bin={}; set -u; . {h}; . {h}",
        bin().display(),
        h = hook.display()
    )
}

#[test]
fn bash_shows_a_new_alert_once_and_keeps_a_string_prompt_command() {
    let f = Fixture::sharing_local_bin();
    let t = Tmux::start(&f.root, &shell_cmd(&f, "bash"));
    t.line(&format!(
        "PROMPT_COMMAND='echo \"other-hook:$?\"'; {}",
        source_line(&hook_path())
    ));
    t.wait_for("other-hook:0", 1);
    plant(&f, "git");
    t.line("false");
    let s = t.wait_for("other-hook:1", 1);
    assert_eq!(s.matches("quarantined ~/.local/bin/git").count(), 1, "{s}");
    assert!(s.contains("claude-sandbox restore q"), "{s}");
    assert!(
        s.contains("wait for your review: `claude-sandbox review`"),
        "{s}"
    );
    t.line("true");
    let s = t.wait_for("other-hook:0", 2);
    assert_eq!(
        s.matches("quarantined ~/.local/bin/git").count(),
        1,
        "shown twice:\n{s}"
    );
    t.line("echo \"PC=$PROMPT_COMMAND\"");
    let s = t.wait_for("PC=", 2);
    assert_eq!(
        s.matches("PC=__claude_sandbox_prompt;echo").count(),
        1,
        "installed twice or not first:\n{s}"
    );
}

#[test]
fn bash_keeps_an_array_prompt_command() {
    let f = Fixture::sharing_local_bin();
    let t = Tmux::start(&f.root, &shell_cmd(&f, "bash"));
    t.line(&format!(
        "PROMPT_COMMAND=('echo \"first:$?\"' 'echo second'); {}",
        source_line(&hook_path())
    ));
    t.wait_for("second", 1);
    plant(&f, "ls");
    t.line("(exit 3)");
    let s = t.wait_for("first:3", 1);
    t.wait_for("second", 2);
    assert!(
        s.contains("quarantined ~/.local/bin/ls")
            || t.wait_for("quarantined ~/.local/bin/ls", 1).contains("ls")
    );
    t.line("declare -p PROMPT_COMMAND");
    let s = t.wait_for("declare -a PROMPT_COMMAND", 1);
    assert!(
        s.contains("[2]=\"__claude_sandbox_prompt\""),
        "appended as the last element:\n{s}"
    );
}

#[test]
fn zsh_shows_a_new_alert_once_through_precmd_functions() {
    let f = Fixture::sharing_local_bin();
    if !std::process::Command::new("zsh")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        panic!("zsh is required for this test: apt-get install zsh");
    }
    let t = Tmux::start(&f.root, &shell_cmd(&f, "zsh"));
    t.line(&format!(
        "other() {{ echo \"other-hook:$?\" }}; precmd_functions=(other); {}",
        source_line(&hook_path())
    ));
    t.wait_for("other-hook:0", 1);
    plant(&f, "sed");
    t.line("false");
    t.wait_for("other-hook:1", 1);
    t.line("true");
    let s = t.wait_for("other-hook:0", 2);
    assert_eq!(s.matches("quarantined ~/.local/bin/sed").count(), 1, "{s}");
    t.line("echo \"PF=${precmd_functions[*]}\"");
    let s = t.wait_for("PF=", 2);
    assert!(s.contains("PF=other __claude_sandbox_prompt"), "{s}");
}

#[test]
fn nothing_happens_inside_the_jail_or_in_non_interactive_shells() {
    let f = Fixture::sharing_local_bin();
    plant(&f, "git");
    let hook = hook_path().display().to_string();
    // Non-interactive: the hook is not installed.
    let out = std::process::Command::new("bash")
        .args([
            "--norc",
            "-c",
            &format!(". {hook}; declare -F __claude_sandbox_prompt || echo NOHOOK"),
        ])
        .envs(f.env())
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "NOHOOK");
    // Inside the jail, even an interactive shell installs nothing and prints nothing.
    let script = format!(
        "bash --norc -i -c '. {hook}; declare -F __claude_sandbox_prompt || echo NOHOOK' 2>&1"
    );
    let out = ok(&f.jail(&script));
    assert!(out.contains("NOHOOK"), "{out}");
    assert!(!out.contains("claude-sandbox:"), "{out}");
}

#[test]
fn installer_end_to_end() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::sharing_local_bin();
    let (usr, etc) = (f.root.join("usr"), f.root.join("etc"));
    let fake = f.root.join("real/fakeagent");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"fake-agent $*\"\ncp /bin/true ~/.local/bin/git\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let installer = src_dir().join("installer/install.sh");
    let install = |extra: &[&str]| {
        let out = std::process::Command::new("bash")
            .arg(&installer)
            .args([
                "--prefix",
                usr.to_str().unwrap(),
                "--sysconfdir",
                etc.to_str().unwrap(),
                "--no-packages",
            ])
            .args(["--binary", bin().to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    };
    install(&["--wrap", &format!("fakeagent={}", fake.display())]);
    install(&["--wrap", &format!("fakeagent={}", fake.display())]); // idempotent
    let rc = std::fs::read_to_string(etc.join("bash.bashrc")).unwrap();
    assert_eq!(rc.matches(">>> claude-sandbox prompt hook >>>").count(), 1);
    // The wrapper runs the real agent in the jail.
    let out = ok(&std::process::Command::new(usr.join("bin/claude-sandbox"))
        .arg("--version")
        .output()
        .unwrap());
    assert!(out.starts_with("claude-sandbox "), "{out}");
    let mut c = std::process::Command::new(usr.join("bin/fakeagent"));
    c.arg("--hello")
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", f.home.join(".local/bin").display()),
        );
    let out = ok(&c.output().unwrap());
    assert_eq!(out.trim(), "fake-agent --hello");
    assert!(
        !f.home.join(".local/bin/git").exists(),
        "the wrapped agent's plant was quarantined"
    );
    // A shell that sourced the installed bashrc shows the alert at its prompt.
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let t = Tmux::start(
        &f.root,
        &format!(
            "env -i TERM=xterm {} bash --rcfile {} -i",
            env.join(" "),
            etc.join("bash.bashrc").display()
        ),
    );
    t.line("echo ready");
    let s = t.wait_for("quarantined ~/.local/bin/git", 1);
    assert!(s.contains("shadows"), "{s}");
    drop(t);
    // Uninstall: nothing is left.
    install(&["--uninstall"]);
    assert!(
        !usr.exists(),
        "{:?}",
        walkdir::WalkDir::new(&usr)
            .into_iter()
            .flatten()
            .map(|e| e.path().to_path_buf())
            .collect::<Vec<_>>()
    );
    assert!(
        !etc.exists(),
        "{:?}",
        walkdir::WalkDir::new(&etc)
            .into_iter()
            .flatten()
            .map(|e| e.path().to_path_buf())
            .collect::<Vec<_>>()
    );
}

#[test]
fn doctor_passes_here_and_fails_clearly() {
    let f = Fixture::new();
    // The installed prompt hook is looked for in the fixture (`Fixture::env`), not in this
    // machine's /etc.
    let doctor = |args: &[&str]| f.cmd(args);
    let out = doctor(&["doctor", "--json"]).output().unwrap();
    let checks: Vec<serde_json::Value> =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
    let failed: Vec<_> = checks.iter().filter(|c| c["mark"] == "fail").collect();
    // This machine runs jails; the prompt hook is not installed in the fixture, and doctor runs
    // without a terminal here: not applicable, not a failure.
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(out.status.code(), Some(0));
    for name in [
        "bwrap",
        "user namespaces",
        "jail",
        "sealing",
        "inotify",
        "TIOCSTI",
        "prompt hook",
        "alerts",
    ] {
        assert!(
            checks.iter().any(|c| c["name"] == name),
            "missing check {name}"
        );
    }
    let out = doctor(&["doctor"])
        .env("CLAUDE_SANDBOX_BWRAP", "/nonexistent/bwrap")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("[✗] bwrap") && text.contains("fix: apt-get install bubblewrap"),
        "{text}"
    );
    // Sealing from outside works here; when it cannot, doctor says so (a warning: the jail is the
    // same, only slower) with the reason.
    let sealing = checks.iter().find(|c| c["name"] == "sealing").unwrap();
    assert_eq!(sealing["mark"], "pass", "{sealing:#?}");
    let out = doctor(&["doctor"])
        .env("CLAUDE_SANDBOX_SEAL", "fail-halfway")
        .output()
        .unwrap();
    assert!(
        stdout(&out)
            .contains("[!] sealing: $HOME, the workspace and the seals are mounted by bwrap")
            && stdout(&out).contains("CLAUDE_SANDBOX_SEAL=fail-halfway"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn doctor_in_a_post_start_command_and_in_a_terminal() {
    let f = Fixture::new();
    // Installed in the fixture's /etc (`Fixture::env` points doctor there).
    let hook = f.etc().join("profile.d/claude-sandbox.sh");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "# installed\n").unwrap();
    // A devcontainer's postStartCommand: no terminal, no $SHELL, the hook variable exported empty
    // by the CLI's login-shell probe. Not applicable, and the login shell comes from passwd.
    let out = f
        .cmd(["doctor"])
        .env("CLAUDE_SANDBOX_PROMPT_HOOK", "")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("[-] prompt hook: installed; not an interactive shell"),
        "{text}"
    );
    assert!(!text.contains("your login shell is \"\""), "{text}");
    // In a terminal, a hook that is installed but never ran is a failure.
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let t = Tmux::start(
        &f.root,
        &format!(
            "cd {} && env -i TERM=xterm {} CLAUDE_SANDBOX_PROMPT_HOOK= {} doctor; sleep 60",
            f.ws.display(),
            env.join(" "),
            bin().display()
        ),
    );
    let s = t.wait_for(" not applicable", 1);
    assert!(
        s.contains("[✗] prompt hook: not active in this shell: loaded but it never ran"),
        "{s}"
    );
    // A broken workspace configuration is named with file and line, as `run` names it.
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "hidden = [\"a\"]\nbogus = [\n",
    )
    .unwrap();
    let out = f.cmd(["doctor"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let want = format!(
        "[✗] configuration: {}:2: ",
        f.ws.join(".claude-sandbox.toml").display()
    );
    assert!(stdout(&out).contains(&want), "{}", stdout(&out));
}
