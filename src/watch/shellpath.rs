//! The PATH of the human's future shells, for judging what a new executable shadows.
//!
//! Guards against a plant the launcher's PATH does not reveal: in a stock Debian/Ubuntu container
//! `~/.profile` puts `~/.local/bin` and `~/bin` *first* in every later login shell, once they exist,
//! whatever the launcher's PATH said; a directory last on the launcher's PATH can be first there. So
//! the watcher also watches the directories a login + interactive shell of this user would put on
//! PATH, and the conventional user bin directories (`~/.local/bin`, `~/bin`, `~/.cargo/bin`,
//! `~/go/bin`, the npm prefix's `bin`) whether they exist yet or not, and judges "shadows" in the
//! worst order: conventional directories first, then the login shell's PATH, then the launcher's.
//!
//! Running the shell (`$SHELL -lic`) costs 100 ms here (median of 40, `bash -lc 'printf %s
//! "$PATH"'`, against 1.2 ms for `bash -c`): it runs in a thread of the watcher, after the jail's
//! gate opened, never on the launch's path. The conventional directories are static (a few `stat`s)
//! and are watched before the gate.

use crate::host::{self, HostEnv};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest a shell may take to print its PATH.
const TIMEOUT: Duration = Duration::from_secs(3);

/// The login shell is started this long into the session (after the jail's gate, usually).
const LOGIN_DELAY: Duration = Duration::from_millis(50);

/// The conventional user bin directories, existing or not.
pub(crate) fn conventional(home: &Path, npm_prefix: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = crate::jail::layers::PATH_DIRS
        .iter()
        .map(|d| home.join(d))
        .collect();
    if let Some(p) = npm_prefix {
        out.push(p.join("bin"));
    }
    out
}

/// npm's user prefix: `$NPM_CONFIG_PREFIX`, else `prefix=` in `~/.npmrc` (`~/` expanded).
pub(crate) fn npm_prefix(home: &Path, env: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if let Some(p) = env.filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let text = std::fs::read_to_string(home.join(".npmrc")).ok()?;
    let value = text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "prefix").then(|| v.trim().to_string())
    })?;
    Some(match value.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None => PathBuf::from(value),
    })
}

/// The order the human's future shells may search: every conventional directory the login shell
/// does not place (first: Debian's `~/.profile` prepends them once they exist), then the login
/// shell's PATH, then whatever of the launcher's is left. Relative entries are dropped (a login
/// shell's PATH has none that mean anything here).
pub(crate) fn future_order(
    conventional: &[PathBuf],
    login: &[PathBuf],
    launcher: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut push = |p: &PathBuf| {
        if p.is_absolute() && !out.contains(p) {
            out.push(p.clone());
        }
    };
    conventional
        .iter()
        .filter(|c| !login.contains(c))
        .for_each(&mut push);
    login.iter().for_each(&mut push);
    launcher.iter().for_each(&mut push);
    out
}

/// The first executable regular file named `name` after `dir` in `order`.
pub(crate) fn shadowed_in(order: &[PathBuf], dir: &Path, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let at = order.iter().position(|d| d == dir)?;
    // A later occurrence of the same directory is itself, not a command it shadows.
    order[at + 1..]
        .iter()
        .filter(|d| *d != dir)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// Split the text between the markers a shell printed.
fn between_markers(out: &[u8]) -> Option<Vec<PathBuf>> {
    use std::os::unix::ffi::OsStrExt;
    const START: &[u8] = b"__CLAUDE_SANDBOX_PATH_START__";
    const END: &[u8] = b"__CLAUDE_SANDBOX_PATH_END__";
    let s = out.windows(START.len()).position(|w| w == START)? + START.len();
    let e = s + out[s..].windows(END.len()).position(|w| w == END)?;
    Some(
        out[s..e]
            .split(|&b| b == b':')
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
            .collect(),
    )
}

/// The PATH a login, interactive shell of this user builds: `shell -lic`, in a session of its own
/// (no terminal: an interactive shell that sees one not in the foreground stops itself), stdin
/// closed, killed after `TIMEOUT`, with `env`'s `host::LOGIN_SHELL_VARS`. `None` if it fails (the
/// caller keeps the other two orders).
pub(crate) fn login_path(
    shell: &Path,
    home: &Path,
    launcher_path: &std::ffi::OsStr,
    env: &HostEnv,
) -> Option<Vec<PathBuf>> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let mut c = Command::new(shell);
    c.args([
        "-l",
        "-i",
        "-c",
        "printf '__CLAUDE_SANDBOX_PATH_START__%s__CLAUDE_SANDBOX_PATH_END__' \"$PATH\"",
    ])
    .env_clear()
    .env("HOME", home)
    .env("PATH", launcher_path)
    .env("SHELL", shell)
    .env("TERM", "dumb")
    .current_dir(home)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    for k in host::LOGIN_SHELL_VARS {
        if let Some(v) = env.get(k) {
            c.env(k, v);
        }
    }
    // SAFETY: setsid is async-signal-safe and touches nothing of the parent.
    unsafe {
        c.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    let mut child = c.spawn().ok()?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut stdout = child.stdout.take()?;
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut buf);
        let _ = tx.send(buf);
    });
    let out = rx.recv_timeout(TIMEOUT);
    if out.is_err() {
        // Its own session: its group id is its pid (never 0 or 1 here, it is our child).
        if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0))
            .filter(|p| p.as_raw_nonzero().get() > 1)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        tracing::warn!(shell = %shell.display(), "the login shell did not print its PATH within {TIMEOUT:?}");
    }
    let _ = child.wait();
    between_markers(&out.ok()?)
}

