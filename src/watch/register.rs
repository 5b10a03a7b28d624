//! Registration: which directories are watched (PATH directories, pending ones, repositories' hooks,
//! the workspace tree) and the indexes that name them; the watches themselves are `table`'s.

use super::*;

impl Watcher {
    pub(super) fn repo(&self, id: RepoId) -> &RepoBaseline {
        &self.repos[id.0]
    }

    pub(super) fn repo_ids(&self) -> impl Iterator<Item = RepoId> {
        (0..self.repos.len()).map(RepoId)
    }

    pub(super) fn path_dir(&self, pos: PathPos) -> &Path {
        &self.path_dirs[pos.0]
    }

    /// Watch the nearest existing ancestor of a PATH directory that does not exist (yet), then look
    /// again: whatever was created between finding that ancestor and watching it sends no event
    /// (`mkdir -p node_modules/.bin` makes both in microseconds).
    pub(super) fn add_pending(&mut self, pos: PathPos) {
        let target = self.path_dir(pos).to_path_buf();
        if let Some(a) = target.ancestors().skip(1).find(|a| a.is_dir()) {
            let idx = self
                .table
                .add(a.to_path_buf(), Role::Pending { pos }, BTreeMap::new());
            self.pending_changed(idx, pos);
        }
    }

    pub(super) fn add_repo(&mut self, r: RepoBaseline) {
        if !self.known_git_dirs.insert(r.git_dir.clone()) {
            return;
        }
        let repo = RepoId(self.repos.len());
        let (common, hooks_dir, hooks) =
            (r.common_dir.clone(), r.hooks_dir.clone(), r.hooks.clone());
        self.repos.push(r);
        self.table
            .add(common, Role::GitDir { repo }, BTreeMap::new());
        if hooks_dir.is_dir() {
            self.table.add(hooks_dir, Role::Hooks { repo }, hooks);
        }
    }

    /// Watch the workspace tree (not `.git`, not `node_modules`) for new repositories.
    pub(super) fn add_tree(&mut self, root: &Path) {
        if !self.table.has_inotify() {
            return; // the sweep walks the tree instead
        }
        let since = self.declared_before();
        let walker = walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| {
                e.file_type().is_dir()
                    && !matches!(e.file_name().to_str(), Some(".git" | "node_modules"))
                    && (e.depth() == 0 || !entrypoints::walk_skips(e.path(), since))
            });
        for e in walker.flatten() {
            if !self.watch_tree_dir(e.path().to_path_buf()) {
                return;
            }
        }
    }

    /// Watch one workspace directory for new repositories; false once the budget is spent.
    pub(super) fn watch_tree_dir(&mut self, dir: PathBuf) -> bool {
        if !self.table.has_inotify() {
            return false;
        }
        if self.tree_watches >= TREE_BUDGET {
            tracing::warn!("workspace too large to watch for new repositories live ({TREE_BUDGET} directories); the final sweep checks it");
            self.lost_events = true;
            return false;
        }
        self.tree_watches += 1;
        self.table.add(dir, Role::Tree, BTreeMap::new());
        true
    }

    /// Register repositories that appeared under `root` (a walk; cheap for a new subtree).
    pub(super) fn discover_repos(&mut self, root: &Path) {
        for r in entrypoints::discover_workspace(root).repos {
            if self.known_git_dirs.contains(&r.git_dir) {
                continue;
            }
            tracing::info!(git_dir = %r.git_dir.display(), "new repository");
            let mut b = baseline::repo_baseline(&r);
            // Created during the session: nothing in it is trusted, so all of it is checked.
            b.hooks.clear();
            b.exec_keys.clear();
            let repo = RepoId(self.repos.len());
            self.add_repo(b);
            self.new_repos.insert(repo);
            self.check_keys(repo);
            if let Some(idx) = self.table.find(&Role::Hooks { repo }) {
                self.rescan(idx);
            }
        }
    }
}
