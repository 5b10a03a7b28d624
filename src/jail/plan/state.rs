//! The agents' state in the plan: which runtimes a session may run, the private directories and
//! views of their state, the project and `$HOME` directories they write at every start, and which
//! holes' links are followed.

use super::*;

/// The runtime launched, if the command is one (the views it needs cost mounts and placeholders:
/// made for it only).
pub(super) fn present_runtimes(input: &PlanInput) -> Vec<&'static crate::runtimes::Runtime> {
    input
        .command
        .first()
        .and_then(|c| Path::new(c).file_name())
        .and_then(|a| crate::runtimes::by_command(&a.to_string_lossy()))
        .into_iter()
        .collect()
}

/// The holes whose links `links` follows: a state directory with a top level of the jail's own is
/// no hole as a whole, only its writable binds are (its links lead where your agent reads outside).
pub(super) fn link_holes(plan: &Plan, home: &Path, writable_roots: &[PathBuf]) -> Vec<PathBuf> {
    let own_state: Vec<PathBuf> = plan
        .policy
        .home_entries
        .iter()
        .filter(|e| matches!(e.bind, HomeBind::State { .. }))
        .map(|e| home.join(&e.name))
        .collect();
    plan.holes
        .iter()
        .filter(|h| !own_state.contains(h))
        .chain(
            writable_roots
                .iter()
                .filter(|r| own_state.iter().any(|s| r.starts_with(s))),
        )
        .cloned()
        .collect()
}

/// The project directories the session's runtimes write at every start (`Runtime::project_views`).
pub(super) fn project_views(input: &PlanInput, ws: &Path) -> Vec<PathBuf> {
    present_runtimes(input)
        .iter()
        .flat_map(|r| r.project_views.iter().map(|n| ws.join(n)))
        .collect()
}

/// The project views of the launched runtime (sealed directories no longer: taken out of
/// `sealed`), with the jail's own files in them (`ownfiles`), which the views leave out.
pub(super) fn views_and_own_files(
    plan: &mut Plan,
    input: &PlanInput,
    ws: &Path,
    sealed: &mut Vec<Sealed>,
) -> Vec<PathBuf> {
    let mut views = Vec::new();
    for view in project_views(input, ws) {
        if sealed.iter().any(|s| s.path == view) {
            sealed.retain(|s| s.path != view);
            views.push(view);
        }
    }
    let store = crate::jail::layers::store_dir(&plan.policy.home, &input.host);
    plan.policy.own_files = crate::jail::ownfiles::plan(&store, ws, &views);
    for view in &views {
        let own: Vec<&std::ffi::OsStr> = plan
            .policy
            .own_files
            .iter()
            .filter(|(_, p)| p.parent() == Some(view))
            .filter_map(|(_, p)| p.file_name())
            .collect();
        let mut keep = crate::jail::statedir::names_in(view);
        keep.retain(|n| !own.contains(&n.as_os_str()));
        plan.policy.state_views.push((view.clone(), keep));
    }
    views
}

/// A work directory inside a view is one of its entries: bound, then made writable again.
pub(super) fn keep_work_in_views(plan: &mut Plan, work_in_seals: &[PathBuf]) {
    for (dir, keep) in &mut plan.policy.state_views {
        for w in work_in_seals.iter().filter(|w| w.parent() == Some(dir)) {
            if let Some(n) = w.file_name().filter(|n| !keep.iter().any(|k| k == n)) {
                keep.push(n.to_owned());
            }
        }
    }
}

/// The private tmpfs mount points and the views of the state directories that are holes, and
/// placeholders (agent state, removed again if left empty) for the missing ones and their missing
/// parents.
#[allow(clippy::type_complexity)]
pub(super) fn state_private(
    input: &PlanInput,
    home: &Path,
    holes: &[PathBuf],
    placeholders: &mut Vec<Placeholder>,
    gaps: &mut Vec<String>,
) -> (Vec<PathBuf>, Vec<(PathBuf, Vec<OsString>)>) {
    let (mut private, mut views) = (Vec::new(), Vec::new());
    for sd in crate::runtimes::state_dirs() {
        let dir = home.join(sd.path);
        if !holes.contains(&dir) {
            continue;
        }
        let wanted = sd
            .private
            .iter()
            .map(|rel| (*rel, None))
            .chain(sd.views.iter().map(|v| (v.name, Some(v.fresh))));
        for (rel, fresh) in wanted {
            let p = dir.join(rel);
            // In the jail's own directory the mount point is the jail's (`statedir`).
            let own_top = sd.own_top_level();
            // Through a symlink the mount would land elsewhere: left as it is.
            if own_top {
            } else if p
                .ancestors()
                .any(|a| a.starts_with(&dir) && a != dir && is_symlink(a))
            {
                gaps.push(format!(
                    "{} is reached through a symlink: not made private",
                    p.display()
                ));
                continue;
            }
            match std::fs::symlink_metadata(&p) {
                _ if own_top => {}
                Ok(m) if m.is_dir() && !input.held(&p) => {}
                Ok(m) if m.is_dir() => {
                    let planned = |a: &Path| placeholders.iter().any(|x| x.path == a);
                    let held: Vec<Placeholder> = held_dirs(input, &p, &dir)
                        .into_iter()
                        .filter(|h| !planned(&h.path))
                        .collect();
                    placeholders.extend(held);
                }
                Ok(_) => {
                    gaps.push(format!(
                        "{} is not a directory: it stays as it is, writable",
                        p.display()
                    ));
                    continue;
                }
                Err(_) => {
                    let planned = |a: &Path| placeholders.iter().any(|x| x.path == a);
                    let missing: Vec<PathBuf> = p
                        .ancestors()
                        .take_while(|a| *a != dir && !a.exists() && !planned(a))
                        .map(Path::to_path_buf)
                        .collect();
                    placeholders.extend(missing.into_iter().rev().map(|path| Placeholder {
                        path,
                        stub: Stub::Dir,
                        state_dir: true,
                    }));
                }
            }
            match fresh {
                None => private.push(p),
                Some(fresh) => {
                    let mut keep: Vec<OsString> = std::fs::read_dir(&p)
                        .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
                        .unwrap_or_default();
                    keep.retain(|n| !fresh.iter().any(|f| n == *f));
                    keep.sort();
                    views.push((p, keep));
                }
            }
        }
    }
    (private, views)
}
