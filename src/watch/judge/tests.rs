//! Every arm of the judge, from plain values: no file, no inotify, no jail.

use super::*;
use crate::alerts::AlertKind;
use crate::baseline::{Kind, Sha256};

fn file(mode: u32, ino: u64, content: u8) -> Entry {
    Entry {
        kind: Kind::File,
        mode,
        uid: 1000,
        gid: 1000,
        size: 10,
        mtime_ns: 1,
        ctime_ns: 1,
        dev: 7,
        ino,
        nlink: 1,
        sha256: Sha256::from_hex(&format!("{content:02x}").repeat(32)),
        link_target: None,
        changed_in_session: false,
    }
}

fn exe(content: u8) -> Entry {
    file(0o755, 100, content)
}

fn symlink(target: &str) -> Entry {
    Entry {
        kind: Kind::Symlink,
        mode: 0o777,
        sha256: None,
        link_target: Some(PathBuf::from(target)),
        ..file(0o777, 200, 0)
    }
}

/// Plain answers, and a record of what the judge asked.
struct Facts {
    quarantine_new: bool,
    shadows: Option<&'static str>,
    asked: std::cell::RefCell<Vec<(PathPos, String)>>,
}

impl Facts {
    fn new() -> Facts {
        Facts {
            quarantine_new: false,
            shadows: None,
            asked: std::cell::RefCell::default(),
        }
    }
}

impl Context for Facts {
    fn quarantine_new(&self) -> bool {
        self.quarantine_new
    }
    fn shadows(&self, pos: PathPos, name: &str) -> Option<PathBuf> {
        self.asked.borrow_mut().push((pos, name.to_string()));
        self.shadows.map(PathBuf::from)
    }
    fn git_dir(&self, repo: RepoId) -> &Path {
        assert_eq!(repo, RepoId(3));
        Path::new("/ws/.git")
    }
}

const PATH_DIR: Role = Role::PathDir { pos: PathPos(1) };
const HOOKS: Role = Role::Hooks { repo: RepoId(3) };

fn seen<'a>(
    name: &'a str,
    origin: Option<&'a Entry>,
    before: Option<&'a Entry>,
    after: &'a Entry,
) -> Seen<'a> {
    Seen {
        name,
        origin,
        before,
        after,
    }
}

fn quarantine(severity: Severity, kind: AlertKind, detail: &str) -> Verdict {
    Verdict::Quarantine(Finding {
        severity,
        kind,
        detail: detail.into(),
    })
}

#[test]
fn a_new_executable_that_shadows_a_command_is_quarantined() {
    let mut f = Facts::new();
    f.shadows = Some("/usr/bin/git");
    let after = exe(1);
    let v = judge(&PATH_DIR, &seen("git", None, None, &after), &f);
    assert_eq!(
        v,
        quarantine(
            Severity::Critical,
            AlertKind::PathShadow,
            "shadows /usr/bin/git"
        )
    );
    assert_eq!(*f.asked.borrow(), [(PathPos(1), "git".to_string())]);
}

#[test]
fn a_new_executable_that_shadows_nothing_is_alerted_or_quarantined_as_configured() {
    let mut f = Facts::new();
    let after = exe(1);
    let s = seen("tool", None, None, &after);
    assert_eq!(
        judge(&PATH_DIR, &s, &f),
        Verdict::Alert(Finding {
            severity: Severity::Info,
            kind: AlertKind::PathNew,
            detail: "new executable on PATH, shadows nothing".into(),
        })
    );
    f.quarantine_new = true;
    assert_eq!(
        judge(&PATH_DIR, &s, &f),
        quarantine(Severity::Info, AlertKind::PathNew, "new executable on PATH")
    );
}

#[test]
fn a_file_that_becomes_executable_is_new() {
    let mut f = Facts::new();
    f.shadows = Some("/usr/bin/ls");
    let (before, after) = (file(0o644, 100, 1), file(0o755, 100, 1));
    let v = judge(&PATH_DIR, &seen("ls", None, Some(&before), &after), &f);
    assert_eq!(
        v,
        quarantine(
            Severity::Critical,
            AlertKind::PathShadow,
            "shadows /usr/bin/ls"
        )
    );
}

