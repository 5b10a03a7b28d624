//! claude-sandbox: a filesystem guard for devcontainers that run AI coding agents.
//!
//! The agent runs in a bubblewrap jail (`jail`) in which the workspace and its own state are writable
//! and everything else is read-only; every *entry point* (a file that a program outside the jail would
//! later execute as the human: git hooks and config, shell startup files, IDE tasks, agent settings) is
//! sealed read-only whether or not it exists (`entrypoints`), and every escape hatch (Docker and IDE
//! sockets, `sudo`, terminal injection) is closed. `explain` tells a human what a launch would do.

pub(crate) mod adopt;
pub(crate) mod agent_hooks;
pub(crate) mod audit;
pub(crate) mod battery;
pub(crate) mod catalogue;
pub mod cli;
pub(crate) mod commands;
pub(crate) mod config;
pub(crate) mod docker;
#[cfg(test)]
mod docs_tables;
pub(crate) mod doctor;
pub(crate) mod entrypoints;
pub(crate) mod error;
pub(crate) mod escape;
pub(crate) mod explain;
#[cfg(test)]
mod fuzz;
pub(crate) mod gitconfig;
pub(crate) mod handback;
pub(crate) mod held;
pub mod host;
pub(crate) mod jail;
pub(crate) mod logfile;
pub(crate) mod net;
pub(crate) mod runtime_dir;
pub(crate) mod runtimes;
pub(crate) mod secrets;
pub(crate) mod service;
pub(crate) mod ssh_agent;
pub(crate) mod tempname;

pub(crate) use error::{Error, Result};
pub(crate) mod alerts;
pub mod baseline;
pub(crate) mod process;
pub(crate) mod quarantine;
pub(crate) mod review;
pub(crate) mod walk;
pub mod watch;
