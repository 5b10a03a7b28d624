use super::*;
use std::os::unix::fs::PermissionsExt;

/// A `run` watcher's configuration for a workspace watched as a tree.
pub(super) fn config(ws: &Path, runtime: PathBuf) -> WatchConfig {
    WatchConfig {
        runtime,
        session: "s".into(),
        workspace: ws.to_path_buf(),
        force_poll: false,
        quarantine_new: false,
        hidden_globs: Vec::new(),
        tree_dirs: vec![ws.to_path_buf()],
        catch_up: false,
        placeholders: std::collections::HashSet::default(),
        resolve_delay: RESOLVE_DELAY,
        tree_delay: Duration::ZERO,
        writable_roots: Some(vec![ws.to_path_buf()]),
        host: HostEnv::default(),
        envrc_path_dirs: Vec::new(),
        new_sockets: None,
    }
}

/// `mkdir -p node_modules/.bin && cp … .bin/ls` can outrun the watcher: `.bin` is made after the
/// watcher saw it missing and before it watches `node_modules`, so no event ever names it. The
/// watcher must look again once the watch is in place. (Found as a rare miss of the battery's
/// `path-node-modules-bin` and of `a_hard_link_and_a_path_dir_created_during_the_session`.)
#[test]
fn a_path_directory_made_before_its_parent_is_watched_is_still_scanned() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let runtime = t.path().join("rt");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let late = ws.join("node_modules/.bin");
    let path_env = std::env::join_paths([late.clone(), PathBuf::from("/usr/bin")]).unwrap();
    let in_ws = |p: &Path| p.starts_with(&ws);
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &in_ws,
        &[],
        None,
        baseline::Depth::Attributes,
    );
    let index = base.dirs.iter().find(|d| d.path == late).unwrap().index;
    let mut w = Watcher::new(config(&ws, runtime), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    // The whole chain exists before the watch moves down to `node_modules`.
    std::fs::create_dir_all(&late).unwrap();
    let plant = late.join("ls");
    std::fs::write(&plant, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&plant, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.add_pending(PathPos(index));
    assert!(
        !plant.exists(),
        "a plant in a PATH directory that appeared unseen was not quarantined"
    );
}

/// A `CACHEDIR.TAG` or `pyvenv.cfg` made during the session is not honoured (the agent can tag any
/// directory it makes): repositories inside are found and watched like any other (issue 16).
#[test]
fn a_cache_tagged_during_the_session_is_walked() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let runtime = t.path().join("rt");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let path_env = std::env::join_paths([PathBuf::from("/usr/bin")]).unwrap();
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &|_| false,
        &[],
        None,
        baseline::Depth::Names,
    );
    let mut w = Watcher::new(config(&ws, runtime), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    let repo = |dir: &Path| {
        for sub in ["hooks", "objects", "refs"] {
            std::fs::create_dir_all(dir.join(".git").join(sub)).unwrap();
        }
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    };
    std::fs::create_dir(ws.join("target")).unwrap();
    std::fs::write(
        ws.join("target/CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    repo(&ws.join("target/debug/build/dep"));
    std::fs::create_dir(ws.join(".venv")).unwrap();
    std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    repo(&ws.join(".venv/src/editable"));
    repo(&ws.join("src/r"));
    w.drain();
    let git_dirs: Vec<&Path> = w.repos.git_dirs();
    let canonical = |p: PathBuf| std::fs::canonicalize(p).unwrap();
    assert!(
        git_dirs.contains(&canonical(ws.join("src/r/.git")).as_path()),
        "a repository made beside the cache was missed: {git_dirs:?}"
    );
    for hidden in ["target/debug/build/dep/.git", ".venv/src/editable/.git"] {
        assert!(
            git_dirs.contains(&canonical(ws.join(hidden)).as_path()),
            "{hidden}: a repository in a directory tagged during the session was missed: {git_dirs:?}"
        );
    }
}

/// Inside a tree tagged during the session the files a build writes do not wake the watcher: they
/// are read from the lazy instance (`table::Table::lazy`), not the one every event of a PATH
/// directory comes through; a repository made there is still found from those events.
#[test]
fn a_tree_tagged_during_the_session_is_watched_lazily() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let runtime = t.path().join("rt");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let path_env = std::env::join_paths([PathBuf::from("/usr/bin")]).unwrap();
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &|_| false,
        &[],
        None,
        baseline::Depth::Names,
    );
    let mut w = Watcher::new(config(&ws, runtime), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    // As cargo does: the directory, then its tag, then the build's directories.
    std::fs::create_dir(ws.join("target")).unwrap();
    w.drain();
    std::fs::write(
        ws.join("target/CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    std::fs::create_dir(ws.join("target/debug")).unwrap();
    std::fs::create_dir(ws.join("build-out")).unwrap();
    w.drain();
    for dir in ["target/debug", "build-out"] {
        for i in 0..20 {
            std::fs::write(ws.join(dir).join(format!("f{i}")), "x").unwrap();
        }
    }
    let names = |events: Vec<table::Event>| -> Vec<String> {
        events.into_iter().filter_map(|(_, n, _)| n).collect()
    };
    let main = names(w.table.read_events().0);
    let lazy = names(w.table.read_lazy_events().0);
    assert_eq!(
        main.len(),
        20,
        "an untagged tree's files come through the main instance: {main:?}"
    );
    assert_eq!(
        lazy.len(),
        20,
        "the tagged tree's files come through the lazy one: {lazy:?}"
    );
    // A repository planted inside the lazily watched tree is found from its events.
    let repo = ws.join("target/debug/build/dep");
    for sub in ["hooks", "objects", "refs"] {
        std::fs::create_dir_all(repo.join(".git").join(sub)).unwrap();
    }
    std::fs::write(repo.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    w.drain();
    let git_dir = std::fs::canonicalize(repo.join(".git")).unwrap();
    assert!(
        w.repos.git_dirs().contains(&git_dir.as_path()),
        "a repository in a lazily watched tree was missed: {:?}",
        w.repos.git_dirs()
    );
}

/// Sweep mode looks for `.git`/`HEAD` markers the same way: not inside a tagged cache.
#[test]
fn the_sweep_does_not_look_for_repositories_inside_a_cache() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    std::fs::create_dir_all(ws.join("target/debug/dep/.git")).unwrap();
    std::fs::write(
        ws.join("target/CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.join(".venv/src/editable/.git")).unwrap();
    std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    std::fs::create_dir_all(ws.join("src/r/.git")).unwrap();
    let markers = git_markers(ws, &mut HashMap::new(), i64::MAX, &mut Vec::new());
    assert_eq!(markers, vec![ws.join("src/r/.git")]);
}

/// At launch a PATH directory's names are only listed; their attributes are read a little later
/// (`resolve_batch`). One changed in between has an event queued by then and counts as changed
/// (here a shadowing `ls`: quarantined); one untouched becomes baseline; one gone is dropped, so
/// that the reading ends.
#[test]
fn names_read_after_launch_count_a_change_made_in_between() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let bin = ws.join("bin");
    let runtime = t.path().join("rt");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    for name in ["ls", "cat", "gone"] {
        let p = bin.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path_env = std::env::join_paths([bin.clone(), PathBuf::from("/usr/bin")]).unwrap();
    let in_ws = |p: &Path| p.starts_with(&ws);
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &in_ws,
        &[],
        None,
        baseline::Depth::Names,
    );
    // Gone before the watch: no event will ever name it.
    std::fs::remove_file(bin.join("gone")).unwrap();
    let mut w = Watcher::new(config(&ws, runtime), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    assert!(w.any_deferred(), "Depth::Names defers every name");
    std::fs::write(bin.join("ls"), "#!/bin/sh\necho planted\n").unwrap();
    w.resolve_batch(RESOLVE_BATCH);
    assert!(
        !w.any_deferred(),
        "a name that went away is still waiting to be read"
    );
    assert!(
        !bin.join("ls").exists(),
        "a shadowing executable changed before it was read was not quarantined"
    );
    assert!(
        bin.join("cat").exists(),
        "an untouched executable was quarantined"
    );
    let (_, d) = w.table.iter().find(|(_, d)| d.path == bin).unwrap();
    assert!(
        d.state.contains_key("cat"),
        "an untouched name did not become baseline"
    );
}

/// A quarantine that fails is tried again on the next tick: judged afresh, and its success alerted
/// (with its own fingerprint: not taken for a repeat of the failure's alert).
#[test]
fn a_failed_quarantine_is_tried_again_until_it_succeeds() {
    use super::act::fake::{Call, Recording};
    use std::sync::atomic::{AtomicUsize, Ordering};
    static ATTEMPTS: AtomicUsize = AtomicUsize::new(0);
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let bin = ws.join("bin");
    let runtime = t.path().join("rt");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let path_env = std::env::join_paths([bin.clone(), PathBuf::from("/usr/bin")]).unwrap();
    let in_ws = |p: &Path| p.starts_with(&ws);
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &in_ws,
        &[],
        None,
        baseline::Depth::Attributes,
    );
    let mut w = Watcher::new(config(&ws, runtime), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    let mut sink = Recording::new();
    // The first attempt fails as it did with the launcher's descriptors spent (EMFILE).
    sink.answer = || {
        if ATTEMPTS.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(crate::Error::io(
                "opening",
                std::io::Error::from_raw_os_error(libc::EMFILE),
            ))
        } else {
            Ok(Some(super::act::Taken {
                id: "q2".into(),
                method: crate::quarantine::Method::Moved,
                nlink: 1,
            }))
        }
    };
    let calls = sink.calls.clone();
    w.sink = Box::new(sink);
    assert!(
        Path::new("/usr/bin/ls").exists(),
        "this test needs /usr/bin/ls"
    );
    let (outside, ls) = (t.path().join("ls"), bin.join("ls"));
    let made = std::process::Command::new("sh")
        .args([
            "-c",
            r#"printf '#!/bin/sh\n' > "$1" && chmod 755 "$1" && mv "$1" "$2""#,
        ])
        .args(["sh".as_ref(), outside.as_os_str(), ls.as_os_str()])
        .status()
        .unwrap();
    assert!(made.success());
    w.drain();
    assert_eq!(w.failed.len(), 1, "{:?}", w.failed);
    // The next tick: no new event, the same change judged again.
    w.retry_failed();
    assert!(w.failed.is_empty(), "{:?}", w.failed);
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        [
            Call::Quarantine(ls.clone()),
            Call::Alert("path-shadow".into(), ls.clone(), "failed".into(), None),
            Call::Quarantine(ls.clone()),
            Call::Alert(
                "path-shadow".into(),
                ls.clone(),
                "quarantined".into(),
                Some("q2".into())
            ),
        ]
    );
}

/// The watcher with a recording sink: real files and real inotify events, the exact actions asked
/// for, in order, and nothing touched on disk (the fake quarantines nothing).
#[test]
fn the_watcher_asks_the_sink_for_exactly_the_judges_actions() {
    use super::act::fake::{Call, Recording};
    let t = tempfile::tempdir().unwrap();
    let ws = t.path().join("ws");
    let bin = ws.join("bin");
    let runtime = t.path().join("rt");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    let path_env = std::env::join_paths([bin.clone(), PathBuf::from("/usr/bin")]).unwrap();
    let in_ws = |p: &Path| p.starts_with(&ws);
    let base = baseline::take(
        "s",
        &path_env,
        &ws,
        &in_ws,
        &[],
        None,
        baseline::Depth::Attributes,
    );
    let mut w = Watcher::new(config(&ws, runtime.clone()), &base);
    assert!(w.table.inotify_open(), "this test needs inotify");
    let sink = Recording::new();
    let calls = sink.calls.clone();
    w.sink = Box::new(sink);
    // Each made outside and renamed in: one event each (the fake leaves a "quarantined" file in
    // place, so a later event for it would be judged again). Made by a shell, not by this process:
    // a file this process wrote can have its last close, and so a CLOSE_WRITE, after the rename,
    // when another test's thread forked while it was open (seen once in 25 runs of the suite).
    let exe = |name: &str| {
        let (outside, p) = (t.path().join(name), bin.join(name));
        let made = std::process::Command::new("sh")
            .args([
                "-c",
                r#"printf '#!/bin/sh\n' > "$1" && chmod 755 "$1" && mv "$1" "$2""#,
            ])
            .args(["sh".as_ref(), outside.as_os_str(), p.as_os_str()])
            .status()
            .unwrap();
        assert!(made.success());
        p
    };
    assert!(
        Path::new("/usr/bin/ls").exists(),
        "this test needs /usr/bin/ls"
    );
    let ls = exe("ls");
    let tool = exe("claude-sandbox-test-no-such-command");
    std::fs::write(bin.join("notes"), "not executable").unwrap();
    w.drain();
    let calls = calls.lock().unwrap().clone();
    assert_eq!(
        calls,
        [
            Call::Quarantine(ls.clone()),
            Call::Alert(
                "path-shadow".into(),
                ls.clone(),
                "quarantined".into(),
                Some("q1".into())
            ),
            Call::Alert("path-new".into(), tool.clone(), "alerted".into(), None),
        ]
    );
    assert!(ls.exists() && tool.exists(), "the fake touched a file");
    assert!(
        std::fs::read_dir(&runtime).unwrap().next().is_none(),
        "the fake wrote to the runtime directory"
    );
}
