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
