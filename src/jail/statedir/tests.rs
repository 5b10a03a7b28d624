use super::*;
use crate::runtimes::{CLAUDE, CODEX};

fn names(binds: &[StateBind]) -> Vec<(String, How)> {
    binds
        .iter()
        .map(|b| (b.name.to_string_lossy().into_owned(), b.how.clone()))
        .collect()
}

fn how(binds: &[StateBind], name: &str) -> Option<How> {
    binds.iter().find(|b| b.name == name).map(|b| b.how.clone())
}

#[test]
fn the_jails_top_level_is_decided_by_name_and_kind() {
    let sd = &CLAUDE.state[0];
    let file = |size| Kind::File { size };
    let seen: Vec<(OsString, Kind)> = [
        ("projects", Kind::Dir),
        ("todos", Kind::Dir),
        (".credentials.json", file(100)),
        ("history.jsonl", file(100)),
        ("stats-cache.json", file(MAX_COPY + 1)),
        ("settings.json", file(10)),
        ("statusline.sh", file(10)),
        ("skills", Kind::Dir),
        ("CLAUDE.md", Kind::Symlink("dotfiles/CLAUDE.md".into())),
        ("ide.sock", Kind::Other),
        ("x.lock", Kind::Dir),
    ]
    .into_iter()
    .map(|(n, k)| (OsString::from(n), k))
    .collect();
    let binds = classify(
        sd,
        &seen,
        &["-w".into()],
        &[OsString::from("statusline.sh"), OsString::from("gone.sh")],
        None,
    );
    assert_eq!(
        how(&binds, "projects"),
        Some(How::Projects(vec!["-w".into()]))
    );
    assert_eq!(how(&binds, "todos"), Some(How::Writable));
    assert_eq!(how(&binds, ".credentials.json"), Some(How::Copied));
    assert_eq!(
        how(&binds, "history.jsonl"),
        Some(How::Writable),
        "appended in place"
    );
    assert_eq!(
        how(&binds, "stats-cache.json"),
        Some(How::Writable),
        "too large to copy"
    );
    assert_eq!(how(&binds, "settings.json"), Some(How::ReadOnly));
    assert_eq!(
        how(&binds, "statusline.sh"),
        Some(How::ReadOnly),
        "named by settings"
    );
    assert_eq!(
        how(&binds, "gone.sh"),
        Some(How::Stub(Stub::Dir)),
        "named, missing"
    );
    assert_eq!(how(&binds, "skills"), Some(How::ReadOnly));
    assert_eq!(
        how(&binds, "CLAUDE.md"),
        Some(How::Symlink("dotfiles/CLAUDE.md".into()))
    );
    assert_eq!(how(&binds, "ide.sock"), None, "a socket is not in the jail");
    assert_eq!(how(&binds, "x.lock"), Some(How::Writable));
    assert_eq!(how(&binds, "shell-snapshots"), Some(How::MountPoint));
    for missing in ["settings.local.json", "commands", "rules", "hooks"] {
        assert!(
            matches!(how(&binds, missing), Some(How::Stub(_))),
            "{missing}: {:?}",
            names(&binds)
        );
    }
    assert_eq!(
        how(&binds, "sessions"),
        None,
        "a missing allowlisted directory is the jail's"
    );
}

#[test]
fn codex_gets_its_own_sqlite_store_and_a_view_of_its_skills() {
    let sd = &CODEX.state[0];
    let seen = vec![
        (OsString::from("state_5.sqlite"), Kind::File { size: 10 }),
        (OsString::from("skills"), Kind::Dir),
        (OsString::from("auth.json"), Kind::File { size: 10 }),
    ];
    let store = Path::new("/s/codex-sqlite");
    let binds = classify(sd, &seen, &[], &[], Some(store));
    assert_eq!(
        how(&binds, ".claude-sandbox-sqlite"),
        Some(How::Store(store.into()))
    );
    assert_eq!(how(&binds, "state_5.sqlite"), Some(How::ReadOnly), "yours");
    assert_eq!(how(&binds, "skills"), Some(How::MountPoint));
    assert_eq!(how(&binds, "auth.json"), Some(How::Copied));
    assert_eq!(how(&binds, ".tmp"), Some(How::MountPoint));
}

