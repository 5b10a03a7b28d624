//! Everyday installs succeed in the jail (`~/.local`, `~/.cargo`, `~/go` and `~/bin` are its own
//! layers, PATH directories included: docs/layers.md) while nothing the agent installs there is
//! seen by your tools outside; `claude-sandbox adopt` brings one program over on purpose.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

fn layers(f: &Fixture) -> PathBuf {
    f.root.join("layers")
}

fn jail_with(f: &Fixture, env: &[(&str, String)], script: &str) -> Output {
    let mut c = f.cmd(["run", "--", "bash", "-c", script]);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("spawn claude-sandbox")
}

/// Everything under `dir`, relative, sorted (to compare your home before and after).
fn tree(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = walk(dir)
        .into_iter()
        .map(|p| p.strip_prefix(dir).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            out.push(e.path());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(walk(&e.path()));
            }
        }
    }
    out
}

#[test]
fn installs_and_path_dirs_are_the_jails_own_and_persist() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".local/share/app")).unwrap();
    std::fs::write(f.home.join(".local/share/app/yours"), "yours\n").unwrap();
    std::fs::create_dir_all(f.home.join(".local/bin")).unwrap();
    std::fs::create_dir_all(f.home.join(".cargo/bin")).unwrap();
    std::fs::write(f.home.join(".cargo/.crates.toml"), "[v1]\n").unwrap();
    let before = tree(&f.home);
    let site = ".local/lib/python3.11/site-packages";
    let run = f.jail(&format!(
        "set -e; mkdir ~/.local/share/x && echo x > ~/.local/share/x/f; \
         cat ~/.local/share/app/yours; echo agent >> ~/.local/share/app/yours; \
         mkdir -p ~/{site} && echo 'import os' > ~/{site}/evil.pth; \
         mkdir -p ~/.local/state/tool && echo s > ~/.local/state/tool/s; \
         echo '[v1]' > ~/.local/.crates.toml; echo '[v1]' >> ~/.cargo/.crates.toml; \
         echo c > ~/.cargo/config.toml; \
         printf '#!/bin/sh\\necho t\\n' > ~/.local/bin/agent-tool; \
         printf '#!/bin/sh\\necho t\\n' > ~/.cargo/bin/agent-tool2; \
         mkdir -p ~/go/bin; echo g > ~/go/bin/gotool; echo b > ~/bin/mine; echo done"
    ));
    assert_eq!(ok(&run), "yours\ndone\n");
    // Your files are unchanged, nothing new appeared in your home: not even in the PATH
    // directories, and `~/go`, `~/bin` that you do not have were the jail's own.
    assert_eq!(read(&f.home.join(".local/share/app/yours")), "yours\n");
    assert_eq!(read(&f.home.join(".cargo/.crates.toml")), "[v1]\n");
    assert_eq!(tree(&f.home), before, "the jail changed your home");
    // The summary names what was installed on the jail's PATH, and how to bring it over.
    let err = stderr(&run);
    assert!(
        err.contains("installed in the jail's ~/.local/bin this session: agent-tool ("),
        "{err}"
    );
    for (dir, name) in [
        (".cargo/bin", "agent-tool2"),
        ("go/bin", "gotool"),
        ("bin", "mine"),
    ] {
        assert!(
            err.contains(&format!("~/{dir} this session: {name} (")),
            "{err}"
        );
    }
    assert!(err.contains("claude-sandbox adopt NAME"), "{err}");
    // What the agent wrote is in the jail's layers, and its next session finds it.
    assert_eq!(read(&layers(&f).join("local/upper/share/x/f")), "x\n");
    let again = f.jail(&format!(
        "cat ~/.local/share/x/f ~/.local/share/app/yours ~/{site}/evil.pth \
         ~/.local/state/tool/s ~/.local/.crates.toml ~/.cargo/.crates.toml ~/.cargo/config.toml \
         ~/.local/bin/agent-tool ~/.cargo/bin/agent-tool2 ~/go/bin/gotool ~/bin/mine"
    ));
    assert_eq!(
        ok(&again),
        "x\nyours\nagent\nimport os\ns\n[v1]\n[v1]\n[v1]\nc\n#!/bin/sh\necho t\n#!/bin/sh\necho t\ng\nb\n"
    );
    // Nothing new this time: the summary is quiet.
    assert!(
        !stderr(&again).contains("this session:"),
        "{}",
        stderr(&again)
    );
}

