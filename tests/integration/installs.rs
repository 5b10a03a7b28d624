//! Everyday installs succeed in the jail (`~/.local` and `~/.cargo` are its own layers: docs/layers.md)
//! while nothing the agent installs there is seen by your tools outside, except what lands in the
//! PATH directories (`~/.local/bin`, `~/.cargo/bin`), which stay yours and are watched.

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
fn installed_data_is_the_jails_own_and_persists_while_path_dirs_stay_shared() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".local/share/app")).unwrap();
    std::fs::write(f.home.join(".local/share/app/yours"), "yours\n").unwrap();
    std::fs::create_dir_all(f.home.join(".cargo/bin")).unwrap();
    std::fs::write(f.home.join(".cargo/.crates.toml"), "[v1]\n").unwrap();
    let before = tree(&f.home);
    let site = ".local/lib/python3.11/site-packages";
    let out = ok(&f.jail(&format!(
        "set -e; mkdir ~/.local/share/x && echo x > ~/.local/share/x/f; \
         cat ~/.local/share/app/yours; echo agent >> ~/.local/share/app/yours; \
         mkdir -p ~/{site} && echo 'import os' > ~/{site}/evil.pth; \
         mkdir -p ~/.local/state/tool && echo s > ~/.local/state/tool/s; \
         echo '[v1]' > ~/.local/.crates.toml; echo '[v1]' >> ~/.cargo/.crates.toml; \
         echo c > ~/.cargo/config.toml; \
         printf '#!/bin/sh\\necho t\\n' > ~/.local/bin/agent-tool; \
         printf '#!/bin/sh\\necho t\\n' > ~/.cargo/bin/agent-tool2; echo done"
    )));
    assert_eq!(out, "yours\ndone\n");
    // Your files are unchanged, nothing new appeared in your home but in the PATH directories.
    assert_eq!(read(&f.home.join(".local/share/app/yours")), "yours\n");
    assert_eq!(read(&f.home.join(".cargo/.crates.toml")), "[v1]\n");
    let mut want = before.clone();
    want.extend([
        ".cargo/bin/agent-tool2".to_string(),
        ".local/bin/agent-tool".to_string(),
    ]);
    want.sort();
    assert_eq!(tree(&f.home), want, "the jail changed your home");
    // What the agent wrote is in the jail's layers, and its next session finds it.
    assert_eq!(read(&layers(&f).join("local/upper/share/x/f")), "x\n");
    let again = ok(&f.jail(&format!(
        "cat ~/.local/share/x/f ~/.local/share/app/yours ~/{site}/evil.pth \
         ~/.local/state/tool/s ~/.local/.crates.toml ~/.cargo/.crates.toml ~/.cargo/config.toml"
    )));
    assert_eq!(
        again,
        "x\nyours\nagent\nimport os\ns\n[v1]\n[v1]\n[v1]\nc\n"
    );
}

/// Where no overlay can be made (here: bwrap making every mount), your `~/.local` is what the jail
/// sees, read-only, as before: never writable through.
#[test]
fn without_an_overlay_your_local_is_read_only_never_writable_through() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".local/share/app")).unwrap();
    std::fs::write(f.home.join(".local/share/app/yours"), "yours\n").unwrap();
    let before = tree(&f.home);
    let out = ok(&jail_with(
        &f,
        &[("CLAUDE_SANDBOX_SEAL", "bwrap".into())],
        "cat ~/.local/share/app/yours; mkdir ~/.local/share/x 2>/dev/null && echo WROTE; \
         echo agent >> ~/.local/share/app/yours 2>/dev/null && echo WROTE; \
         echo t > ~/.local/bin/t && echo bin-ok",
    ));
    assert_eq!(out, "yours\nbin-ok\n");
    let mut want = before;
    want.push(".local/bin/t".into());
    want.sort();
    assert_eq!(tree(&f.home), want);
}

#[test]
fn pip_install_user_works_inside_and_stays_out_of_your_python() {
    let pip = Command::new("/usr/bin/python3")
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !pip {
        // python3-pip: .ci/run installs it.
        assert!(
            std::env::var_os("CLAUDE_SANDBOX_CI").is_none(),
            "pip is missing, and .ci/run installs python3-pip"
        );
        eprintln!("\n*** pip_install_user_works_inside…: NOT RUN here — apt-get install python3-pip ***\n");
        return;
    }
    let f = Fixture::new();
    let whl = wheel(&f.root, "hello_cs", "hello from pip", true);
    let out = ok(&f.jail(&format!(
        "PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install -q --user --no-index {} \
         2>&1 | grep -v WARNING; /usr/bin/python3 -c 'import hello_cs; hello_cs.main()'",
        whl.display()
    )));
    assert_eq!(out, "hello from pip\n");
    // Outside, your Python does not import it (its site-packages is the jail's).
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
    // The next session still has it.
    let again = ok(&f.jail("/usr/bin/python3 -c 'import hello_cs; hello_cs.main()'"));
    assert_eq!(again, "hello from pip\n");
}

#[test]
fn npm_install_global_prefix_local_works_inside() {
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
    // The package is the jail's; the link in ~/.local/bin is yours (watched), and leads nowhere.
    assert!(!f.home.join(".local/lib").exists());
    let link = f.home.join(".local/bin/hello-cs");
    assert!(std::fs::symlink_metadata(&link).is_ok());
    assert!(
        std::fs::metadata(&link).is_err(),
        "the link leads somewhere outside"
    );
    assert_eq!(ok(&f.jail("hello-cs")), "hello from npm\n");
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
    // The binary is in your ~/.local/bin (watched); cargo's record of it is the jail's.
    assert!(f.home.join(".local/bin/tiny-cs").is_file());
    assert!(!f.home.join(".local/.crates.toml").exists());
    assert!(!f.home.join(".local/.crates2.json").exists());
}

/// `~/.cargo/bin` stays yours, writable and watched like `~/.local/bin`: an executable that shadows
/// a command of your next shell is quarantined, a new one is kept (and alerted).
#[test]
fn cargo_bin_is_shared_and_watched() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".cargo/bin")).unwrap();
    // As rustup's `~/.cargo/env` does: your next shell has `~/.cargo/bin` first. (Without it the
    // verdict depended on whether your login shell's PATH was known when the plant was judged.)
    std::fs::write(
        f.home.join(".profile"),
        "export PATH=\"$HOME/.cargo/bin:$PATH\"\n",
    )
    .unwrap();
    ok(&f.jail(
        "printf '#!/bin/sh\\necho evil\\n' > ~/.cargo/bin/ls && chmod +x ~/.cargo/bin/ls && \
         printf '#!/bin/sh\\n' > ~/.cargo/bin/newtool && chmod +x ~/.cargo/bin/newtool && sleep 0.3",
    ));
    assert!(
        !f.home.join(".cargo/bin/ls").exists(),
        "the shadowing ls was kept"
    );
    assert!(f.home.join(".cargo/bin/newtool").is_file());
    let alerts = stdout(&f.cmd(["alerts"]).output().unwrap());
    assert!(alerts.contains(".cargo/bin/ls — shadows"), "{alerts}");
}
