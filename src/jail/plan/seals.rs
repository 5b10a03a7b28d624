//! The plan's second half (`add_seals`, run while bwrap starts): findings into seals — read-only
//! binds of existing entry points, placeholders for missing ones (not where nothing can create
//! them), and the anchors that keep their directories in place.

use super::*;

/// The rest of the plan: the workspace's entry points (sealed, or placeholders where missing), the
/// anchors, the hidden runtime directory, the masks, the repositories for the watcher.
pub fn add_seals(plan: &mut Plan, input: &PlanInput) {
    add_seals_fed(plan, input, None);
}

/// `add_seals`, its walk of the workspace doing the hard-link scan's share there (`feed`, whose
/// scan runs beside it: `jail::hardlinks::feed`).
pub(crate) fn add_seals_fed(
    plan: &mut Plan,
    input: &PlanInput,
    feed: Option<crate::jail::hardlinks::Feed>,
) {
    let home = plan.policy.home.clone();
    let writable_roots = plan.writable_roots();
    let private = plan.policy.private.clone();
    let hidden = hidden_dirs(input, &home, &private);
    let views: Vec<PathBuf> = plan.policy.views.iter().map(|v| v.path.clone()).collect();
    std::thread::scope(|s| {
        // The home's scan for secrets runs beside the workspace's walk: two independent reads, and
        // the longest parts of the plan.
        let secrets = s
            .spawn(|| masks::secrets(input, &home, (&private, &hidden), (&writable_roots, &views)));
        let secrets = || {
            secrets
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        seal_all(plan, input, (hidden.clone(), feed), secrets);
    });
}

fn seal_all(
    plan: &mut Plan,
    input: &PlanInput,
    (hidden, feed): (Vec<PathBuf>, Option<crate::jail::hardlinks::Feed>),
    secrets: impl FnOnce() -> masks::Secrets,
) {
    let ws = plan.policy.workspace.clone();
    let home = plan.policy.home.clone();
    let mut warnings = Vec::new();
    let writable_roots = plan.writable_roots();

    let (mut discovery, extras) = discover(plan, input, &ws, feed);
    // What the walk could not read or work out is not sealed.
    let mut gaps = std::mem::take(&mut discovery.warnings);
    let mut findings = std::mem::take(&mut discovery.findings);
    findings.extend(entrypoints::discover_state(&home, &plan.holes));
    let link_holes = link_holes(plan, &home, &writable_roots);
    let (links, cut) = crate::jail::links::home_link_targets(&home, &link_holes, &writable_roots);
    findings.extend(links);
    gaps.extend(cut);
    findings.extend(crate::jail::links::global_git_targets(
        &home,
        &plan.holes,
        &writable_roots,
        &input.host,
    ));
    for p in input.config_paths.all() {
        findings.push(Finding {
            path: p.to_path_buf(),
            stub: Stub::Dir,
            runs: "claude-sandbox: configuration of the next session".into(),
        });
    }
    for p in &input.config.read_only {
        findings.push(Finding {
            path: p.clone(),
            stub: Stub::Dir,
            runs: "configured read-only path".into(),
        });
    }
    let search = readers::search_dirs(&input.path_env, &home, &input.host);
    plan.existing_entry_points = findings
        .iter()
        .filter(|f| std::fs::symlink_metadata(&f.path).is_ok())
        .map(|f| f.path.clone())
        .collect();
    let edits_held = readers::drop_held(&mut findings);
    plan.unread = readers::unread(&mut findings, &ws, &search);
    for extra in &extras {
        plan.unread
            .extend(readers::unread(&mut findings, extra, &search));
    }
    let (mut sealed, mut stubs, closed) = seal(
        findings,
        &writable_roots,
        &input.held,
        &mut warnings,
        &mut gaps,
    );
    // What the launched runtime writes in the project at every start: a view for the session.
    let views = views_and_own_files(plan, input, &ws, &mut sealed);
    // A sealed directory that is also a private tmpfs's parent is made once, as agent state.
    stubs.retain(|s| !plan.placeholders.iter().any(|p| p.path == s.path));
    let work_in_seals = work_in_seals(&ws, &sealed, &views, &input.held, &mut stubs);
    keep_work_in_views(plan, &work_in_seals);
    plan.watched_not_sealed = refused_placeholders(input, plan, &mut sealed, &mut stubs);
    plan.placeholders.extend(stubs);

    let mut anchor_roots: Vec<PathBuf> = writable_roots
        .iter()
        .filter(|r| **r == ws)
        .cloned()
        .collect();
    anchor_roots.extend(plan.git_roots.iter().cloned());
    anchor_roots.extend(extras);
    let anchors = anchors(&anchor_roots, &discovery.repos, &sealed, &closed);
    let private = &plan.policy.private;
    let mut masks = masks(input, &home, (private, &hidden), secrets(), &mut gaps);
    // ssh's ControlMaster sockets outside `~/.ssh` (a fixed view): their directory is masked.
    for dir in crate::jail::sockets::control_path_dirs(&home) {
        if !dir.starts_with(home.join(".ssh")) && dir != home && dir.is_dir() {
            masks.push(Mask {
                path: dir,
                kind: MaskKind::Dir,
                why: "ssh ControlPath directory: sockets made later".into(),
            });
        }
    }
    let policy = &mut plan.policy;
    policy.anchors = anchors
        .into_iter()
        .filter(|a| !work_in_seals.contains(a))
        .collect();
    policy.sealed = sealed;
    policy.work_in_seals = work_in_seals;
    policy.masks = super::inject::unmasked(masks, &policy.views);
    policy.hidden = hidden;
    // What a fixed view leaves out is not in the jail at all: nothing to mask or hide there (and
    // no mount point could be made in the read-only view).
    let views = crate::jail::sockets::Views::of(policy);
    policy.masks.retain(|m| !views.leave_out(&m.path));
    policy.hidden.retain(|h| !views.leave_out(h));
    policy.sealed.retain(|s| !views.leave_out(&s.path));
    policy.anchors.retain(|a| !views.leave_out(a));
    plan.warnings.extend(warnings);
    plan.gaps.extend(gaps);
    plan.worktree_listings = crate::jail::worktrees::listings(&discovery.repos, &writable_roots);
    plan.repos = discovery.repos;
    plan.workspace_dirs = discovery.dirs;
    plan.edited =
        crate::jail::launch::edited::at_launch(&discovery.dotenv, &edits_held, &writable_roots);
    plan.envrc_path_dirs = discovery.path_adds;
}

/// Turn findings into read-only seals (existing paths) and placeholders (missing ones). Only paths
/// under a writable root need sealing: everything else is read-only already.
/// `held`: the placeholders other sessions hold, which are held here too (placeholders again).
pub(super) fn seal(
    findings: Vec<Finding>,
    roots: &[PathBuf],
    held: &std::collections::HashSet<PathBuf>,
    warnings: &mut Vec<String>,
    gaps: &mut Vec<String>,
) -> (Vec<Sealed>, Vec<Placeholder>, Vec<PathBuf>) {
    let mut closed = Vec::new();
    let mut sealed: Vec<Sealed> = Vec::new();
    let mut stubs = Vec::new();
    let mut seen = BTreeSet::new();
    // Targets that are (or will be, as a placeholder) directories: what a seal can cover.
    let mut dirs: std::collections::HashSet<PathBuf> = std::collections::HashSet::default();
    for f in entrypoints::dedup(findings) {
        let Some(root) = roots
            .iter()
            .filter(|r| f.path.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        else {
            continue;
        };
        if &f.path == root {
            continue;
        }
        let (target, stub, placeholder, dir) = match std::fs::symlink_metadata(&f.path) {
            // Another session's placeholder: this session's too (it may be gone by the time this
            // session makes its own; `placeholders::acquire` holds or makes it, under its lock).
            Ok(m) if held.contains(&f.path) => {
                let stub = if m.is_dir() { Stub::Dir } else { f.stub };
                (f.path.clone(), Some(stub), true, m.is_dir())
            }
            // A `.git/config` another session diverted: sealed by its own name, which stays there
            // whichever session releases the diversion before this one joins it (the diversion's
            // directory may be gone by then). This session's copy replaces the seal (`mounts`).
            Ok(m) if m.file_type().is_symlink() && crate::jail::gitcopy::is_diverted(&f.path) => {
                (f.path.clone(), None, false, false)
            }
            Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(&f.path) {
                Ok(t) if roots.iter().any(|r| t.starts_with(r)) => {
                    gaps.push(format!(
                        "{} is a symlink: its target {} is sealed, the link itself stays replaceable",
                        f.path.display(),
                        t.display()
                    ));
                    let dir = t.is_dir();
                    (t, None, false, dir)
                }
                Ok(_) => continue, // points outside every writable root: read-only already
                Err(_) => {
                    gaps.push(format!(
                        "{} is a dangling symlink; the watcher must catch its target",
                        f.path.display()
                    ));
                    continue;
                }
            },
            Ok(m) => (f.path.clone(), None, false, m.is_dir()),
            Err(_) => match first_missing(&f.path, root) {
                Some((p, _)) if p.parent().is_some_and(closed_to_us) => {
                    // Nothing can create it: not you, so not the agent (same uid, no capability,
                    // and only the owner could open the directory up). Its parents still may not be
                    // renamed, so the directory stays where the human's tools look.
                    let parent = p.parent().unwrap_or(&p).to_path_buf();
                    warnings.push(format!(
                        "{} is not sealed: {} is not yours and you cannot write it, so nothing in the jail can create it",
                        p.display(),
                        parent.display()
                    ));
                    closed.push(parent);
                    continue;
                }
                Some((p, leaf)) => {
                    let stub = if leaf { f.stub } else { Stub::Dir };
                    (p, Some(stub), true, stub == Stub::Dir)
                }
                None => continue, // an ancestor is a file (a `.git` pointer): nothing can be created
            },
        };
        if !seen.insert(target.clone()) {
            continue;
        }
        if dir {
            dirs.insert(target.clone());
        }
        if let Some(stub) = stub {
            stubs.push(Placeholder {
                path: target.clone(),
                stub,
                state_dir: false,
            });
        }
        sealed.push(Sealed {
            path: target,
            runs: f.runs,
            placeholder,
        });
    }
    // A seal inside another sealed directory is covered by it (and could not be created there).
    // (Looked up by ancestor: comparing every pair of paths was a third of the planning time.)
    sealed.sort_by(|a, b| a.path.cmp(&b.path));
    let mut kept: Vec<Sealed> = Vec::new();
    let mut kept_dirs: std::collections::HashSet<PathBuf> = std::collections::HashSet::default();
    for s in sealed {
        if s.path.ancestors().skip(1).any(|a| kept_dirs.contains(a)) {
            stubs.retain(|p| p.path != s.path);
            continue;
        }
        if dirs.contains(&s.path) {
            kept_dirs.insert(s.path.clone());
        }
        kept.push(s);
    }
    let kept_paths: std::collections::HashSet<&Path> =
        kept.iter().map(|k| k.path.as_path()).collect();
    stubs.retain(|p| kept_paths.contains(p.path.as_path()));
    (kept, stubs, closed)
}

/// A directory in which this user cannot create anything and whose mode only its owner (not this
/// user) could change: a nested repository made by root in a `postCreateCommand`, say.
pub(super) fn closed_to_us(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    m.is_dir()
        && m.uid() != rustix::process::geteuid().as_raw()
        && rustix::fs::accessat(
            rustix::fs::CWD,
            dir,
            rustix::fs::Access::WRITE_OK,
            rustix::fs::AtFlags::EACCESS,
        )
        .is_err()
}

/// The first missing component of `path` below `root`, and whether it is the leaf itself.
/// `None` when an existing ancestor is not a directory.
pub(super) fn first_missing(path: &Path, root: &Path) -> Option<(PathBuf, bool)> {
    let rel = path.strip_prefix(root).ok()?;
    let mut cur = root.to_path_buf();
    for c in rel.components() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return None,
            Err(_) => return Some((cur.clone(), cur == path)),
        }
    }
    None
}

