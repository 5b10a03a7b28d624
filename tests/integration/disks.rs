//! Full disks (issue 38, item 2): the runtime directory's filesystem full at launch, and full while
//! a plant is being quarantined; the layer store's full while the jail installs into `~/.local`.
//! Nothing is lost: a plant is never both gone and unrecorded without the human being told where it
//! is, the session ends cleanly, and the message names the fix; a full store fails only the jail's
//! own writes.
//!
//! The full filesystem is a real tmpfs of 2 MiB over the fixture's runtime directory (or its layer
//! store), made by an outer bwrap (so the test runs as an ordinary user too), inside which the launcher, its jail and
//! the watcher run as they always do; the test fills it with `dd` while the session runs.

use crate::common::*;
use std::process::Output;

/// `script` (sh) in a mount namespace where the fixture's runtime directory is a 2 MiB tmpfs;
/// `$CS` is the launcher, `$RT` the runtime directory, the fixture's environment around it.
fn on_a_small_tmpfs(f: &Fixture, script: &str) -> Output {
    on_a_small_tmpfs_at(f, &f.rt, script)
}

/// `script` as `on_a_small_tmpfs` runs it, with the 2 MiB tmpfs at `dir`; `$LAYERS` is the layer
/// store, `$PIP` a `pip install --user`.
fn on_a_small_tmpfs_at(f: &Fixture, dir: &std::path::Path, script: &str) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    let rt = f.rt.to_str().unwrap();
    std::process::Command::new("bwrap")
        .args(["--dev-bind", "/", "/", "--size", "2097152", "--tmpfs"])
        .arg(dir)
        .args(["--", "sh", "-c", script])
        .current_dir(&f.ws)
        .env_clear()
        .envs(f.env())
        .env("CS", bin())
        .env("RT", rt)
        .env("LAYERS", f.root.join("layers"))
        .env(
            "PIP",
            "env PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install -q --user --no-index \
             --no-warn-script-location",
        )
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

/// The layer store's disk full while the jail installs into `~/.local` (the agent filling it, as
/// any program may fill its disk): the jail's write fails inside with ENOSPC, as it would outside,
/// and a small write after it too; the session ends with the command's status and no word of the
/// launcher's; your home is byte for byte as it was. Once the jail's own files are removed (by a
/// session, as the agent would), the next session writes to `~/.local` again.
#[test]
fn a_full_layer_store_fails_the_jails_writes_and_nothing_else() {
    if !pip_or_say("a_full_layer_store_fails_the_jails_writes_and_nothing_else") {
        return;
    }
    let f = Fixture::new();
    let whl = wheel(&f.root, "hello_full", "installed", false);
    let mine = f.home.join(".local/bin/mine");
    std::fs::write(&mine, "#!/bin/sh\necho mine\n").unwrap();
    std::fs::set_permissions(&mine, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let before = f.snapshot();
    let layers = f.root.join("layers");
    let script = format!("export WHL={}\n", whl.display())
        + r#"df -k "$LAYERS" | tail -1 | awk '{print "free-before=" $4}'
           "$CS" run -- sh -c 'mkdir -p ~/.local/lib/fill ~/.local/share
               dd if=/dev/zero of="$HOME/.local/lib/fill/big" bs=64k 2>dd.err; echo "dd=$?"
               grep -c "No space left on device" dd.err; rm dd.err
               echo more > ~/.local/share/after 2>/dev/null || echo small-write-failed
               $PIP "$WHL" >/dev/null 2>&1; echo "pip=$?"
               mine; exit 3'
           echo "run=$?"
           df -k "$LAYERS" | tail -1 | awk '{print "free-after=" $4}'
           "$CS" run -- sh -c 'rm -r ~/.local/lib/fill ~/.local/share/after 2>/dev/null; echo ok > ~/.local/share/next
               cat ~/.local/share/next; $PIP --force-reinstall "$WHL" >&2 && python3 -c "import hello_full; hello_full.main()"'
           echo "again=$?"
           "$CS" run -- cat ~/.local/share/next; echo "kept=$?""#;
    let out = on_a_small_tmpfs_at(&f, &layers, &script);
    let text = stdout(&out);
    let err = stderr(&out);
    for want in [
        "dd=1\n1\nsmall-write-failed\npip=1\nmine\nrun=3\n",
        "ok\ninstalled\nagain=0\nok\nkept=0\n",
    ] {
        assert!(text.contains(want), "{want:?} missing:\n{text}\n{err}");
    }
    let free_after = text
        .lines()
        .find_map(|l| l.strip_prefix("free-after="))
        .and_then(|n| n.parse::<u64>().ok())
        .expect("df after");
    assert!(free_after < 64, "the store was not filled: {text}");
    assert!(
        !err.contains("claude-sandbox"),
        "the launcher spoke of a disk only the jail filled:\n{err}\n{}",
        std::fs::read_to_string(f.root.join("rt/claude-sandbox.log")).unwrap_or_default()
    );
    assert_same(&before, &f.snapshot(), "your home and workspace");
}
