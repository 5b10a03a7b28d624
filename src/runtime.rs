//! The runtime directory: per-user state the jail must never see (session records, placeholders,
//! private home directories; later the baseline, alerts and quarantine).
//!
//! Guards against a planted or borrowed state directory: the directory is per user, mode 0700, owned
//! by the user; one that is owned by someone else, or is a symlink, is refused rather than used.
//! Default `/run/claude-sandbox/<uid>` (see `locate` for the fallbacks); `CLAUDE_SANDBOX_RUNTIME_DIR`
//! names the per-user directory itself (tests and unusual setups).

use crate::error::{Error, Result};
use rustix::fs::{Mode, OFlags};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The shared parent of the per-user runtime directories.
pub const BASE: &str = "/run/claude-sandbox";
/// Environment variable that overrides the per-user runtime directory.
pub const ENV: &str = "CLAUDE_SANDBOX_RUNTIME_DIR";

/// Where this user's runtime directory is (without creating anything): `$CLAUDE_SANDBOX_RUNTIME_DIR`;
/// else `/run/claude-sandbox/<uid>` when `/run/claude-sandbox` exists (the installer makes it) or we are
/// root; else, because `/run` is often a fresh tmpfs in containers, `$XDG_RUNTIME_DIR/claude-sandbox`
/// or `/var/tmp/claude-sandbox-<uid>`. Wherever it is, the jail hides it.
pub fn locate() -> PathBuf {
    if let Some(dir) = std::env::var_os(ENV).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let uid = rustix::process::getuid().as_raw();
    if Path::new(BASE).is_dir() || uid == 0 {
        return Path::new(BASE).join(uid.to_string());
    }
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
    {
        return xdg.join("claude-sandbox");
    }
    PathBuf::from(format!("/var/tmp/claude-sandbox-{uid}"))
}

/// The shared base directory to hide from the jail besides the user's own (other users' state).
pub fn shared_base() -> Option<PathBuf> {
    if std::env::var_os(ENV).is_some_and(|v| !v.is_empty()) {
        return None;
    }
    Some(PathBuf::from(BASE))
}

/// Create (if needed) and check the runtime directory: a real directory, owned by us, mode 0700.
pub fn ensure(dir: &Path) -> Result<PathBuf> {
    let err = |message: String| Error::RuntimeDir {
        path: dir.to_path_buf(),
        message,
    };
    if let Some(parent) = dir.parent().filter(|p| *p == Path::new(BASE)) {
        if !parent.exists() {
            // The shared base is sticky and world-writable like /tmp, so each user makes their own
            // 0700 directory in it; the installer creates it as root.
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(parent)
                .map_err(|e| {
                    err(format!(
                        "cannot create {}: {e}; run the installer as root or set {ENV}",
                        parent.display()
                    ))
                })?;
            let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o1777));
        }
    }
    // Only the last component is created here (with the parents a test or override may need).
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(err(format!(
                "cannot create it: {e}; set {ENV} to a directory you own"
            )))
        }
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| err(e.to_string()))?;
    if !meta.file_type().is_dir() {
        return Err(err(
            "is not a directory (a symlink or file is refused); remove it".into(),
        ));
    }
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Err(err(format!(
            "is owned by uid {}, not by you (uid {uid}); refusing to use it: remove it or set {ENV}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        // Ours, so we may fix it; state readable by others would leak the baseline and alerts.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(format!("cannot set mode 0700: {e}")))?;
    }
    Ok(dir.to_path_buf())
}

/// Open (creating it, 0600, never through a symlink) `dir/name` and hold an exclusive `flock` on it
/// for as long as the returned file lives: the runtime directory's stores change only under it.
pub fn lock(dir: &Path, name: &str) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(OFlags::NOFOLLOW.bits() as i32)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| Error::io(format!("locking {}", path.display()), e.into()))?;
    Ok(file)
}

/// Open a directory without following a symlink at its last component.
pub fn open_dir_nofollow(dir: &Path) -> std::io::Result<std::os::fd::OwnedFd> {
    rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)
}
