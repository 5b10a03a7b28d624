//! Read-only places (issue 32, items 4 and 5): a workspace you cannot write launches quietly, read
//! only in the jail too, with nothing made in it; a path outside the writable places that a session
//! needs (a local bare repository to push to) is named at the session's end with the knob that
//! opens it, and `--writable` opens it with the same seals as any repository. Real bwrap, real git.

use crate::common::*;
use std::path::Path;
use std::process::{Command, Output};

/// Make `ws` read-only to the user running the tests and run `claude-sandbox ARGS` against it: as
/// an ordinary user by its mode (`chmod a-w`, as the human would), as root (whom no mode stops) by
/// a read-only bind of it in a mount namespace of the launcher's own.
fn run_read_only(f: &Fixture, ws: &Path, args: &[&str]) -> Output {
    if is_root() {
        let mut c = Command::new("unshare");
        c.args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind -o ro "$0" "$0" && shift && exec "$@""#)
            .arg(ws)
            .arg("--")
            .arg(bin())
            .args(args)
            .current_dir(ws)
            .env_clear()
            .envs(f.env())
            .stdin(std::process::Stdio::null());
        c.output().expect("unshare")
    } else {
        set_mode(ws, 0o555);
        let out = f.cmd(args).current_dir(ws).output().expect("spawn");
        set_mode(ws, 0o755);
        out
    }
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_workspace_read_only_to_you_launches_quietly_and_read_only() {
    let f = Fixture::new();
    let before = f.snapshot();
    let script = "cat README; if touch new 2>/dev/null; then echo WROTE; fi; \
                  if mkdir .claude 2>/dev/null; then echo WROTE-DIR; fi; git status --short; echo END";
    let out = run_read_only(&f, &f.ws, &["run", "--", "bash", "-c", script]);
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "the launch failed:\n{se}");
    assert!(so.contains("hello") && so.contains("END"), "{so}\n{se}");
    assert!(
        !so.contains("WROTE"),
        "the jail wrote a read-only workspace:\n{so}"
    );
    // Quietly: nothing to seal where nothing can be written, so nothing to warn of either.
    assert!(
        !se.contains("WARN"),
        "warnings on a read-only workspace:\n{se}"
    );
    // Nothing was made in it (no placeholder, no diverted config), nothing is left.
    assert_same(&before, &f.snapshot(), "a read-only workspace's session");
    let explain = run_read_only(&f, &f.ws, &["explain"]);
    assert!(
        stdout(&explain).contains("Workspace (read-only: it is read-only to you)"),
        "{}",
        stdout(&explain)
    );
}

fn listing(dir: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    v.sort();
    v
}

#[test]
fn a_push_to_a_local_repository_outside_names_the_knob_and_writable_opens_it_sealed() {
    let f = Fixture::new();
    let bare = f.root.join("remote.git");
    f.git(&f.root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    f.git(&f.ws, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let (top, hooks) = (listing(&bare), listing(&bare.join("hooks")));

    // Outside the writable places: git's own failure, and the session's end names the remote and
    // the knob.
    let out = f.jail("git push -q origin HEAD:refs/heads/one 2>&1 || echo PUSH-FAILED");
    assert!(stdout(&out).contains("PUSH-FAILED"), "{}", stdout(&out));
    let se = stderr(&out);
    let named = format!("git remote `origin` is {}", bare.display());
    assert!(se.contains(&named) && se.contains("--writable"), "{se}");
    let explain = stdout(&f.cmd(["explain"]).output().unwrap());
    assert!(explain.contains(&named), "{explain}");

    // `--writable`: the push lands; the repository's hooks stay sealed and its config is the
    // jail's copy, what runs a program in it held for the review.
    let script = format!(
        "git push -q origin HEAD:refs/heads/two && echo PUSHED; \
         if echo x > {b}/hooks/pre-receive 2>/dev/null; then echo HOOK-WRITTEN; fi; \
         git -C {b} config core.fsmonitor 'touch planted'",
        b = bare.display()
    );
    let out = f
        .cmd([
            "run",
            "--writable",
            bare.to_str().unwrap(),
            "--",
            "bash",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(
        so.contains("PUSHED") && !so.contains("HOOK-WRITTEN"),
        "{so}\n{se}"
    );
    assert!(!se.contains(&named), "named although writable:\n{se}");
    f.git(&bare, &["rev-parse", "--verify", "-q", "refs/heads/two"]);
    let config = std::fs::read_to_string(bare.join("config")).unwrap();
    assert!(
        !config.contains("fsmonitor"),
        "crossed back unreviewed:\n{config}"
    );
    let review = stdout(&f.cmd(["review", "--json"]).output().unwrap());
    assert!(review.contains("core.fsmonitor"), "not held: {review}");
    assert_eq!(listing(&bare.join("hooks")), hooks, "the hooks changed");
    assert_eq!(listing(&bare), top, "something was left in the repository");
}
