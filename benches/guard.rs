//! `cargo bench --bench guard`: the watcher's figures, printed as a table (never asserted).
//!
//! - baseline time for a writable PATH directory holding 1k and 10k executables;
//! - detection latency, plant → quarantined, measured from outside (the planting thread polls the
//!   path until it is gone), with inotify and with the forced one-second sweep.

use claude_sandbox::baseline;
use claude_sandbox::watch::{Running, WatchConfig};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cs-bench-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

fn exe(path: &Path) {
    std::fs::write(path, b"#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn baseline_time(n: usize) -> (f64, f64) {
    let d = tmp();
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for i in 0..n {
        exe(&bin.join(format!("tool{i}")));
    }
    let path_env = format!("{}:/usr/bin", bin.display());
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let b = baseline::take(
                "bench",
                path_env.as_ref(),
                d.path(),
                &|p| p.starts_with(d.path()),
                &[],
            );
            assert_eq!(b.dirs[0].entries.len(), n);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    (pct(&mut times, 0.5), pct(&mut times, 1.0))
}

/// Plant `count` shadowing executables one at a time; latency until each is gone.
fn detection(poll: bool, count: usize) -> Vec<f64> {
    let d = tmp();
    let (bin, rt, ws) = (
        d.path().join("bin"),
        d.path().join("rt"),
        d.path().join("ws"),
    );
    for p in [&bin, &rt, &ws] {
        std::fs::create_dir(p).unwrap();
    }
    let path_env = format!("{}:/usr/bin:/bin", bin.display());
    let base = baseline::take(
        "bench",
        path_env.as_ref(),
        d.path(),
        &|p| p.starts_with(d.path()),
        &[],
    );
    let cfg = WatchConfig {
        runtime: rt,
        session: "bench".into(),
        workspace: ws,
        force_poll: poll,
        quarantine_new: false,
    };
    let running = Running::start(cfg, &base).unwrap();
    let names = [
        "ls", "cat", "cp", "mv", "rm", "env", "sed", "tar", "grep", "sort", "head", "tail",
    ];
    let mut out = Vec::new();
    for i in 0..count {
        let p = bin.join(names[i % names.len()]);
        // Vary the phase against the sweep so that poll-mode figures are not one lucky alignment.
        std::thread::sleep(Duration::from_millis(37 * (i as u64 % 7)));
        let t = Instant::now();
        exe(&p);
        while std::fs::symlink_metadata(&p).is_ok() {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "not quarantined: {}",
                p.display()
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        out.push(t.elapsed().as_secs_f64() * 1e3);
    }
    running.finish();
    out
}

/// Microseconds per prompt over `n` prompts in a real interactive bash: (hook, no alert file),
/// (hook, alerts all shown), (no hook).
fn prompt_cost(n: usize) -> (f64, f64, f64) {
    let d = tmp();
    let rt = d.path().join("rt");
    std::fs::create_dir(&rt).unwrap();
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("profile.d/claude-sandbox.sh");
    let script = format!(
        r#"__claude_sandbox_bin=/bin/false; . {hook}
loop() {{ local s=$EPOCHREALTIME i; for ((i=0;i<{n};i++)); do "$@"; done; echo "$s $EPOCHREALTIME"; }}
loop __claude_sandbox_prompt
echo a1 > {rt}/alerts.shown
loop __claude_sandbox_prompt
loop :
"#,
        hook = hook.display(),
        rt = rt.display()
    );
    let out = std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-i", "-c", &script])
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", &rt)
        .stderr(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let per: Vec<f64> = text
        .lines()
        .filter_map(|l| {
            let (a, b) = l.split_once(' ')?;
            Some((b.parse::<f64>().ok()? - a.parse::<f64>().ok()?) * 1e6 / n as f64)
        })
        .collect();
    assert_eq!(per.len(), 3, "unexpected output: {text}");
    (per[0], per[1], per[2])
}

fn main() {
    println!(
        "claude-sandbox watcher benchmark ({} cores)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!();
    println!(
        "{:<40} {:>10} {:>10} {:>10}  n",
        "figure", "median", "p99/max", "target"
    );
    for n in [1_000, 10_000] {
        let (med, max) = baseline_time(n);
        println!(
            "{:<40} {:>8.1}ms {:>8.1}ms {:>10}  {}",
            format!("baseline, {n} executables"),
            med,
            max,
            "linear",
            5
        );
    }
    let mut ino = detection(false, 60);
    let (p50, p99) = (pct(&mut ino, 0.5), pct(&mut ino, 0.99));
    println!(
        "{:<40} {:>8.2}ms {:>8.2}ms {:>10}  {}",
        "detection latency, inotify (p50 / p99)",
        p50,
        p99,
        "10 / 50 ms",
        ino.len()
    );
    let (none, shown, bare) = prompt_cost(5000);
    println!(
        "{:<40} {:>8.1}µs {:>10} {:>10}  {}",
        "prompt hook, no alerts ever", none, "", "+50 µs", 5000
    );
    println!(
        "{:<40} {:>8.1}µs {:>10} {:>10}  {}",
        "prompt hook, old alerts all shown", shown, "", "+50 µs", 5000
    );
    println!(
        "{:<40} {:>8.1}µs {:>10} {:>10}  {}",
        "no hook (empty loop)", bare, "", "", 5000
    );
    let mut poll = detection(true, 12);
    let (p50, p99) = (pct(&mut poll, 0.5), pct(&mut poll, 0.99));
    println!(
        "{:<40} {:>8.1}ms {:>8.1}ms {:>10}  {}",
        "detection latency, poll (p50 / p99)",
        p50,
        p99,
        "p99 1.2 s",
        poll.len()
    );
}
