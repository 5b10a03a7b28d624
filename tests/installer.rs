//! The installer against a fake root (`--prefix`, `--sysconfdir`): uninstall leaves the tree exactly
//! as it was, pre-existing empty directories included; `--wrap` later needs no cargo; wrappers find
//! the agent when they run; and a wrapped agent (or a nested `run`) inside the jail runs directly.
//! .ci/run does the same round trip against the real /etc and /usr/local as root.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Every path under `root`: its kind, mode and (for files and links) content.
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .map(|e| {
            let m = e.path().symlink_metadata().unwrap();
            let what = if m.file_type().is_symlink() {
                format!("link {:?}", std::fs::read_link(e.path()).unwrap())
            } else if m.is_dir() {
                "dir".to_string()
            } else {
                format!(
                    "file {:?}",
                    String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
                )
            };
            (e.path().to_path_buf(), format!("{:o} {what}", m.mode()))
        })
        .collect()
}

struct Root {
    usr: PathBuf,
    etc: PathBuf,
}

impl Root {
    fn new(f: &Fixture) -> Root {
        Root {
            usr: f.root.join("sys/usr/local"),
            etc: f.root.join("sys/etc"),
        }
    }

    /// install.sh with this root; `path` is the PATH it sees (no cargo on it).
    fn install(&self, args: &[&str], path: &str) -> Output {
        Command::new("bash")
            .arg(src_dir().join("installer/install.sh"))
            .args(["--prefix", self.usr.to_str().unwrap()])
            .args(["--sysconfdir", self.etc.to_str().unwrap(), "--no-packages"])
            .args(args)
            .env_clear()
            .env("PATH", path)
            .output()
            .unwrap()
    }
}

const SYS_PATH: &str = "/usr/bin:/bin";

