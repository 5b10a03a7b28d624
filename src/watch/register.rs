//! Registration: which directories are watched (PATH directories, pending ones, repositories' hooks,
//! the workspace tree) and the indexes that name them; the watches themselves are `table`'s.

use super::*;

impl Watcher {
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

    /// Watch the workspace tree (not `.git`, not `node_modules`) for new repositories.
    pub(super) fn add_tree(&mut self, root: &Path) {
        self.add_tree_in(root, false);
    }

    /// `add_tree`, through the lazy instance when `lazy` (`root` lies in a tree declared generated
    /// during the session). A declaration older than the session is honoured (not walked); one
    /// made since is not, but what lies under it is watched lazily (`table::Table::lazy`).
    pub(super) fn add_tree_in(&mut self, root: &Path, lazy: bool) {
        if !self.table.has_inotify() {
            return; // the sweep walks the tree instead
        }
        let before = crate::walk::Trust::Before(self.since.declared_before());
        let mut lazy_roots: Vec<PathBuf> = Vec::new();
        let mut walker = walkdir::WalkDir::new(root).follow_links(false).into_iter();
        while let Some(e) = walker.next() {
            let Ok(e) = e else { continue };
            if !e.file_type().is_dir() {
                continue;
            }
            if e.depth() > 0 {
                if crate::walk::pruned(e.file_name()) {
                    walker.skip_current_dir();
                    continue;
                }
                let declared = crate::walk::skips(e.path(), crate::walk::Trust::Any);
                if declared && crate::walk::skips(e.path(), before) {
                    walker.skip_current_dir();
                    continue;
                }
                if declared {
                    lazy_roots.push(e.path().to_path_buf());
                }
            }
            let lazy = lazy || lazy_roots.iter().any(|r| e.path().starts_with(r));
            if self.watch_tree_dir(e.path().to_path_buf(), lazy).is_none() {
                return;
            }
        }
    }

    /// Watch one workspace directory for new repositories (through the lazy instance when
    /// `lazy`); `None` once the workspace tree can be watched no further (`tree::tree_budget`
    /// spent, or the user's inotify watches: ENOSPC), and the final sweep walks it instead.
    pub(super) fn watch_tree_dir(&mut self, dir: PathBuf, lazy: bool) -> Option<DirId> {
        if !self.table.has_inotify() {
            return None;
        }
        if self.tree_watches >= self.tree_budget {
            self.out_of_tree_watches(&format!(
                "{} directories, what fs.inotify.max_user_watches leaves to one session",
                self.tree_budget
            ));
            return None;
        }
        let known = self.table.len();
        let idx = if lazy {
            self.table.add_lazy_tree(dir)
        } else {
            self.table.add(dir, Role::Tree, BTreeMap::new())
        };
        if self.table.len() > known {
            self.tree_watches += 1;
        }
        if self.table.out_of_watches() && matches!(self.table[idx].mode, Mode::Poll(_)) {
            self.out_of_tree_watches("out of inotify watches");
            return None;
        }
        Some(idx)
    }

    /// The workspace tree cannot be watched further: the final sweep walks all of it. Said once.
    fn out_of_tree_watches(&mut self, why: &str) {
        self.lost_events = true;
        self.tree_queue.clear();
        if !self.tree_warned {
            self.tree_warned = true;
            tracing::warn!(
                "workspace too large to watch for new repositories live ({why}); the final sweep checks it; raise fs.inotify.max_user_watches (sysctl) to watch it all"
            );
        }
    }
}
