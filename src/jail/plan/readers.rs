//! Placeholders only where something would read them: a missing workspace-root entry point whose
//! readers (`Catalogued::read_by`) are none of them installed gets no placeholder.
//!
//! Guards against noise that gets a guard switched off: every session put ~32 empty directories
//! (`.npmrc/`, `lefthook.yml/`, `hk.pkl/`, ...) into the workspace root, in the human's editor and
//! `ls`, most of them for tools this machine does not have. Keeps the guarantee where it matters:
//! a name whose reader is installed (on the launcher's PATH or in a conventional user bin
//! directory, where the human's next login shell looks) is still blocked; a name left unblocked that
//! appears during the session is alerted when it ends (`entry-point-created`), since a tool
//! installed later would run it.

use crate::entrypoints::{per_directory, Finding};
use crate::host::{self, HostEnv};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Where an installed reader is looked for: the launcher's PATH and the conventional user bin
/// directories (`~/.local/bin`, ...).
pub(crate) fn search_dirs(path_env: &OsStr, home: &Path, env: &HostEnv) -> Vec<PathBuf> {
    let npm = crate::watch::shellpath::npm_prefix(home, env.get(host::NPM_CONFIG_PREFIX));
    let mut dirs: Vec<PathBuf> = std::env::split_paths(path_env)
        .filter(|d| d.is_absolute())
        .collect();
    for d in crate::watch::shellpath::conventional(home, npm.as_deref()) {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

/// An executable regular file `name` in one of `dirs`.
pub(crate) fn installed(name: &str, dirs: &[PathBuf]) -> bool {
    dirs.iter().any(|d| {
        std::fs::metadata(d.join(name))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The major version of the installed `name` (its npm package's `package.json`, found beside the
/// file its command resolves to), if it can be read.
pub(crate) fn major(name: &str, dirs: &[PathBuf]) -> Option<u64> {
    let exe = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())?;
    let real = std::fs::canonicalize(exe).ok()?;
    let manifest = real
        .ancestors()
        .skip(1)
        .take(4)
        .map(|d| d.join("package.json"))
        .find(|p| p.is_file())?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(manifest).ok()?).ok()?;
    (v.get("name")?.as_str()? == name)
        .then(|| v.get("version")?.as_str()?.split('.').next()?.parse().ok())?
}

/// Take the missing entry points of a kind that never gets a placeholder (`Catalogued::held`) out
/// of `findings`: the session's end holds one that was made (`launch::created`). Existing ones of
/// a kind whose edits are held (`Catalogued::edits_held`) are taken out too, and returned: the
/// session's end judges their changes (`launch::edited`).
pub(crate) fn drop_held(findings: &mut Vec<Finding>) -> Vec<PathBuf> {
    let mut edited = Vec::new();
    findings.retain(|f| {
        // Found as that name, not for another reason (the target of a link from `$HOME`'s
        // `~/.claude/CLAUDE.md` is sealed as that file is, whatever its name).
        let Some(c) = f.path.file_name().and_then(|n| {
            per_directory().find(|c| c.held && OsStr::new(c.name) == n && c.runs == f.runs)
        }) else {
            return true;
        };
        let exists = std::fs::symlink_metadata(&f.path).is_ok();
        if exists && c.edits_held {
            edited.push(f.path.clone());
            return false;
        }
        exists
    });
    edited
}

/// Split off the findings for missing workspace-root names that nothing installed reads. Returns
/// them as paths (for the end-of-session check).
pub(crate) fn unread(findings: &mut Vec<Finding>, ws: &Path, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut known: HashMap<&str, bool> = HashMap::new();
    let mut out = Vec::new();
    findings.retain(|f| {
        if f.path.parent() != Some(ws) || std::fs::symlink_metadata(&f.path).is_ok() {
            return true;
        }
        let Some(c) = f
            .path
            .file_name()
            .and_then(|n| per_directory().find(|c| OsStr::new(c.name) == n))
        else {
            return true;
        };
        if c.read_by.is_empty() {
            return true;
        }
        let read = c
            .read_by
            .iter()
            .any(|r| *known.entry(r).or_insert_with(|| installed(r, dirs)));
        if !read {
            out.push(f.path.clone());
        }
        read
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_left_unblocked_only_when_none_of_its_readers_is_installed() {
        let t = tempfile::tempdir().unwrap();
        let (ws, bin) = (t.path().join("ws"), t.path().join("bin"));
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&bin).unwrap();
        let exe = |name: &str, mode: u32| {
            std::fs::write(bin.join(name), "").unwrap();
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(mode))
                .unwrap();
        };
        exe("direnv", 0o755);
        exe("mise", 0o644); // not executable: not installed
        std::fs::write(ws.join("hk.pkl"), "").unwrap(); // exists: always sealed
        let finding = |name: &str| Finding {
            path: ws.join(name),
            stub: crate::catalogue::Stub::Dir,
            runs: String::new(),
        };
        let mut findings: Vec<Finding> =
            [".envrc", "mise.toml", "hk.pkl", ".vscode", "lefthook.yml"]
                .iter()
                .map(|n| finding(n))
                .chain([Finding {
                    path: ws.join("sub/lefthook.yml"),
                    ..finding("x")
                }])
                .collect();
        let left = unread(&mut findings, &ws, &[bin]);
        assert_eq!(left, [ws.join("mise.toml"), ws.join("lefthook.yml")]);
        let kept: Vec<_> = findings.iter().map(|f| f.path.clone()).collect();
        assert_eq!(
            kept,
            [
                ws.join(".envrc"),
                ws.join("hk.pkl"),
                ws.join(".vscode"),
                ws.join("sub/lefthook.yml")
            ]
        );
    }

    #[test]
    fn the_major_version_comes_from_the_package_the_command_links_to() {
        let t = tempfile::tempdir().unwrap();
        let (bin, pkg) = (t.path().join("bin"), t.path().join("lib/node_modules/pnpm"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::write(pkg.join("bin/pnpm.cjs"), "").unwrap();
        std::os::unix::fs::symlink(pkg.join("bin/pnpm.cjs"), bin.join("pnpm")).unwrap();
        let dirs = [bin.clone()];
        assert_eq!(major("pnpm", &dirs), None, "no package.json");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name": "pnpm", "version": "11.2.0"}"#,
        )
        .unwrap();
        assert_eq!(major("pnpm", &dirs), Some(11));
        // Another package's manifest says nothing of pnpm.
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name": "other", "version": "3.0.0"}"#,
        )
        .unwrap();
        assert_eq!(major("pnpm", &dirs), None);
        assert_eq!(major("yarn", &dirs), None);
    }
}