/// What the watcher knows of the human's future shells.
#[derive(Debug, Default)]
pub(super) struct Future {
    /// The order they search (`future_order`).
    pub order: Vec<PathBuf>,
    /// The login shell's PATH, while it is being computed.
    login: Option<std::sync::mpsc::Receiver<Option<Vec<PathBuf>>>>,
    asked: bool,
    /// The launcher's PATH, which the login shell starts from.
    path_env: std::ffi::OsString,
}

/// The watcher's side: which future-shell directories to watch, and when the login shell answers.
impl super::Watcher {
    /// Before the gate: watch the conventional directories the jail can write (existing ones with
    /// their entries as the baseline, missing ones awaited).
    pub(super) fn watch_future_shells(&mut self, path_env: &std::ffi::OsStr) {
        path_env.clone_into(&mut self.future.path_env);
        let env = &self.cfg.host;
        let Some(home) = env.home() else {
            return;
        };
        let npm = npm_prefix(&home, env.get(host::NPM_CONFIG_PREFIX));
        // An `.envrc`'s PATH directories come first in its directory: direnv prepends them.
        let first: Vec<PathBuf> = (self.cfg.envrc_path_dirs.iter().cloned())
            .chain(conventional(&home, npm.as_deref()))
            .collect();
        self.future.order = future_order(&first, &[], &self.path_dirs);
        for d in first {
            self.add_future_dir(&d, super::Resolve::Quiet);
        }
    }

