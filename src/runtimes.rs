//! Every agent runtime, once: its commands, its state directories and what in them the jail may
//! write, the entry points in them and in a project, and where its hooks are installed.
//!
//! Guards against agent state that is really instructions or code: `~/.claude/` and `~/.codex/` mix
//! what the agent writes during a session (sessions, history, credentials refresh, logs) with what
//! steers or runs the next session, including an unjailed one (an IDE extension, a terminal outside
//! the wrapper): settings and hooks, scripts they name, `CLAUDE.md`/`AGENTS.md`, rules, skills,
//! commands, agents, plugins, `~/.codex/.env`. A runtime whose writes were measured
//! (docs/runtimes.md, with the version) has a writable *allowlist*: every existing entry of its state
//! directory that is not on it is read-only in the jail, whatever its name, and its catalogued entry
//! points are sealed even when missing. A runtime not measured here keeps its directory writable but
//! for the catalogued entry points, and says so (docs/runtimes.md).
//!
//! Adding a runtime: one `Runtime` in `runtimes/agents.rs`, listed in its `ALL`, its column in
//! docs/runtimes.md, its tests and battery cases.

use crate::catalogue::{Catalogued, Stub};

/// One agent runtime.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub name: &'static str,
    /// The commands that start it (the launcher creates its state directories for these).
    pub commands: &'static [&'static str],
    /// Its state directories under `$HOME` (writable holes of the jail).
    pub state: &'static [StateDir],
    /// Names in a project (the workspace root, and wherever they exist below) that it reads.
    pub project: &'static [Catalogued],
    /// How it calls the hook adapter (`agent_hooks`), if it has hooks.
    pub hooks: Option<Hooks>,
    /// Its API and sign-in hosts (in the network allow list's defaults: `net`).
    pub hosts: &'static [&'static str],
    /// Its npm package, when it ships as one: CI installs the version its allowlist was measured
    /// with (`.ci/agents-pinned`) beside the latest release.
    pub npm: Option<&'static str>,
    /// Directories of a project it writes at every start although they hold what it runs (a
    /// sealed entry point): when it is the command launched, a view for the session (yours in it
    /// read-only, what it writes there the session's own).
    pub project_views: &'static [&'static str],
    /// The same for directories under `$HOME` (relative to it).
    pub home_views: &'static [&'static str],
    /// Directories inside a sealed project name where it makes the human's work, not what it runs
    /// (Claude Code's `claude -w NAME` worktrees in `.claude/worktrees/`): writable in every
    /// session, inside the seal, made when missing and kept when not empty afterwards.
    pub project_work: &'static [&'static str],
    /// Files of `catalogue::git::FILES` it refuses to find in its repository's `.git` directory:
    /// when it is launched their placeholders are not made there, and the watcher takes a new one
    /// out at once instead (Claude Code 2.1.332 stops `claude -w` at a `.git` holding `commondir`).
    pub refuses_in_git_dir: &'static [&'static str],
    /// The environment variables that carry its own API credentials: kept in the jail although
    /// their names look like secrets (`secrets::env`), since the agent cannot work without them.
    pub api_keys: &'static [&'static str],
}

/// Every runtime's `api_keys`: kept whichever command is launched (a shell started in the jail may
/// start any agent).
pub(crate) fn api_keys() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|r| r.api_keys.iter().copied())
}

/// Every runtime's `project_work` directories, relative to a project root.
pub(crate) fn project_work() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|r| r.project_work.iter().copied())
}

/// A runtime's hooks (`Runtime::hooks`): `hooks install --runtime NAME` writes them into its
/// settings, and they call `hook … --host NAME`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hooks {
    /// Its name on the command line and in the hook commands installed.
    pub name: &'static str,
    /// The user-level settings file the hooks go in, relative to `$HOME`.
    pub file: &'static str,
    /// The shape of that configuration, of what the runtime sends and of a denial.
    pub protocol: Protocol,
}

