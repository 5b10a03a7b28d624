//! The git-config reader against git itself: `git config -z --list --file F` (with `--includes`
//! for the include graph) is the oracle. Both must refuse the same files, and list the same keys and
//! values in the same order otherwise. Where git refuses a file the reader must say so (`Bad`): the
//! callers then fail closed (the baseline records the file as an alert, the seal diverts the
//! config whole, the watcher holds it), never read it as a file with no keys.

use super::{check, mutated, seeds};
use crate::gitconfig::tests::{git_list, ours, Listed, FRAGMENTS};
use crate::gitconfig::{parse, read};
use proptest::prelude::*;

/// Bytes that steer the grammar: brackets, quotes, escapes, comments, separators, line ends.
const STRUCTURAL: &[u8] = b"[]\"\\#;= \t\r\n.-_aZ0\xef\xbb\xbf\xff\x00";

fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::sample::select(FRAGMENTS).prop_map(<[u8]>::to_vec),
        2 => proptest::collection::vec(proptest::sample::select(STRUCTURAL), 1..8),
        1 => proptest::collection::vec(any::<u8>(), 1..6),
    ]
}

/// A config: a seed (mutated, or not) followed by fragments, or fragments alone.
fn config() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => mutated(seeds("gitconfig"), 4),
        1 => (mutated(seeds("gitconfig"), 2), proptest::collection::vec(piece(), 0..5))
            .prop_map(|(s, p)| [s, p.concat()].concat()),
        2 => proptest::collection::vec(piece(), 1..10).prop_map(|p| p.concat()),
    ]
}

fn compare(
    what: &str,
    bytes: &[u8],
    git: &Result<Listed, ()>,
    ours: &Result<Listed, String>,
) -> Result<(), TestCaseError> {
    match (git, ours) {
        (Err(()), Err(_)) => Ok(()),
        (Ok(g), Ok(m)) if g == m => Ok(()),
        _ => Err(TestCaseError::fail(format!(
            "{what} {:?}\ngit:  {git:?}\nours: {ours:?}",
            bytes.escape_ascii().to_string()
        ))),
    }
}

#[test]
fn the_reader_lists_what_git_lists_and_refuses_what_git_refuses() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("config");
    let (refused, read) = (std::cell::Cell::new(0u32), std::cell::Cell::new(0u32));
    check("gitconfig", 96, config(), |bytes| {
        std::fs::write(&path, &bytes).unwrap();
        let git = git_list(&path, false, t.path());
        let mine = parse(&bytes).map(|k| ours(&k)).map_err(|e| e.to_string());
        let counter = if git.is_ok() { &read } else { &refused };
        counter.set(counter.get() + 1);
        compare("config", &bytes, &git, &mine)
    });
    // Both outcomes, or the comparison proves little.
    assert!(
        refused.get() * 8 > super::cases(96) && read.get() * 8 > super::cases(96),
        "refused {refused:?}, read {read:?}"
    );
}

/// Where an include points: the three files of the graph (itself too), missing files, `~/`, empty.
const TARGETS: &[&str] = &["a", "b", "./c", "sub/../b", "missing", "~/h", "", "~"];

fn included() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(piece(), 0..4),
        proptest::option::of(proptest::sample::select(TARGETS)),
        proptest::collection::vec(piece(), 0..3),
    )
        .prop_map(|(before, target, after)| {
            let include = target.map_or_else(Vec::new, |t| {
                format!("\n[include]\n\tpath = {t}\n").into_bytes()
            });
            [before.concat(), include, after.concat()].concat()
        })
}

#[test]
fn includes_are_followed_as_git_follows_them_or_refused_as_git_refuses_them() {
    let t = tempfile::tempdir().unwrap();
    let (dir, home) = (t.path().join("repo"), t.path().join("home"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let graph = (included(), included(), included(), included());
    check("gitconfig-includes", 48, graph, |(a, b, c, h)| {
        for (name, bytes) in [("a", &a), ("b", &b), ("c", &c)] {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        std::fs::write(home.join("h"), &h).unwrap();
        let main = dir.join("a");
        let git = git_list(&main, true, &home);
        let read = read(std::slice::from_ref(&main), Some(&home));
        let mine = match read.bad().next() {
            Some((file, bad)) => Err(format!("{}: {bad}", file.display())),
            None => Ok(read
                .keys
                .iter()
                .map(|l| (l.key.name.clone(), l.key.value.clone()))
                .collect()),
        };
        let shown = [
            &a[..],
            b"\n--- b\n",
            &b[..],
            b"\n--- c\n",
            &c[..],
            b"\n--- ~/h\n",
            &h[..],
        ]
        .concat();
        compare("include graph", &shown, &git, &mine)
    });
}