    /// Ask the login shell for its PATH, in a thread (`LOGIN_DELAY` into the session: not while the
    /// jail is being built on the same cores). Once per session.
    fn start_login_shell(&mut self) {
        if self.future.asked {
            return;
        }
        self.future.asked = true;
        let env = self.cfg.host.clone();
        let Some(home) = env.home() else {
            return;
        };
        if env.get(host::LOGIN_PATH).is_some_and(|v| v == "0") {
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let path_env = self.future.path_env.clone();
        let spawned = std::thread::Builder::new()
            .name("login-path".into())
            .spawn(move || {
                let _ = tx.send(login_path(&env.shell(), &home, &path_env, &env));
            });
        if spawned.is_ok() {
            self.future.login = Some(rx);
        }
    }

    /// Take the login shell's PATH once it is known (`wait`: block until it is, for the final
    /// sweep): its directories are watched from now on, judged by ctime (anything changed since the
    /// session started counts as changed), and the order of future shells includes it.
    pub(super) fn take_login_path(&mut self, wait: bool, started: std::time::Instant) {
        // A session over before `LOGIN_DELAY` (`run -- true`, a script) is not made to wait ~100 ms
        // for the human's startup files at its end: its final sweep judges by the conventional
        // directories and the launcher's PATH.
        if started.elapsed() >= LOGIN_DELAY {
            self.start_login_shell();
        }
        let Some(rx) = &self.future.login else { return };
        let got = if wait {
            rx.recv().ok()
        } else {
            match rx.try_recv() {
                Ok(v) => Some(v),
                Err(std::sync::mpsc::TryRecvError::Empty) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => None,
            }
        };
        self.future.login = None;
        let Some(Some(login)) = got else { return };
        tracing::info!(path = ?login, "the login shell's PATH");
        self.future.order = future_order(&self.cfg.envrc_path_dirs, &login, &self.future.order);
        for d in login {
            self.add_future_dir(&d, super::Resolve::Ctime);
        }
    }

    /// How long the event loop may sleep before looking for the login shell's PATH again.
    pub(super) fn login_wait(&self, started: std::time::Instant) -> Option<Duration> {
        match (self.future.asked, &self.future.login) {
            (false, _) => Some(LOGIN_DELAY.saturating_sub(started.elapsed())),
            (true, Some(_)) => Some(Duration::from_millis(10)),
            (true, None) => None,
        }
    }

    fn add_future_dir(&mut self, dir: &Path, how: super::Resolve) {
        if !dir.is_absolute()
            || self.path_dirs.iter().any(|p| p == dir)
            || !self.jail_can_write(dir)
        {
            return;
        }
        let pos = super::PathPos(self.path_dirs.len());
        self.path_dirs.push(dir.to_path_buf());
        if !dir.is_dir() {
            self.add_pending(pos);
            return;
        }
        tracing::info!(dir = %dir.display(), "watching a directory of the human's future shells");
        let idx = self.table.add(
            dir.to_path_buf(),
            super::Role::PathDir { pos },
            std::collections::BTreeMap::default(),
        );
        self.table[idx].deferred = crate::baseline::list_names(dir).into_iter().collect();
        self.resolve_all(idx, how);
        if how != super::Resolve::Quiet {
            self.rescan(idx);
        }
    }

    fn jail_can_write(&self, dir: &Path) -> bool {
        if let Some(roots) = &self.cfg.writable_roots {
            roots.iter().any(|r| dir.starts_with(r))
        } else {
            let existing = dir
                .ancestors()
                .find(|a| a.exists())
                .unwrap_or(Path::new("/"));
            rustix::fs::access(existing, rustix::fs::Access::WRITE_OK).is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventional_directories_come_first_then_the_login_shell_then_the_launcher() {
        let h = Path::new("/h");
        let conv = conventional(h, Some(Path::new("/h/.npm-global")));
        let login = vec![PathBuf::from("/h/bin"), PathBuf::from("/usr/bin")];
        let launcher = vec![
            PathBuf::from("/usr/bin"),
            PathBuf::from("rel"),
            PathBuf::from("/opt/last"),
        ];
        let order = future_order(&conv, &login, &launcher);
        let s: Vec<&str> = order.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            s,
            [
                "/h/.local/bin",
                "/h/.cargo/bin",
                "/h/go/bin",
                "/h/.npm-global/bin",
                "/h/bin",
                "/usr/bin",
                "/opt/last"
            ]
        );
    }

    #[test]
    fn the_path_is_read_between_markers_whatever_the_startup_files_print() {
        let out = b"welcome!\n__CLAUDE_SANDBOX_PATH_START__/a:/b::/c__CLAUDE_SANDBOX_PATH_END__";
        assert_eq!(
            between_markers(out).unwrap(),
            [Path::new("/a"), Path::new("/b"), Path::new("/c")]
        );
        assert!(between_markers(b"no markers").is_none());
    }

    #[test]
    fn npm_prefix_from_the_environment_or_npmrc() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(
            npm_prefix(t.path(), Some(std::ffi::OsStr::new("/p"))),
            Some(PathBuf::from("/p"))
        );
        assert_eq!(npm_prefix(t.path(), None), None);
        std::fs::write(t.path().join(".npmrc"), "x=1\nprefix = ~/.npm-global\n").unwrap();
        assert_eq!(
            npm_prefix(t.path(), None),
            Some(t.path().join(".npm-global"))
        );
    }

    /// A real login shell: Debian's `~/.profile` snippet puts `~/bin` first once it exists.
    #[test]
    fn a_real_login_shell_puts_a_profile_directory_first() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        std::fs::create_dir(home.join("bin")).unwrap();
        std::fs::write(
            home.join(".profile"),
            "if [ -d \"$HOME/bin\" ] ; then\n    PATH=\"$HOME/bin:$PATH\"\nfi\n",
        )
        .unwrap();
        let path = login_path(
            Path::new("/bin/bash"),
            home,
            std::ffi::OsStr::new("/usr/bin:/bin"),
            &HostEnv::default(),
        )
        .expect("bash printed no PATH");
        assert_eq!(path.first(), Some(&home.join("bin")), "{path:?}");
    }
}