/// Directories that must not be renamed: every `.git` directory under a writable root, every git
/// and common directory that lies inside one (a worktree's `worktrees/<name>`), and every directory
/// between a root and a nested repository or a sealed path. `roots`: the workspace, and its git
/// directories outside it (`entrypoints::own`); a chain stops at the root it lies in.
pub(super) fn anchors(
    roots: &[PathBuf],
    repos: &[entrypoints::Repo],
    sealed: &[Sealed],
    closed: &[PathBuf],
) -> Vec<PathBuf> {
    let mut set = BTreeSet::new();
    // Every directory looked at once (the seals of one repository share their ancestors): a chain
    // stops where an earlier one went, since it went on from there to the root.
    let mut looked = std::collections::HashSet::new();
    let mut add_chain = |leaf: &Path, set: &mut BTreeSet<PathBuf>| {
        let Some(root) = roots
            .iter()
            .filter(|r| leaf.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
        else {
            return;
        };
        let mut cur = leaf.to_path_buf();
        while cur.starts_with(root) && cur != *root && looked.insert(cur.clone()) {
            // A directory, not a link to one (`lstat`).
            if std::fs::symlink_metadata(&cur).is_ok_and(|m| m.is_dir()) {
                set.insert(cur.clone());
            }
            if !cur.pop() {
                break;
            }
        }
    };
    for r in repos {
        if r.git_dir.file_name() == Some(".git".as_ref()) {
            add_chain(&r.git_dir, &mut set);
        }
        // A worktree's or a submodule's git directory inside a common one: renamed away, a new one
        // in its place would redirect the hooks (`commondir`).
        if r.git_dir != r.common_dir {
            add_chain(&r.git_dir, &mut set);
        }
        if let Some(w) = &r.worktree {
            add_chain(w, &mut set);
        }
    }
    for s in sealed {
        if let Some(parent) = s.path.parent() {
            add_chain(parent, &mut set);
        }
    }
    for dir in closed {
        add_chain(dir, &mut set);
    }
    // A sealed directory is already a mount point; binding it writable would undo the seal.
    let sealed_paths: BTreeSet<&Path> = sealed.iter().map(|s| s.path.as_path()).collect();
    set.into_iter()
        .filter(|a| !a.ancestors().any(|x| sealed_paths.contains(x)))
        .collect()
}

/// The placeholders the launched agent refuses in its repository's `.git` directory (the
/// workspace's, or the one above it), taken out of the seals: the paths.
pub(super) fn refused_placeholders(
    input: &PlanInput,
    plan: &Plan,
    sealed: &mut Vec<Sealed>,
    stubs: &mut Vec<Placeholder>,
) -> Vec<PathBuf> {
    let ws = &plan.policy.workspace;
    let git_dir = match &plan.own_repo {
        Some(own) if own.git_dir == own.common_dir => own.git_dir.clone(),
        Some(_) => return Vec::new(),
        None => ws.join(".git"),
    };
    let mut out = Vec::new();
    for name in present_runtimes(input)
        .iter()
        .flat_map(|r| r.refuses_in_git_dir)
    {
        let path = git_dir.join(name);
        if stubs.iter().any(|p| p.path == path) {
            stubs.retain(|p| p.path != path);
            sealed.retain(|s| s.path != path);
            out.push(path);
        }
    }
    out
}

/// The directories of the human's work inside a sealed project name (`runtimes::project_work`),
/// and a placeholder (after its sealed parent's) for each that is missing. One that is a symlink or
/// a file, or whose parent is not a sealed directory here, stays sealed.
pub(super) fn work_in_seals(
    ws: &Path,
    sealed: &[Sealed],
    views: &[PathBuf],
    held: &std::collections::HashSet<PathBuf>,
    stubs: &mut Vec<Placeholder>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for rel in crate::runtimes::project_work() {
        let dir = ws.join(rel);
        let Some(parent) = dir.parent() else { continue };
        let parent_sealed =
            sealed.iter().any(|s| s.path == parent) || views.iter().any(|v| v == parent);
        let parent_is_dir = std::fs::symlink_metadata(parent).is_ok_and(|m| m.is_dir())
            || stubs
                .iter()
                .any(|p| p.path == parent && p.stub == Stub::Dir);
        if !parent_sealed || !parent_is_dir {
            continue;
        }
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() && !held.contains(&dir) => {}
            Ok(m) if !m.is_dir() => continue,
            _ => stubs.push(Placeholder {
                path: dir.clone(),
                stub: Stub::Dir,
                state_dir: false,
            }),
        }
        out.push(dir);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every real directory between a seal and the workspace is anchored once, whatever order the
    /// seals come in; a link to a directory and a sealed directory are not.
    #[test]
    fn anchors_are_the_real_directories_above_the_seals() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("w");
        for d in ["r/.git/hooks", "sub/deep", "vsc/.vscode"] {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(ws.join("sub"), ws.join("link")).unwrap();
        let seal = |p: &str| Sealed {
            path: ws.join(p),
            runs: String::new(),
            placeholder: false,
        };
        let sealed = [
            seal("sub/deep/.envrc"),
            seal("r/.git/hooks/pre-commit"),
            seal("link/.envrc"),
            seal("r/.git/config"),
            seal("vsc/.vscode"),
            seal("vsc/.vscode/tasks.json"),
        ];
        let repo = entrypoints::Repo {
            worktree: Some(ws.join("r")),
            git_dir: ws.join("r/.git"),
            common_dir: ws.join("r/.git"),
        };
        let want: Vec<PathBuf> = ["r", "r/.git", "r/.git/hooks", "sub", "sub/deep", "vsc"]
            .iter()
            .map(|p| ws.join(p))
            .collect();
        assert_eq!(
            anchors(
                std::slice::from_ref(&ws),
                std::slice::from_ref(&repo),
                &sealed,
                &[]
            ),
            want
        );
        let mut reversed = sealed.to_vec();
        reversed.reverse();
        assert_eq!(
            anchors(
                std::slice::from_ref(&ws),
                &[repo],
                &reversed,
                &[ws.join("sub")]
            ),
            want
        );
    }
}