#[test]
fn what_is_not_executable_is_quiet_whatever_the_role() {
    let f = Facts::new();
    let after = file(0o644, 100, 1);
    for role in [PATH_DIR, HOOKS, Role::Tree, Role::Retired] {
        let v = judge(&role, &seen("x", None, None, &after), &f);
        assert_eq!(v, Verdict::Quiet, "{role:?}");
    }
    assert!(f.asked.borrow().is_empty(), "asked what it shadows");
}

#[test]
fn an_unchanged_executable_is_quiet() {
    let f = Facts::new();
    let (before, after) = (exe(1), exe(1));
    let v = judge(
        &PATH_DIR,
        &seen("ls", Some(&before), Some(&before), &after),
        &f,
    );
    assert_eq!(v, Verdict::Quiet);
}

#[test]
fn a_baseline_executable_that_changed_is_quarantined() {
    let f = Facts::new();
    let (origin, after) = (exe(1), exe(2));
    let v = judge(
        &PATH_DIR,
        &seen("ls", Some(&origin), Some(&origin), &after),
        &f,
    );
    assert_eq!(
        v,
        quarantine(
            Severity::High,
            AlertKind::PathChanged,
            "an executable on PATH changed since the session started"
        )
    );
    // Changed before the watcher read it (`Resolve::Event`): it counts as changed even though the
    // attributes read are the changed ones.
    let mut read_late = exe(2);
    read_late.changed_in_session = true;
    let v = judge(&PATH_DIR, &seen("ls", Some(&read_late), None, &after), &f);
    assert!(
        matches!(
            v,
            Verdict::Quarantine(Finding {
                kind: AlertKind::PathChanged,
                ..
            })
        ),
        "{v:?}"
    );
}

#[test]
fn a_new_executable_still_being_written_is_not_judged_twice() {
    let mut f = Facts::new();
    f.shadows = Some("/usr/bin/ls");
    let (before, after) = (exe(1), exe(2));
    let v = judge(&PATH_DIR, &seen("ls", None, Some(&before), &after), &f);
    assert_eq!(v, Verdict::Quiet);
    assert!(f.asked.borrow().is_empty());
}

#[test]
fn a_symlink_says_where_it_points_and_a_hard_link_how_many_names() {
    let mut f = Facts::new();
    f.shadows = Some("/usr/bin/git");
    let after = symlink("/tmp/evil");
    let v = judge(&PATH_DIR, &seen("git", None, None, &after), &f);
    assert_eq!(
        v,
        quarantine(
            Severity::Critical,
            AlertKind::PathShadow,
            "shadows /usr/bin/git (symlink to /tmp/evil)"
        )
    );
    let mut linked = exe(1);
    linked.nlink = 3;
    assert_eq!(describe_links(&linked), " (hard link, 3 names)");
}

#[test]
fn a_hook_is_quarantined_and_a_sample_is_not() {
    let f = Facts::new();
    let after = exe(1);
    let v = judge(&HOOKS, &seen("pre-commit", None, None, &after), &f);
    assert_eq!(
        v,
        quarantine(
            Severity::Critical,
            AlertKind::GitHook,
            "git hook `pre-commit` of /ws/.git"
        )
    );
    // A changed hook of the baseline too.
    let (origin, changed) = (exe(1), exe(2));
    let v = judge(
        &HOOKS,
        &seen("pre-push", Some(&origin), Some(&origin), &changed),
        &f,
    );
    assert!(
        matches!(
            v,
            Verdict::Quarantine(Finding {
                kind: AlertKind::GitHook,
                ..
            })
        ),
        "{v:?}"
    );
    let v = judge(&HOOKS, &seen("pre-commit.sample", None, None, &after), &f);
    assert_eq!(v, Verdict::Quiet);
}

