//! The watcher's judgement of repositories' configs: a new exec-capable key is alerted with its
//! exact value, and in a repository created during the session it is also taken out of the config
//! (`quarantine::config`, restorable byte for byte), since `git status` there (a prompt, VS Code)
//! would run it before the human reads the alert.
//!
//! Guards against a planted `core.fsmonitor`, `include.path`, `core.hooksPath`, alias or filter in a
//! new repository. Kept as alerts only: values git treats as harmless (`core.fsmonitor = true`,
//! the built-in daemon), keys in files outside the repository's own config (an included file may be
//! the human's; the `include.path` that names it is taken out instead), and a config git refuses to
//! read (git runs nothing from it; the alert says so).

use super::judge::{judge_key, Verdict};
use super::{RepoId, Watcher};
use crate::alerts::{Action, Alert};
use crate::baseline;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

impl Watcher {
    /// New exec-capable keys in a repository's config are alerted with the key and value; in a
    /// repository new this session they are taken out of its own config files.
    pub(super) fn check_keys(&mut self, repo: RepoId) {
        let (common, git_dir) = (
            self.repo(repo).common_dir.clone(),
            self.repo(repo).git_dir.clone(),
        );
        let home = self.cfg.host.home();
        let keys = baseline::exec_keys(&common, &git_dir, home.as_deref());
        let known: BTreeSet<(String, String)> = self
            .repo(repo)
            .exec_keys
            .iter()
            .map(|(_, k, v)| (k.clone(), v.clone()))
            .collect();
        let own = baseline::own_config_files(&common, &git_dir);
        let new_repo = self.repos.is_new(repo);
        let fresh: Vec<(&PathBuf, &String, &String, Verdict)> = keys
            .iter()
            .filter(|(_, k, v)| !known.contains(&(k.clone(), v.clone())))
            .map(|(f, k, v)| (f, k, v, judge_key(k, v, new_repo, own.contains(f))))
            .collect();
        // Per file: the keys to take out.
        let mut take: Vec<(PathBuf, BTreeSet<(String, String)>)> = Vec::new();
        for (file, k, v, verdict) in &fresh {
            if !matches!(verdict, Verdict::Neutralise(_)) {
                continue;
            }
            match take.iter_mut().find(|(f, _)| f == *file) {
                Some((_, set)) => {
                    set.insert(((*k).clone(), (*v).clone()));
                }
                None => take.push(((*file).clone(), [((*k).clone(), (*v).clone())].into())),
            }
        }
        let mut taken: Vec<(PathBuf, String)> = Vec::new();
        let mut failed: Vec<(PathBuf, String)> = Vec::new();
        for (file, set) in &take {
            let remove =
                |k: &crate::gitconfig::Key| set.contains(&(k.name.to_ascii_lowercase(), k.text()));
            let reason = format!(
                "exec-capable keys of a repository made in the session: {}",
                file.display()
            );
            match self.sink.neutralise_keys(file, &remove, &reason) {
                Ok(Some(id)) => taken.push((file.clone(), id)),
                Ok(None) => {}
                Err(e) => failed.push((file.clone(), e.to_string())),
            }
        }
        for (file, key, value, verdict) in fresh {
            let (neutralise, mut finding) = match verdict {
                Verdict::Neutralise(f) => (true, f),
                Verdict::Alert(f) | Verdict::Quarantine(f) => (false, f),
                Verdict::Quiet => continue,
            };
            let qid = taken
                .iter()
                .find(|(f, _)| f == file && neutralise)
                .map(|(_, id)| id.clone());
            if let Some((_, why)) = failed.iter().find(|(f, _)| f == file) {
                let _ = write!(finding.detail, "; taking it out FAILED: {why}");
            }
            let action = match &qid {
                Some(_) => Action::Neutralised,
                None => Action::Alerted,
            };
            let alert = Alert::new(
                finding.kind,
                finding.severity,
                file,
                finding.detail,
                &self.cfg.session,
            )
            .action(action)
            .fingerprint(format!("git-config:{}:{key}={value}", file.display()))
            .taken_as(qid);
            self.sink.alert(alert);
        }
        let now = if taken.is_empty() {
            keys
        } else {
            baseline::exec_keys(&common, &git_dir, home.as_deref())
        };
        self.repos.set_exec_keys(repo, now);
    }
}