/// A hook protocol: the events a runtime calls its hooks on, their payloads and the answer that
/// denies (`agent_hooks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// Claude Code's (`PreToolUse`, `hookSpecificOutput` with `permissionDecision`), which Codex
    /// speaks too.
    ClaudeCode,
    /// Gemini CLI's (`BeforeTool`, `decision: deny`).
    Gemini,
    /// Cursor's (`preToolUse`, `beforeShellExecution`, `beforeReadFile`, `permission: deny`).
    Cursor,
}

/// Claude Code's own state and configuration at the top of `$HOME`: a private copy per session,
/// merged back with MCP servers, allowed tools and trust kept at your values (`jail::home`).
pub(crate) const CLAUDE_JSON: &str = ".claude.json";

/// One state directory of a runtime.
#[derive(Debug)]
pub(crate) struct StateDir {
    /// Relative to `$HOME`.
    pub path: &'static str,
    /// What the jail may write at its top level.
    pub writable: Writable,
    /// Paths (relative to the state directory) the agent writes that are code it runs later: in the
    /// jail each is a private, empty tmpfs for the session; the human's copy is neither read nor
    /// written there. Their mount points are made (and removed again if left empty) by the launcher.
    pub private: &'static [&'static str],
    /// Top-level directories the agent rewrites in part while the rest is the human's: in the jail a
    /// private tmpfs for the session holding read-only binds of the human's entries, except `fresh`
    /// ones (which the agent writes anew). What the agent adds or replaces there is the session's
    /// only. Their mount points are made like `private`'s.
    pub views: &'static [View],
    /// Entry points inside it, sealed read-only, a placeholder where missing (relative to `$HOME`).
    pub entry_points: &'static [StateEntry],
    /// The files of the allowlist that are a login, and how each names its account
    /// (`handback::identity`): one of another account comes back only when the human accepts it.
    pub identity: &'static [(&'static str, crate::handback::identity::Format)],
    /// `SQLite` stores the runtime keeps beside its other state: in the jail they live in a directory
    /// of the jail's own (persistent, never read outside), named to the runtime by an environment
    /// variable (`jail::statedir`).
    pub jail_store: Option<JailStore>,
}

/// `StateDir::jail_store`.
#[derive(Debug)]
pub(crate) struct JailStore {
    /// Its name at the top of the jail's state directory.
    pub name: &'static str,
    /// The variable that points the runtime at it.
    pub env: &'static str,
    /// Stores removed from it at every launch: what steers later sessions (memories) lasts one
    /// session only, as a saved preference is refused (docs/runtimes.md).
    pub fresh: &'static [&'static str],
}

/// How a name on a measured allowlist is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Allowed {
    /// A directory (written `name/` in the list): the human's own, bound writable.
    Dir,
    /// A file (a literal name): the jail's copy, carried back when the session ends.
    File,
    /// A `*`/`?` pattern (locks, temporary files of atomic saves): the jail's own, never carried out.
    Pattern,
}

/// A directory of a state directory seen through a session-private view (`StateDir::views`).
#[derive(Debug)]
pub(crate) struct View {
    /// Relative to the state directory.
    pub name: &'static str,
    /// Entries of the human's directory left out of the view: the agent writes its own.
    pub fresh: &'static [&'static str],
}

/// The writable part of a state directory's top level.
#[derive(Debug)]
pub(crate) enum Writable {
    /// Measured (version, and the names or `*` patterns the agent writes at the top level): every
    /// other existing entry is read-only.
    Only {
        measured: &'static str,
        names: &'static [&'static str],
    },
    /// Not measured here: everything but the entry points stays writable.
    Unmeasured,
}

/// An entry point in a state directory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateEntry {
    /// Relative to `$HOME`.
    pub rel: &'static str,
    /// Its placeholder where it is missing; for a `jails_own` file, what the jail's copy starts as.
    pub stub: Stub,
    pub runs: &'static str,
    /// The agent saves its own choices here (an auth method, folder trust: measured, with how it
    /// saves, in `runtimes::agents`): in the jail a copy of the jail's own, seeded from yours
    /// (`jail::ownfiles`), so the save works and is kept while yours is never written.
    pub jails_own: bool,
}

