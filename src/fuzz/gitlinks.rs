//! The index's gitlinks against git itself: indexes git writes (versions 2 to 4, entries with
//! extended flags) read as `git ls-files --stage` reads them, and any bytes at all (a mutated real
//! index, a made-up one with prefix-compressed paths) read without a panic, and alike through any
//! buffer. Failing closed here is
//! `None`: the watcher then follows the `.gitmodules` paths alone, and the walks still cover the
//! workspace; a panic would end the watcher.

use super::{apply_edits, check};
use crate::watch::gitlinks::index_gitlinks;
use proptest::prelude::*;
use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git is needed for these tests");
    out.status.success().then_some(out.stdout)
}

/// A path of one to three components from a small alphabet (so that prefixes are shared).
fn path() -> impl Strategy<Value = String> {
    proptest::collection::vec("[a-c._-]{1,3}|node_modules|\\.x", 1..=3).prop_map(|c| c.join("/"))
}

#[derive(Debug, Clone)]
struct Entry {
    path: String,
    gitlink: bool,
    skip_worktree: bool,
}

fn entries() -> impl Strategy<Value = (Vec<Entry>, u8, Vec<super::Edit>)> {
    let entry =
        (path(), any::<bool>(), proptest::bool::weighted(0.2)).prop_map(|(path, gitlink, s)| {
            Entry {
                path,
                gitlink,
                skip_worktree: s,
            }
        });
    (
        proptest::collection::vec(entry, 1..6),
        2u8..=4,
        proptest::collection::vec(super::edit_strategy(), 0..4),
    )
}

#[test]
fn gitlinks_are_the_entries_git_lists_with_mode_160000() {
    let sha = "0123456789012345678901234567890123456789";
    let compared = std::cell::Cell::new(0u32);
    check("gitlinks", 24, entries(), |(entries, version, edits)| {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        git(r, &["init", "-q"]).unwrap();
        for e in &entries {
            let mode = if e.gitlink { "160000" } else { "100644" };
            // git refuses a path that is also a directory of another: not an index it writes.
            if git(
                r,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("{mode},{sha},{}", e.path),
                ],
            )
            .is_none()
            {
                return Ok(());
            }
            if e.skip_worktree && git(r, &["update-index", "--skip-worktree", &e.path]).is_none() {
                return Ok(());
            }
        }
        git(
            r,
            &["update-index", "--index-version", &version.to_string()],
        )
        .unwrap();
        let index = std::fs::read(r.join(".git/index")).unwrap();
        let listed = git(r, &["ls-files", "--stage", "-z"]).unwrap();
        let expected: Vec<Vec<u8>> = listed
            .split(|&b| b == 0)
            .filter(|l| l.starts_with(b"160000 "))
            .map(|l| l[l.iter().position(|&b| b == b'\t').unwrap() + 1..].to_vec())
            .collect();
        let got = index_gitlinks(index.as_slice(), 20);
        prop_assert_eq!(got.as_ref(), Some(&expected), "index v{}", version);
        compared.set(compared.get() + 1);
        // The same index damaged anywhere: an answer or `None`, never a panic.
        let _ = index_gitlinks(apply_edits(index, &edits).as_slice(), 20);
        Ok(())
    });
    // Most generated trees are ones git accepts, or the comparison proves little.
    assert!(
        compared.get() * 2 > super::cases(24),
        "compared {compared:?}"
    );
}

/// A version-4 entry: 40 bytes of stat data and mode, a hash, flags, then the prefix-compressed
/// path: a variable-length "strip N bytes" and a NUL-terminated suffix, all made up.
fn v4_index() -> impl Strategy<Value = Vec<u8>> {
    let entry = (
        any::<bool>(),
        any::<u16>(),
        proptest::collection::vec(prop_oneof![3 => 0x80u8..=0xff, 1 => any::<u8>()], 1..12),
        proptest::collection::vec(1u8..=0xff, 0..5),
    );
    (
        any::<u32>().prop_map(|n| n % 5),
        proptest::collection::vec(entry, 1..4),
    )
        .prop_map(|(count, entries)| {
            let mut v = b"DIRC".to_vec();
            v.extend_from_slice(&4u32.to_be_bytes());
            v.extend_from_slice(&count.to_be_bytes());
            for (gitlink, flags, strip, suffix) in entries {
                let mut stat = [0u8; 40];
                let mode: u32 = if gitlink { 0o160_000 } else { 0o100_644 };
                stat[24..28].copy_from_slice(&mode.to_be_bytes());
                v.extend_from_slice(&stat);
                v.extend_from_slice(&[0x11; 20]);
                v.extend_from_slice(&flags.to_be_bytes());
                v.extend_from_slice(&strip);
                v.extend_from_slice(&suffix);
                v.push(0);
            }
            v
        })
}

#[test]
fn any_index_bytes_are_read_without_a_panic() {
    use crate::watch::gitlinks::index::{for_each_entry, CHUNK};
    let entries = |index: &[u8], hash_len: usize, chunk: usize| {
        let mut out = Vec::new();
        for_each_entry(index, hash_len, chunk, |m, p| out.push((m, p.to_vec()))).map(|()| out)
    };
    check("gitlinks-bytes", 512, v4_index(), |index| {
        let _ = index_gitlinks(index.as_slice(), 20);
        let _ = index_gitlinks(index.as_slice(), 32);
        // Through a buffer smaller than an entry: the same answer as through one that holds it.
        prop_assert_eq!(entries(&index, 20, 5), entries(&index, 20, CHUNK));
        Ok(())
    });
}
