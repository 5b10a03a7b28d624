//! `cargo bench --bench guard`: every performance figure of the guard in one table (printed, never
//! asserted). Figures: launch overhead against bare bwrap (and srt when installed), the launcher's
//! peak RSS, detection latency in both watch modes, the prompt hook's cost, the watcher at rest, and
//! how the baseline and the launch scale with executables and repositories.

// Statistics over timings and counts: f64 is exact far beyond any figure measured here.
#![allow(clippy::cast_precision_loss)]

mod audit;
mod features;
mod links;
mod scale;
mod tree_cpu;
mod watching;
mod work;
use watching::{baseline_time, detection_rows, prompt_rows, rest_rows};

use claude_sandbox::baseline;
use claude_sandbox::watch::{Running, WatchConfig};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the scenes are made: `/var/tmp`, or `$CLAUDE_SANDBOX_BENCH_DIR` (another file system, e.g.
/// an ext4 image with a journal, as most disks have: this VM's own disk has none, and there
/// back-to-back launches slow each other down; docs/performance.md).
fn bench_dir() -> PathBuf {
    std::env::var_os("CLAUDE_SANDBOX_BENCH_DIR")
        .map_or_else(|| PathBuf::from("/var/tmp"), PathBuf::from)
}

fn tmp() -> tempfile::TempDir {
    tmp_in(&bench_dir())
}

fn tmp_in(base: &Path) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cs-bench-")
        .tempdir_in(base)
        .unwrap()
}

/// The filesystem under `path`; for ext4 whether it has a journal and whether it is mounted with
/// `discard`. With `discard` every freed block is trimmed as it is freed: removing the 42 placeholder
/// directories took 5-6 ms here instead of ~1 ms (docs/performance.md).
fn describe_fs(path: &Path) -> String {
    let out = Command::new("findmnt")
        .args(["-no", "SOURCE,FSTYPE,OPTIONS", "-T"])
        .arg(path)
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut parts = text.split_whitespace();
    let (source, fstype) = (parts.next().unwrap_or("?"), parts.next().unwrap_or("?"));
    let discard = parts
        .next()
        .is_some_and(|o| o.split(',').any(|o| o == "discard"));
    if fstype != "ext4" {
        return format!("{fstype} ({source})");
    }
    let dev = Path::new(source)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let journal = match std::fs::read_to_string(format!("/sys/fs/ext4/{dev}/journal_task")) {
        Ok(t) if t.trim() == "<none>" => "without a journal",
        Ok(_) => "with a journal",
        Err(_) => "journal unknown",
    };
    let discard = if discard {
        ", mounted with discard"
    } else {
        ""
    };
    format!("ext4 {journal}{discard} ({source})")
}

