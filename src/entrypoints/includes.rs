//! What the `.envrc` files discovery found include, followed as git's `include.path` is: the
//! shell code they source is sealed like the `.envrc` itself, the `.env` files they export are
//! named for the session's end (held when changed: `jail::launch::edited`), the directories they
//! put on PATH are named for the watcher.
//!
//! Guards against an allowed `.envrc` that stays byte for byte the same (so direnv never asks
//! again) while what it reads is the agent's. The reading is `envrc::parse`; this side reads the
//! files and decides what each include is.

use super::envrc::{self, Kind, Target};
use super::Discovery;
use crate::catalogue::Stub;
use std::path::{Path, PathBuf};

/// Files read per `.envrc` chain at most (a `source_env` loop, or a generated tree of them).
const MAX_FILES: usize = 256;

/// Files larger than this are not read for includes (an `.envrc` is a few lines).
const MAX_BYTES: u64 = 1 << 20;

impl Discovery {
    /// Follow the includes of every regular `.envrc` and `mise.toml` found so far (and of the
    /// shell code they source, read as an `.envrc`: direnv's stdlib is defined there too).
    pub(super) fn follow_envrc_includes(&mut self, home: Option<&Path>) {
        let mut queue: Vec<PathBuf> = self
            .findings
            .iter()
            .filter(|f| f.path.file_name().is_some_and(|n| n == ".envrc"))
            .map(|f| f.path.clone())
            .collect();
        let mise: Vec<PathBuf> = (self.findings.iter())
            .filter(|f| {
                f.path
                    .file_name()
                    .is_some_and(|n| n == "mise.toml" || n == ".mise.toml")
            })
            .map(|f| f.path.clone())
            .collect();
        for config in mise {
            let Some(text) = read_small(&config).and_then(|b| String::from_utf8(b).ok()) else {
                continue;
            };
            let dir = config.parent().unwrap_or(Path::new("/"));
            for inc in super::mise::parse(&text, dir) {
                self.include(&config, dir, inc, &mut queue);
            }
        }
        let mut seen = std::collections::HashSet::new();
        while let Some(rc) = queue.pop() {
            if seen.len() >= MAX_FILES {
                self.warnings.push(format!(
                    "{}: more than {MAX_FILES} files sourced by .envrc files; the rest are not \
                     sealed: review them",
                    rc.display()
                ));
                break;
            }
            if !seen.insert(rc.clone()) {
                continue;
            }
            let Some(bytes) = read_small(&rc) else {
                continue;
            };
            let dir = rc.parent().unwrap_or(Path::new("/"));
            for inc in envrc::parse(&bytes, dir, home) {
                self.include(&rc, dir, inc, &mut queue);
            }
        }
        self.dotenv.sort();
        self.dotenv.dedup();
    }

    fn include(&mut self, rc: &Path, dir: &Path, inc: envrc::Include, queue: &mut Vec<PathBuf>) {
        let p = match inc.target {
            Target::Path(p) => p,
            Target::Unknown(word) => {
                if matches!(inc.kind, Kind::Source | Kind::Dotenv | Kind::PathAdd) {
                    self.warnings.push(
                        crate::escape::visible(&format!(
                        "{}: `{word}` is a path claude-sandbox cannot work out, so what it names \
                         is not sealed: write it from $PWD, or review that file",
                        rc.display()
                    ))
                        .into_owned(),
                    );
                }
                return;
            }
        };
        let runs = |what: &str| format!("{what} by {}", rc.display());
        match inc.kind {
            Kind::Source => {
                let p = if p.is_dir() { p.join(".envrc") } else { p };
                self.seal(p.clone(), Stub::Dir, runs("shell code sourced"));
                queue.push(p);
            }
            Kind::SourceUp => {
                // The nearest one above wins, so a missing one below an existing one is an entry
                // point too: every parent's.
                for up in dir.ancestors().skip(1) {
                    let file = up.join(&p);
                    self.seal(
                        file.clone(),
                        Stub::Dir,
                        runs("shell code sourced (source_up)"),
                    );
                    queue.push(file);
                }
            }
            Kind::Dotenv => {
                let p = if p.is_dir() { p.join(".env") } else { p };
                self.dotenv.push(p);
            }
            Kind::PathAdd => {
                if !self.path_adds.contains(&p) {
                    self.path_adds.push(p);
                }
            }
            Kind::Watch | Kind::EnvVarsRequired => {}
        }
    }
}

/// A regular file's bytes, if it is one and small (symlinks followed: direnv follows them).
fn read_small(path: &Path) -> Option<Vec<u8>> {
    let m = std::fs::metadata(path).ok()?;
    (m.is_file() && m.len() <= MAX_BYTES)
        .then(|| std::fs::read(path).ok())
        .flatten()
}
