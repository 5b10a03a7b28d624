//! What adopting a name would copy, and whether it may: reads the layer store and your home, never
//! writes. Each refusal is one line naming the cause and what to do.

use super::{Adoption, Step};
use crate::error::{Error, Result};
use crate::jail::layers::{DATA, PATH_DIRS};
use std::ffi::OsStr;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

/// The data layer that holds `home/rel`: its path relative to `$HOME`, and the store's directories
/// that hold what sessions wrote there (the shared upper directory, then the jail's own, used where
/// no overlay could be made).
fn layer_of(store: &Path, rel: &Path) -> Option<(&'static str, [PathBuf; 2])> {
    let (top, name) = DATA
        .iter()
        .filter(|(d, _)| rel.starts_with(d))
        .max_by_key(|(d, _)| d.len())?;
    let dir = store.join(name);
    Some((top, [dir.join("upper"), dir.join("own")]))
}

/// Where `home/rel` lies in the store, in each of the layer's directories.
fn layer_dirs(store: &Path, rel: &Path) -> Vec<PathBuf> {
    layer_of(store, rel).map_or_else(Vec::new, |(top, roots)| {
        let rest = rel.strip_prefix(top).unwrap_or(rel);
        roots.iter().map(|r| r.join(rest)).collect()
    })
}

fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| !(m.file_type().is_char_device() && m.rdev() == 0))
}

/// `path` with `.` and `..` taken away lexically (the jail's view of a link target).
pub(crate) fn normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c.as_os_str()),
        }
    }
    out
}

/// The npm package directory (`lib/node_modules/NAME` or `lib/node_modules/@SCOPE/NAME`, relative
/// to the layer) that `rel` lies in.
pub(crate) fn npm_package(rel: &Path) -> Option<PathBuf> {
    let parts: Vec<&OsStr> = rel.iter().collect();
    let at = parts
        .windows(2)
        .position(|w| w == ["lib", "node_modules"])?;
    let first = parts.get(at + 2)?;
    let take = if first.as_encoded_bytes().starts_with(b"@") {
        4
    } else {
        3
    };
    (parts.len() > at + take).then(|| parts[..at + take].iter().collect())
}

/// The names in a `[console_scripts]` or `[gui_scripts]` section of `entry_points.txt`.
pub(crate) fn scripts(entry_points: &str) -> Vec<String> {
    let mut on = false;
    let mut out = Vec::new();
    for line in entry_points.lines().map(str::trim) {
        if line.starts_with('[') {
            on = line == "[console_scripts]" || line == "[gui_scripts]";
        } else if on {
            if let Some((k, _)) = line.split_once('=') {
                out.push(k.trim().to_string());
            }
        }
    }
    out
}

/// The paths a wheel's `RECORD` lists inside site-packages (not the scripts beside it, `../`).
pub(crate) fn record_paths(record: &str) -> Vec<PathBuf> {
    record
        .lines()
        .filter_map(|l| {
            let path = match l.strip_prefix('"') {
                Some(rest) => rest.split_once('"')?.0,
                None => l.split(',').next()?,
            };
            let p = Path::new(path);
            let inside =
                !path.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)));
            inside.then(|| p.to_path_buf())
        })
        .collect()
}

/// `Requires-Dist` of a `METADATA`, without the ones only an extra needs.
pub(crate) fn requires(metadata: &str) -> Vec<String> {
    metadata
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.strip_prefix("Requires-Dist:"))
        .map(str::trim)
        .filter(|r| !r.contains("extra =="))
        .map(|r| r.split(';').next().unwrap_or(r).trim().to_string())
        .collect()
}

/// The first executable `name` on `path_env` outside `own` (what adopting it would shadow).
fn shadows(path_env: &OsStr, own: &Path, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path_env)
        .filter(|d| d.is_absolute() && d != own)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// What adopting `name` copies, or why it may not.
