//! A large workspace (issue 36): what is remembered between launches to make them cheap (the
//! hard-link scan's clean directories) never hides what was planted in between. 20 000 files, two
//! launches, and between them, made outside: a repository deep in the tree (its hooks and config
//! run at the human's next `git`: sealed at the second launch) and a hard link into a store in a
//! directory the first launch remembered as clean (broken at the second launch).

use crate::common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const DIRS: usize = 1_000;
const PER_DIR: usize = 20;

fn tree(root: &Path) {
    for i in 0..DIRS {
        let dir = root.join(format!("src/d{:02}/d{:03}", i / 100, i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..PER_DIR {
            std::fs::write(dir.join(format!("f{j}.rs")), "x\n").unwrap();
        }
    }
}

#[test]
fn on_a_large_workspace_a_repository_and_a_store_link_planted_between_launches_are_caught() {
    let f = Fixture::new();
    tree(&f.ws);
    // Older than the racy window (jail::hardlinks::scan): the first launch remembers every
    // directory of the tree as clean.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let first = f
        .cmd(["run", "--", "true"])
        .env("RUST_LOG", "claude_sandbox::entrypoints=debug")
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));

    // Between the launches, outside: a repository deep in the tree, and a store's file linked into
    // a remembered directory.
    let deep = f.ws.join("src/d09/d099");
    f.git(&deep, &["init", "-q"]);
    std::fs::write(deep.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
    let store = f.root.join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("index.js"), "module.exports = 1\n").unwrap();
    let linked = f.ws.join("src/d05/d050/index.js");
    std::fs::hard_link(store.join("index.js"), &linked).unwrap();

    let second = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > src/d09/d099/.git/hooks/pre-commit \
             2>/dev/null && echo ESCAPED; echo '[core] fsmonitor = touch /tmp/pwned' \
             >> src/d09/d099/.git/config; echo '// evil' >> src/d05/d050/index.js && echo appended",
        ])
        .env("RUST_LOG", "claude_sandbox::entrypoints=debug")
        .output()
        .unwrap();
    let out = ok(&second);
    assert!(
        !out.contains("ESCAPED"),
        "the planted repository's hooks were writable: {out}"
    );
    assert!(out.contains("appended"), "{out}");
    assert!(!deep.join(".git/hooks/pre-commit").exists());
    // `git config` in the jail writes the jail's copy (tests/integration/gitconfig.rs): yours is
    // as it was.
    assert_eq!(
        std::fs::read_to_string(deep.join(".git/config")).unwrap(),
        "[core]\n\tbare = false\n"
    );
    assert_eq!(
        std::fs::read_to_string(store.join("index.js")).unwrap(),
        "module.exports = 1\n",
        "the store's file changed"
    );
    assert_eq!(
        std::fs::metadata(store.join("index.js")).unwrap().nlink(),
        1
    );
    assert!(std::fs::read_to_string(&linked)
        .unwrap()
        .ends_with("// evil\n"));
    // The second launch took the tree from memory (the entry-point walk, which does the hard-link
    // scan's share of the workspace): what was found is not the full walk's work.
    let log = stderr(&second);
    let skipped: usize = log
        .split("remembered=")
        .nth(1)
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no scan logged: {log}"));
    assert!(skipped >= DIRS, "{skipped} directories from memory: {log}");
}