fn exe(path: &Path) {
    std::fs::write(path, b"#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn pct(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    // `p` is in [0, 1], so the rounded index is within the vector.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

struct Table;
impl Table {
    fn header() {
        println!(
            "{:<46} {:>11} {:>11} {:>12} {:>9}  n",
            "figure", "median", "p99/max", "target", "ratio"
        );
    }
    fn row(
        figure: &str,
        median: impl std::fmt::Display,
        p99: impl std::fmt::Display,
        target: &str,
        ratio: impl std::fmt::Display,
        n: usize,
    ) {
        println!("{figure:<46} {median:>11} {p99:>11} {target:>12} {ratio:>9}  {n}");
    }
}

fn ms(v: f64) -> String {
    format!("{v:.1} ms")
}

/// A workspace with `repos` repositories and `dirs` writable PATH directories holding `per_dir`
/// executables each. Returns (scene, workspace, PATH).
fn fixture(repos: usize, dirs: usize, per_dir: usize) -> (tempfile::TempDir, PathBuf, String) {
    fixture_in(&bench_dir(), repos, dirs, per_dir)
}

fn fixture_in(
    base: &Path,
    repos: usize,
    dirs: usize,
    per_dir: usize,
) -> (tempfile::TempDir, PathBuf, String) {
    let d = tmp_in(base);
    let ws = d.path().join("ws");
    std::fs::create_dir_all(d.path().join("home/.local/bin")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let git = |dir: &Path| {
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    git(&ws);
    for r in 1..repos {
        let p = ws.join(format!("repo{r}"));
        std::fs::create_dir_all(&p).unwrap();
        git(&p);
    }
    let mut path = Vec::new();
    for i in 0..dirs {
        let bin = ws.join(format!("tools{i}/bin"));
        std::fs::create_dir_all(&bin).unwrap();
        for j in 0..per_dir {
            exe(&bin.join(format!("t{i}-{j}")));
        }
        path.push(bin.display().to_string());
    }
    path.push("/usr/local/bin:/usr/bin:/bin".into());
    // Write the fixture out before measuring: otherwise its own writeback (thousands of new inodes)
    // makes every inode the launch allocates wait ~1 ms on ext4 here, for the next half minute.
    assert!(Command::new("sync").status().unwrap().success());
    (d, ws, path.join(":"))
}

fn time_runs(n: usize, mut f: impl FnMut()) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

/// The launcher measured: this build's, or `$CLAUDE_SANDBOX_BENCH_BIN` (another build, for a
/// before/after on the same scenes in the same hour).
fn bin() -> PathBuf {
    std::env::var_os("CLAUDE_SANDBOX_BENCH_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_claude-sandbox")),
        PathBuf::from,
    )
}

fn launch(scene: &Path, ws: &Path, path: &str) -> Command {
    launch_of(scene, ws, path, &["true"])
}

fn launch_of(scene: &Path, ws: &Path, path: &str, command: &[&str]) -> Command {
    launch_with(&bin(), scene, ws, path, command)
}

fn launch_with(bin: &Path, scene: &Path, ws: &Path, path: &str, command: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(["run", "--"])
        .args(command)
        .current_dir(ws)
        .env("HOME", scene.join("home"))
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", scene.join("rt"))
        .env("PATH", path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// Bare bwrap and the guarded launch of `true`, alternating, after three of each to warm up.
fn bare_and_guarded(d: &Path, ws: &Path, path: &str) -> (Vec<f64>, Vec<f64>) {
    let bare = || {
        let ok = Command::new("/usr/bin/bwrap")
            .args([
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "true",
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    let guarded = || assert!(launch(d, ws, path).status().unwrap().success());
    for _ in 0..3 {
        bare();
        guarded();
    }
    let (mut b, mut g) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        b.extend(time_runs(1, bare));
        g.extend(time_runs(1, guarded));
    }
    (b, g)
}

fn launch_overhead() {
    let (scene, ws, path) = fixture(5, 10, 200);
    println!("  (workspace on {})", describe_fs(scene.path()));
    let (b, g) = bare_and_guarded(scene.path(), &ws, &path);
    let bm = overhead_rows(
        &b,
        &g,
        [
            "bare bwrap, true",
            "claude-sandbox run -- true (5 repos, 2000 exe)",
            "  launch overhead (median difference)",
        ],
    );
    if Path::new("/usr/bin/time").exists() {
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(bin())
            .args(["run", "--", "true"])
            .current_dir(&ws)
            .env("HOME", scene.path().join("home"))
            .env("CLAUDE_SANDBOX_RUNTIME_DIR", scene.path().join("rt"))
            .env("PATH", &path)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        let kb: f64 = String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(0.0);
        Table::row(
            "  launcher peak RSS",
            format!("{:.1} MB", kb / 1024.0),
            String::new(),
            "<= 15 MB",
            String::new(),
            1,
        );
    } else {
        println!("  launcher peak RSS: not measured (/usr/bin/time missing: apt-get install time)");
    }
    match Command::new("sh").args(["-c", "command -v srt"]).output() {
        Ok(o) if o.status.success() => {
            let srt = String::from_utf8_lossy(&o.stdout).trim().to_string();
            // A failing srt (it needs ripgrep and socat) must not be timed as if it worked.
            let probe = Command::new(&srt)
                .arg("true")
                .current_dir(&ws)
                .output()
                .unwrap();
            if !probe.status.success() {
                let why = String::from_utf8_lossy(&probe.stderr);
                println!(
                    "  srt installed but `srt true` fails ({}): no side-by-side figure",
                    why.lines().next().unwrap_or("no message").trim()
                );
                return;
            }
            let s = time_runs(10, || {
                let _ = Command::new(&srt)
                    .arg("true")
                    .current_dir(&ws)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            });
            Table::row(
                "srt true (sandbox-runtime)",
                ms(pct(&s, 0.5)),
                ms(pct(&s, 0.99)),
                "",
                format!("{:.1}", pct(&s, 0.5) / bm),
                s.len(),
            );
            if let Ok(out) = Command::new("/usr/bin/time")
                .args(["-f", "%M"])
                .arg(&srt)
                .arg("true")
                .current_dir(&ws)
                .output()
            {
                let err = String::from_utf8_lossy(&out.stderr);
                if let Some(kb) = err
                    .lines()
                    .last()
                    .and_then(|l| l.trim().parse::<f64>().ok())
                {
                    Table::row(
                        "  srt peak RSS",
                        format!("{:.1} MB", kb / 1024.0),
                        String::new(),
                        "",
                        String::new(),
                        1,
                    );
                }
            }
        }
        _ => {
            println!("  srt (@anthropic-ai/sandbox-runtime) not installed: no side-by-side figure");
        }
    }
}

/// The same launch with the workspace (and runtime directory) on tmpfs: the launcher's own cost,
/// without the disk filesystem's.
fn launch_on_tmpfs() {
    let shm = Path::new("/dev/shm");
    if !describe_fs(shm).starts_with("tmpfs") {
        println!("  /dev/shm is not a tmpfs here: no tmpfs figure");
        return;
    }
    let (d, ws, path) = fixture_in(shm, 5, 10, 200);
    let (b, g) = bare_and_guarded(d.path(), &ws, &path);
    overhead_rows(
        &b,
        &g,
        [
            "  same, workspace on tmpfs: bare bwrap",
            "  same, workspace on tmpfs: run -- true",
            "  same, workspace on tmpfs: overhead",
        ],
    );
    // A lived-in `$HOME`: bwrap binds each top-level entry into the session's home, and each of its
    // binds re-reads the mount table (see docs/performance.md).
    let home = d.path().join("home");
    for i in 0..10 {
        std::fs::write(home.join(format!(".rc{i}")), "x\n").unwrap();
        std::fs::create_dir_all(home.join(format!(".dir{i}"))).unwrap();
    }
    let (b, g) = bare_and_guarded(d.path(), &ws, &path);
    overhead_rows(
        &b,
        &g,
        [
            "  same, $HOME with 21 entries: bare bwrap",
            "  same, $HOME with 21 entries: run -- true",
            "  same, $HOME with 21 entries: overhead",
        ],
    );
}

/// Where the overhead is, on tmpfs: before the command starts, and after it ends (final sweep,
/// clean-up, closing the inotify instance). The command prints the wall clock as it starts; bare
/// bwrap runs the same command. The launcher logs how long closing inotify took (its last act, one
/// line on stderr: `RUST_LOG=claude_sandbox::timing=debug`).
fn launch_phases() {
    let shm = Path::new("/dev/shm");
    if !describe_fs(shm).starts_with("tmpfs") {
        return;
    }
    let (d, ws, path) = fixture_in(shm, 5, 10, 200);
    let probe = PROBE;
    let split = split_run;
    let bare = bare_probe;
    let guarded = || {
        let mut c = launch_of(d.path(), &ws, &path, &probe);
        c.env("RUST_LOG", "warn,claude_sandbox::timing=debug");
        c
    };
    let (mut b, mut g, mut closes) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..33 {
        let (bare_run, guarded_run) = (split(bare()), split(guarded()));
        if round < 3 {
            continue;
        }
        b.push((bare_run.0, bare_run.1));
        g.push((guarded_run.0, guarded_run.1));
        let close = guarded_run
            .2
            .lines()
            .find(|l| l.contains("inotify instance closed"))
            .and_then(|l| l.split("ms=").nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok());
        closes.extend(close);
    }
    let half = |v: &[(f64, f64)], second: bool| -> Vec<f64> {
        v.iter().map(|p| if second { p.1 } else { p.0 }).collect()
    };
    for (second, label) in [
        (false, "  tmpfs: until the command starts, + vs bare"),
        (true, "  tmpfs: after the command ends, + vs bare"),
    ] {
        difference_row(label, &half(&b, second), &half(&g, second));
    }
    if closes.is_empty() {
        println!("  closing the inotify instance: not logged (no inotify here?)");
        return;
    }
    let slow = closes.iter().filter(|&&c| c > 2.0).count();
    Table::row(
        "    of which: closing inotify (kernel)",
        ms(pct(&closes, 0.5)),
        ms(pct(&closes, 0.99)),
        "",
        format!("{slow}/{} >2ms", closes.len()),
        closes.len(),
    );
}

/// A command that prints the time it started (ns since the epoch): `split_run` reads it.
const PROBE: [&str; 3] = ["sh", "-c", "date +%s%N"];

/// Bare bwrap running `PROBE`.
fn bare_probe() -> Command {
    let mut c = Command::new("/usr/bin/bwrap");
    c.args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--unshare-pid"])
        .args(PROBE);
    c
}

/// Run a command that runs `PROBE`: (ms until it printed, ms from then until the process was gone,
/// its stderr).
fn split_run(mut c: Command) -> (f64, f64, String) {
    let now_ns = || {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        i128::try_from(ns).unwrap()
    };
    let t0 = now_ns();
    let out = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let t2 = now_ns();
    assert!(out.status.success(), "{c:?} failed");
    let t1: i128 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    ((t1 - t0) as f64 / 1e6, (t2 - t1) as f64 / 1e6, err)
}

/// The benchmark workspace plus a build tree like a Rust `target/` (800 directories, 12 000 files),
/// tagged as a cache (what cargo writes), then the same tree untagged (any other big tree the walk
/// must read: a `build/`, vendored sources). On tmpfs.
fn launch_with_build_tree() {
    let shm = Path::new("/dev/shm");
    if !describe_fs(shm).starts_with("tmpfs") {
        return;
    }
    let (d, ws, path) = fixture_in(shm, 5, 10, 200);
    let tree = ws.join("target");
    for i in 0..400 {
        let dir = tree.join(format!("debug/build/crate{i}/out"));
        std::fs::create_dir_all(&dir).unwrap();
        for j in 0..15 {
            std::fs::write(dir.join(format!("f{j}.o")), b"").unwrap();
            std::fs::write(dir.parent().unwrap().join(format!("g{j}")), b"").unwrap();
        }
    }
    let tag = tree.join("CACHEDIR.TAG");
    std::fs::write(&tag, "Signature: 8a477f597d28d172789f06886806bc55\n").unwrap();
    for (label, tagged) in [
        ("  + 12k-file build tree, tagged: overhead", true),
        ("  + same tree untagged: overhead", false),
    ] {
        if !tagged {
            std::fs::remove_file(&tag).unwrap();
        }
        let (b, g) = bare_and_guarded(d.path(), &ws, &path);
        difference_row(label, &b, &g);
    }
}

/// One row: the guarded median (and p99) less bare bwrap's median.
fn difference_row(label: &str, bare: &[f64], guarded: &[f64]) {
    Table::row(
        label,
        ms(pct(guarded, 0.5) - pct(bare, 0.5)),
        ms(pct(guarded, 0.99) - pct(bare, 0.5)),
        "",
        String::new(),
        guarded.len(),
    );
}

/// Three rows: bare bwrap, the guarded launch, the difference of the medians. Returns bare's median.
fn overhead_rows(b: &[f64], g: &[f64], labels: [&str; 3]) -> f64 {
    let (bm, gm) = (pct(b, 0.5), pct(g, 0.5));
    Table::row(
        labels[0],
        ms(bm),
        ms(pct(b, 0.99)),
        "reference",
        "1.0",
        b.len(),
    );
    Table::row(
        labels[1],
        ms(gm),
        ms(pct(g, 0.99)),
        "",
        format!("{:.1}", gm / bm),
        g.len(),
    );
    Table::row(
        labels[2],
        ms(gm - bm),
        String::new(),
        "<= 15 ms",
        String::new(),
        g.len(),
    );
    bm
}

/// `run -- true` in each network mode, alternating (20 rounds after 3 to warm up), and the
/// differences to `host`: the proxy and the bridge must cost nothing outside `allowlist` mode, and
/// the default (`allowlist`) at most a millisecond over `host` (issue 34).
fn launch_network_modes() {
    let (d, ws, path) = fixture(5, 10, 200);
    let modes = ["host", "none", "allowlist"];
    let once = |mode: &str| {
        let mut c = Command::new(bin());
        c.args(["run", "--network", mode, "--", "true"])
            .current_dir(&ws)
            .env("HOME", d.path().join("home"))
            .env("CLAUDE_SANDBOX_RUNTIME_DIR", d.path().join("rt"))
            .env("PATH", &path)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        assert!(c.status().unwrap().success(), "run --network {mode}");
    };
    for m in modes.iter().chain(&modes).chain(&modes) {
        once(m);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..20 {
        for (i, m) in modes.iter().enumerate() {
            times[i].extend(time_runs(1, || once(m)));
        }
    }
    let host = pct(&times[0], 0.5);
    for (i, m) in modes.iter().enumerate() {
        let med = pct(&times[i], 0.5);
        Table::row(
            &format!(
                "run --network {m} -- true{}",
                if *m == "allowlist" { " (default)" } else { "" }
            ),
            ms(med),
            ms(pct(&times[i], 0.99)),
            match *m {
                "host" => "reference",
                "allowlist" => "+1 ms",
                _ => "",
            },
            if i == 0 {
                String::new()
            } else {
                format!("{:+.2} ms", med - host)
            },
            times[i].len(),
        );
    }
}

fn launch_by_repos() {
    for repos in [1, 10, 100] {
        let (d, ws, path) = fixture(repos, 1, 10);
        let _ = launch(d.path(), &ws, &path).status();
        let t = time_runs(5, || {
            assert!(launch(d.path(), &ws, &path).status().unwrap().success());
        });
        Table::row(
            &format!("launch, workspace with {repos} repositories"),
            ms(pct(&t, 0.5)),
            ms(pct(&t, 1.0)),
            "",
            String::new(),
            t.len(),
        );
    }
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    println!("claude-sandbox benchmark ({cores} cores)\n");
    Table::header();
    // `cargo bench --bench guard -- launch poll`: only the sections named (launch, baseline,
    // detection, prompt, rest, churn, tmpfs-churn, memory, realwork, network, features, audit,
    // hardlinks, scale); all by default.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted =
        |section: &str| only.is_empty() || only.iter().any(|o| section.contains(o.as_str()));
    if wanted("launch") {
        launch_overhead();
        launch_on_tmpfs();
        launch_phases();
        launch_with_build_tree();
        launch_by_repos();
    }
    if wanted("network") {
        launch_network_modes();
    }
    if wanted("features") {
        features::launch_every_feature();
    }
    if wanted("audit") {
        audit::launch_with_shipping();
    }
    for n in [1_000, 10_000, 100_000]
        .into_iter()
        .filter(|_| wanted("baseline"))
    {
        for (depth, what) in [
            (baseline::Depth::Names, "names (at launch)"),
            (baseline::Depth::Attributes, "attributes"),
        ] {
            let (med, max, runs) = baseline_time(n, depth);
            Table::row(
                &format!("baseline, {n} executables, {what}"),
                ms(med),
                ms(max),
                "linear",
                format!("{:.3} ms/k", med / (n as f64 / 1000.0)),
                runs,
            );
        }
    }
    if wanted("detection") {
        detection_rows();
    }
    if wanted("prompt") {
        prompt_rows();
    }
    if wanted("rest") {
        rest_rows();
    }
    if wanted("churn") {
        work::churn_rows();
    }
    if wanted("tmpfs-churn") {
        tree_cpu::tree_cpu_rows();
    }
    if wanted("memory") {
        work::memory_rows();
    }
    if wanted("realwork") {
        work::real_work_rows();
    }
    if wanted("hardlinks") {
        links::hardlink_rows();
    }
    if wanted("scale") {
        scale::scale_rows();
    }
}
