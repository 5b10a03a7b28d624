//! The launch with every feature of the guard turned on, beside the plain guarded launch and bare
//! bwrap, alternating: the cache layers (overlays over the human's `~/.cache`, `~/.npm`,
//! `~/.cargo/registry`, `~/.local/share/pnpm`), the network allowlist (the proxy), the jail's own
//! copy of each repository's `.git/config` (five repositories, each diverted for the session), and
//! agent state directories (`~/.claude`, `~/.codex`). The runtime directory is beside the scene (on
//! the bench's disk) in the first rows; a last row puts it on a tmpfs, as it is in use (`/run` for
//! root, `$XDG_RUNTIME_DIR` for a user), where the jail's own state directories and the session's
//! `$HOME` cost no disk.

use super::{
    bare_probe, difference_row, fixture, launch_of, ms, pct, split_run, Command, Table, PROBE,
};

pub(crate) fn launch_every_feature() {
    let (plain, plain_ws, plain_path) = fixture(5, 10, 200);
    let (full, full_ws, full_path) = fixture(5, 10, 200);
    let home = full.path().join("home");
    for d in [
        ".cache/pip",
        ".npm/_cacache",
        ".cargo/registry/index",
        ".local/share/pnpm/store",
        ".claude/projects",
        ".codex/sessions",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".claude/settings.json"), "{}\n").unwrap();
    std::fs::create_dir_all(home.join(".config/claude-sandbox")).unwrap();
    std::fs::write(
        home.join(".config/claude-sandbox/config.toml"),
        "[network]\nmode = \"allowlist\"\nallow = [\"registry.npmjs.org\"]\n",
    )
    .unwrap();
    let probe = PROBE;
    let split = |c: Command| {
        let (start, end, _) = split_run(c);
        (start, end)
    };
    let bare = bare_probe;
    let plain_run = || launch_of(plain.path(), &plain_ws, &plain_path, &probe);
    let full_run = || {
        let mut c = launch_of(full.path(), &full_ws, &full_path, &probe);
        c.env(
            "CLAUDE_SANDBOX_LAYERS_DIR",
            full.path().join("layers").display().to_string(),
        );
        c
    };
    // A runtime directory on tmpfs (0700, the launcher checks its owner and mode).
    let shm = tempfile::Builder::new()
        .prefix("cs-bench-rt-")
        .tempdir_in("/dev/shm")
        .ok();
    let tmpfs_run = || {
        let mut c = full_run();
        if let Some(d) = &shm {
            c.env("CLAUDE_SANDBOX_RUNTIME_DIR", d.path().join("rt"));
        }
        c
    };
    let (mut b, mut p, mut f, mut t) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // 60 measured rounds (about 15 s): on a noisy VM the median of 20 pairs moved by ±1.5 ms
    // between runs, as much as the changes it was meant to show.
    for round in 0..63 {
        let runs = (
            split(bare()),
            split(plain_run()),
            split(full_run()),
            split(tmpfs_run()),
        );
        if round >= 3 {
            b.push(runs.0);
            p.push(runs.1);
            f.push(runs.2);
            t.push(runs.3);
        }
    }
    let half = |v: &[(f64, f64)], second: bool| -> Vec<f64> {
        v.iter().map(|x| if second { x.1 } else { x.0 }).collect()
    };
    let total = |v: &[(f64, f64)]| -> Vec<f64> { v.iter().map(|x| x.0 + x.1).collect() };
    Table::row(
        "bare bwrap, sh -c date (5 repos, 2000 exe scenes)",
        ms(pct(&total(&b), 0.5)),
        ms(pct(&total(&b), 0.99)),
        "reference",
        "1.0",
        b.len(),
    );
    for (i, (label, v)) in [
        ("plain guarded launch", &p),
        (
            "every feature on (layers, allowlist, git copies, agent state)",
            &f,
        ),
        ("same, runtime directory on tmpfs (as /run is)", &t),
    ]
    .into_iter()
    .enumerate()
    {
        if i == 2 && shm.is_none() {
            println!("  {label}: skipped (no /dev/shm here)");
            continue;
        }
        difference_row(
            &format!("  {label}: until the command starts, + vs bare"),
            &half(&b, false),
            &half(v, false),
        );
        difference_row(
            &format!("  {label}: after the command ends, + vs bare"),
            &half(&b, true),
            &half(v, true),
        );
    }
}
