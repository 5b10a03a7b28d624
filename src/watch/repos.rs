//! The repositories the watcher knows: those of the baseline, those found during the session (new:
//! nothing in them is trusted), and their registration (the git directory and the hooks directory
//! are watched).
//!
//! Guards against a repository watched twice or judged against the wrong baseline: a git directory
//! is registered once, and a repository made during the session starts with no hooks and no keys.

use super::table::{RepoId, Role};
use super::Watcher;
use crate::baseline::{self, RepoBaseline};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every known repository, by `RepoId`.
#[derive(Debug, Default)]
pub(crate) struct Repos {
    list: Vec<RepoBaseline>,
    /// Their git directories, to register each once.
    known: BTreeSet<PathBuf>,
    /// Those created during the session: their exec-capable keys are taken out.
    new: BTreeSet<RepoId>,
}

impl Repos {
    /// Register a repository; `None` if its git directory is known already.
    fn insert(&mut self, r: RepoBaseline) -> Option<RepoId> {
        if !self.known.insert(r.git_dir.clone()) {
            return None;
        }
        self.list.push(r);
        Some(RepoId(self.list.len() - 1))
    }

    pub(super) fn get(&self, id: RepoId) -> &RepoBaseline {
        &self.list[id.0]
    }

    /// The repository at `n` (for walks that also cover repositories added on the way).
    pub(super) fn id_at(&self, n: usize) -> Option<RepoId> {
        (n < self.list.len()).then_some(RepoId(n))
    }

    /// Every repository id so far.
    pub(super) fn ids(&self) -> Vec<RepoId> {
        (0..self.list.len()).map(RepoId).collect()
    }

    pub(super) fn knows(&self, git_dir: &Path) -> bool {
        self.known.contains(git_dir)
    }

    pub(super) fn is_new(&self, id: RepoId) -> bool {
        self.new.contains(&id)
    }

    /// The exec-capable keys now known for a repository (what later reads are compared with).
    pub(super) fn set_exec_keys(&mut self, id: RepoId, keys: Vec<(PathBuf, String, String)>) {
        self.list[id.0].exec_keys = keys;
    }

    #[cfg(test)]
    pub(super) fn git_dirs(&self) -> Vec<&Path> {
        self.list.iter().map(|r| r.git_dir.as_path()).collect()
    }
}

impl Watcher {
    pub(super) fn repo(&self, id: RepoId) -> &RepoBaseline {
        self.repos.get(id)
    }

    /// Watch a repository's git directory and, if it exists, its hooks directory (with the
    /// baseline's hooks as their known state). `None` if it was known already.
    pub(super) fn add_repo(&mut self, r: RepoBaseline) -> Option<RepoId> {
        let (common, hooks_dir, hooks) =
            (r.common_dir.clone(), r.hooks_dir.clone(), r.hooks.clone());
        let repo = self.repos.insert(r)?;
        self.table
            .add(common, Role::GitDir { repo }, BTreeMap::new());
        if hooks_dir.is_dir() {
            self.table.add(hooks_dir, Role::Hooks { repo }, hooks);
        }
        Some(repo)
    }

    /// Register repositories that appeared under `root` (a walk; cheap for a new subtree).
    pub(super) fn discover_repos(&mut self, root: &Path) {
        let home = self.cfg.host.home();
        // A cache tagged during the session is walked: the agent may have tagged it to hide a
        // repository below it (the lazy watch of it sees the new directory, not what is inside).
        let trust = crate::walk::Trust::Before(self.since.declared_before());
        let found = crate::entrypoints::discover_trusting(root, home.as_deref(), None, trust);
        for r in found.repos {
            if self.repos.knows(&r.git_dir) {
                continue;
            }
            tracing::info!(git_dir = %r.git_dir.display(), "new repository");
            let mut b = baseline::repo_baseline(&r, home.as_deref());
            // Created during the session: nothing in it is trusted, so all of it is checked.
            b.hooks.clear();
            b.exec_keys.clear();
            b.had_commondir = false;
            let Some(repo) = self.add_repo(b) else {
                continue;
            };
            self.repos.new.insert(repo);
            self.check_keys(repo);
            if let Some(idx) = self.table.find(&Role::Hooks { repo }) {
                self.rescan(idx);
            }
        }
    }

    /// A repository's hooks directory appeared (it had none at the baseline): watch it, and judge
    /// what is in it already.
    /// A `commondir` made in the repository's common directory: judged (`judge::judge_commondir`),
    /// and taken out at once.
    pub(super) fn commondir_appeared(&mut self, repo: RepoId) {
        let (dir, had) = (
            self.repo(repo).common_dir.clone(),
            self.repo(repo).had_commondir,
        );
        let path = dir.join("commondir");
        // The launcher's own, made while the watcher starts, or another session's: sealed read-only.
        if self.cfg.placeholders.contains(&path)
            || crate::jail::placeholders::is_held(&self.cfg.runtime, &path)
        {
            return;
        }
        let Some(entry) = baseline::Entry::metadata(&path) else {
            return;
        };
        let verdict = super::judge::judge_commondir(had, true);
        let session = self.cfg.session.clone();
        super::act::carry_out(
            &mut *self.sink,
            &session,
            &dir,
            "commondir",
            verdict,
            &entry,
        );
    }

    pub(super) fn hooks_appeared(&mut self, repo: RepoId) {
        let dir = self.repo(repo).hooks_dir.clone();
        if dir.is_dir() && self.table.find(&Role::Hooks { repo }).is_none() {
            let idx = self.table.add(dir, Role::Hooks { repo }, BTreeMap::new());
            self.rescan(idx);
        }
    }
}
