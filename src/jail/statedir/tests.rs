use super::*;
use crate::runtimes::{CLAUDE, CODEX, GEMINI};

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
fn of_yours_the_jail_reads_config_shares_histories_and_copies_the_allowlisted_files() {
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
        &[OsString::from("statusline.sh"), OsString::from("gone.sh")],
        None,
        Path::new("/layers"),
    );
    // Transcripts and other agent state: the jail's own, yours not in the jail.
    for own in [
        "projects",
        "todos",
        "stats-cache.json",
        "x.lock",
        "sessions",
    ] {
        assert_eq!(how(&binds, own), None, "{own}: {:?}", names(&binds));
    }
    assert_eq!(how(&binds, ".credentials.json"), Some(How::Copied));
    assert_eq!(
        how(&binds, "history.jsonl"),
        Some(How::Writable),
        "appended in place"
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
    assert_eq!(how(&binds, "shell-snapshots"), Some(How::MountPoint));
    for missing in ["settings.local.json", "commands", "rules", "hooks"] {
        assert!(
            matches!(how(&binds, missing), Some(How::Stub(_))),
            "{missing}: {:?}",
            names(&binds)
        );
    }
}

#[test]
fn codex_gets_its_own_sqlite_store_and_a_view_of_its_skills() {
    let sd = &CODEX.state[0];
    let seen = vec![
        (OsString::from("state_5.sqlite"), Kind::File { size: 10 }),
        (OsString::from("skills"), Kind::Dir),
        (OsString::from("auth.json"), Kind::File { size: 10 }),
        (OsString::from("tmp"), Kind::Dir),
    ];
    let store = Path::new("/s/codex-sqlite");
    let binds = classify(sd, &seen, &[], Some(store), Path::new("/layers"));
    assert_eq!(
        how(&binds, ".claude-sandbox-sqlite"),
        Some(How::Store(store.into()))
    );
    assert_eq!(how(&binds, "state_5.sqlite"), Some(How::ReadOnly), "yours");
    assert_eq!(how(&binds, "skills"), Some(How::MountPoint));
    assert_eq!(how(&binds, "auth.json"), Some(How::Copied));
    assert_eq!(how(&binds, ".tmp"), Some(How::MountPoint));
    // Its live helper directories (`tmp/arg0/*`, on the PATH of your Codex): the session's own,
    // never carried back to yours.
    assert_eq!(how(&binds, "tmp"), Some(How::MountPoint));
    // Its config (folder trust), yours missing here: the jail's own copy all the same.
    assert_eq!(how(&binds, "config.toml"), Some(How::Own("/layers".into())));
}

#[test]
fn gemini_settings_are_the_jails_own_copy_and_its_missing_instructions_a_directory() {
    let sd = &GEMINI.state[0];
    let seen = vec![(OsString::from("settings.json"), Kind::File { size: 10 })];
    let binds = classify(sd, &seen, &[], None, Path::new("/layers"));
    assert_eq!(
        how(&binds, "settings.json"),
        Some(How::Own("/layers".into()))
    );
    assert_eq!(how(&binds, "GEMINI.md"), Some(How::Stub(Stub::Dir)));
    assert_eq!(
        how(&binds, "trusted_hooks.json"),
        Some(How::Stub(Stub::File("{}\n")))
    );
}

#[test]
fn mounts_bind_the_jails_own_directory_then_yours_and_its_stubs() {
    let binds = vec![
        StateBind {
            name: "history.jsonl".into(),
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
    ];
    let (real, own) = (Path::new("/h/.claude"), Path::new("/s/state/claude"));
    let mut mounts = Vec::new();
    crate::jail::mounts::state_dir(&mut mounts, real, own, &binds);
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
            s("/s/state/claude", "/h/.claude", true),
            s("/h/.claude/history.jsonl", "/h/.claude/history.jsonl", true),
            s(
                "/h/.claude/settings.json",
                "/h/.claude/settings.json",
                false
            ),
            s("/s/state/claude/CLAUDE.md", "/h/.claude/CLAUDE.md", false),
        ]
    );
    assert_eq!(
        writable_paths(real, &binds),
        vec![PathBuf::from("/h/.claude/history.jsonl")]
    );
}

