//! The runtime directory: per-user state the jail must never see (session records, placeholders,
//! private home directories, baselines, alerts, the quarantine, the log), and its layout
//! (`RuntimeDir`, `SessionDir`: every name in it is defined there and nowhere else).
//!
//! Guards against a planted or borrowed state directory: the directory is per user, mode 0700, owned
//! by the user; one that is owned by someone else, or is a symlink, is refused rather than used.
//! Default `/run/claude-sandbox/<uid>` (see `locate` for the fallbacks); `CLAUDE_SANDBOX_RUNTIME_DIR`
//! names the per-user directory itself (tests and unusual setups).

use crate::error::{Error, Result};
use crate::host::{self, HostEnv, RUNTIME_DIR};

pub(crate) mod reserve;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The shared parent of the per-user runtime directories.
pub const BASE: &str = "/run/claude-sandbox";

/// Where this user's runtime directory is (without creating anything): `$CLAUDE_SANDBOX_RUNTIME_DIR`;
/// else `/run/claude-sandbox/<uid>` when `/run/claude-sandbox` exists (the installer makes it) or we are
/// root; else, because `/run` is often a fresh tmpfs in containers, `$XDG_RUNTIME_DIR/claude-sandbox`
/// or `/var/tmp/claude-sandbox-<uid>`. Wherever it is, the jail hides it.
pub fn locate(env: &HostEnv) -> PathBuf {
    if let Some(dir) = env.get(host::RUNTIME_DIR).filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let uid = rustix::process::getuid().as_raw();
    if Path::new(BASE).is_dir() || uid == 0 {
        return Path::new(BASE).join(uid.to_string());
    }
    if let Some(xdg) = env
        .get(host::XDG_RUNTIME_DIR)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
    {
        return xdg.join("claude-sandbox");
    }
    PathBuf::from(format!("/var/tmp/claude-sandbox-{uid}"))
}

/// The shared base directory to hide from the jail besides the user's own (other users' state).
pub fn shared_base(env: &HostEnv) -> Option<PathBuf> {
    if env.get(host::RUNTIME_DIR).is_some_and(|v| !v.is_empty()) {
        return None;
    }
    Some(PathBuf::from(BASE))
}

/// The runtime directory's layout. Every module asks it for paths instead of joining names itself,
/// so that a name is defined once (the prompt hook, `profile.d/claude-sandbox.sh`, has the one copy
/// a shell script needs: `alerts.new`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuntimeDir {
    root: PathBuf,
}

/// A lock file of the runtime directory (see `lock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// The alert store: the log, the acknowledgements and the markers.
    Alerts,
    /// The placeholder registry.
    Placeholders,
}

