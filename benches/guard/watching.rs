//! The watcher's figures: the baseline's cost, detection latency in both modes, the launcher at
//! rest, and the prompt hook's cost per prompt.

use super::*;

/// The baseline of one PATH directory of `n` executables, taken at `depth`: names only is what a
/// launch waits for; every attribute is what the watcher then reads in the background.
pub(super) fn baseline_time(n: usize, depth: baseline::Depth) -> (f64, f64, usize) {
    let d = tmp();
    let bin = d.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for i in 0..n {
        exe(&bin.join(format!("tool{i}")));
    }
    let path_env = format!("{}:/usr/bin", bin.display());
    let runs = if n > 50_000 { 2 } else { 5 };
    let t = time_runs(runs, || {
        let b = baseline::take(
            "bench",
            path_env.as_ref(),
            d.path(),
            &|p| p.starts_with(d.path()),
            &[],
            None,
            depth,
        );
        let read = b.dirs[0].entries.len() + b.dirs[0].deferred.len();
        assert_eq!(read, n);
    });
    (pct(&t, 0.5), pct(&t, 1.0), runs)
}

/// Baseline everything under `scene` on `path_env` and start a watcher on it.
pub(super) fn start_watcher(
    scene: &Path,
    path_env: &str,
    rt: &Path,
    ws: PathBuf,
    poll: bool,
) -> Running {
    let base = baseline::take(
        "bench",
        path_env.as_ref(),
        scene,
        &|p| p.starts_with(scene),
        &[],
        None,
        baseline::Depth::Attributes,
    );
    let cfg = WatchConfig {
        runtime: rt.to_path_buf(),
        session: "bench".into(),
        workspace: ws,
        force_poll: poll,
        quarantine_new: false,
        hidden_globs: Vec::new(),
        tree_dirs: Vec::new(),
        catch_up: true,
        placeholders: std::collections::HashSet::default(),
        resolve_delay: claude_sandbox::watch::RESOLVE_DELAY,
        tree_delay: std::time::Duration::ZERO,
        writable_roots: Some(vec![scene.to_path_buf()]),
        // The watcher of a launch reads the launcher's: this process's.
        host: claude_sandbox::host::HostEnv::capture(),
        envrc_path_dirs: Vec::new(),
        new_sockets: None,
    };
    Running::start(cfg, &base).unwrap()
}

/// Plant `count` shadowing executables one at a time; latency until each is gone, seen from outside.
pub(super) fn detection(poll: bool, count: usize) -> Vec<f64> {
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
    let running = start_watcher(d.path(), &path_env, &rt, ws, poll);
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
    drop(running.finish());
    out
}

/// CPU (% of one core) and RSS of the launcher — its watcher at rest — over `secs`, while the jail
/// sleeps: a real `claude-sandbox run`, 10 writable PATH directories × `per_dir` executables.
pub(super) fn at_rest(poll: bool, per_dir: usize, secs: u64) -> (f64, f64) {
    let (d, ws, path) = fixture(1, 10, per_dir);
    let mut launch = Command::new(bin());
    launch
        .args(["run", "--", "sleep", &(secs + 3).to_string()])
        .current_dir(&ws)
        .env("HOME", d.path().join("home"))
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", d.path().join("rt"))
        .env("PATH", &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if poll {
        launch.env("CLAUDE_SANDBOX_WATCH", "poll");
    }
    let mut child = launch.spawn().unwrap();
    let pid = child.id();
    let cpu = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
            .split_whitespace()
            .collect();
        (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0 // clock ticks (USER_HZ 100)
    };
    // Let the set-up, the background hashing and the first sweeps pass.
    std::thread::sleep(Duration::from_secs(2));
    let (c0, t0) = (cpu(), Instant::now());
    std::thread::sleep(Duration::from_secs(secs));
    let pct_core = (cpu() - c0) / t0.elapsed().as_secs_f64() * 100.0;
    let rss_kb: f64 = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0.0);
    assert!(child.wait().unwrap().success());
    (pct_core, rss_kb / 1024.0)
}

/// Microseconds per prompt over `n` prompts in a real interactive bash: (hook, no alert pending),
/// (no hook at all).
pub(super) fn prompt_cost(n: usize) -> (f64, f64) {
    let d = tmp();
    let rt = d.path().join("rt");
    std::fs::create_dir(&rt).unwrap();
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("profile.d/claude-sandbox.sh");
    let script = format!(
        r#"__claude_sandbox_bin=/bin/false; . {hook}
loop() {{ local s=$EPOCHREALTIME i; for ((i=0;i<{n};i++)); do "$@"; done; echo "$s $EPOCHREALTIME"; }}
echo a1 > {rt}/alerts.shown
loop __claude_sandbox_prompt
loop :
"#,
        hook = hook.display(),
        rt = rt.display()
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-i", "-c", &script])
        .env("CLAUDE_SANDBOX_RUNTIME_DIR", &rt)
        .stderr(Stdio::null())
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
    assert_eq!(per.len(), 2, "unexpected output: {text}");
    (per[0], per[1])
}

pub(super) fn detection_rows() {
    let ino = detection(false, 60);
    Table::row(
        "detection latency, inotify (p50 / p99)",
        format!("{:.2} ms", pct(&ino, 0.5)),
        format!("{:.2} ms", pct(&ino, 0.99)),
        "10 / 50 ms",
        String::new(),
        ino.len(),
    );
    let poll = detection(true, 12);
    Table::row(
        "detection latency, poll (p50 / p99)",
        ms(pct(&poll, 0.5)),
        ms(pct(&poll, 0.99)),
        "p99 1.2 s",
        String::new(),
        poll.len(),
    );
}

pub(super) fn prompt_rows() {
    let (hook, bare) = prompt_cost(5000);
    Table::row(
        "prompt hook, nothing new (per prompt)",
        format!("{hook:.1} µs"),
        String::new(),
        "+50 µs",
        format!("+{:.1} µs", hook - bare),
        5000,
    );
    Table::row(
        "no hook (per prompt)",
        format!("{bare:.1} µs"),
        String::new(),
        "",
        String::new(),
        5000,
    );
}

pub(super) fn rest_rows() {
    let (cpu, rss) = at_rest(false, 1000, 8);
    Table::row(
        "watcher at rest, inotify, 10 dirs/10k entries",
        format!("{cpu:.2} %"),
        format!("{rss:.1} MB"),
        "~0 % / 15 MB",
        "CPU/RSS",
        1,
    );
    let (cpu, rss) = at_rest(true, 1000, 8);
    Table::row(
        "watcher at rest, poll, 10 dirs/10k entries",
        format!("{cpu:.2} %"),
        format!("{rss:.1} MB"),
        "<=1 % / 15 MB",
        "CPU/RSS",
        1,
    );
}
