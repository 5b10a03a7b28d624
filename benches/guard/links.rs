//! `cargo bench --bench guard -- hardlinks`: what the hard-link scan (`jail::hardlinks`) costs a
//! launch. A pnpm-like tree of 3,000 files (100 packages of 30, ~2 KiB each) in the workspace:
//! without links (the scan alone, every launch), and hard-linked to a store outside the workspace
//! (re-linked before each run: the first launch after an install made outside, which copies each).

use super::{fixture, launch, ms, pct, Table};
use std::path::Path;
use std::time::Instant;

const PACKAGES: usize = 100;
const FILES: usize = 30;

fn tree(root: &Path) {
    for p in 0..PACKAGES {
        let d = root.join(format!("pkg{p}@1.0.0/node_modules/pkg{p}/lib"));
        std::fs::create_dir_all(&d).unwrap();
        for f in 0..FILES {
            std::fs::write(d.join(format!("f{f}.js")), vec![b'x'; 2048]).unwrap();
        }
    }
}

/// Every file of `store` linked at the same place under `into` (which is removed first).
fn link_all(store: &Path, into: &Path) {
    let _ = std::fs::remove_dir_all(into);
    for e in walkdir::WalkDir::new(store).into_iter().flatten() {
        let rel = e.path().strip_prefix(store).unwrap();
        let to = into.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
        } else {
            std::fs::hard_link(e.path(), &to).unwrap();
        }
    }
}

pub fn hardlink_rows() {
    let (d, ws, path) = fixture(1, 0, 0);
    let store = d.path().join("store");
    tree(&store);
    // A second workspace holding the same tree, copied (no links): the scan alone.
    let plain = d.path().join("plain");
    link_all(&store, &plain.join("node_modules/.pnpm"));
    for e in walkdir::WalkDir::new(&plain).into_iter().flatten() {
        if e.file_type().is_file() {
            let bytes = std::fs::read(e.path()).unwrap();
            std::fs::remove_file(e.path()).unwrap();
            std::fs::write(e.path(), bytes).unwrap();
        }
    }
    let linked = d.path().join("linked");
    let sync = || {
        assert!(std::process::Command::new("sync")
            .status()
            .unwrap()
            .success());
    };
    sync();
    let run = |w: &Path| {
        let t = Instant::now();
        assert!(launch(d.path(), w, &path).status().unwrap().success());
        t.elapsed().as_secs_f64() * 1e3
    };
    for _ in 0..3 {
        run(&ws);
        run(&plain);
    }
    let (mut empty, mut scanned) = (Vec::new(), Vec::new());
    for _ in 0..20 {
        empty.push(run(&ws));
        scanned.push(run(&plain));
    }
    let mut first = Vec::new();
    for _ in 0..8 {
        link_all(&store, &linked.join("node_modules/.pnpm"));
        sync();
        first.push(run(&linked));
    }
    let base = pct(&empty, 0.5);
    Table::row(
        "run -- true, empty workspace",
        ms(base),
        ms(pct(&empty, 0.99)),
        "reference",
        String::new(),
        empty.len(),
    );
    Table::row(
        "  + 3000 files, no links (scan only)",
        ms(pct(&scanned, 0.5)),
        ms(pct(&scanned, 0.99)),
        "",
        format!("+{:.1} ms", pct(&scanned, 0.5) - base),
        scanned.len(),
    );
    Table::row(
        "  + 3000 files linked outside (copies once)",
        ms(pct(&first, 0.5)),
        ms(pct(&first, 0.99)),
        "",
        format!("+{:.1} ms", pct(&first, 0.5) - base),
        first.len(),
    );
}
