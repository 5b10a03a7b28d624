//! Property-based fuzzing of the parsers that read what the jail wrote (issue 38, item 3): bounded
//! so that `cargo test` runs every target within seconds, longer with
//! `CLAUDE_SANDBOX_FUZZ_CASES=N cargo test --lib fuzz` (docs/reliability.md).
//!
//! Guards against a parser that reads hostile bytes differently from the tool that will act on
//! them (git, for the config reader and the index), or that panics on them: a panic in the watcher
//! or the launcher ends the guard, which must instead fail closed. Inputs grow from the seed corpora
//! in `tests/fuzz-seeds/<target>/` (real files, and every input that once broke something),
//! mutated byte by byte, and from fragments of each grammar.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use std::path::PathBuf;

mod gitconfig;
mod gitlinks;
mod state;

/// The cases per target: `CLAUDE_SANDBOX_FUZZ_CASES`, or the target's own bound for every run.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("CLAUDE_SANDBOX_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A runner of `cases(default)` cases, deterministic unless `CLAUDE_SANDBOX_FUZZ_CASES` is set (a
/// long run explores; the bounded one in every `cargo test` checks the same inputs each time), and
/// with no failure file written into the source tree: a failure is made a named regression test.
pub(crate) fn runner(default: u32) -> TestRunner {
    let config = Config {
        cases: cases(default),
        failure_persistence: None,
        max_shrink_iters: 2048,
        ..Config::default()
    };
    if std::env::var_os("CLAUDE_SANDBOX_FUZZ_CASES").is_some() {
        TestRunner::new(config)
    } else {
        TestRunner::new_with_rng(
            config,
            proptest::test_runner::TestRng::deterministic_rng(
                proptest::test_runner::RngAlgorithm::ChaCha,
            ),
        )
    }
}

/// The seed corpus of a target: every file in `tests/fuzz-seeds/<target>/`, sorted by name.
pub(crate) fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-seeds")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the seed corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    let out: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!out.is_empty(), "no seed in {}", dir.display());
    out
}

/// One edit of a byte string: overwrite, insert or delete at a position (taken modulo the length).
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
}

pub(crate) fn edit_strategy() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
    ]
}

pub(crate) fn apply_edits(mut v: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        match *e {
            Edit::Set(i, b) if !v.is_empty() => {
                let n = v.len();
                v[i % n] = b;
            }
            Edit::Insert(i, b) => {
                let at = i % (v.len() + 1);
                v.insert(at, b);
            }
            Edit::Delete(i) if !v.is_empty() => {
                let n = v.len();
                v.remove(i % n);
            }
            _ => {}
        }
    }
    v
}

/// A seed with up to `max_edits` byte edits (none a quarter of the time: the seeds themselves).
pub(crate) fn mutated(seeds: Vec<Vec<u8>>, max_edits: usize) -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(seeds),
        prop_oneof![
            1 => Just(Vec::new()),
            3 => proptest::collection::vec(edit_strategy(), 1..=max_edits),
        ],
    )
        .prop_map(|(s, edits)| apply_edits(s, &edits))
}

/// Run `check` on `cases(default)` inputs from `strategy`; a failure panics with the smallest input
/// proptest could shrink it to.
pub(crate) fn check<S: Strategy>(
    target: &str,
    default: u32,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: std::fmt::Debug,
{
    if let Err(e) = runner(default).run(&strategy, check) {
        panic!("fuzz target {target}: {e}");
    }
}
