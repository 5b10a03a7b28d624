//! Registration: the watched directories (PATH directories, pending ones, repositories' hooks, the
//! workspace tree), each with its inotify watch or its place in the sweep.

use super::*;

impl Watcher {
    pub(super) fn add(
        &mut self,
        path: PathBuf,
        role: Role,
        state: BTreeMap<String, Entry>,
    ) -> usize {
        let (mode, wd) = self.watch(&path, &role);
        let idx = self.dirs.len();
        // Only a PATH directory's names are ever deferred (see `rescan`).
        let dir_id = matches!(role, Role::PathDir { .. })
            .then(|| dir_id(&path))
            .flatten();
        match (&mode, &wd) {
            (Mode::Inotify, Some(wd)) => {
                self.by_wd.entry(wd.clone()).or_default().push(idx);
                if role != Role::Tree {
                    tracing::info!(dir = %path.display(), "watching with inotify");
                }
            }
            (Mode::Poll(reason), _) => {
                tracing::info!(dir = %path.display(), reason = %reason, "watching by a one-second sweep")
            }
            _ => {}
        }
        let origin = state.clone();
        self.dirs.push(Watched {
            path,
            role,
            mode,
            wd,
            state,
            origin,
            deferred: Default::default(),
            dir_id,
            listed_at: None,
            turn: 0,
        });
        idx
    }

    /// Add an inotify watch, or say why this directory is swept instead.
    pub(super) fn watch(&mut self, path: &Path, role: &Role) -> (Mode, Option<WatchDescriptor>) {
        if let Some(reason) = &self.inotify_error {
            return (Mode::Poll(reason.clone()), None);
        }
        if let Some(fs) = poll_only_fs(path) {
            return (
                Mode::Poll(format!("{fs} does not report every change")),
                None,
            );
        }
        let Some(ino) = self.inotify.as_mut() else {
            return (Mode::Poll("no inotify".into()), None);
        };
        match ino.watches().add(path, mask_for(role)) {
            Ok(wd) => (Mode::Inotify, Some(wd)),
            Err(e) => {
                let why = match e.raw_os_error() {
                    Some(28) => "out of inotify watches (fs.inotify.max_user_watches)".to_string(),
                    Some(24) => "out of inotify instances or file descriptors".to_string(),
                    _ => format!("inotify_add_watch failed: {e}"),
                };
                (Mode::Poll(why), None)
            }
        }
    }

    pub(super) fn unwatch(&mut self, idx: usize) {
        if let Some(wd) = self.dirs[idx].wd.take() {
            if let Some(list) = self.by_wd.get_mut(&wd) {
                list.retain(|i| *i != idx);
                if list.is_empty() {
                    self.by_wd.remove(&wd);
                    if let Some(ino) = self.inotify.as_mut() {
                        let _ = ino.watches().remove(wd);
                    }
                }
            }
        }
    }

    /// Watch the nearest existing ancestor of a PATH directory that does not exist (yet), then look
    /// again: whatever was created between finding that ancestor and watching it sends no event
    /// (`mkdir -p node_modules/.bin` makes both in microseconds).
    pub(super) fn add_pending(&mut self, index: usize) {
        let target = self.path_dirs[index].clone();
        if let Some(a) = target.ancestors().skip(1).find(|a| a.is_dir()) {
            let idx = self.add(a.to_path_buf(), Role::Pending { index }, BTreeMap::new());
            self.pending_changed(idx, index);
        }
    }

    pub(super) fn add_repo(&mut self, r: RepoBaseline) {
        if !self.known_git_dirs.insert(r.git_dir.clone()) {
            return;
        }
        let repo = self.repos.len();
        let (common, hooks_dir, hooks) =
            (r.common_dir.clone(), r.hooks_dir.clone(), r.hooks.clone());
        self.repos.push(r);
        self.add(common, Role::GitDir { repo }, BTreeMap::new());
        if hooks_dir.is_dir() {
            self.add(hooks_dir, Role::Hooks { repo }, hooks);
        }
    }

    /// Watch the workspace tree (not `.git`, not `node_modules`) for new repositories.
    pub(super) fn add_tree(&mut self, root: &Path) {
        if self.inotify_error.is_some() {
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
        if self.inotify_error.is_some() {
            return false;
        }
        if self.tree_watches >= TREE_BUDGET {
            tracing::warn!("workspace too large to watch for new repositories live ({TREE_BUDGET} directories); the final sweep checks it");
            self.lost_events = true;
            return false;
        }
        self.tree_watches += 1;
        self.add(dir, Role::Tree, BTreeMap::new());
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
            let repo = self.repos.len();
            self.add_repo(b);
            self.new_repos.insert(repo);
            self.check_keys(repo);
            if let Some(idx) = self
                .dirs
                .iter()
                .position(|d| d.role == (Role::Hooks { repo }))
            {
                self.rescan(idx);
            }
        }
    }
}
