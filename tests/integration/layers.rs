//! Caches are the jail's own layers: the human's caches read-only beneath, the agent's writes kept
//! for its next session and never seen by the human's tools (`src/jail/layers.rs`).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

fn layers(f: &Fixture) -> PathBuf {
    f.root.join("layers")
}

/// `run -- bash -c SCRIPT`, sealing from outside (None) or with bwrap making every mount.
fn jail(f: &Fixture, seal: Option<&str>, script: &str) -> Output {
    let mut c = f.cmd(["run", "--", "bash", "-c", script]);
    if let Some(s) = seal {
        c.env("CLAUDE_SANDBOX_SEAL", s);
    }
    c.output().expect("spawn claude-sandbox")
}

#[test]
fn a_poisoned_cache_never_reaches_your_copy_and_the_agents_cache_is_warm_next_session() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let hook = f.home.join(".cache/pre-commit/repo1/hook.sh");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let out = ok(&jail(
        &f,
        None,
        "cat ~/.cache/pre-commit/repo1/hook.sh; echo evil >> ~/.cache/pre-commit/repo1/hook.sh; \
         mkdir -p ~/.npm/_cacache ~/.cargo/registry/src && echo pkg > ~/.npm/_cacache/p && \
         echo crate > ~/.cargo/registry/src/c && grep -c ' overlay ' /proc/self/mountinfo",
    ));
    // The jail read your cache (the lower layer) and its write went to its own layer.
    assert!(out.starts_with("#!/bin/sh\nexit 0\n"), "{out}");
    assert_eq!(read(&hook), "#!/bin/sh\nexit 0\n", "your cache was changed");
    assert!(
        !f.home.join(".npm").exists(),
        "~/.npm appeared in your home"
    );
    assert!(
        !f.home.join(".cargo").exists(),
        "~/.cargo appeared in your home"
    );
    assert_eq!(
        read(&layers(&f).join("cache/upper/pre-commit/repo1/hook.sh")),
        "#!/bin/sh\nexit 0\nevil\n"
    );
    // The next session finds what the agent cached, over your unchanged file.
    let second = ok(&jail(
        &f,
        None,
        "cat ~/.cache/pre-commit/repo1/hook.sh ~/.npm/_cacache/p ~/.cargo/registry/src/c",
    ));
    assert_eq!(second, "#!/bin/sh\nexit 0\nevil\npkg\ncrate\n");
    // The kernel leaves the overlay's `work/work` at mode 000: opened up again after the session,
    // or an ordinary user could not remove the store (nor a scene or test home holding it).
    let work = layers(&f).join("cache/work/work");
    let mode = std::fs::metadata(&work).unwrap().permissions().mode();
    assert_eq!(mode & 0o700, 0o700, "{} is mode {:o}", work.display(), mode);
}

/// bwrap 0.8 has no overlay: with bwrap making every mount, each cache is the jail's own directory.
/// It must never be your directory, writable.
#[test]
fn with_bwrap_making_the_mounts_the_cache_is_a_private_directory_never_yours() {
    let f = Fixture::new();
    std::fs::write(f.home.join(".cache/tool"), "yours\n").unwrap();
    let out = ok(&jail(
        &f,
        Some("bwrap"),
        "cat ~/.cache/tool 2>/dev/null || echo not-visible; echo agent > ~/.cache/tool; \
         echo n > ~/.npm-probe 2>/dev/null; mkdir -p ~/.npm && echo p > ~/.npm/p",
    ));
    assert_eq!(out, "not-visible\n");
    assert_eq!(read(&f.home.join(".cache/tool")), "yours\n");
    assert_eq!(read(&layers(&f).join("cache/own/tool")), "agent\n");
    let again = ok(&jail(&f, Some("bwrap"), "cat ~/.cache/tool ~/.npm/p"));
    assert_eq!(again, "agent\np\n", "the private directory did not persist");
}

#[test]
fn a_missing_cache_directory_still_keeps_the_agents_writes() {
    let f = Fixture::new();
    std::fs::remove_dir_all(f.home.join(".cache")).unwrap();
    ok(&jail(
        &f,
        None,
        "mkdir -p ~/.cache/uv && echo wheel > ~/.cache/uv/w",
    ));
    assert!(
        !f.home.join(".cache").exists(),
        "~/.cache appeared in your home"
    );
    assert_eq!(ok(&jail(&f, None, "cat ~/.cache/uv/w")), "wheel\n");
}