impl RuntimeDir {
    pub(crate) fn new(root: &Path) -> RuntimeDir {
        RuntimeDir {
            root: root.to_path_buf(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// `sessions/`: one directory per session, removed at its end.
    pub(crate) fn sessions(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// `sessions/<id>/`.
    pub(crate) fn session(&self, id: &str) -> SessionDir {
        SessionDir(self.sessions().join(id))
    }

    /// `locks/`: one lock per running launcher, held while it runs (`jail::liveness`).
    pub(crate) fn locks(&self) -> PathBuf {
        self.root.join("locks")
    }

    /// `quarantine/`: the quarantined files and their records.
    pub(crate) fn quarantine(&self) -> PathBuf {
        self.root.join("quarantine")
    }

    /// `held/`: items held for the human's review (`crate::held`): `<id>.json`, `<id>.payload`,
    /// `<id>.decision`.
    pub(crate) fn held(&self) -> PathBuf {
        self.root.join("held")
    }

    /// `alerts.jsonl`: one alert per line.
    pub(crate) fn alerts_log(&self) -> PathBuf {
        self.root.join("alerts.jsonl")
    }

    /// `alerts.acks`: the ids of acknowledged alerts, one per line.
    pub(crate) fn alerts_acks(&self) -> PathBuf {
        self.root.join("alerts.acks")
    }

    /// `alerts.new`: exists (holding the newest alert's id) while an alert has not been shown at a
    /// prompt: the prompt hook's whole common-case cost is one test for this file.
    pub(crate) fn alerts_pending(&self) -> PathBuf {
        self.root.join("alerts.new")
    }

    /// `alerts.shown`: the id of the newest alert already shown at a prompt.
    pub(crate) fn alerts_shown(&self) -> PathBuf {
        self.root.join("alerts.shown")
    }

    /// `placeholders.json`: the placeholder registry.
    pub(crate) fn placeholders(&self) -> PathBuf {
        self.root.join("placeholders.json")
    }

    /// `hardlinks/`: the hard-link scan's memory of clean directories, a file per set of writable
    /// roots (`jail::hardlinks::cache_file`).
    pub(crate) fn hardlink_memory(&self) -> PathBuf {
        self.root.join("hardlinks")
    }

    /// `entrypoints/`: the entry-point walk's memory of directory listings, a file per walked root
    /// (`entrypoints::memory::file`).
    pub(crate) fn entrypoint_memory(&self) -> PathBuf {
        self.root.join("entrypoints")
    }

    /// `reserve`: space kept back for the records when the filesystem fills (`reserve`).
    pub(crate) fn reserve(&self) -> PathBuf {
        self.root.join("reserve")
    }

    /// `key-scan`: the home scan's verdicts on files read for a private key, by their stamp
    /// (`secrets::keys::Remembered`), so that an unchanged file is not read again.
    pub(crate) fn key_scan(&self) -> PathBuf {
        self.root.join("key-scan")
    }

    /// `claude-sandbox.log`: the sessions' diagnostics while the command owns the terminal.
    pub(crate) fn log(&self) -> PathBuf {
        self.root.join("claude-sandbox.log")
    }

    /// Hold an exclusive lock on one of the runtime directory's stores (see `lock`).
    pub(crate) fn lock(&self, which: Lock) -> Result<std::fs::File> {
        let name = match which {
            Lock::Alerts => "alerts.lock",
            Lock::Placeholders => "placeholders.lock",
        };
        lock(&self.root, name)
    }
}

/// One session's directory: `<runtime>/sessions/<id>/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionDir(PathBuf);

impl SessionDir {
    /// A directory found under `sessions/` (a dead session's, being cleaned up).
    pub(crate) fn at(path: PathBuf) -> SessionDir {
        SessionDir(path)
    }

    /// The session whose private `$HOME` is `home` (`home()`).
    pub(crate) fn of_home(home: &Path) -> SessionDir {
        SessionDir(home.parent().unwrap_or(home).to_path_buf())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// The runtime directory it belongs to, and the session's id.
    pub(crate) fn runtime_and_id(&self) -> Option<(RuntimeDir, &std::ffi::OsStr)> {
        let runtime = self.0.parent().and_then(Path::parent)?;
        Some((RuntimeDir::new(runtime), self.0.file_name()?))
    }

    /// `home/`: the session's private `$HOME`.
    pub(crate) fn home(&self) -> PathBuf {
        self.0.join("home")
    }

    /// `session.json`: who runs it (pid and start time) and where.
    pub(crate) fn record(&self) -> PathBuf {
        self.0.join("session.json")
    }

    /// `claude.json.orig`: `~/.claude.json` as copied in, to merge back against.
    pub(crate) fn claude_json_copy(&self) -> PathBuf {
        self.0.join("claude.json.orig")
    }

    /// `statedir.json`: what `jail::statedir` made for the jail's own state directories.
    pub(crate) fn state_record(&self) -> PathBuf {
        self.0.join("statedir.json")
    }

    /// The jail's own copies of git configs, bound into the jail (`jail::gitcopy`).
    pub(crate) fn git_copies(&self) -> PathBuf {
        self.0.join("git")
    }

    /// `views/`: the masked views of configs that hold a secret (`secrets::views`), bound
    /// read-only over them in the jail; `N` is the view's index in the policy.
    pub(crate) fn secret_view(&self, n: usize) -> PathBuf {
        self.0.join("views").join(n.to_string())
    }

    /// `git-base.json`: the git configs as they were at launch, and whose each copy is: never in
    /// the jail.
    pub(crate) fn git_base(&self) -> PathBuf {
        self.0.join("git-base.json")
    }

    /// `baseline.json`: the session's baseline.
    pub(crate) fn baseline(&self) -> PathBuf {
        self.0.join("baseline.json")
    }

    /// `ssh/`: the filtering ssh agent's socket (`ssh_agent`), bound read-only into the jail.
    pub(crate) fn ssh_agent(&self) -> PathBuf {
        self.0.join("ssh")
    }

    /// `docker/`: the Docker filter's socket (`docker`), bound read-only into the jail.
    pub(crate) fn docker(&self) -> PathBuf {
        self.0.join("docker")
    }

    /// `network-allow`: hosts allowed for this session only (`allow HOST --session`), read by its
    /// proxy (`net::proxy::session_allow`).
    pub(crate) fn network_allow(&self) -> PathBuf {
        self.0.join("network-allow")
    }
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
                        "cannot create {}: {e}; run the installer as root or set {RUNTIME_DIR}",
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
                "cannot create it: {e}; set {RUNTIME_DIR} to a directory you own"
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
            "is owned by uid {}, not by you (uid {uid}); refusing to use it: remove it or set {RUNTIME_DIR}",
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
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| Error::io(format!("locking {}", path.display()), e.into()))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout is what the prompt hook, `doctor` and older sessions' leftovers expect; the
    /// prompt hook's script tests for the pending-alerts marker by the same name.
    #[test]
    fn the_layout_is_defined_once_and_the_prompt_hook_agrees() {
        let rt = RuntimeDir::new(Path::new("/rt"));
        let s = rt.session("abc");
        let names = [
            rt.sessions(),
            s.path().to_path_buf(),
            s.home(),
            s.record(),
            s.claude_json_copy(),
            s.baseline(),
            rt.quarantine(),
            rt.alerts_log(),
            rt.alerts_acks(),
            rt.alerts_pending(),
            rt.alerts_shown(),
            rt.placeholders(),
            rt.reserve(),
            rt.entrypoint_memory(),
            rt.log(),
        ];
        let names: Vec<&str> = names.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "/rt/sessions",
                "/rt/sessions/abc",
                "/rt/sessions/abc/home",
                "/rt/sessions/abc/session.json",
                "/rt/sessions/abc/claude.json.orig",
                "/rt/sessions/abc/baseline.json",
                "/rt/quarantine",
                "/rt/alerts.jsonl",
                "/rt/alerts.acks",
                "/rt/alerts.new",
                "/rt/alerts.shown",
                "/rt/placeholders.json",
                "/rt/reserve",
                "/rt/entrypoints",
                "/rt/claude-sandbox.log",
            ]
        );
        let (back, id) = s.runtime_and_id().unwrap();
        assert_eq!((back, id), (rt, std::ffi::OsStr::new("abc")));
        let hook = include_str!("../profile.d/claude-sandbox.sh");
        let pending = RuntimeDir::new(Path::new("$__claude_sandbox_dir")).alerts_pending();
        assert!(
            hook.contains(&format!("\"{}\"", pending.display())),
            "the prompt hook does not test for {}",
            pending.display()
        );
    }
}