#[test]
fn mounts_bind_yours_from_the_host_and_stubs_from_the_jails_own() {
    let sd = &CLAUDE.state[0];
    let binds = vec![
        StateBind {
            name: "todos".into(),
            how: How::Writable,
        },
        StateBind {
            name: "settings.json".into(),
            how: How::ReadOnly,
        },
        StateBind {
            name: "CLAUDE.md".into(),
            how: How::Stub(Stub::File("")),
        },
        StateBind {
            name: ".credentials.json".into(),
            how: How::Copied,
        },
        StateBind {
            name: "projects".into(),
            how: How::Projects(vec!["-w".into()]),
        },
    ];
    let (real, own) = (Path::new("/h/.claude"), Path::new("/s/home/.claude"));
    let mut mounts = Vec::new();
    crate::jail::mounts::state_dir(&mut mounts, real, own, &binds, sd);
    let m: Vec<(String, String, bool)> = mounts
        .into_iter()
        .map(|m| match m {
            crate::jail::mounts::Mount::Bind { src, dst, writable } => (
                src.display().to_string(),
                dst.display().to_string(),
                writable,
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    let s = |a: &str, b: &str, w| (a.to_string(), b.to_string(), w);
    assert_eq!(
        m,
        vec![
            s("/s/home/.claude", "/h/.claude", true),
            s("/h/.claude/todos", "/h/.claude/todos", true),
            s(
                "/h/.claude/settings.json",
                "/h/.claude/settings.json",
                false
            ),
            s("/s/home/.claude/CLAUDE.md", "/h/.claude/CLAUDE.md", false),
            s("/h/.claude/projects/-w", "/h/.claude/projects/-w", true),
            s(
                "/h/.claude/projects/-w/memory",
                "/h/.claude/projects/-w/memory",
                false
            ),
        ]
    );
    assert_eq!(
        writable_paths(real, &binds),
        vec![
            PathBuf::from("/h/.claude/todos"),
            PathBuf::from("/h/.claude/projects/-w")
        ]
    );
}

#[test]
fn claude_project_names_follow_claude_code() {
    let slug = |p: &str| crate::runtimes::claude_project_slug(p, Path::new("/h")).unwrap();
    assert_eq!(slug("/work/main"), "-work-main");
    assert_eq!(slug("/tmp/nt/ws"), "-tmp-nt-ws");
    assert_eq!(slug("/w/é"), "-w--");
    let long = format!("/{}", "a".repeat(250));
    let s = slug(&long);
    assert!(s.starts_with(&format!("-{}", "a".repeat(199))), "{s}");
    assert_eq!(s.len(), 201 + s.rsplit('-').next().unwrap().len());
}

#[test]
fn sealed_project_entries_are_found_for_the_hook() {
    let sd = &CLAUDE.state[0];
    assert!(sealed_in_project(sd, Path::new("projects/-w/memory/MEMORY.md")).is_some());
    assert!(sealed_in_project(sd, Path::new("projects/-w/s.jsonl")).is_none());
    assert!(sealed_in_project(sd, Path::new("todos/memory/x")).is_none());
}

#[test]
fn a_file_comes_back_only_over_yours_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (jail, yours) = (
        dir.path().join("jail.jsonl"),
        dir.path().join("yours.jsonl"),
    );
    std::fs::write(&yours, "a\n").unwrap();
    std::fs::write(&jail, "a\n").unwrap();
    let stamp = |p: &Path| Stamp::of(&std::fs::symlink_metadata(p).unwrap());
    let c = Copied {
        name: "h".into(),
        jail: stamp(&jail),
        yours: stamp(&yours),
    };
    std::fs::write(&jail, "a\nj\n").unwrap();
    // Yours unchanged: replaced.
    finish::carry_file(&jail, &yours, Some(&c)).unwrap();
    assert_eq!(std::fs::read_to_string(&yours).unwrap(), "a\nj\n");
    // Another file changed on both sides: yours is kept.
    let (jail2, yours2) = (dir.path().join("j.json"), dir.path().join("y.json"));
    std::fs::write(&yours2, "1").unwrap();
    std::fs::write(&jail2, "1").unwrap();
    let c2 = Copied {
        name: "x".into(),
        jail: stamp(&jail2),
        yours: stamp(&yours2),
    };
    std::fs::write(&jail2, "jail").unwrap();
    std::fs::write(&yours2, "yours!").unwrap();
    assert!(finish::carry_file(&jail2, &yours2, Some(&c2)).is_err());
    assert_eq!(std::fs::read_to_string(&yours2).unwrap(), "yours!");
    // The jail's file a symlink to a secret: never read.
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "KEY").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    let target = dir.path().join("new.json");
    assert!(finish::carry_file(&link, &target, None).is_err());
    assert!(!target.exists());
}

#[test]
fn gemini_project_ids_come_from_its_registry_and_are_one_component() {
    let dir = tempfile::tempdir().unwrap();
    let id = |root: &str| crate::runtimes::gemini_project_id(root, dir.path());
    assert_eq!(id("/w"), None, "no registry yet");
    std::fs::write(
        dir.path().join("projects.json"),
        r#"{"projects":{"/w":"w-1","/x":"../x","/y":"a/b","/z":".."}}"#,
    )
    .unwrap();
    assert_eq!(id("/w"), Some("w-1".into()));
    for bad in ["/x", "/y", "/z", "/other"] {
        assert_eq!(id(bad), None, "{bad}");
    }
}