fn write_exe(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn uninstall_leaves_the_tree_as_it_was_with_pre_existing_empty_directories() {
    let f = Fixture::new();
    let r = Root::new(&f);
    // What a fresh image has: empty /usr/local/bin, /usr/local/share and /etc/profile.d, a
    // bash.bashrc of its own, no zsh.
    for d in [
        r.usr.join("bin"),
        r.usr.join("share"),
        r.etc.join("profile.d"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        r.etc.join("bash.bashrc"),
        "# the image's own\nalias ll='ls -l'\n",
    )
    .unwrap();
    let sys = f.root.join("sys");
    let before = tree(&sys);
    let binary = bin().display().to_string();
    ok(&r.install(&["--binary", &binary, "--wrap", "fakeagent"], SYS_PATH));
    ok(&r.install(&["--binary", &binary, "--wrap", "fakeagent"], SYS_PATH)); // idempotent
                                                                             // A later --wrap without --binary and without cargo reuses the installed binary.
    let out = ok(&r.install(&["--wrap", "otheragent"], SYS_PATH));
    assert!(out.contains("keeping the installed"), "{out}");
    assert!(r.usr.join("bin/otheragent").is_file());
    let rc = std::fs::read_to_string(r.etc.join("bash.bashrc")).unwrap();
    assert_eq!(
        rc.matches(">>> claude-sandbox prompt hook >>>").count(),
        1,
        "{rc}"
    );
    let manifest = std::fs::read_to_string(r.usr.join("share/claude-sandbox/manifest")).unwrap();
    for pre in ["bin", "share"] {
        let line = format!("dir:{}", r.usr.join(pre).display());
        assert!(
            !manifest.lines().any(|l| l == line),
            "{line} recorded:\n{manifest}"
        );
    }
    assert!(!manifest.contains(&format!("dir:{}", r.etc.join("profile.d").display())));
    let out = ok(&r.install(&["--uninstall"], SYS_PATH));
    assert!(!out.contains("left "), "{out}");
    let after = tree(&sys);
    assert_eq!(before, after, "the tree changed across install + uninstall");
    // A second uninstall finds nothing to do.
    assert!(ok(&r.install(&["--uninstall"], SYS_PATH)).contains("no manifest"));
}

#[test]
fn uninstall_into_an_empty_root_removes_everything_it_made_and_keeps_foreign_files() {
    let f = Fixture::new();
    let r = Root::new(&f);
    let binary = bin().display().to_string();
    ok(&r.install(&["--binary", &binary], SYS_PATH));
    // Something of the human's inside a directory the installer made stays, with its directory.
    let mine = r.usr.join("bin/mine");
    std::fs::write(&mine, "mine\n").unwrap();
    let out = ok(&r.install(&["--uninstall"], SYS_PATH));
    assert!(
        out.contains(&format!("left {}", r.usr.join("bin").display())),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "mine\n");
    let left: Vec<_> = tree(&f.root.join("sys")).into_keys().collect();
    assert_eq!(
        left,
        vec![
            f.root.join("sys"),
            r.usr.parent().unwrap().to_path_buf(),
            r.usr.clone(),
            r.usr.join("bin"),
            mine,
        ],
        "only the human's file and its directories remain"
    );
}

#[test]
fn a_wrapper_refuses_to_replace_a_real_agent() {
    let f = Fixture::new();
    let r = Root::new(&f);
    // npm's global bin is often PREFIX/bin: a real `claude` there must not be overwritten.
    write_exe(&r.usr.join("bin/claude"), "#!/bin/sh\necho real\n");
    let out = r.install(
        &["--binary", bin().to_str().unwrap(), "--wrap", "claude"],
        SYS_PATH,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("is not a claude-sandbox wrapper"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(r.usr.join("bin/claude")).unwrap(),
        "#!/bin/sh\necho real\n"
    );
}

/// A fake agent that reports whether it runs in the jail: bwrap's user namespace maps one uid.
const AGENT: &str = "#!/bin/sh\necho \"fake-agent $* sandbox=${CLAUDE_SANDBOX-} map=$(awk '{print $3}' /proc/self/uid_map)\"\n";

#[test]
fn a_wrapper_finds_its_agent_when_it_runs_and_runs_it_in_the_jail() {
    let f = Fixture::new();
    let r = Root::new(&f);
    // Installed before the agent exists (Features install in an order the user does not choose).
    ok(&r.install(
        &["--binary", bin().to_str().unwrap(), "--wrap", "fakeagent"],
        SYS_PATH,
    ));
    let agent_dir = f.root.join("agent-bin");
    let path = format!(
        "{}:{}:{SYS_PATH}",
        r.usr.join("bin").display(),
        agent_dir.display()
    );
    let wrapper = r.usr.join("bin/fakeagent");
    let run = |env: &[(&str, &str)]| {
        Command::new(&wrapper)
            .arg("--hello")
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .env("PATH", &path)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no fakeagent found on PATH outside"),
        "{}",
        stderr(&out)
    );
    write_exe(&agent_dir.join("fakeagent"), AGENT);
    let out = ok(&run(&[]));
    assert_eq!(out.trim(), "fake-agent --hello sandbox=1 map=1", "{out}");
    // Claiming to be inside the jail from outside changes nothing: the agent is still jailed.
    let out = run(&[("CLAUDE_SANDBOX", "1")]);
    assert_eq!(ok(&out).trim(), "fake-agent --hello sandbox=1 map=1");
    assert!(!stderr(&out).contains("already inside"), "{}", stderr(&out));
    // Inside the jail (started through the installed binary, which the jail masks), the wrapper
    // says so and runs the agent directly, instead of failing on the masked binary.
    let inner = Command::new(r.usr.join("bin/claude-sandbox"))
        .args(["run", "--", "sh", "-c", "fakeagent --inner"])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env("PATH", &path)
        .output()
        .unwrap();
    assert_eq!(ok(&inner).trim(), "fake-agent --inner sandbox=1 map=1");
    assert!(
        stderr(&inner).contains("claude-sandbox: already inside the jail; running"),
        "{}",
        stderr(&inner)
    );
    ok(&r.install(&["--uninstall"], SYS_PATH));
}

#[test]
fn a_nested_run_inside_the_jail_runs_the_command_directly() {
    let f = Fixture::new();
    // The outer launcher is a copy (the jail masks the binary that launched it); the inner `run` is
    // the binary under test, reachable in the jail.
    let outer = f.root.join("outer-claude-sandbox");
    std::fs::copy(bin(), &outer).unwrap();
    let script = format!(
        "{} run -- sh -c 'echo nested sandbox=$CLAUDE_SANDBOX'; echo status=$?",
        bin().display()
    );
    let out = Command::new(&outer)
        .args(["run", "--", "sh", "-c", &script])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(ok(&out), "nested sandbox=1\nstatus=0\n");
    assert!(
        stderr(&out).contains("already inside the jail; running sh directly"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("bwrap not found"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_shell_in_the_jail_says_it_is_inside() {
    let f = Fixture::new();
    require_tmux();
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let t = Tmux::start(
        &f.root,
        &format!(
            "cd {} && env -i TERM=xterm {} {} run -- bash --norc --noprofile",
            f.ws.display(),
            env.join(" "),
            bin().display()
        ),
    );
    t.wait_for("you are inside the jail (CLAUDE_SANDBOX=1)", 1);
    t.line("echo \"in=$CLAUDE_SANDBOX\"");
    t.wait_for("in=1", 1);
}
