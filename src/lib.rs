//! claude-sandbox: a filesystem guard for devcontainers that run AI coding agents.
//!
//! The agent runs in a bubblewrap jail (`jail`) in which the workspace and its own state are writable
//! and everything else is read-only; every *entry point* (a file that a program outside the jail would
//! later execute as the human: git hooks and config, shell startup files, IDE tasks, agent settings) is
//! sealed read-only whether or not it exists (`entrypoints`), and every escape hatch (Docker and IDE
//! sockets, `sudo`, terminal injection) is closed. `explain` tells a human what a launch would do.

pub mod battery;
pub mod cli;
pub(crate) mod completions;
pub mod config;
pub mod doctor;
pub mod entrypoints;
pub mod error;
pub mod explain;
pub(crate) mod gitconfig;
pub mod hook;
pub mod jail;
pub(crate) mod logfile;
pub mod net;
pub mod runtime;
pub(crate) mod runtimes;
pub mod secrets;

pub use error::{Error, Result};
pub mod alerts;
pub mod baseline;
pub(crate) mod process;
pub mod quarantine;
pub(crate) mod walk;
pub mod watch;
