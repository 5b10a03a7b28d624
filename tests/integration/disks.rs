//! Full disks (issue 38, item 2): the runtime directory's filesystem full at launch, and full while
//! a plant is being quarantined. Nothing is lost: a plant is never both gone and unrecorded without
//! the human being told where it is, the session ends cleanly, and the message names the fix.
//!
//! The full filesystem is a real tmpfs of 2 MiB over the fixture's runtime directory, made by an
//! outer bwrap (so the test runs as an ordinary user too), inside which the launcher, its jail and
//! the watcher run as they always do; the test fills it with `dd` while the session runs.

use crate::common::*;
use std::process::Output;

/// `script` (sh) in a mount namespace where the fixture's runtime directory is a 2 MiB tmpfs;
/// `$CS` is the launcher, `$RT` the runtime directory, the fixture's environment around it.
fn on_a_small_tmpfs(f: &Fixture, script: &str) -> Output {
    std::fs::create_dir_all(&f.rt).unwrap();
    let rt = f.rt.to_str().unwrap();
    std::process::Command::new("bwrap")
        .args(["--dev-bind", "/", "/", "--size", "2097152", "--tmpfs", rt])
        .args(["--", "sh", "-c", script])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env("CS", bin())
        .env("RT", rt)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

/// Start a session that plants `~/.local/bin/git` once `go` exists, wait until its command runs,
/// then `$BEFORE_PLANT` (fills the disk), then let it plant and end.
const SESSION: &str = r#"
"$CS" run -- sh -c 'touch ready; while [ ! -e go ]; do sleep 0.05; done
    cp /bin/true ~/.local/bin/git; sleep 1.5' &
until [ -e ready ]; do sleep 0.05; done
eval "$BEFORE_PLANT"
dd if=/dev/zero of="$RT/fill" bs=4k 2>/dev/null
touch go; wait $!; echo "run=$?"
"#;

fn alerts_of(text: &str) -> Vec<serde_json::Value> {
    let json = &text[text.find("ALERTS=").expect("the alerts were listed") + 7..];
    let json = &json[..json.find("=END").unwrap()];
    serde_json::from_str::<serde_json::Value>(json)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Full while the plant is taken: the reserve is released, the plant is quarantined with its
/// record and its alert, and `restore` brings it back byte for byte.
#[test]
fn a_full_runtime_directory_costs_neither_the_record_nor_the_alert() {
    let f = Fixture::sharing_local_bin();
    let script = format!(
        "BEFORE_PLANT=: {SESSION}
         echo ALERTS=$(\"$CS\" alerts --json)=END
         id=$(\"$CS\" alerts --json | grep -o '\"quarantine_id\": \"q[0-9a-f]*\"' | head -1 | cut -d'\"' -f4)
         \"$CS\" restore \"$id\" >/dev/null; echo restore=$?"
    );
    let out = on_a_small_tmpfs(&f, &script);
    let text = stdout(&out);
    assert!(text.contains("run=0"), "{text}\n{}", stderr(&out));
    let alerts = alerts_of(&text);
    let plant = f.home.join(".local/bin/git");
    let a = alerts
        .iter()
        .find(|a| a["path"] == plant.to_str().unwrap())
        .unwrap_or_else(|| panic!("no alert for the plant: {alerts:?}"));
    assert!(a["quarantine_id"].is_string(), "{a}");
    assert!(text.contains("restore=0"), "{text}\n{}", stderr(&out));
    assert_eq!(
        std::fs::read(&plant).unwrap(),
        std::fs::read("/bin/true").unwrap()
    );
}

/// Full with no reserve left (another session took it): the plant is out of reach all the same,
/// and the one place that knows where — the alert, or the session's last words on stderr — says
/// the command that puts it back; that command does.
#[test]
fn past_the_reserve_the_plant_is_out_of_reach_and_the_alert_says_where() {
    let f = Fixture::sharing_local_bin();
    let script = format!(
        "BEFORE_PLANT='rm -f \"$RT/reserve\"' {SESSION}
         echo ALERTS=$(\"$CS\" alerts --json)=END"
    );
    let out = on_a_small_tmpfs(&f, &script);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("run=0"), "{text}");
    let plant = f.home.join(".local/bin/git");
    assert!(!plant.exists(), "the plant is out of reach");
    let told = text.find("to put it back by hand: `mv ").map_or_else(
        || panic!("no one says where the plant is: {text}"),
        |i| &text[i + "to put it back by hand: `".len()..],
    );
    let command = &told[..told.find('`').unwrap()];
    let back = std::process::Command::new("sh")
        .args(["-c", command])
        .output()
        .unwrap();
    assert!(back.status.success(), "{command:?}: {}", stderr(&back));
    assert_eq!(
        std::fs::read(&plant).unwrap(),
        std::fs::read("/bin/true").unwrap()
    );
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&plant).unwrap().permissions())
            & 0o777,
        0o755
    );
}

/// Full before the launch: nothing starts, one line names the file and the fix; with space again
/// the next launch runs and the failed one left no session behind.
#[test]
fn full_at_launch_nothing_starts_and_the_next_launch_cleans_up() {
    let f = Fixture::new();
    let out = on_a_small_tmpfs(
        &f,
        r#"dd if=/dev/zero of="$RT/fill" bs=4k 2>/dev/null
           "$CS" run -- touch started; echo "run=$?"
           rm "$RT/fill"; "$CS" run -- true; echo "again=$?"; ls "$RT/sessions""#,
    );
    let text = stdout(&out);
    assert!(text.contains("run=125"), "{text}\n{}", stderr(&out));
    assert!(!f.ws.join("started").exists(), "nothing started");
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.contains("the filesystem is full: free space on it")),
        "{err}"
    );
    assert!(text.contains("again=0"), "{text}\n{err}");
    assert!(
        text.trim_end().ends_with("again=0"),
        "a session directory was left: {text}"
    );
}