/// A session directory in a runtime directory, and what `prepare` gives the jail.
struct Scene {
    _dir: tempfile::TempDir,
    home: PathBuf,
    own: PathBuf,
    runtime: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let home = root.join("home");
        std::fs::create_dir_all(home.join(".claude")).unwrap();
        Scene {
            own: root.join("state/claude"),
            runtime: root.join("rt"),
            home,
            _dir: dir,
        }
    }

    /// One session: prepare, let `jail` write in the jail's own directory, finish.
    fn session(&self, id: &str, jail: impl FnOnce(&Path)) -> Vec<String> {
        let sd = &CLAUDE.state[0];
        let session = crate::runtime_dir::RuntimeDir::new(&self.runtime)
            .session(id)
            .path()
            .to_path_buf();
        std::fs::create_dir_all(&session).unwrap();
        let real = self.home.join(".claude");
        let binds = classify(
            sd,
            &listing(&real),
            &[],
            None,
            &self.own.parent().unwrap().join("layers"),
        );
        prepare(&session, &self.home, &[(sd, &self.own, &binds)]).unwrap();
        jail(&self.own);
        finish(&session)
    }
}

fn creds(account: &str, token: &str) -> String {
    format!(
        r#"{{"claudeAiOauth":{{"accessToken":"{token}","refreshToken":"r-{account}","accountUuid":"{account}","organizationUuid":"o"}}}}"#
    )
}

#[test]
fn a_refresh_of_your_login_comes_back_and_another_account_is_held() {
    let s = Scene::new();
    let yours = s.home.join(".claude/.credentials.json");
    std::fs::write(&yours, creds("me", "t1")).unwrap();
    let notes = s.session("s1", |own| {
        assert_eq!(
            std::fs::read_to_string(own.join(".credentials.json")).unwrap(),
            creds("me", "t1"),
            "yours copied in"
        );
        std::fs::write(own.join(".credentials.json"), creds("me", "t2")).unwrap();
    });
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(std::fs::read_to_string(&yours).unwrap(), creds("me", "t2"));
    assert!(crate::held::Store::new(&s.runtime).waiting().is_empty());
    let notes = s.session("s2", |own| {
        std::fs::write(own.join(".credentials.json"), creds("attacker", "x")).unwrap();
    });
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(
        std::fs::read_to_string(&yours).unwrap(),
        creds("me", "t2"),
        "held, not yours"
    );
    let held = crate::held::Store::new(&s.runtime).waiting();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].target, yours);
    assert!(held[0].why.contains("attacker"), "{}", held[0].why);
    // Accepted, it is yours byte for byte.
    crate::held::Store::new(&s.runtime)
        .accept(&held[0].id)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&yours).unwrap(),
        creds("attacker", "x")
    );
}

#[test]
fn what_the_agent_writes_stays_the_jails_for_its_next_session_and_never_reaches_you() {
    let s = Scene::new();
    std::fs::write(s.home.join(".claude/settings.json"), "{}\n").unwrap();
    s.session("s1", |own| {
        std::fs::create_dir_all(own.join("projects/-w")).unwrap();
        std::fs::write(own.join("projects/-w/t.jsonl"), "PLANTED\n").unwrap();
        std::fs::create_dir_all(own.join("plugins-of-a-newer-release")).unwrap();
        std::fs::write(own.join("remote-settings.json"), "{}").unwrap();
    });
    assert!(!s.home.join(".claude/projects").exists());
    assert!(!s.home.join(".claude/remote-settings.json").exists());
    assert!(crate::held::Store::new(&s.runtime).waiting().is_empty());
    assert!(
        crate::alerts::Store::new(&s.runtime)
            .read()
            .alerts
            .is_empty(),
        "no alert"
    );
    // The next session finds it; two sessions making the directory ready at once do not collide.
    s.session("s2", |own| {
        assert_eq!(
            std::fs::read_to_string(own.join("projects/-w/t.jsonl")).unwrap(),
            "PLANTED\n"
        );
    });
    s.session("s3", |_| {});
}

#[test]
fn a_mount_point_whose_kind_changed_is_moved_aside_not_lost() {
    let s = Scene::new();
    s.session("s1", |own| {
        // Your `commands` is missing: its stub is a directory of the jail's.
        assert!(own.join("commands").is_dir());
    });
    std::fs::write(s.home.join(".claude/commands"), "a file of yours now").unwrap();
    std::fs::write(s.own.join("commands/kept.md"), "x").unwrap();
    s.session("s2", |own| {
        assert!(own.join("commands").is_file());
    });
    let aside = s.own.join(".claude-sandbox-set-aside");
    let kept: Vec<_> = std::fs::read_dir(&aside).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1);
    assert!(kept[0].path().join("kept.md").is_file());
}
