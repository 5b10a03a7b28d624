//! The launch with every feature of the guard turned on, beside the plain guarded launch and bare
//! bwrap, alternating: the cache layers (overlays over the human's `~/.cache`, `~/.npm`,
//! `~/.cargo/registry`, `~/.local/share/pnpm`), the network allowlist (the proxy), the jail's own
//! copy of each repository's `.git/config` (five repositories, each diverted for the session), and
//! agent state directories (`~/.claude`, `~/.codex`).

use super::*;

fn bare() {
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
}

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
    let plain_run = || {
        assert!(launch(plain.path(), &plain_ws, &plain_path)
            .status()
            .unwrap()
            .success())
    };
    let full_run = || {
        let mut c = launch(full.path(), &full_ws, &full_path);
        c.env(
            "CLAUDE_SANDBOX_LAYERS_DIR",
            full.path().join("layers").display().to_string(),
        );
        assert!(c.status().unwrap().success(), "every feature on");
    };
    for _ in 0..3 {
        bare();
        plain_run();
        full_run();
    }
    let (mut b, mut p, mut f) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..20 {
        b.extend(time_runs(1, bare));
        p.extend(time_runs(1, plain_run));
        f.extend(time_runs(1, full_run));
    }
    let bm = overhead_rows(
        &b,
        &p,
        [
            "bare bwrap, true",
            "claude-sandbox run -- true (5 repos, 2000 exe)",
            "  launch overhead (median difference)",
        ],
    );
    Table::row(
        "  every feature on (layers, allowlist, git copies, agent state)",
        ms(pct(&f, 0.5)),
        ms(pct(&f, 0.99)),
        "",
        format!("{:.1}", pct(&f, 0.5) / bm),
        f.len(),
    );
    difference_row("  every feature on: overhead over bare bwrap", &b, &f);
    difference_row("  every feature on: over the plain guarded launch", &p, &f);
}
