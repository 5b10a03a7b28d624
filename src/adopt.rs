//! `claude-sandbox adopt NAME`: one program the agent installed in the jail's layer (a home PATH
//! directory, `jail::layers::PATH_DIRS`) brought over to your real directory, on purpose.
//!
//! Guards against two things. A program reaching your PATH without a decision: adopt refuses a
//! name that would shadow a command on your PATH or replace a file of yours, unless `--force`.
//! And half an install: a pip console script without its package, an npm link into the jail's
//! layer: the libraries come with the program where adopt can tell which they are (the
//! distribution's `RECORD` whose `entry_points.txt` names the script; the `lib/node_modules`
//! package a link points into), and where it cannot tell, it refuses and says why. Files are
//! copied byte for byte with their permission bits (never set-id), each to a temporary name then
//! renamed, the program last: your PATH never names a program whose libraries are not there yet.

mod plan;

use crate::error::{Error, Result};
use serde::Serialize;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub(crate) use plan::plan;

/// One thing to make in your home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum Step {
    /// A regular file, copied from the layer.
    File { from: PathBuf, to: PathBuf },
    /// A directory (of a package), with the source's mode.
    Dir { from: PathBuf, to: PathBuf },
    /// A symbolic link, as the jail made it.
    Link { target: PathBuf, to: PathBuf },
}

impl Step {
    pub(crate) fn to(&self) -> &Path {
        match self {
            Step::File { to, .. } | Step::Dir { to, .. } | Step::Link { to, .. } => to,
        }
    }
}

/// What adopting one name does.
#[derive(Debug, Serialize)]
pub(crate) struct Adoption {
    pub name: String,
    /// The program in the jail's layer.
    pub from: PathBuf,
    /// Where it goes: your home PATH directory.
    pub to: PathBuf,
    /// What kind of install it is, as adopt read it.
    pub kind: &'static str,
    /// Libraries first, the program last.
    pub steps: Vec<Step>,
    /// What the package says it needs (pip's `Requires-Dist`): not brought.
    pub requires: Vec<String>,
}

/// Carry the adoption out: libraries first, the program last.
pub(crate) fn apply(a: &Adoption) -> Result<()> {
    for s in &a.steps {
        let to = s.to();
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(format!("adopt: creating {}", parent.display()), e))?;
        }
        let tmp = to.with_file_name(format!(
            ".{}.adopt-{}",
            to.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        let made = match s {
            Step::File { from, .. } => copy_file(from, &tmp).and_then(|()| rename(&tmp, to)),
            Step::Link { target, .. } => {
                std::os::unix::fs::symlink(target, &tmp).and_then(|()| rename(&tmp, to))
            }
            Step::Dir { from, .. } => make_dir(from, to),
        };
        if let Err(e) = made {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io(format!("adopt: making {}", to.display()), e));
        }
    }
    Ok(())
}

fn copy_file(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mode = std::fs::symlink_metadata(from)?.permissions().mode() & 0o777;
    let mut src = std::fs::File::open(from)?;
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)?;
    std::io::copy(&mut src, &mut dst)?;
    dst.sync_all()?;
    // After the bytes, and without the umask: the mode is the layer's, set-id bits dropped.
    dst.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// A rename that replaces a directory of yours only when empty (never silently merges one away).
fn rename(from: &Path, to: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(to).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir(to)?;
    }
    std::fs::rename(from, to)
}

fn make_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    // A directory the layer did not copy up is yours already in the jail's view: the usual mode.
    let mode = std::fs::symlink_metadata(from).map_or(0o755, |m| m.permissions().mode() & 0o777);
    match std::fs::symlink_metadata(to) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => {
            std::fs::remove_file(to)?;
            std::fs::create_dir(to)?;
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        }
        Err(_) => {
            std::fs::create_dir(to)?;
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))
        }
    }
}

/// The lines `adopt` prints (paths escaped: the jail chose them).
pub(crate) fn describe(a: &Adoption, home: &Path) -> Vec<String> {
    let short = |p: &Path| {
        p.strip_prefix(home).map_or_else(
            |_| crate::escape::visible_path(p),
            |r| format!("~/{}", crate::escape::visible_path(r)),
        )
    };
    let libraries = a.steps.len().saturating_sub(1);
    let mut out = vec![format!(
        "adopted {} ({}): {}{}",
        crate::escape::visible(&a.name),
        a.kind,
        short(&a.to),
        if libraries > 0 {
            format!(", with {libraries} files and directories of its package")
        } else {
            String::new()
        }
    )];
    if !a.requires.is_empty() {
        let req: Vec<String> = a
            .requires
            .iter()
            .map(|r| crate::escape::visible(r).into_owned())
            .collect();
        out.push(format!(
            "it requires {} (not brought over: install what you lack yourself)",
            req.join(", ")
        ));
    }
    out
}
