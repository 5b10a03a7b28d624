//! `cargo bench --bench guard -- scale`: how the launch grows with the workspace (issue 36). A row per
//! size: the time until the command starts (`claude-sandbox run` of a command that prints the clock)
//! against bare bwrap running the same command in the same run, and whether the launch printed a
//! WARN. Workspaces: N committed files in a git repository (10k, 100k, 200k, and 1M with
//! `CLAUDE_SANDBOX_BENCH_1M=1`), the 200k one plus a 100k-file `node_modules` and a `.venv` (both
//! ignored by git, as they are), and 100 nested repositories.
//!
//! The trees take a while to make on a slow disk (200k files and their commit): they are kept under
//! `<bench dir>/cs-bench-scale/` by size and reused by the next run when
//! `CLAUDE_SANDBOX_BENCH_KEEP=1`; otherwise removed at the end.

use super::{bare_probe, bench_dir, bin, launch_with, ms, pct, split_run, Table, PROBE};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Files per directory of the generated trees (a source tree's typical fan-out).
const PER_DIR: usize = 20;

/// `files` files below `root`, in directories of `PER_DIR`, two levels deep; the relative paths.
fn tree(root: &Path, files: usize, ext: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(files);
    for i in 0..files.div_ceil(PER_DIR) {
        let rel = format!("d{:03}/d{:03}", i / 100, i % 100);
        std::fs::create_dir_all(root.join(&rel)).unwrap();
        for j in 0..PER_DIR.min(files - i * PER_DIR) {
            let name = format!("{rel}/f{j}.{ext}");
            std::fs::write(root.join(&name), b"x\n").unwrap();
            out.push(name);
        }
    }
    out
}

fn git(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut c = Command::new("git");
    c.args([
        "-c",
        "user.name=b",
        "-c",
        "user.email=b@b",
        "-c",
        "core.hooksPath=/dev/null",
    ])
    .args(args)
    .current_dir(dir)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository at `dir` with `files` committed files: every file has the same bytes, so one blob,
/// and the index is written from a list (`git add` of 200k files takes minutes here).
fn committed(dir: &Path, files: usize) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"], None);
    let mut paths = tree(&dir.join("src"), files, "rs");
    std::fs::write(dir.join(".gitignore"), "node_modules/\n.venv/\n").unwrap();
    paths.push(".gitignore".into());
    let blob = git(dir, &["hash-object", "-w", "--stdin"], Some(b"x\n"));
    let ignore = git(dir, &["hash-object", "-w", ".gitignore"], None);
    let mut list = String::new();
    for p in &paths {
        let sha = if p == ".gitignore" { &ignore } else { &blob };
        let rel = if p == ".gitignore" {
            p.clone()
        } else {
            format!("src/{p}")
        };
        let _ = writeln!(list, "100644 {sha}\t{rel}");
    }
    git(
        dir,
        &["update-index", "--index-info"],
        Some(list.as_bytes()),
    );
    // The index's stat data, as `git add` leaves it (else every `git status` re-reads every file).
    git(dir, &["update-index", "-q", "--refresh"], None);
    git(dir, &["commit", "-q", "-m", "scale"], None);
}

/// pnpm's layout without links (what the scan leaves after breaking them), and a venv.
fn installed(ws: &Path, node_files: usize, venv_files: usize) {
    tree(&ws.join("node_modules/.pnpm"), node_files, "js");
    tree(
        &ws.join(".venv/lib/python3.12/site-packages"),
        venv_files,
        "py",
    );
    // What `python -m venv` and uv write at its top (the workspace walk skips such a tree).
    std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
}

/// A scene (home, runtime directory, workspace) made by `make` once per `key`, kept if asked.
struct Scene {
    root: PathBuf,
    ws: PathBuf,
}

fn scene(key: &str, make: impl FnOnce(&Path)) -> Scene {
    let root = bench_dir().join("cs-bench-scale").join(key);
    let ws = root.join("ws");
    if !root.join("done").exists() {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("home/.local/bin")).unwrap();
        let t = std::time::Instant::now();
        make(&ws);
        assert!(Command::new("sync").status().unwrap().success());
        std::fs::write(root.join("done"), "").unwrap();
        println!("  (made {key} in {:.0} s)", t.elapsed().as_secs_f64());
    }
    Scene { root, ws }
}

/// Until the command starts: bare and guarded, alternating; and whether any guarded launch warned.
/// With `$CLAUDE_SANDBOX_BENCH_VS` (another build of the launcher) that one runs in each round too,
/// on its own row: a before/after from the same minutes of a loaded machine.
fn row(label: &str, s: &Scene, runs: usize) {
    let path = "/usr/local/bin:/usr/bin:/bin";
    let vs = std::env::var_os("CLAUDE_SANDBOX_BENCH_VS").map(PathBuf::from);
    let guarded = |bin: &Path| launch_with(bin, &s.root, &s.ws, path, &PROBE);
    let (mut b, mut g, mut other, mut warned) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for round in 0..runs + 2 {
        let bare = split_run(bare_probe());
        let run = split_run(guarded(&bin()));
        // Its own runtime directory: the hard-link scan's memory is not shared between the two.
        let before = vs.as_deref().map(|v| {
            let mut c = guarded(v);
            c.env("CLAUDE_SANDBOX_RUNTIME_DIR", s.root.join("rt-vs"));
            split_run(c).0
        });
        if round < 2 {
            continue;
        }
        b.push(bare.0);
        g.push(run.0);
        other.extend(before);
        warned += usize::from(run.2.contains("WARN"));
    }
    let bm = pct(&b, 0.5);
    let line = |label: &str, v: &[f64]| {
        Table::row(
            label,
            ms(pct(v, 0.5)),
            ms(pct(v, 0.99)),
            &format!("bare {bm:.1}"),
            format!("+{:.0} ms", pct(v, 0.5) - bm),
            v.len(),
        );
    };
    line(label, &g);
    if vs.is_some() {
        line("  the same, $CLAUDE_SANDBOX_BENCH_VS", &other);
    }
    if warned > 0 {
        let log = split_run(guarded(&bin())).2;
        let mut warns: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
        warns.dedup();
        println!("    WARN in {warned}/{}:", g.len());
        for w in warns {
            println!("      {}", w.trim());
        }
    }
}

pub fn scale_rows() {
    println!("  until the command starts (ms; ratio column: + over bare bwrap's median)");
    let mut sizes = vec![10_000, 100_000, 200_000];
    if std::env::var_os("CLAUDE_SANDBOX_BENCH_1M").is_some() {
        sizes.push(1_000_000);
    }
    for &n in &sizes {
        let s = scene(&format!("committed-{n}"), |ws| committed(ws, n));
        row(&format!("run, {}k committed files", n / 1000), &s, 10);
    }
    let s = scene("committed-200000-installed", |ws| {
        committed(ws, 200_000);
        installed(ws, 100_000, 5_000);
    });
    row("run, 200k committed + 100k node_modules + venv", &s, 10);
    let s = scene("repos-100", |ws| {
        committed(ws, 100);
        for r in 0..100 {
            committed(&ws.join(format!("vendor/repo{r}")), 20);
        }
    });
    row("run, 100 nested repositories", &s, 10);
    if std::env::var_os("CLAUDE_SANDBOX_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(bench_dir().join("cs-bench-scale"));
    }
}
