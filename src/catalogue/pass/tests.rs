//! The pass held against the catalogue and the runtimes' tables. "Disagree" means, concretely:
//!
//! - a file the pass calls a per-directory entry point is not a catalogued name (its first
//!   component, in `TOOLS` or a runtime's `project`), or the catalogue treats it otherwise
//!   (sealed, held when made, held when made or changed);
//! - a file the pass calls a state entry point is not one of a state directory's `entry_points`
//!   (or inside one of them, its private directories or views);
//! - a file the pass calls git's is not in `git::FILES`;
//! - a file the pass calls covered, data or open is in fact catalogued (one of the above);
//! - a runtime declares a project name or a state entry point that the pass has no row for, under
//!   that runtime;
//! - a runtime's rows were taken at a version other than the one its allowlist was measured with
//!   (re-measuring a runtime means a new pass).

use super::{Read, Treatment, Verdict, PASS};
use crate::catalogue::git::FILES;
use crate::entrypoints::per_directory;
use crate::runtimes::{state_dirs, Writable, ALL};

fn catalogued(path: &str) -> Option<&'static crate::catalogue::Catalogued> {
    let first = path.split('/').next()?;
    per_directory().find(|c| c.name == first)
}

/// Whether `~/rel` is an entry point of a state directory, or in one of its private directories
/// or views.
fn state_entry(rel: &str) -> bool {
    let under = |rel: &str, of: &str| rel == of || rel.starts_with(&format!("{of}/"));
    state_dirs().any(|sd| {
        sd.entry_points.iter().any(|e| under(rel, e.rel))
            || sd
                .private
                .iter()
                .any(|p| under(rel, &format!("{}/{p}", sd.path)))
            || sd
                .views
                .iter()
                .any(|v| under(rel, &format!("{}/{}", sd.path, v.name)))
    })
}

fn git_file(path: &str) -> bool {
    path.strip_prefix(".git/").is_some_and(|rel| {
        FILES
            .iter()
            .any(|f| rel == f.rel || rel.starts_with(&format!("{}/", f.rel)))
    })
}

fn disagreement(read: &Read) -> Option<String> {
    let home = read.path.strip_prefix("~/");
    let catalogued_as = match (home, read.verdict) {
        (None, Verdict::Project(t)) => {
            return match catalogued(read.path) {
                None => Some("not in the catalogue".into()),
                Some(c) if Treatment::of(c) != t => {
                    Some(format!("catalogued as {:?}", Treatment::of(c)))
                }
                Some(_) => None,
            };
        }
        (Some(rel), Verdict::State) => {
            return (!state_entry(rel)).then(|| "no state directory's entry point".into());
        }
        (None, Verdict::Git) => {
            return (!git_file(read.path)).then(|| "not in git::FILES".into());
        }
        (_, Verdict::Project(_) | Verdict::State | Verdict::Git) => {
            return Some("a verdict for the other kind of place".into());
        }
        (Some(rel), _) => state_entry(rel).then_some("a state entry point"),
        (None, _) => {
            let as_project = catalogued(read.path).map(|_| "a catalogued name");
            as_project.or_else(|| git_file(read.path).then_some("in git::FILES"))
        }
    };
    catalogued_as.map(|what| format!("{what}, yet the pass says {:?}", read.verdict))
}

#[test]
fn every_file_the_pass_found_is_treated_as_it_says() {
    let wrong: Vec<String> = PASS
        .iter()
        .filter_map(|r| disagreement(r).map(|d| format!("{} reads {}: {d}", r.tool, r.path)))
        .collect();
    assert!(
        wrong.is_empty(),
        "the catalogue and the pass disagree:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_name_a_runtime_declares_was_found_by_the_pass_at_its_measured_version() {
    for rt in ALL {
        let rows: Vec<&Read> = PASS.iter().filter(|r| r.tool == rt.name).collect();
        for c in rt.project {
            let found = rows.iter().any(|r| {
                matches!(r.verdict, Verdict::Project(_)) && r.path.split('/').next() == Some(c.name)
            });
            assert!(found, "{}: no row of the pass reads {}", rt.name, c.name);
        }
        for sd in rt.state {
            for e in sd.entry_points {
                let found = rows.iter().any(|r| {
                    r.verdict == Verdict::State
                        && r.path
                            .strip_prefix("~/")
                            .is_some_and(|p| p == e.rel || p.starts_with(&format!("{}/", e.rel)))
                });
                assert!(found, "{}: no row of the pass reads ~/{}", rt.name, e.rel);
            }
            let version = match sd.writable {
                Writable::Only { measured, .. } => measured,
                Writable::Unmeasured => super::NOT_HERE,
            };
            for r in &rows {
                assert_eq!(
                    r.version, version,
                    "{}: the pass read {} at another version than the runtime's",
                    rt.name, r.path
                );
            }
        }
    }
}

/// The test can fail: a pass row for a name the catalogue does not have, and one it treats
/// otherwise, are both found.
#[test]
fn a_missing_or_mistreated_name_is_a_disagreement() {
    let missing = Read {
        path: ".not-catalogued",
        ..PASS[0]
    };
    let missing = Read {
        verdict: Verdict::Project(Treatment::Sealed),
        ..missing
    };
    assert!(disagreement(&missing).is_some());
    let mistreated = Read {
        path: "CLAUDE.md",
        verdict: Verdict::Project(Treatment::Sealed),
        ..PASS[0]
    };
    assert!(disagreement(&mistreated).is_some());
    let hidden = Read {
        path: "~/.claude/settings.json",
        verdict: Verdict::Data("x"),
        ..PASS[0]
    };
    assert!(disagreement(&hidden).is_some());
}