/// Where no overlay can be made (here: bwrap making every mount), your `~/.local` is what the jail
/// sees, read-only, as before: never writable through, the PATH directory in it neither (an
/// install there fails: read-only file system).
#[test]
fn without_an_overlay_your_local_is_read_only_never_writable_through() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".local/share/app")).unwrap();
    std::fs::create_dir_all(f.home.join(".local/bin")).unwrap();
    std::fs::write(f.home.join(".local/share/app/yours"), "yours\n").unwrap();
    let before = tree(&f.home);
    let out = ok(&jail_with(
        &f,
        &[("CLAUDE_SANDBOX_SEAL", "bwrap".into())],
        "cat ~/.local/share/app/yours; mkdir ~/.local/share/x 2>/dev/null && echo WROTE; \
         echo agent >> ~/.local/share/app/yours 2>/dev/null && echo WROTE; \
         echo t 2>/dev/null > ~/.local/bin/t && echo WROTE; echo b > ~/bin/b && cat ~/bin/b",
    ));
    assert_eq!(out, "yours\nb\n");
    assert_eq!(tree(&f.home), before);
}

/// The install issue 33 met: a console script that shadows a system command (`pip install --user
/// pytest` brings `pygmentize`; here `tac`, which coreutils always has). It installs whole, runs
/// inside and in the next session, never reaches your `~/.local/bin`, and raises no alert; `adopt`
/// refuses it for the shadow until `--force`, then brings the script with its package.
#[test]
fn pip_install_user_of_a_shadowing_script_works_inside_and_adopt_brings_it_whole() {
    if !pip_or_say("pip_install_user") {
        return;
    }
    let f = Fixture::new();
    let whl = wheel_script(&f.root, "hello_cs", "hello from pip", Some("tac"));
    let run = f.jail(&format!(
        "PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install -q --user --no-index {} \
         2>&1 | grep -v WARNING; ~/.local/bin/tac; /usr/bin/python3 -c 'import hello_cs; hello_cs.main()'",
        whl.display()
    ));
    assert_eq!(ok(&run), "hello from pip\nhello from pip\n");
    assert!(
        stderr(&run).contains("~/.local/bin this session: tac ("),
        "{}",
        stderr(&run)
    );
    // Outside, your Python does not import it and your PATH has no `tac` of the jail's.
    let outside = Command::new("/usr/bin/python3")
        .args(["-c", "import hello_cs"])
        .envs(f.env())
        .output()
        .unwrap();
    assert!(
        !outside.status.success(),
        "your Python imports the agent's package"
    );
    assert!(!f.home.join(".local/lib").exists());
    assert!(!f.home.join(".local/bin/tac").exists());
    let alerts = stdout(&f.cmd(["alerts"]).output().unwrap());
    assert!(!alerts.contains("tac"), "{alerts}");
    // The next session still has it.
    assert_eq!(ok(&f.jail("~/.local/bin/tac")), "hello from pip\n");
    // Adopting it: refused for the shadow, then brought over with its package.
    let refused = f.cmd(["adopt", "tac"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("would shadow /usr/bin/tac"),
        "{}",
        stderr(&refused)
    );
    assert!(!f.home.join(".local/bin/tac").exists());
    let adopted = ok(&f.cmd(["adopt", "--force", "tac"]).output().unwrap());
    assert!(
        adopted.contains("adopted tac (pip console script): ~/.local/bin/tac"),
        "{adopted}"
    );
    let script = f.home.join(".local/bin/tac");
    assert_eq!(
        std::fs::read(&script).unwrap(),
        std::fs::read(layers(&f).join("local/upper/bin/tac")).unwrap()
    );
    let ran = Command::new(&script).envs(f.env()).output().unwrap();
    assert_eq!(stdout(&ran), "hello from pip\n", "{}", stderr(&ran));
}

#[test]
fn npm_install_global_prefix_local_works_inside_and_adopt_brings_the_package() {
    let t = "npm_install_global_prefix_local_works_inside";
    if !(tool_or_say(t, "npm", false) && tool_or_say(t, "node", false)) {
        return;
    }
    let f = Fixture::new();
    let tgz = npm_tarball(&f.root, "hello from npm");
    let out = ok(&f.jail(&format!(
        "npm i -g --offline --no-audit --no-fund --prefix ~/.local {} >/dev/null && hello-cs",
        tgz.display()
    )));
    assert_eq!(out, "hello from npm\n");
    // The package and its link are the jail's: no dangling link outside.
    assert!(!f.home.join(".local/lib").exists());
    assert!(std::fs::symlink_metadata(f.home.join(".local/bin/hello-cs")).is_err());
    assert_eq!(ok(&f.jail("hello-cs")), "hello from npm\n");
    let adopted = ok(&f.cmd(["adopt", "--json", "hello-cs"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&adopted).unwrap();
    assert_eq!(v["kind"], "npm package", "{v}");
    let ran = Command::new(f.home.join(".local/bin/hello-cs"))
        .envs(f.env())
        .output()
        .unwrap();
    assert_eq!(stdout(&ran), "hello from npm\n", "{}", stderr(&ran));
}

/// Run under `cargo test` (which names cargo in `$CARGO`); as CI's ordinary user, who has no Rust
/// toolchain, it says so and the root run covers it.
#[test]
fn cargo_install_root_local_works_inside() {
    let cargo = std::env::var("CARGO")
        .ok()
        .filter(|c| Path::new(c).is_file());
    let Some(cargo) = cargo else {
        eprintln!(
            "\n*** cargo_install_root_local_works_inside: NOT RUN — cargo is not available to this \
             user (run it under `cargo test`; CI's root run does) ***\n"
        );
        return;
    };
    let f = Fixture::new();
    let krate = f.ws.join("tiny");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny-cs\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        krate.join("src/main.rs"),
        "fn main() { println!(\"hello from cargo\"); }\n",
    )
    .unwrap();
    let bin_dir = Path::new(&cargo).parent().unwrap().display().to_string();
    let mut env = vec![(
        "PATH",
        format!("{}/.local/bin:{bin_dir}:/usr/bin:/bin", f.home.display()),
    )];
    for k in ["RUSTUP_HOME", "RUSTUP_TOOLCHAIN"] {
        if let Ok(v) = std::env::var(k) {
            env.push((k, v));
        }
    }
    let out = ok(&jail_with(
        &f,
        &env,
        "cargo install -q --offline --root ~/.local --path tiny 2>&1 | grep -v warning; tiny-cs; \
         cat ~/.local/.crates.toml | grep -c tiny-cs",
    ));
    assert_eq!(out, "hello from cargo\n1\n");
    // The binary and cargo's record of it are the jail's.
    assert!(!f.home.join(".local/bin/tiny-cs").exists());
    assert!(!f.home.join(".local/.crates.toml").exists());
    assert!(!f.home.join(".local/.crates2.json").exists());
    assert_eq!(ok(&jail_with(&f, &env, "tiny-cs")), "hello from cargo\n");
}

/// A plant in `~/.cargo/bin` that shadows `ls` for your next shell (rustup's `~/.cargo/env` puts it
/// first) is the jail's: your directory never has it, so nothing is quarantined or alerted and the
/// jail still sees what it wrote.
#[test]
fn a_plant_in_cargo_bin_stays_in_the_jails_layer() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".cargo/bin")).unwrap();
    std::fs::write(
        f.home.join(".profile"),
        "export PATH=\"$HOME/.cargo/bin:$PATH\"\n",
    )
    .unwrap();
    ok(&f.jail(
        "printf '#!/bin/sh\\necho evil\\n' > ~/.cargo/bin/ls && chmod +x ~/.cargo/bin/ls && sleep 0.3",
    ));
    assert!(
        !f.home.join(".cargo/bin/ls").exists(),
        "the plant reached your ~/.cargo/bin"
    );
    assert_eq!(ok(&f.jail("~/.cargo/bin/ls")), "evil\n");
    let alerts = stdout(&f.cmd(["alerts"]).output().unwrap());
    assert!(!alerts.contains(".cargo/bin/ls"), "{alerts}");
}