pub(crate) fn plan(
    home: &Path,
    store: &Path,
    path_env: &OsStr,
    name: &str,
    force: bool,
) -> Result<Adoption> {
    let refuse = |why: String| Err(Error::Usage(format!("adopt {}: {why}", visible(name))));
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return refuse("not a program's name (a file name in one of your PATH directories)".into());
    }
    let found = PATH_DIRS.iter().find_map(|rel| {
        layer_dirs(store, Path::new(rel))
            .into_iter()
            .map(|d| d.join(name))
            .find(|p| present(p))
            .map(|p| (*rel, p))
    });
    let Some((rel, from)) = found else {
        let dirs: Vec<String> = PATH_DIRS.iter().map(|d| format!("~/{d}")).collect();
        return refuse(format!(
            "not installed in the jail's {} (a session running beside another adds its installs \
             when it ends)",
            dirs.join(", ")
        ));
    };
    let own = home.join(rel);
    let to = own.join(name);
    if !force && std::fs::symlink_metadata(&to).is_ok() {
        return refuse(format!(
            "{} exists (yours); --force replaces it",
            visible_path(&to)
        ));
    }
    if let Some(shadowed) = shadows(path_env, &own, name).filter(|_| !force) {
        return refuse(format!(
            "it would shadow {} on your PATH; --force adopts it anyway",
            visible_path(&shadowed)
        ));
    }
    let meta = std::fs::symlink_metadata(&from)
        .map_err(|e| Error::io(format!("adopt: reading {}", from.display()), e))?;
    let mut adoption = Adoption {
        name: name.to_string(),
        from: from.clone(),
        to: to.clone(),
        kind: "program",
        steps: Vec::new(),
        requires: Vec::new(),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&from)
            .map_err(|e| Error::io(format!("adopt: reading {}", from.display()), e))?;
        linked(home, store, &own, &target, &mut adoption, force)?;
        adoption.steps.push(Step::Link { target, to });
    } else if meta.is_file() {
        if rel == ".local/bin" {
            console_script(home, store, name, &mut adoption, force)?;
        }
        adoption.steps.push(Step::File { from, to });
    } else {
        return refuse("not a file or a link; install it outside the jail".into());
    }
    Ok(adoption)
}

fn visible(s: &str) -> String {
    crate::escape::visible(s).into_owned()
}

fn visible_path(p: &Path) -> String {
    crate::escape::visible_path(p)
}

/// A link: the npm package it points into comes with it; a target of yours needs nothing; any other
/// target in the jail's layer cannot be brought whole.
fn linked(
    home: &Path,
    store: &Path,
    own: &Path,
    target: &Path,
    a: &mut Adoption,
    force: bool,
) -> Result<()> {
    let seen = normal(&own.join(target));
    let Some(rel) = seen.strip_prefix(home).ok().map(Path::to_path_buf) else {
        return Ok(()); // outside your home: the same for you as in the jail
    };
    let Some((top, roots)) = layer_of(store, &rel) else {
        return Ok(());
    };
    let in_layer = rel.strip_prefix(top).unwrap_or(&rel);
    let Some(root) = roots.iter().find(|r| present(&r.join(in_layer))) else {
        return Ok(()); // yours, not the jail's: the link means the same outside
    };
    let Some(pkg) = npm_package(in_layer) else {
        return Err(Error::Usage(format!(
            "adopt {}: it links to {} in the jail's layer, which adopt cannot bring whole (not an \
             npm package); install it outside the jail",
            visible(&a.name),
            visible_path(&seen)
        )));
    };
    a.kind = "npm package";
    tree(&root.join(&pkg), &home.join(top).join(&pkg), a, force)
}