/// A cache file hard-linked to a store elsewhere (uv, pnpm): a write in the jail copies it up; the
/// shared inode never changes.
#[test]
fn a_write_through_a_hard_linked_cache_file_leaves_the_shared_inode_alone() {
    let f = Fixture::new();
    let store = f.root.join("store-file");
    std::fs::write(&store, "print('ok')\n").unwrap();
    std::fs::hard_link(&store, f.home.join(".cache/linked.py")).unwrap();
    ok(&jail(&f, None, "echo 'import evil' >> ~/.cache/linked.py"));
    assert_eq!(read(&store), "print('ok')\n");
    assert_eq!(read(&f.home.join(".cache/linked.py")), "print('ok')\n");
}

/// A nested cache: an existing one is a layer of its own; a missing one below an existing
/// `~/.cargo` lies in the `~/.cargo` data layer: writable in the jail, never in your home.
#[test]
fn a_nested_cache_is_a_layer_and_a_missing_one_lies_in_its_parents_layer() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.home.join(".cargo/registry")).unwrap();
    let out = ok(&jail(
        &f,
        None,
        "mkdir -p ~/.cargo/registry/src && echo r > ~/.cargo/registry/src/x; \
         mkdir ~/.cargo/git && echo g > ~/.cargo/git/y && echo WROTE-git; echo done",
    ));
    assert_eq!(out, "WROTE-git\ndone\n");
    assert!(!f.home.join(".cargo/git").exists());
    assert!(!f.home.join(".cargo/registry/src").exists());
    assert_eq!(read(&layers(&f).join("cargo-registry/upper/src/x")), "r\n");
    assert_eq!(read(&layers(&f).join("cargo/upper/git/y")), "g\n");
}

/// Without an override the store is `~/.local/state/claude-sandbox/layers`, 0700, hidden in the jail.
#[test]
fn the_default_store_is_private_and_hidden_in_the_jail() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let store = f.home.join(".local/state/claude-sandbox/layers");
    let run = |script: &str| {
        f.cmd(["run", "--", "bash", "-c", script])
            .env_remove("CLAUDE_SANDBOX_LAYERS_DIR")
            .output()
            .unwrap()
    };
    ok(&run("echo x > ~/.cache/x"));
    assert_eq!(read(&store.join("cache/upper/x")), "x\n");
    let mode = std::fs::metadata(&store).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let inside = ok(&run(&format!(
        "ls -A {s} | wc -l; touch {s}/cache/upper/y 2>/dev/null && echo WROTE; cat ~/.cache/x",
        s = store.display()
    )));
    assert_eq!(inside, "0\nx\n");
}

#[test]
fn cache_ls_and_clear_show_and_remove_the_jails_layer_only() {
    let f = Fixture::new();
    std::fs::write(f.home.join(".cache/mine"), "yours\n").unwrap();
    ok(&jail(
        &f,
        None,
        "head -c 100000 /dev/zero > ~/.cache/big; echo a > ~/.cache/mine",
    ));
    let ls = ok(&f.cmd(["cache", "ls", "--json"]).output().unwrap());
    let rows: serde_json::Value = serde_json::from_str(&ls).unwrap();
    let cache = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "cache")
        .unwrap();
    assert!(cache["bytes"].as_u64().unwrap() >= 100_000, "{ls}");
    let text = ok(&f.cmd(["cache", "ls"]).output().unwrap());
    assert!(text.contains(&layers(&f).display().to_string()), "{text}");
    let explain = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(
        explain.contains(&format!(
            "{}  (overlay: yours read-only beneath, writes in {}",
            f.home.join(".cache").display(),
            layers(&f).join("cache/upper").display()
        )),
        "{explain}"
    );
    ok(&f.cmd(["cache", "clear"]).output().unwrap());
    assert!(!layers(&f).join("cache").exists());
    assert_eq!(read(&f.home.join(".cache/mine")), "yours\n");
    assert_eq!(
        ok(&jail(
            &f,
            None,
            "cat ~/.cache/mine; test -e ~/.cache/big || echo gone"
        )),
        "yours\ngone\n"
    );
}

