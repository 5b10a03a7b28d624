//! The attack battery, run exactly as a user runs it: every case through the real launcher and
//! watcher, in both watch modes — one of them from a terminal (a pseudo-terminal made by `script`),
//! where a battery that hands its commands the caller's terminal hangs — and `--unguarded`, which
//! must show that every attack really works. Also: a case that times out ends what it started and
//! nothing else, proved inside a PID namespace of its own so that a wrong signal can only hit the
//! disposable processes there.

use crate::common::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A bound for a whole battery run: a hang fails the test instead of blocking it forever.
const RUN_LIMIT: Duration = Duration::from_secs(15 * 60);

fn quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Run `c` in a session of its own (never on the test runner's terminal) and wait at most `limit`;
/// on a time-out its group is killed by pid and the test fails.
fn run_bounded(mut c: Command, limit: Duration, what: &str) -> Option<i32> {
    c.stdin(Stdio::null());
    // SAFETY: `setsid` is one async-signal-safe system call between fork and exec.
    unsafe {
        c.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if t0.elapsed() > limit {
            let pgid = i32::try_from(child.id()).unwrap();
            assert!(pgid > 1);
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn battery(
    extra_env: &[(&str, &str)],
    args: &[&str],
    terminal: bool,
) -> (Option<i32>, Vec<serde_json::Value>) {
    require_jail();
    let dir = src_dir().join("battery");
    let out_dir = tempfile::Builder::new()
        .prefix("cs-battery-out-")
        .tempdir_in(test_tmp())
        .unwrap();
    let (json, err) = (out_dir.path().join("out.json"), out_dir.path().join("err"));
    let mut words = vec![
        quote(&bin()),
        "battery".into(),
        "--json".into(),
        "--dir".into(),
        quote(&dir),
    ];
    words.extend(args.iter().map(|a| format!("'{a}'")));
    let line = format!("{} > {} 2> {}", words.join(" "), quote(&json), quote(&err));
    let mut c = if terminal {
        // `script` gives the battery a controlling terminal of its own, as a human's shell would.
        let mut c = Command::new("script");
        c.args(["-qec", &line, "/dev/null"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &line]);
        c
    };
    c.stdout(Stdio::null());
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let code = run_bounded(c, RUN_LIMIT, "the battery");
    let text = std::fs::read(&json).unwrap_or_default();
    let results: Vec<serde_json::Value> = serde_json::from_slice(&text).unwrap_or_else(|e| {
        panic!(
            "{e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&text),
            std::fs::read_to_string(&err).unwrap_or_default()
        )
    });
    if terminal {
        // script's exit status is the battery's.
        assert!(code.is_some(), "script was killed");
    }
    (code, results)
}

fn report(results: &[serde_json::Value], bad: impl Fn(&str) -> bool) -> Vec<String> {
    results
        .iter()
        .filter(|r| bad(r["verdict"].as_str().unwrap()))
        .map(|r| format!("{} [{}]: {}", r["name"], r["verdict"], r["detail"]))
        .collect()
}

fn assert_guarded(mode: &str, env: &[(&str, &str)], terminal: bool) {
    let (code, results) = battery(env, &[], terminal);
    assert!(results.len() >= 40, "{} cases", results.len());
    let failed = report(&results, |v| v == "missed" || v == "alerted");
    assert!(
        failed.is_empty(),
        "[{mode}] attacks that got through:\n{}",
        failed.join("\n")
    );
    for s in report(&results, |v| v == "skipped") {
        eprintln!("[{mode}] SKIPPED (not counted as a pass): {s}");
    }
    assert_eq!(code, Some(0));
}

#[test]
fn every_attack_is_blocked_or_neutralised_with_inotify_from_a_terminal() {
    assert_guarded("inotify, in a terminal", &[], true);
}

#[test]
fn every_attack_is_blocked_or_neutralised_with_the_poll_sweep() {
    assert_guarded("poll", &[("CLAUDE_SANDBOX_WATCH", "poll")], false);
}

#[test]
fn unguarded_every_attack_really_works() {
    let (code, results) = battery(&[], &["--unguarded"], false);
    let broken = report(&results, |v| v != "missed" && v != "skipped");
    assert!(
        broken.is_empty(),
        "cases that cannot fail (the attack does not work even without the guard):\n{}",
        broken.join("\n")
    );
    assert_eq!(code, Some(0));
}

/// A case made to time out, run in a PID namespace of its own beside a bystander: a process of the
/// same user in another group. The battery must finish, say the case timed out, and leave the
/// bystander alive; the timed-out payload's group must be gone.
#[test]
fn a_timed_out_case_ends_its_own_group_and_nothing_else() {
    require_jail();
    let root = tempfile::Builder::new()
        .prefix("cs-battery-timeout-")
        .tempdir_in(test_tmp())
        .unwrap();
    let cases = root.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    std::fs::write(
        cases.join("hangs.toml"),
        "name = \"hangs\"\nclass = \"test\"\nentry_point = \"none\"\ntier = 1\n\
         success = \"never\"\ntimeout = 2\n\
         payload = '''\necho $$ > \"$ROOT/../payload.pgid\"\nsleep 300 & sleep 300\n'''\n",
    )
    .unwrap();
    let out = root.path().join("out.json");
    let report = root.path().join("report");
    let script = format!(
        r#"setsid sleep 300 & bystander=$!
CLAUDE_SANDBOX_TEST_TMP={tmp} {bin} battery --unguarded --json --dir {cases} > {out} 2>&1
echo "battery=$?" > {report}
if kill -0 "$bystander" 2>/dev/null; then echo bystander=alive >> {report}; fi
ps -eo pid=,pgid=,comm= >> {report}
kill "$bystander""#,
        tmp = quote(root.path()),
        bin = quote(&bin()),
        cases = quote(&cases),
        out = quote(&out),
        report = quote(&report),
    );
    let mut c = Command::new("bwrap");
    c.args([
        "--dev-bind",
        "/",
        "/",
        "--unshare-pid",
        "--proc",
        "/proc",
        "--die-with-parent",
        "--",
        "bash",
        "-c",
        &script,
    ]);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    let t0 = Instant::now();
    run_bounded(
        c,
        Duration::from_secs(120),
        "the battery with a timed-out case",
    );
    let report = std::fs::read_to_string(&report).unwrap();
    let json = std::fs::read_to_string(&out).unwrap();
    assert!(report.contains("bystander=alive"), "{report}\n{json}");
    let results: Vec<serde_json::Value> = serde_json::from_str(&json).expect(&json);
    assert_eq!(results.len(), 1, "{json}");
    assert!(
        results[0]["detail"].as_str().unwrap().contains("timed out"),
        "{json}"
    );
    // The payload's group (its pid, as it leads its session) has no member left.
    let pgid = std::fs::read_to_string(root.path().join("payload.pgid")).unwrap();
    let pgid = pgid.trim();
    let survivors: Vec<&str> = report
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some(pgid))
        .collect();
    assert!(survivors.is_empty(), "group {pgid} survived: {survivors:?}");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}
