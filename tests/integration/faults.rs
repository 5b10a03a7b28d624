//! Killed at every phase (issue 38, item 1): SIGKILL the launcher at spread-out moments of a
//! session — launch, seal, the command's run, carry-back and holding at its end — and after each,
//! the next `run` finishes what the dead one left: no placeholder or diversion in the workspace, no
//! mount left on the host, the human's `.git/config` a regular file that never holds what the
//! session wrote there to run a program, and every held item whole. Real bwrap, real signals.

use crate::common::*;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What one session does: commit (the workspace's own repository), write a key git would run (held
/// at the end), leave its config copy to be merged back, and change `~/.claude.json` (carried back
/// at the end by a temporary file and a rename).
const SESSION: &str = "echo more >> README && git commit -qam more && \
                       git config core.fsmonitor 'touch planted' && git config user.name Jailed && \
                       echo \"{\\\"numStartups\\\": $RANDOM}\" > ~/.claude.json";

/// The kills, spread over a session's length and a little past it (uniform, fixed seed).
const KILLS: usize = 200;

/// The host's mount points, sorted, without those a container engine on this machine makes and
/// takes away on its own (another job's `docker run` while this test runs is not a leak of ours).
fn host_mounts() -> Vec<String> {
    const ENGINES: [&str; 4] = [
        "/var/lib/docker/",
        "/run/docker/",
        "/run/containerd/",
        "/run/netns/",
    ];
    let mut out: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| !ENGINES.iter().any(|e| m.starts_with(e)))
        .collect();
    out.sort();
    out
}

/// What the dead session must not have left once the next one ran: the workspace as the session
/// makes it (README, `.git`), the config a regular file without the held key, no diversion.
fn broken(f: &Fixture) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(&f.ws).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n != ".git" && n != "README" {
            out.push(format!("left in the workspace: {n}"));
        }
    }
    let git = f.ws.join(".git");
    match std::fs::symlink_metadata(git.join("config")) {
        Ok(m) if m.file_type().is_file() => {
            let text = std::fs::read_to_string(git.join("config")).unwrap_or_default();
            if text.contains("fsmonitor") {
                out.push(format!("a held key is live in .git/config:\n{text}"));
            }
        }
        _ => out.push(".git/config is not a regular file".into()),
    }
    for n in ["claude-sandbox", "commondir", "config.worktree"] {
        if std::fs::symlink_metadata(git.join(n)).is_ok() {
            out.push(format!(".git/{n} left"));
        }
    }
    if let Ok(lock) = std::fs::read(git.join("config.lock")) {
        out.push(format!(
            ".git/config.lock left: {:?}",
            String::from_utf8_lossy(&lock)
        ));
    }
    for e in std::fs::read_dir(&git).unwrap().flatten() {
        if e.file_name().to_string_lossy().contains("claude-sandbox.") {
            out.push(format!(".git/{} left", e.file_name().to_string_lossy()));
        }
    }
    // The carry-back's temporary names beside your files (`crate::tempname`).
    for e in walkdir::WalkDir::new(&f.home).into_iter().flatten() {
        if e.file_name().to_string_lossy().contains(".claude-sandbox.") {
            out.push(format!("{} left", e.path().display()));
        }
    }
    if serde_json::from_slice::<serde_json::Value>(
        &std::fs::read(f.home.join(".claude.json")).unwrap_or_default(),
    )
    .is_err()
    {
        out.push("~/.claude.json is not whole".into());
    }
    out
}

/// Processes still running for the fixture's workspace (its path in their command line).
fn left_processes(f: &Fixture) -> Vec<String> {
    let ws = f.ws.as_os_str().as_encoded_bytes();
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|p| {
            p.file_name()
                .to_str()
                .is_some_and(|n| n != me && n.parse::<u32>().is_ok())
        })
        .filter_map(|p| {
            let cmd = std::fs::read(p.path().join("cmdline")).ok()?;
            cmd.windows(ws.len()).any(|w| w == ws).then(|| {
                format!(
                    "left running: {:?} {}",
                    p.file_name(),
                    String::from_utf8_lossy(&cmd)
                        .replace('\0', " ")
                        .chars()
                        .take(120)
                        .collect::<String>()
                )
            })
        })
        .collect()
}