#[test]
fn other_roles_judge_no_entries() {
    let f = Facts::new();
    let after = exe(1);
    for role in [
        Role::GitDir { repo: RepoId(3) },
        Role::Pending { pos: PathPos(0) },
        Role::Tree,
        Role::Retired,
    ] {
        let v = judge(&role, &seen("x", None, None, &after), &f);
        assert_eq!(v, Verdict::Quiet, "{role:?}");
    }
}

#[test]
fn keys_are_taken_out_only_from_a_new_repositorys_own_config() {
    let alert = |detail: &str| {
        Verdict::Alert(Finding {
            severity: Severity::Critical,
            kind: AlertKind::GitConfig,
            detail: detail.into(),
        })
    };
    let fsmonitor = "exec-capable git config: core.fsmonitor = ./x";
    assert_eq!(
        judge_key("core.fsmonitor", "./x", true, true),
        Verdict::Neutralise(Finding {
            severity: Severity::Critical,
            kind: AlertKind::GitConfig,
            detail: fsmonitor.into(),
        })
    );
    // A repository of the baseline: alerted only.
    assert_eq!(
        judge_key("core.fsmonitor", "./x", false, true),
        alert(fsmonitor)
    );
    // An included file (perhaps the human's): alerted only.
    assert_eq!(
        judge_key("core.fsmonitor", "./x", true, false),
        alert(fsmonitor)
    );
    // The built-in daemon runs nothing of the repository's.
    assert_eq!(
        judge_key("core.fsmonitor", "true", true, true),
        alert("exec-capable git config: core.fsmonitor = true")
    );
    // A config git refuses to read runs nothing; there is no key to take out.
    assert_eq!(
        judge_key(baseline::REFUSED_KEY, "bad line 3", true, true),
        alert("git config that git refuses to read: bad line 3")
    );
}

#[test]
fn a_visible_secret_is_high() {
    let f = judge_hidden("**/.env");
    assert_eq!(
        (f.severity, f.kind),
        (Severity::High, AlertKind::SecretVisible)
    );
    assert!(f.detail.contains("hidden = \"**/.env\""), "{}", f.detail);
}

/// `core.fsmonitor` is one boolean for the baseline (which keys are exec-capable at all) and the
/// judge (which of them runs nothing of the repository's, and stays in a new repository's config):
/// git's (`gitconfig::parse_bool`). Read apart, `FALSE` was exec-capable to the baseline and taken
/// out of a new repository, and `2` (git's built-in daemon) was taken for a hook.
#[test]
fn core_fsmonitor_is_read_as_one_boolean_by_the_baseline_and_the_judge() {
    for v in crate::gitconfig::tests::BOOLEANS {
        let git = crate::gitconfig::parse_bool(v);
        assert_eq!(
            crate::catalogue::git::is_exec_key("core.fsmonitor", v),
            git != Some(false),
            "{v:?}: exec-capable"
        );
        if git == Some(false) {
            continue;
        }
        let verdict = judge_key("core.fsmonitor", v, true, true);
        assert_eq!(
            matches!(verdict, Verdict::Neutralise(_)),
            git.is_none(),
            "{v:?}: taken out of a new repository's config"
        );
    }
}

/// A catalogued name, made: an alert naming who runs it; any other name a build writes: nothing.
#[test]
fn a_made_catalogued_name_is_an_entry_point_alert_and_other_names_are_nothing() {
    let f = judge_created_name(".npmrc").expect(".npmrc is catalogued");
    assert_eq!(f.kind, AlertKind::EntryPointCreated);
    assert_eq!(f.severity, Severity::High);
    assert!(f.detail.contains("npm: "), "{}", f.detail);
    for name in [
        "AGENTS.md",
        ".vscode",
        "pnpm-workspace.yaml",
        "opencode.json",
    ] {
        assert!(judge_created_name(name).is_some(), "{name}");
    }
    for name in ["main.o", "npmrc", ".npmrc.bak", "tasks.json", "x.rs"] {
        assert!(judge_created_name(name).is_none(), "{name}");
    }
}