/// The entry-point walk's memory (`entrypoints::memory`): the second launch takes the tree from
/// memory, and still sees each entry point planted between the launches in a directory the first
/// one remembered: an `.envrc`, a `.vscode/tasks.json`, a `.git` pointer file, an `.envrc` in a
/// directory that replaced a file, one in a directory whose cache tag stopped being one (its bytes
/// changed in place: the directory did not). A directory tagged between the launches is not walked.
#[test]
fn entry_points_planted_in_remembered_directories_between_launches_are_sealed() {
    let f = Fixture::new();
    tree(&f.ws);
    let tag = "Signature: 8a477f597d28d172789f06886806bc55\n";
    std::fs::create_dir_all(f.ws.join("was_tagged/inner")).unwrap();
    std::fs::write(f.ws.join("was_tagged/CACHEDIR.TAG"), tag).unwrap();
    std::fs::create_dir_all(f.ws.join("becomes_tagged/inner")).unwrap();
    let outside = f.root.join("outside.git");
    std::fs::create_dir_all(&outside).unwrap();
    f.git(&outside, &["init", "-q", "--bare"]);
    // Older than the racy window: the first launch remembers every directory.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let log = "claude_sandbox::entrypoints=debug";
    let first = f
        .cmd(["run", "--", "true"])
        .env("RUST_LOG", log)
        .output()
        .unwrap();
    assert!(first.status.success(), "{}", stderr(&first));
    let listed = |o: &std::process::Output, key: &str| -> usize {
        let log = stderr(o);
        log.split(&format!("{key}="))
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no walk logged: {log}"))
    };
    assert!(listed(&first, "listed") >= DIRS, "{}", stderr(&first));

    // Between the launches, outside, in directories the first launch remembered.
    std::fs::write(f.ws.join("src/d07/d070/.envrc"), "echo hi\n").unwrap();
    std::fs::create_dir(f.ws.join("src/d03/d030/.vscode")).unwrap();
    std::fs::write(f.ws.join("src/d03/d030/.vscode/tasks.json"), "{}\n").unwrap();
    let pointer = format!("gitdir: {}\n", outside.display());
    std::fs::write(f.ws.join("src/d02/d020/.git"), &pointer).unwrap();
    let replaced = f.ws.join("src/d04/d040/f3.rs");
    std::fs::remove_file(&replaced).unwrap();
    std::fs::create_dir(&replaced).unwrap();
    std::fs::write(replaced.join(".envrc"), "echo hi\n").unwrap();
    std::fs::write(f.ws.join("was_tagged/inner/.envrc"), "echo hi\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    // In place: the directory's stamp stays; the tag is read again anyway.
    std::fs::write(f.ws.join("was_tagged/CACHEDIR.TAG"), "Signature: none\n").unwrap();
    std::fs::write(f.ws.join("becomes_tagged/CACHEDIR.TAG"), tag).unwrap();

    let targets = [
        "src/d07/d070/.envrc",
        "src/d03/d030/.vscode/tasks.json",
        "src/d03/d030/.vscode/new.json",
        "src/d02/d020/.git",
        "src/d04/d040/f3.rs/.envrc",
        "was_tagged/inner/.envrc",
    ];
    let script = format!(
        "for p in {}; do echo x >> \"$p\" 2>/dev/null && echo \"WROTE $p\"; done; \
         echo x >> src/d07/d070/f0.rs && echo CONTROL",
        targets.join(" ")
    );
    let second = f
        .cmd(["run", "--", "bash", "-c", &script])
        .env("RUST_LOG", log)
        .output()
        .unwrap();
    let out = ok(&second);
    assert!(out.contains("CONTROL"), "{out}");
    assert!(
        !out.contains("WROTE"),
        "planted entry points writable: {out}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/d02/d020/.git")).unwrap(),
        pointer
    );
    let log2 = stderr(&second);
    assert!(
        log2.lines()
            .any(|l| l.contains("not walked") && l.contains("becomes_tagged")),
        "{log2}"
    );
    // Taken from memory: only the changed directories (and the top's) were read.
    let (relisted, remembered) = (listed(&second, "listed"), listed(&second, "remembered"));
    assert!(
        remembered >= DIRS,
        "{relisted} read, {remembered} from memory: {log2}"
    );
    assert!(
        relisted < 50,
        "{relisted} read, {remembered} from memory: {log2}"
    );
    // Another build (an update: its catalogue may hold names this one's listings did not keep)
    // trusts none of it: everything is read again.
    let other = f.root.join("claude-sandbox-other-build");
    std::fs::copy(bin(), &other).unwrap();
    let third = std::process::Command::new(&other)
        .args(["run", "--", "true"])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env("RUST_LOG", log)
        .output()
        .unwrap();
    assert!(third.status.success(), "{}", stderr(&third));
    assert!(
        listed(&third, "listed") >= DIRS,
        "another build used this one's memory: {}",
        stderr(&third)
    );
}

/// The workspace tree's watches are added after the watcher starts, off the launch's critical path
/// (`watch::tree`): the command's very first writes race them. A repository made at once in a deep
/// directory of a 3000-directory workspace, a hook planted in it: quarantined while the session
/// runs, as the race falls (here the tree is watched before the gate opens), and when the watches
/// are held back until after those writes (`CLAUDE_SANDBOX_TREE_DELAY_MS`): then found by looking
/// again at each directory once its watch is in.
#[test]
fn a_hook_planted_at_the_command_s_first_instant_in_a_large_workspace_is_quarantined_live() {
    let f = Fixture::new();
    for i in 0..3_000 {
        let dir = f.ws.join(format!("t/d{:02}/d{:03}", i / 100, i % 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f.rs"), "x\n").unwrap();
    }
    // Settled: only what the command changes is looked at again.
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    for (n, delay) in [("d29/d099", "0"), ("d14/d050", "2000")] {
        let hook = format!("t/{n}/.git/hooks/pre-commit");
        let script = format!(
            "git init -q t/{n} && printf '#!/bin/sh\\nexit 0\\n' > {hook} && chmod +x {hook}; \
             for i in $(seq 1 100); do [ -e {hook} ] || {{ echo GONE; break; }}; sleep 0.05; done; true"
        );
        let out = f
            .cmd(["run", "--", "bash", "-c", &script])
            .env("RUST_LOG", "claude_sandbox::watch=debug")
            .env("CLAUDE_SANDBOX_TREE_DELAY_MS", delay)
            .output()
            .unwrap();
        let log = stderr(&out);
        let said = ok(&out);
        assert!(
            said.contains("GONE"),
            "[{delay}] not quarantined live: {said}\n{log}"
        );
        let alerts = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
        let all: Vec<serde_json::Value> = serde_json::from_slice(&alerts.stdout).unwrap();
        let path = f.ws.join(&hook);
        let a: Vec<_> = all
            .iter()
            .filter(|a| a["path"].as_str() == path.to_str())
            .collect();
        assert_eq!(a.len(), 1, "[{delay}] {all:#?}");
        assert_eq!(a[0]["kind"], "git-hook");
        assert!(!log.contains("too large to watch"), "{log}");
        if delay != "0" {
            assert!(
                log.contains("tree directory changed before its watch"),
                "the repository did not come before the watches: {log}"
            );
        }
    }
}
