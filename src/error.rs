//! Typed errors of the library, and the exit status each one maps to.
//!
//! Every failure that stops a launch is one of these, so that `main` can print one line that names the
//! cause and the fix, and exit with the documented status: 2 for usage and configuration mistakes,
//! 125 when the jail cannot be set up, 126/127 when the command cannot be run.

use std::path::PathBuf;

/// Exit status for usage and configuration errors.
pub const EXIT_USAGE: i32 = 2;
/// Exit status when the jail could not be set up (bwrap missing, namespaces refused, ...).
pub const EXIT_JAIL: i32 = 125;
/// Exit status when the command exists but cannot be executed.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;
/// Exit status when the command is not found.
pub const EXIT_NOT_FOUND: i32 = 127;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{path}:{line}: {message}")]
    Config {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{0}")]
    Usage(String),
    #[error("bwrap not found ({0}): install bubblewrap (apt-get install bubblewrap) or run `claude-sandbox doctor`")]
    BwrapMissing(String),
    #[error(
        "the jail could not be set up: {0}; run `claude-sandbox doctor` for the cause and the fix"
    )]
    Jail(String),
    /// `fail_closed = true` and the guard would be less than the policy says: nothing started.
    #[error("not started: {0} — the system configuration says fail_closed = true ({1}): remove or fix what it names (`claude-sandbox explain` lists every gap, `claude-sandbox doctor` the rest)")]
    FailClosed(String, String),
    #[error("runtime directory {path}: {message}")]
    RuntimeDir { path: PathBuf, message: String },
    #[error("{0}: command not found on PATH")]
    CommandNotFound(String),
    #[error("{0}: not executable{1}")]
    NotExecutable(String, String),
    #[error("{0}: no such held item (`claude-sandbox review` lists them)")]
    NotHeld(String),
    #[error("{id}: {} changed since this was held; nothing was applied (look at it with `claude-sandbox review show {id}`, then apply it by hand or `claude-sandbox review reject {id}`)", target.display())]
    HeldConflict { id: String, target: PathBuf },
    #[error("{0}: not applied: {1}")]
    HeldApply(String, String),
    /// A plant moved or renamed out of reach whose record could not be written (a full disk past
    /// the reserve): nothing is lost, but only this message knows where the bytes are.
    #[error("{} is out of reach as {}, but its quarantine record could not be written ({cause}), so `claude-sandbox restore` does not know it: free space in the runtime directory; to put it back by hand: `mv {2} {3} && chmod {mode:o} {3}`", original.display(), stored_at.display(), crate::jail::args::shell_quote(stored_at.as_os_str()), crate::jail::args::shell_quote(original.as_os_str()))]
    QuarantineUnrecorded {
        original: PathBuf,
        stored_at: PathBuf,
        mode: u32,
        cause: String,
    },
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The process exit status this error maps to.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config { .. }
            | Error::Usage(_)
            | Error::NotHeld(_)
            | Error::HeldConflict { .. } => EXIT_USAGE,
            Error::CommandNotFound(_) => EXIT_NOT_FOUND,
            Error::NotExecutable(..) => EXIT_NOT_EXECUTABLE,
            Error::BwrapMissing(_)
            | Error::Jail(_)
            | Error::FailClosed(..)
            | Error::RuntimeDir { .. }
            | Error::HeldApply(..)
            | Error::QuarantineUnrecorded { .. }
            | Error::Io { .. } => EXIT_JAIL,
        }
    }

    /// Wrap an I/O error with what was being done; a full filesystem says the fix.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        let mut context = context.into();
        if crate::runtime_dir::reserve::is_full(&source) {
            context.push_str(" (the filesystem is full: free space on it)");
        }
        Error::Io { context, source }
    }

    /// A failure on a path the human named: one that does not exist is a usage mistake (`missing`
    /// says what to give instead, exit 2); any other failure is an I/O error with its context.
    pub(crate) fn named_path(
        source: std::io::Error,
        missing: impl FnOnce() -> String,
        context: impl FnOnce() -> String,
    ) -> Self {
        match source.kind() {
            std::io::ErrorKind::NotFound => Error::Usage(missing()),
            _ => Error::io(context(), source),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A path the human named that does not exist is a usage mistake; any other I/O failure is not.
    #[test]
    fn a_missing_path_is_usage_and_other_failures_are_io() {
        let missing = Error::named_path(
            std::io::Error::from(std::io::ErrorKind::NotFound),
            || "x: no such directory; pass --workspace DIR".into(),
            || unreachable!(),
        );
        assert_eq!(missing.exit_code(), EXIT_USAGE);
        assert_eq!(
            missing.to_string(),
            "x: no such directory; pass --workspace DIR"
        );
        let denied = Error::named_path(
            std::io::Error::from_raw_os_error(libc::EACCES),
            || unreachable!(),
            || "resolving x".into(),
        );
        assert_eq!(denied.exit_code(), EXIT_JAIL);
        assert!(denied.to_string().starts_with("resolving x: "), "{denied}");
    }

    /// `restore` of a record that cannot be read: a wrong id is the human's mistake (exit 2), a
    /// corrupt record is not, and says that nothing was restored and where the bytes are.
    #[test]
    fn a_corrupt_quarantine_record_is_not_a_usage_error() {
        let rt = tempfile::tempdir().unwrap();
        let wrong = crate::quarantine::load(rt.path(), "q123").unwrap_err();
        assert_eq!(wrong.exit_code(), EXIT_USAGE, "{wrong}");
        let q = crate::runtime_dir::RuntimeDir::new(rt.path()).quarantine();
        std::fs::create_dir_all(&q).unwrap();
        std::fs::write(q.join("q123.json"), "{not json").unwrap();
        let corrupt = crate::quarantine::load(rt.path(), "q123").unwrap_err();
        assert_eq!(corrupt.exit_code(), EXIT_JAIL, "{corrupt}");
        let text = corrupt.to_string();
        assert!(
            text.contains("is corrupt; nothing was restored") && text.contains(q.to_str().unwrap()),
            "{text}"
        );
    }

    /// `hooks install` where the settings directory cannot be made: an I/O error naming the path,
    /// not a usage error; a settings file that is not JSON is the human's to fix (usage).
    #[test]
    fn hooks_install_fails_with_typed_errors() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".claude"), "a file, not a directory").unwrap();
        let e =
            crate::agent_hooks::install(crate::runtimes::CLAUDE.hooks.unwrap(), home.path(), false)
                .unwrap_err();
        assert_eq!(e.exit_code(), EXIT_JAIL, "{e}");
        assert!(e.to_string().starts_with("creating "), "{e}");
        std::fs::remove_file(home.path().join(".claude")).unwrap();
        std::fs::create_dir(home.path().join(".claude")).unwrap();
        std::fs::write(home.path().join(".claude/settings.json"), "{oops").unwrap();
        let e =
            crate::agent_hooks::install(crate::runtimes::CLAUDE.hooks.unwrap(), home.path(), false)
                .unwrap_err();
        assert_eq!(e.exit_code(), EXIT_USAGE, "{e}");
        assert!(e.to_string().contains("not JSON"), "{e}");
    }
}
