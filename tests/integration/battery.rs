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
            // SIGTERM first: the battery then ends its own case's group and removes its scene
            // (src/battery/interrupt.rs), which a SIGKILL to this group would not reach.
            let pgid = nix::unistd::Pid::from_raw(pgid);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGTERM);
            let t1 = Instant::now();
            let mut ended = false;
            while !ended && t1.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(50));
                ended = child.try_wait().unwrap().is_some();
            }
            // Only while the leader is unreaped does its pid still name this group.
            if !ended {
                let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
            }
            panic!("{what} did not finish within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Files the battery writes into that have no name: a test ended by Ctrl-C (which runs no
/// destructor) leaves nothing behind in the temporary directory.
fn unnamed_file() -> std::fs::File {
    tempfile::tempfile_in(test_tmp()).unwrap()
}

/// The battery's command line, its output and errors on descriptors 3 and 4 (`exec`: the battery
/// is the shell itself, and receives the parent-death signal set before it).
fn battery_line(args: &[&str]) -> String {
    let dir = src_dir().join("battery");
    let mut words = vec![
        "exec".into(),
        quote(&bin()),
        "battery".into(),
        "--json".into(),
        "--dir".into(),
        quote(&dir),
    ];
    words.extend(args.iter().map(|a| format!("'{a}'")));
    format!("{} >&3 2>&4 3>&- 4>&-", words.join(" "))
}

/// `c` writes its descriptors 3 and 4 into `out` and `err`, and is sent SIGTERM when this test's
/// thread ends (it ended, panicked, or the test binary was interrupted): the battery then ends its
/// running case and removes its scene (src/battery/interrupt.rs).
fn tied_to_this_test(c: &mut Command, out: &std::fs::File, err: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // Above 3 and 4, so that placing one cannot overwrite the other.
    let high = |f: &std::fs::File| rustix::io::fcntl_dupfd_cloexec(f, 100).unwrap();
    let (o, e) = (high(out), high(err));
    let parent = i32::try_from(std::process::id()).unwrap();
    // SAFETY: prctl, getppid and dup2 are async-signal-safe system calls; the descriptors are
    // moved in and stay open until the closure is dropped after the spawn.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
                || libc::getppid() != parent
                || libc::dup2(o.as_raw_fd(), 3) != 3
                || libc::dup2(e.as_raw_fd(), 4) != 4
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn read_all(mut f: std::fs::File) -> Vec<u8> {
    use std::io::{Read, Seek};
    let mut v = Vec::new();
    f.rewind().unwrap();
    f.read_to_end(&mut v).unwrap();
    v
}

fn battery(
    extra_env: &[(&str, &str)],
    args: &[&str],
    terminal: bool,
) -> (Option<i32>, Vec<serde_json::Value>) {
    require_jail();
    let (json, err) = (unnamed_file(), unnamed_file());
    let line = battery_line(args);
    let mut c = if terminal {
        // `script` gives the battery a controlling terminal of its own, as a human's shell would;
        // killed, it hangs the terminal up, and the battery ends on the SIGHUP.
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
    tied_to_this_test(&mut c, &json, &err);
    let code = run_bounded(c, RUN_LIMIT, "the battery");
    let text = read_all(json);
    let results: Vec<serde_json::Value> = serde_json::from_slice(&text).unwrap_or_else(|e| {
        panic!(
            "{e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&text),
            String::from_utf8_lossy(&read_all(err))
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

/// Ctrl-C during `cargo test` (issue 38, item 6): SIGINT to the test binary while a battery test's
/// battery runs a case. The battery and everything it started end, and nothing is left in the
/// temporary directory (no `cs-battery-out-*`, no scene), within `BOUND`. (A PID namespace would be
/// neater, but the jail cannot mount its `/proc` inside one that bwrap made.)
#[test]
fn an_interrupted_battery_test_leaves_no_process_and_no_file() {
    const BOUND: u64 = 20;
    require_jail();
    let root = tempfile::Builder::new()
        .prefix("cs-battery-interrupt-")
        .tempdir_in(test_tmp())
        .unwrap();
    let test_bin = std::env::current_exe().unwrap();
    for inner in [
        "battery::every_attack_is_blocked_or_neutralised_with_the_poll_sweep",
        "battery::every_attack_is_blocked_or_neutralised_with_inotify_from_a_terminal",
    ] {
        let tmp = root.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let report = root.path().join("report");
        let script = format!(
            r#"# Job control: the test runs in a group of its own, not ignoring SIGINT as a plain `&` would;
# Ctrl-C is SIGINT to the terminal's foreground group, which is this group.
set -m
CLAUDE_SANDBOX_TEST_TMP={tmp} {test_bin} {inner} --exact --test-threads=1 >/dev/null 2>&1 &
inner=$!
for _ in $(seq 600); do
  for d in {tmp}/claude-sandbox-battery-*; do [ -e "$d" ] && break 2; done
  sleep 0.1
done
sleep 2
ps -eo pid=,args= > {report}.before
kill -INT -- "-$inner"; wait "$inner"; echo "inner=$?" > {report}
t0=$SECONDS
while :; do
  left=""
  for p in /proc/[0-9]*; do
    read -r stat < "$p/stat" 2>/dev/null || continue
    set -- ${{stat##*) }}
    [ "$2" = $$ ] && [ "$1" != Z ] && left="$left ${{stat%% *}}:${{stat#*(}}"
  done
  [ -z "$left" ] && break
  [ $((SECONDS - t0)) -ge {BOUND} ] && break
  sleep 0.2
done
echo "left=$left" >> {report}
echo "after=$((SECONDS - t0))" >> {report}
ls -A {tmp} >> {report}"#,
            tmp = quote(&tmp),
            test_bin = quote(&test_bin),
            report = quote(&report),
        );
        // The driver is a child subreaper: whatever the interrupted test leaves running becomes
        // its child, so "its children" is exactly what was left.
        let mut c = Command::new("python3");
        c.args([
            "-c",
            "import ctypes, os, sys\n\
             if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0: sys.exit('PR_SET_CHILD_SUBREAPER failed')\n\
             os.execvp('bash', ['bash', '-c', sys.argv[1]])",
            &script,
        ]);
        c.stdout(Stdio::null()).stderr(Stdio::null());
        run_bounded(c, Duration::from_secs(180), "the interrupted battery test");
        let before = std::fs::read_to_string(report.with_extension("before")).unwrap();
        let report = std::fs::read_to_string(&report).unwrap();
        // The interrupt came while the battery ran (so the check below can fail).
        assert!(
            before.lines().any(|l| l.contains(" battery --json")),
            "{inner}: no battery was running when interrupted:\n{before}"
        );
        let mut lines = report.lines();
        assert_eq!(lines.next(), Some("inner=130"), "{inner}: {report}");
        assert_eq!(lines.next(), Some("left="), "{inner}: {report}\n{before}");
        let secs: u64 = lines
            .next()
            .and_then(|l| l.strip_prefix("after="))
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(secs < BOUND, "{inner}: {report}");
        let files: Vec<&str> = lines.collect();
        assert!(files.is_empty(), "{inner}: left behind: {files:?}");
        eprintln!("{inner}: interrupted; nothing left after {secs} s");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