/// Every directory and file under `from`, to the same place under `to` (whiteouts skipped).
fn tree(from: &Path, to: &Path, a: &mut Adoption, force: bool) -> Result<()> {
    for e in walkdir::WalkDir::new(from).follow_links(false) {
        let e = e.map_err(|e| Error::Usage(format!("adopt: reading {}: {e}", from.display())))?;
        let rel = e.path().strip_prefix(from).unwrap_or(Path::new(""));
        let dst = if rel.as_os_str().is_empty() {
            to.to_path_buf()
        } else {
            to.join(rel)
        };
        let t = e.file_type();
        let step = if t.is_dir() {
            Step::Dir {
                from: e.path().to_path_buf(),
                to: dst,
            }
        } else if t.is_symlink() {
            let target = std::fs::read_link(e.path())
                .map_err(|err| Error::io(format!("adopt: reading {}", e.path().display()), err))?;
            Step::Link { target, to: dst }
        } else if t.is_file() {
            Step::File {
                from: e.path().to_path_buf(),
                to: dst,
            }
        } else {
            continue; // a whiteout: nothing of the package
        };
        if !force
            && !matches!(step, Step::Dir { .. })
            && std::fs::symlink_metadata(step.to()).is_ok()
        {
            return Err(Error::Usage(format!(
                "adopt {}: it would replace {} (yours); --force replaces it",
                visible(&a.name),
                visible_path(step.to())
            )));
        }
        a.steps.push(step);
    }
    Ok(())
}

/// A pip console script: the distribution whose `entry_points.txt` names it, its files as its
/// `RECORD` lists them (from the jail's `site-packages` under `~/.local/lib/python3*`).
fn console_script(
    home: &Path,
    store: &Path,
    name: &str,
    a: &mut Adoption,
    force: bool,
) -> Result<()> {
    for lib in layer_dirs(store, Path::new(".local/lib")) {
        let Ok(rd) = std::fs::read_dir(&lib) else {
            continue;
        };
        for py in rd.flatten() {
            let py_name = py.file_name();
            if !py_name.as_encoded_bytes().starts_with(b"python") {
                continue;
            }
            let site = py.path().join("site-packages");
            let Ok(infos) = std::fs::read_dir(&site) else {
                continue;
            };
            for info in infos.flatten() {
                let dist = info.path();
                if !info.file_name().as_encoded_bytes().ends_with(b".dist-info") {
                    continue;
                }
                let eps =
                    std::fs::read_to_string(dist.join("entry_points.txt")).unwrap_or_default();
                if !scripts(&eps).iter().any(|s| s == name) {
                    continue;
                }
                let record = std::fs::read_to_string(dist.join("RECORD")).map_err(|e| {
                    Error::io(
                        format!("adopt: reading {}", dist.join("RECORD").display()),
                        e,
                    )
                })?;
                let yours = home.join(".local/lib").join(&py_name).join("site-packages");
                a.kind = "pip console script";
                a.requires =
                    requires(&std::fs::read_to_string(dist.join("METADATA")).unwrap_or_default());
                return distribution(&site, &yours, &record, a, force);
            }
        }
    }
    Ok(())
}

fn distribution(
    site: &Path,
    yours: &Path,
    record: &str,
    a: &mut Adoption,
    force: bool,
) -> Result<()> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for rel in record_paths(record) {
        let (from, to) = (site.join(&rel), yours.join(&rel));
        if !present(&from) {
            if std::fs::symlink_metadata(&to).is_ok() {
                continue; // yours already, unchanged in the jail
            }
            return Err(Error::Usage(format!(
                "adopt {}: its package is incomplete in the jail's layer ({} is missing); install \
                 it outside the jail",
                visible(&a.name),
                visible_path(&rel)
            )));
        }
        if !force && std::fs::symlink_metadata(&to).is_ok() {
            return Err(Error::Usage(format!(
                "adopt {}: it would replace {} (yours); --force replaces it",
                visible(&a.name),
                visible_path(&to)
            )));
        }
        for d in rel
            .ancestors()
            .skip(1)
            .filter(|d| !d.as_os_str().is_empty())
        {
            if !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_path_buf());
            }
        }
        a.steps.push(Step::File { from, to });
    }
    // Directories before the files in them, shallow first.
    dirs.sort_by_key(|d| d.components().count());
    let made: Vec<Step> = dirs
        .into_iter()
        .map(|d| Step::Dir {
            from: site.join(&d),
            to: yours.join(&d),
        })
        .collect();
    a.steps.splice(0..0, made);
    Ok(())
}

#[cfg(test)]
mod tests;