/// `pipx install` and `uv tool install` (issue 33's quality bar): the tool's virtual environment
/// (`~/.local/pipx` or `~/.local/share/pipx`, `~/.local/share/uv/tools`) and its link in
/// `~/.local/bin` are the jail's layer, so the tool works inside and in the next session, never
/// reaches your home, and raises no alert. From a local wheel with no network (`--network none`).
fn tool_installer_works_inside_and_next_time(test: &str, program: &str, install: &str) {
    if !tool_or_say(test, program, false) {
        return;
    }
    let f = Fixture::new();
    let whl = wheel_script(&f.root, "hello_cs", "hello from a tool", Some("hello-cs"));
    let before = tree(&f.home);
    let jail = |script: &str| {
        f.cmd(["run", "--network", "none", "--", "bash", "-c", script])
            .output()
            .unwrap()
    };
    let run = jail(&format!(
        "{install} {} >/dev/null 2>&1; ~/.local/bin/hello-cs",
        whl.display()
    ));
    assert_eq!(ok(&run), "hello from a tool\n", "{test}");
    assert!(
        stderr(&run).contains("~/.local/bin this session: hello-cs ("),
        "{test}: {}",
        stderr(&run)
    );
    assert_eq!(tree(&f.home), before, "{test}: the jail changed your home");
    assert_eq!(
        ok(&jail("~/.local/bin/hello-cs")),
        "hello from a tool\n",
        "{test}"
    );
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert_eq!(alerts.trim(), "[]", "{test}: {alerts}");
}

#[test]
fn pipx_install_works_inside_and_in_the_next_session() {
    tool_installer_works_inside_and_next_time(
        "pipx_install_works_inside",
        "pipx",
        "pipx install --pip-args=--no-index",
    );
}

#[test]
fn uv_tool_install_works_inside_and_in_the_next_session() {
    tool_installer_works_inside_and_next_time(
        "uv_tool_install_works_inside",
        "uv",
        "uv tool install --offline",
    );
}
