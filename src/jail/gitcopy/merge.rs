//! Which of the jail's config changes come back to the human's file, by what git would do with
//! them (`crate::handback::git`): everyday data is carried out with git itself; anything that names
//! a program, a place or a key this guard does not know is **held** for the human's review
//! (`crate::held`), never silently dropped and never carried out unseen.
//!
//! Guards against trust by name: an allowlist of keys carried `branch.main.pushRemote =
//! ../x.git` (a local repository whose `pre-receive` the agent wrote: the human's next push runs
//! it) and a `remote.origin.url` moved to another host (the next push sends the work there), and
//! dropped `alias.co = checkout` and `submodule.*.active`, which everyday work needs.

use crate::gitconfig::{self, Key};
use crate::handback::{git::Ctx, Verdict};
use std::path::{Path, PathBuf};

/// The values of each key, in file order, keys in first-seen order.
type Values = Vec<(String, Vec<Option<Vec<u8>>>)>;

fn values(keys: &[Key]) -> Values {
    let mut out: Values = Vec::new();
    for k in keys {
        match out.iter_mut().find(|(n, _)| *n == k.name) {
            Some((_, v)) => v.push(k.value.clone()),
            None => out.push((k.name.clone(), vec![k.value.clone()])),
        }
    }
    out
}

fn get<'a>(v: &'a Values, name: &str) -> &'a [Option<Vec<u8>>] {
    v.iter()
        .find(|(n, _)| n == name)
        .map_or(&[], |(_, v)| v.as_slice())
}

/// At most this many keys are carried out or held from one session's copy: an agent that changes
/// more (3000 junk sections took 36 s of `git config` at exit) has none of them carried out.
pub(crate) const MAX_CARRIED: usize = 64;

/// One key held for review.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct HeldKey {
    pub name: String,
    /// The jail's values (none: it removed the key).
    pub values: Vec<Option<Vec<u8>>>,
    /// The human's values now (what an accept will check is still there).
    pub human: Vec<Option<Vec<u8>>>,
    pub verdict: Verdict,
}

/// What the merge does to the human's config.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Merge {
    /// Keys given exactly these values (an empty list: removed).
    pub set: Vec<(String, Vec<Option<Vec<u8>>>)>,
    /// Keys that are more than data: held for the human's review.
    pub held: Vec<HeldKey>,
    /// Keys both sides changed since the launch: the human's values kept.
    pub conflicts: Vec<String>,
    /// More than `MAX_CARRIED` keys to carry or hold: none of them is.
    pub too_many: bool,
}

/// Decide the merge from the config at launch, the jail's copy and the human's config now. Pure
/// (`ctx` answers the one question about the world outside: what a local path names).
pub(crate) fn merge(base: &[Key], jail: &[Key], human: &[Key], ctx: &Ctx) -> Merge {
    let (base, jail, human) = (values(base), values(jail), values(human));
    let mut names: Vec<&str> = base.iter().chain(&jail).map(|(n, _)| n.as_str()).collect();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));
    let mut m = Merge::default();
    for name in names {
        let (b, j, h) = (get(&base, name), get(&jail, name), get(&human, name));
        if b == j {
            continue;
        }
        if h != b {
            m.conflicts.push(name.to_string());
            continue;
        }
        let verdict = crate::handback::git::judge(name, j, b, ctx);
        if verdict.flows() {
            m.set.push((name.to_string(), j.to_vec()));
        } else {
            m.held.push(HeldKey {
                name: name.to_string(),
                values: j.to_vec(),
                human: h.to_vec(),
                verdict,
            });
        }
    }
    if m.set.len() + m.held.len() > MAX_CARRIED {
        m.too_many = true;
        m.set.clear();
        m.held.clear();
    }
    m
}

/// A key's values as the review names them.
pub(crate) fn shown(vals: &[Option<Vec<u8>>]) -> String {
    if vals.is_empty() {
        return "(removed)".into();
    }
    vals.iter()
        .map(|v| {
            v.as_deref().map_or("true".into(), |b| {
                format!("\"{}\"", String::from_utf8_lossy(b))
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a local path written as a URL in the config `config` names a repository whose hooks
/// or config lie under the jail's writable roots (or that cannot be told: then yes). A relative
/// path is taken from the working tree and from the git directory (git resolves it from where it
/// runs): either one under a root counts.
pub(crate) fn local_repo_writable(path: &[u8], config: &Path, writable: &[PathBuf]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if writable.is_empty() || path.starts_with(b"~") {
        return true;
    }
    let p = Path::new(std::ffi::OsStr::from_bytes(path));
    let git_dir = config.parent().unwrap_or(Path::new("/"));
    let candidates: Vec<PathBuf> = if p.is_absolute() {
        vec![p.to_path_buf()]
    } else {
        let mut c = vec![git_dir.join(p)];
        if git_dir.file_name().is_some_and(|n| n == ".git") {
            if let Some(tree) = git_dir.parent() {
                c.push(tree.join(p));
            }
        }
        c
    };
    let roots: Vec<PathBuf> = writable.iter().map(|r| resolved(r)).collect();
    let under = |q: &Path| roots.iter().any(|r| q.starts_with(r));
    candidates.iter().any(|c| {
        let c = resolved(c);
        // The repository itself, its `.git`, and where its hooks are.
        let mut places = vec![c.clone(), c.join(".git"), c.join("hooks")];
        if let Ok(bytes) =
            std::fs::read(c.join("config")).or_else(|_| std::fs::read(c.join(".git/config")))
        {
            if let Ok(keys) = gitconfig::parse(&bytes) {
                for k in keys
                    .iter()
                    .filter(|k| k.name.eq_ignore_ascii_case("core.hookspath"))
                {
                    if let Some(v) = &k.value {
                        places.push(c.join(Path::new(std::ffi::OsStr::from_bytes(v))));
                    }
                }
            }
        }
        places.iter().any(|p| under(&resolved(p)))
    })
}

/// `p` with its symbolic links resolved as far as it exists, the rest appended.
fn resolved(p: &Path) -> PathBuf {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return out;
        }
        match (
            existing.file_name().map(std::ffi::OsStr::to_os_string),
            existing.parent(),
        ) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                existing = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Give `name` exactly `vals` in the config file `real`, with git itself (its locking, its quoting).
pub(crate) fn apply(
    real: &std::path::Path,
    name: &str,
    vals: &[Option<Vec<u8>>],
) -> Result<(), super::GitCopyError> {
    use super::GitCopyError;
    use std::os::unix::ffi::OsStrExt;
    let git = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new("git")
            .arg("config")
            .arg("--file")
            .arg(real)
            .args(args)
            .env_remove("GIT_CONFIG_PARAMETERS")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(GitCopyError::Git)
    };
    // `--`: a section named `-x` or a value starting with `-` is never read as an option.
    let unset = git(&["--unset-all".as_ref(), "--".as_ref(), name.as_ref()])?;
    // 5: the key was not there.
    if !unset.status.success() && unset.status.code() != Some(5) {
        return Err(GitCopyError::GitRefused(
            String::from_utf8_lossy(&unset.stderr).trim().to_string(),
        ));
    }
    for v in vals {
        let v = v.as_deref().unwrap_or(b"true");
        let out = git(&[
            "--add".as_ref(),
            "--".as_ref(),
            name.as_ref(),
            std::ffi::OsStr::from_bytes(v),
        ])?;
        if !out.status.success() {
            return Err(GitCopyError::GitRefused(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