/// Two sessions at once: the second may not share the first's upper directory (overlayfs would
/// only warn), so it gets one of its own, over the shared one and yours: it sees yours and what
/// the first wrote, writes its own, and what it wrote is folded into the shared layer for the next
/// session (here by the next session, as the first still ran when the second ended). Neither
/// writes your cache.
#[test]
fn a_second_concurrent_session_gets_its_own_upper_directory_folded_in_later() {
    let f = Fixture::new();
    std::fs::write(f.home.join(".cache/f"), "yours\n").unwrap();
    std::fs::write(f.home.join(".cache/h"), "yours too\n").unwrap();
    // In the shared layer before both: the second removes it (a whiteout in its own slot).
    ok(&jail(&f, None, "echo earlier > ~/.cache/e"));
    let mut first = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "echo first > ~/.cache/g; touch started; sleep 3",
        ])
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while !f.ws.join("started").exists() {
        assert!(
            t0.elapsed().as_secs() < 20,
            "the first session did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = ok(&jail(
        &f,
        None,
        "grep ' overlay ' /proc/self/mountinfo | grep \" $HOME/.cache \" | grep -c upper.1; \
         cat ~/.cache/f ~/.cache/g ~/.cache/e; echo 2 > ~/.cache/f; rm ~/.cache/e ~/.cache/h; \
         mkdir -p ~/.local/share/x && echo wrote",
    ));
    assert!(first.wait().unwrap().success());
    assert_eq!(out, "1\nyours\nfirst\nearlier\nwrote\n");
    assert_eq!(read(&f.home.join(".cache/f")), "yours\n");
    assert_eq!(read(&layers(&f).join("cache/upper.1/f")), "2\n");
    // The next session folds the second's into the shared layer and sees both.
    assert_eq!(
        ok(&jail(
            &f,
            None,
            "cat ~/.cache/f ~/.cache/g; ls ~/.local/share; ls ~/.cache/e ~/.cache/h 2>/dev/null | wc -l"
        )),
        "2\nfirst\nx\n0\n",
        "the removals (whiteouts) were not folded in"
    );
    assert_eq!(read(&f.home.join(".cache/h")), "yours too\n");
    assert_eq!(read(&layers(&f).join("cache/upper/f")), "2\n");
    assert!(!layers(&f).join("cache/upper.1/f").exists());
    assert_eq!(read(&f.home.join(".cache/f")), "yours\n");
}

/// The default store lies inside the `~/.local` layer (`~/.local/state/claude-sandbox/layers`):
/// the shared upper directory a second session sees above its own is then inside its lower one,
/// which overlayfs refuses as two lower layers. The second session still gets its overlay (no
/// fallback, no refusal), sees what an earlier session installed, and finds no scratch mount.
#[test]
fn with_the_default_store_a_second_concurrent_session_gets_its_local_layer() {
    let f = Fixture::new();
    let run = |script: &str| {
        let mut c = f.cmd(["run", "--", "bash", "-c", script]);
        c.env_remove("CLAUDE_SANDBOX_LAYERS_DIR");
        c
    };
    ok(
        &run("mkdir -p ~/.local/share/tool && echo earlier > ~/.local/share/tool/v")
            .output()
            .unwrap(),
    );
    let mut first = run("touch started; sleep 3").spawn().unwrap();
    let t0 = std::time::Instant::now();
    while !f.ws.join("started").exists() {
        assert!(
            t0.elapsed().as_secs() < 20,
            "the first session did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = run(
        "cat ~/.local/share/tool/v; echo second > ~/.local/share/tool/w && echo wrote; \
         ls -A /tmp | grep -c under",
    )
    .output()
    .unwrap();
    assert!(first.wait().unwrap().success());
    let (so, se) = (stdout(&out), stderr(&out));
    assert_eq!(so, "earlier\nwrote\n0\n", "{se}");
    assert!(
        !f.home.join(".local/share/tool").exists(),
        "the layer reached your ~/.local"
    );
    assert_eq!(
        ok(&run("cat ~/.local/share/tool/w").output().unwrap()),
        "second\n"
    );
}
