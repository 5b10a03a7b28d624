use super::*;

#[test]
fn each_runtime_and_state_dir_is_defined_once() {
    let mut names: Vec<_> = ALL.iter().map(|r| r.name).collect();
    let mut commands: Vec<_> = commands().collect();
    let mut dirs: Vec<_> = state_dirs().map(|s| s.path).collect();
    for v in [&mut names, &mut commands, &mut dirs] {
        let n = v.len();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), n, "defined twice: {v:?}");
    }
}

#[test]
fn entry_points_lie_in_their_state_dir_and_are_never_writable_when_measured() {
    for s in state_dirs() {
        for e in s.entry_points {
            let rel = e.rel.strip_prefix(s.path).and_then(|r| r.strip_prefix('/'));
            let rel = rel.unwrap_or_else(|| panic!("{} outside {}", e.rel, s.path));
            let top = rel.split('/').next().unwrap();
            if s.measured().is_some() {
                assert_ne!(s.access(top), Access::Writable, "{} is writable", e.rel);
            }
        }
    }
}

#[test]
fn the_allowlist_decides_by_name() {
    let claude = &CLAUDE.state[0];
    assert_eq!(claude.access("projects"), Access::Writable);
    assert_eq!(claude.access(".credentials.json"), Access::Writable);
    assert_eq!(
        claude.access(".credentials.json.tmp.1a2b3c4d"),
        Access::Writable
    );
    assert_eq!(claude.access(".oauth_refresh.lock"), Access::Writable);
    assert_eq!(claude.access("shell-snapshots"), Access::Private);
    for ro in [
        "CLAUDE.md",
        "settings.json",
        "statusline.sh",
        "skills",
        "local",
        ".config.json",
    ] {
        assert_eq!(claude.access(ro), Access::ReadOnly, "{ro}");
    }
    let codex = &CODEX.state[0];
    for w in ["auth.json", ".tmpoRDpVf", "sessions"] {
        assert_eq!(codex.access(w), Access::Writable, "{w}");
    }
    for p in [".tmp", "shell_snapshots"] {
        assert_eq!(codex.access(p), Access::Private, "{p}");
    }
    for ro in [
        ".env",
        "AGENTS.md",
        "rules",
        "prompts",
        "config.toml",
        "hooks.json",
        // Yours: the jail's SQLite stores are its own (`JailStore`).
        "state_5.sqlite",
        "memories_1.sqlite-wal",
    ] {
        assert_eq!(codex.access(ro), Access::ReadOnly, "{ro}");
    }
    assert_eq!(codex.access("skills"), Access::View);
    let gemini = &GEMINI.state[0];
    for w in [
        "tmp",
        "projects.json",
        "projects.json.0d9e-4c1a.tmp",
        "oauth_creds.json",
    ] {
        assert_eq!(gemini.access(w), Access::Writable, "{w}");
    }
    for ro in [
        "GEMINI.md",
        "system.md",
        "policies",
        "trusted_hooks.json",
        ".env",
    ] {
        assert_eq!(gemini.access(ro), Access::ReadOnly, "{ro}");
    }
    assert_eq!(CURSOR.state[0].access("anything"), Access::Writable);
}

#[test]
fn commands_find_their_runtime() {
    assert_eq!(by_command("claude").map(|r| r.name), Some("Claude Code"));
    assert_eq!(
        by_command("cursor-agent").map(|r| r.name),
        Some("Cursor CLI")
    );
    assert!(by_command("bash").is_none());
}

#[test]
fn the_allowlist_says_how_each_name_is_written() {
    let claude = &CLAUDE.state[0];
    assert_eq!(claude.allowed("projects"), Some(Allowed::Dir));
    assert_eq!(claude.allowed(".credentials.json"), Some(Allowed::File));
    assert_eq!(claude.allowed("x.lock"), Some(Allowed::Pattern));
    assert_eq!(claude.allowed("settings.json"), None);
    assert!(claude.own_top_level() && CODEX.state[0].own_top_level());
    assert!(!CURSOR.state[0].own_top_level(), "not measured");
    assert!(!OPENCODE.state[0].own_top_level(), "not directly in $HOME");
}

/// CI installs each agent at the version its allowlist was measured with (`.ci/agents-pinned`):
/// a re-measured table with a stale pin (or the reverse) would test one version and claim another.
#[test]
fn ci_pins_the_measured_version_of_every_npm_runtime() {
    let pins: Vec<&str> = include_str!("../../.ci/agents-pinned")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut expected = Vec::new();
    for r in ALL {
        let Some(package) = r.npm else { continue };
        let measured: Vec<_> = r.state.iter().filter_map(StateDir::measured).collect();
        assert!(
            !measured.is_empty(),
            "{}: an npm runtime that was never measured",
            r.name
        );
        assert!(
            measured.windows(2).all(|w| w[0] == w[1]),
            "{}: its state directories were measured with different versions: {measured:?}",
            r.name
        );
        expected.push(format!("{package}@{}", measured[0]));
    }
    let mut pins: Vec<String> = pins.into_iter().map(String::from).collect();
    pins.sort();
    expected.sort();
    assert_eq!(
        pins, expected,
        ".ci/agents-pinned and the runtimes' `measured` disagree"
    );
}