impl StateEntry {
    /// Whether the jail has its own copy of this entry point (`jails_own`) rather than a seal.
    pub(crate) fn sealed(&self) -> bool {
        !self.jails_own
    }
}

mod agents;
pub(crate) use agents::ALL;
#[cfg(test)]
pub(crate) use agents::{CLAUDE, CODEX, CURSOR, GEMINI, OPENCODE};

/// Every state directory of every runtime.
pub(crate) fn state_dirs() -> impl Iterator<Item = &'static StateDir> {
    ALL.iter().flat_map(|r| r.state.iter())
}

/// The runtime started by `command` (its file name), if any.
pub(crate) fn by_command(command: &str) -> Option<&'static Runtime> {
    ALL.iter().copied().find(|r| r.commands.contains(&command))
}

/// Every runtime's hooks, in the order of `ALL`.
pub(crate) fn hooks() -> impl Iterator<Item = Hooks> {
    ALL.iter().filter_map(|r| r.hooks)
}

/// The hooks named `name` on the command line.
pub(crate) fn hooks_named(name: &str) -> Option<Hooks> {
    hooks().find(|h| h.name == name)
}

/// Every agent command.
pub(crate) fn commands() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|r| r.commands.iter().copied())
}

/// Every project-level name of every runtime.
pub(crate) fn project_entry_points() -> impl Iterator<Item = &'static Catalogued> {
    ALL.iter().flat_map(|r| r.project.iter())
}

/// How the jail treats one top-level entry of a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The agent writes it (on the allowlist, or the runtime was not measured).
    Writable,
    /// A private tmpfs for the session.
    Private,
    /// A private tmpfs for the session over read-only binds of the human's entries.
    View,
    /// Read-only in the jail (not on a measured runtime's allowlist).
    ReadOnly,
}

impl StateDir {
    /// The jail's treatment of the top-level entry `name` (pure: the name alone decides).
    pub(crate) fn access(&self, name: &str) -> Access {
        if self.private.contains(&name) {
            return Access::Private;
        }
        if self.views.iter().any(|v| v.name == name) {
            return Access::View;
        }
        match &self.writable {
            Writable::Unmeasured => Access::Writable,
            Writable::Only { names, .. } => {
                if names.iter().any(|p| crate::secrets::glob_match(p, name)) {
                    Access::Writable
                } else {
                    Access::ReadOnly
                }
            }
        }
    }

    /// How the allowlist gives `name`, if it does (`Unmeasured` gives nothing this way).
    pub(crate) fn allowed(&self, name: &str) -> Option<Allowed> {
        let Writable::Only { names, .. } = &self.writable else {
            return None;
        };
        names
            .iter()
            .find(|p| crate::secrets::glob_match(p, name))
            .map(|p| {
                if p.contains(['*', '?']) {
                    Allowed::Pattern
                } else if p.ends_with('/') {
                    Allowed::Dir
                } else {
                    Allowed::File
                }
            })
    }

    /// Whether the jail sees a top level of its own here (`jail::statedir`): a measured directory
    /// directly under `$HOME`.
    pub(crate) fn own_top_level(&self) -> bool {
        self.measured().is_some() && !self.path.contains('/')
    }

    /// How the login file `name` names its account, if it is one.
    pub(crate) fn identity_of(&self, name: &str) -> Option<crate::handback::identity::Format> {
        self.identity
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
    }

    /// The version the allowlist was measured with, if it was.
    pub(crate) fn measured(&self) -> Option<&'static str> {
        match self.writable {
            Writable::Only { measured, .. } => Some(measured),
            Writable::Unmeasured => None,
        }
    }
}

#[cfg(test)]
mod tests;
