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
    #[error("runtime directory {path}: {message}")]
    RuntimeDir { path: PathBuf, message: String },
    #[error("{0}: command not found on PATH")]
    CommandNotFound(String),
    #[error("{0}: not executable{1}")]
    NotExecutable(String, String),
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
            Error::Config { .. } | Error::Usage(_) => EXIT_USAGE,
            Error::CommandNotFound(_) => EXIT_NOT_FOUND,
            Error::NotExecutable(..) => EXIT_NOT_EXECUTABLE,
            Error::BwrapMissing(_)
            | Error::Jail(_)
            | Error::RuntimeDir { .. }
            | Error::Io { .. } => EXIT_JAIL,
        }
    }

    /// Wrap an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