/// `FAULTS_DEBUG=1`: what the first problem found there.
fn debug_first(f: &Fixture, problem: &str, next: &std::process::Output) {
    if std::env::var_os("FAULTS_DEBUG").is_none() {
        return;
    }
    let dir = f.ws.join(".git/claude-sandbox");
    let ls: Vec<_> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let lock = std::fs::read(f.ws.join(".git/config.lock")).unwrap_or_default();
    let registry = std::fs::read_to_string(f.rt.join("placeholders.json")).unwrap_or_default();
    let log = std::fs::read_to_string(f.rt.join("claude-sandbox.log")).unwrap_or_default();
    let log: Vec<&str> = log.lines().rev().take(12).collect();
    // Who holds the launchers' locks now (a session judged alive keeps its placeholders).
    let mut holders = Vec::new();
    for l in std::fs::read_dir(f.rt.join("locks"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = l.path();
        for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            for fd in std::fs::read_dir(p.path().join("fd"))
                .into_iter()
                .flatten()
                .flatten()
            {
                if std::fs::read_link(fd.path()).is_ok_and(|t| t == target) {
                    let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                    holders.push(format!(
                        "{} held by {:?}: {}",
                        target.display(),
                        p.file_name(),
                        String::from_utf8_lossy(&cmd).replace('\0', " ")
                    ));
                }
            }
        }
    }
    eprintln!("  lock holders: {holders:#?}");
    eprintln!(
        "FIRST: {problem}\n  .git/claude-sandbox: {ls:?}\n  config.lock: {:?}\n  next: {}\n  registry: {registry}\n  log (last first): {log:#?}",
        String::from_utf8_lossy(&lock),
        stderr(next)
    );
}

#[test]
fn killed_at_any_moment_the_next_run_finishes_it_and_nothing_is_lost() {
    let f = Fixture::new();
    std::fs::write(f.home.join(".claude.json"), "{\"numStartups\": 1}\n").unwrap();
    let mounts = host_mounts();
    // Whole sessions, to spread the kills over their length (the median of five after the
    // first, which makes the layers).
    let mut lengths: Vec<Duration> = (0..6)
        .map(|_| {
            let t0 = Instant::now();
            let out = f.jail(SESSION);
            assert!(out.status.success(), "{}", stderr(&out));
            t0.elapsed()
        })
        .skip(1)
        .collect();
    lengths.sort();
    let length = lengths[2];
    let held_once = stdout(&f.cmd(["review", "--json"]).output().unwrap());
    assert!(
        held_once.contains("core.fsmonitor"),
        "the key was not held: {held_once}"
    );
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut problems = Vec::new();
    let mut before_end = 0;
    for round in 0..KILLS {
        // xorshift64: the same spread every run.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let at = length.mul_f64(f64::from(u32::try_from(seed % 1000).unwrap()) / 1000.0 * 1.1);
        let mut child = f
            .cmd(["run", "--", "bash", "-c", SESSION])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        // Still unreaped when it has not ended: its pid names it alone.
        if child.try_wait().unwrap().is_none() {
            before_end += 1;
            signal(child.id(), nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
        }
        // The next session finishes the dead one's work before its own.
        let next = f.jail("true");
        if !next.status.success() {
            problems.push(format!(
                "round {round} (+{at:?}): the next run failed: {}",
                stderr(&next)
            ));
        }
        // The killed jail's processes end after the launcher (its PID namespace goes down on its
        // own): what is left must still be there 2 s later to count.
        let mut now_broken = broken(&f);
        if !now_broken.is_empty() {
            std::thread::sleep(Duration::from_secs(2));
            now_broken = broken(&f);
        }
        for p in now_broken {
            if problems.is_empty() {
                debug_first(&f, &p, &next);
            }
            problems.push(format!("round {round} (+{at:?}): {p}"));
        }
        let review = f.cmd(["review", "--json"]).output().unwrap();
        if let Err(e) = serde_json::from_slice::<Vec<serde_json::Value>>(&review.stdout) {
            problems.push(format!("round {round}: the review does not read: {e}"));
        }
    }
    // Every held item is whole: the review shows its change.
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    for i in &items {
        let id = i["id"].as_str().unwrap_or_default();
        let shown = f.cmd(["review", "show", id]).output().unwrap();
        if !shown.status.success() {
            problems.push(format!("held item {id} is not whole: {}", stderr(&shown)));
        }
    }
    assert_eq!(host_mounts(), mounts, "mounts were left on the host");
    // Nothing a killed launcher started outlives it: not the jail, not bwrap (a launcher killed
    // between bwrap's fork and its `--die-with-parent` left bwrap waiting for ever).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !left_processes(&f).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    problems.extend(left_processes(&f));
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    // The kills fell on live sessions, not only on ones already over.
    assert!(
        before_end >= KILLS / 4,
        "only {before_end} of {KILLS} kills hit a running session"
    );
    eprintln!(
        "{KILLS} kills over a session of {length:?}: {before_end} before it ended, {} items held; all recovered",
        items.len()
    );
}
