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

/// The private tmpfs mount points and the views of the state directories that are holes, and
/// placeholders (agent state, removed again if left empty) for the missing ones and their missing
/// parents.
#[allow(clippy::type_complexity)]
pub(super) fn state_private(
    input: &PlanInput,
    home: &Path,
    holes: &[PathBuf],
    placeholders: &mut Vec<Placeholder>,
    warnings: &mut Vec<String>,
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
                warnings.push(format!(
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
                    warnings.push(format!(
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
