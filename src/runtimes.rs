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
//! Adding a runtime: one `Runtime` below, its column in docs/runtimes.md, its tests and battery cases.

use crate::entrypoints::{Catalogued, Stub};

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
    /// Where `hooks install` writes its hook configuration, relative to `$HOME`.
    pub hook_file: Option<&'static str>,
    /// Its API and sign-in hosts (in the network allow list's defaults: `net`).
    pub hosts: &'static [&'static str],
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
    /// A directory of transcripts per project whose entries hold what steers later sessions there
    /// (`jail::statedir`): in the jail only this session's projects are the human's, and `sealed`
    /// in each is read-only.
    pub per_project: Option<PerProject>,
    /// SQLite stores the runtime keeps beside its other state: in the jail they live in a directory
    /// of the jail's own (persistent, never read outside), named to the runtime by an environment
    /// variable (`jail::statedir`).
    pub jail_store: Option<JailStore>,
}

/// `StateDir::per_project`.
#[derive(Debug)]
pub(crate) struct PerProject {
    /// Relative to the state directory.
    pub dir: &'static str,
    /// The project's directory name for a working directory.
    pub slug: fn(&str) -> String,
    /// Entries of a project's directory that are read-only in the jail, and why.
    pub sealed: &'static [(&'static str, &'static str)],
}

/// `StateDir::jail_store`.
#[derive(Debug)]
pub(crate) struct JailStore {
    /// Its name at the top of the jail's state directory.
    pub name: &'static str,
    /// The variable that points the runtime at it.
    pub env: &'static str,
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
    pub stub: Stub,
    pub runs: &'static str,
}

const fn ep(rel: &'static str, stub: Stub, runs: &'static str) -> StateEntry {
    StateEntry { rel, stub, runs }
}

/// Always placeholdered when missing (`Catalogued::read_by` empty): the agent that reads it may
/// run as an editor's extension, not from PATH.
const fn project(name: &'static str, runs: &'static str) -> Catalogued {
    Catalogued {
        name,
        stub: Stub::Dir,
        runs,
        read_by: &[],
        jail_env: None,
    }
}

/// An empty file where a missing instruction or environment file is expected: read as "nothing".
const EMPTY: Stub = Stub::File("");
/// An empty JSON object where a missing settings file is expected.
const EMPTY_JSON: Stub = Stub::File("{}\n");

pub(crate) const CLAUDE: Runtime = Runtime {
    name: "Claude Code",
    commands: &["claude"],
    state: &[StateDir {
        path: ".claude",
        writable: Writable::Only {
            measured: "2.1.197",
            names: &[
                // Sessions, history and their indexes.
                "projects/",
                "sessions/",
                "history.jsonl",
                "todos/",
                "tasks/",
                "teams/",
                "plans/",
                "file-history/",
                "paste-cache/",
                "image-cache/",
                "shares/",
                "uploads/",
                "backups/",
                // Credentials (saved by `<name>.tmp.<hex>` and rename) and their refresh lock.
                ".credentials.json",
                "hfi-auth.json",
                "mcp-needs-auth-cache.json",
                // Logs, telemetry, caches.
                "statsig/",
                "telemetry/",
                "debug/",
                "traces/",
                "usage-data/",
                "startup-perf/",
                "feedback-bundles/",
                "dump-prompts/",
                "cache/",
                "ide/",
                "stats-cache.json",
                "gh-pr-status-cache.json",
                "daemon.log",
                "daemon.status.json",
                "daemon.scheduled.status.json",
                ".last-cleanup",
                ".last-update-result.json",
                ".deep-link-register-failed",
                // Locks (directories made by mkdir) and temporary files of atomic saves.
                "*.lock",
                "*.tmp.*",
            ],
        },
        // `jobs/` holds background sessions' state and the hand-off (`jobs/<id>/adopt.json`: shells
        // and workflow scripts) another Claude Code process adopts and runs; Claude Code's own
        // sandbox denies writes there too. The session's own, empty.
        // `session-env/<session>/*-hook-<n>.sh` (what hooks export through CLAUDE_ENV_FILE) is
        // joined into the script Claude Code runs before every Bash command of that session — also
        // when you resume the session outside the jail (resuming keeps its id).
        private: &["shell-snapshots", "jobs", "session-env"],
        views: &[],
        per_project: Some(PerProject {
            dir: "projects",
            slug: claude_project_slug,
            sealed: &[(
                "memory",
                "Claude Code: auto memory, read by every later session in this project",
            )],
        }),
        jail_store: None,
        entry_points: &[
            ep(
                ".claude/settings.json",
                EMPTY_JSON,
                "Claude Code: user hooks, statusLine, apiKeyHelper",
            ),
            ep(
                ".claude/settings.local.json",
                EMPTY_JSON,
                "Claude Code: user hooks",
            ),
            ep(
                ".claude/CLAUDE.md",
                EMPTY,
                "Claude Code: the user's instructions, read by every session",
            ),
            ep(
                ".claude/commands",
                Stub::Dir,
                "Claude Code: slash commands with !`cmd`",
            ),
            ep(".claude/agents", Stub::Dir, "Claude Code: subagents"),
            ep(
                ".claude/skills",
                Stub::Dir,
                "Claude Code: skills with shell execution",
            ),
            ep(
                ".claude/plugins",
                Stub::Dir,
                "Claude Code: plugins (hooks, MCP servers)",
            ),
            ep(
                ".claude/rules",
                Stub::Dir,
                "Claude Code: the user's rules (instructions)",
            ),
            ep(
                ".claude/output-styles",
                Stub::Dir,
                "Claude Code: output styles (system prompt)",
            ),
            ep(
                ".claude/hooks",
                Stub::Dir,
                "Claude Code: the usual place of hook scripts named by settings",
            ),
        ],
    }],
    project: &[
        project(
            ".claude",
            "Claude Code: settings hooks, statusLine, commands, agents, skills",
        ),
        project(".mcp.json", "Claude Code: stdio MCP server commands"),
    ],
    hook_file: Some(".claude/settings.json"),
    hosts: &[
        "api.anthropic.com",
        "statsig.anthropic.com",
        "console.anthropic.com",
        "claude.ai",
    ],
};

pub(crate) const CODEX: Runtime = Runtime {
    name: "Codex CLI",
    commands: &["codex"],
    state: &[StateDir {
        path: ".codex",
        writable: Writable::Only {
            measured: "0.171.0",
            names: &[
                "auth.json",
                "installation_id",
                ".sandbox_migration",
                ".personality_migration",
                "sessions/",
                "archived_sessions/",
                "history.jsonl",
                "thread-writer-locks/",
                "log/",
                "version.json",
                "models_cache.json",
                "cache/",
                // Its own helpers (symlinks to its binary under a random name per process).
                "tmp/",
                "*.lock",
                // Temporary files of atomic saves (`.tmpXXXXXX`).
                ".tmp?*",
            ],
        },
        // Shell snapshots are sourced into the shells it starts; `.tmp` holds the plugin
        // marketplace it installs from.
        private: &["shell_snapshots", ".tmp"],
        // Its bundled skills, `skills/.system`, are removed and written anew at every start (measured:
        // `remove_dir_all` first, so a read-only `skills/` makes it fail); your skills stay read-only.
        views: &[View {
            name: "skills",
            fresh: &[".system"],
        }],
        per_project: None,
        // Threads, logs, goals and memories (`memories_1.sqlite` steers later sessions): SQLite with
        // WAL files made and removed beside each, which neither a copy nor a file bind keeps sound.
        jail_store: Some(JailStore {
            name: ".claude-sandbox-sqlite",
            env: "CODEX_SQLITE_HOME",
        }),
        entry_points: &[
            ep(
                ".codex/config.toml",
                EMPTY,
                "Codex CLI: mcp_servers, notify, project trust",
            ),
            ep(".codex/hooks.json", EMPTY_JSON, "Codex CLI: hooks"),
            ep(
                ".codex/AGENTS.md",
                EMPTY,
                "Codex CLI: the user's instructions, read by every session",
            ),
            ep(
                ".codex/AGENTS.override.md",
                EMPTY,
                "Codex CLI: instructions read instead of AGENTS.md",
            ),
            ep(
                ".codex/.env",
                EMPTY,
                "Codex CLI: environment of Codex and every process it starts (LD_PRELOAD)",
            ),
            ep(
                ".codex/rules",
                Stub::Dir,
                "Codex CLI: execpolicy rules (commands allowed outside its sandbox)",
            ),
            ep(".codex/prompts", Stub::Dir, "Codex CLI: custom prompts"),
            ep(".codex/agents", Stub::Dir, "Codex CLI: agent definitions"),
            ep(".codex/plugins", Stub::Dir, "Codex CLI: installed plugins"),
        ],
    }],
    project: &[project(
        ".codex",
        "Codex CLI: project config.toml (mcp_servers, notify), hooks.json",
    )],
    hook_file: Some(".codex/hooks.json"),
    hosts: &["api.openai.com", "auth.openai.com", "chatgpt.com"],
};

pub(crate) const GEMINI: Runtime = Runtime {
    name: "Gemini CLI",
    commands: &["gemini"],
    state: &[StateDir {
        path: ".gemini",
        writable: Writable::Only {
            measured: "0.61.0",
            names: &[
                // Chats, logs, checkpoints and plans per project (`tmp/<project>/`), shell history.
                "tmp/",
                // The project registry (saved by `<name>.<uuid>.tmp` and rename, under a lock).
                "projects.json",
                "installation_id",
                "state.json",
                // Sign-in and tokens.
                "oauth_creds.json",
                "google_accounts.json",
                "mcp-oauth-tokens.json",
                "a2a-oauth-tokens.json",
                "browser-consent-acknowledged.txt",
                ".extraction.lock",
                ".extraction-state.json",
                "*.lock",
                "*.tmp",
            ],
        },
        // `history/<project>/` are the shadow git repositories of its checkpoints: your Gemini CLI
        // runs `git add` and `git commit` in them (GIT_DIR), so a hook or `core.fsmonitor` written
        // there would run outside the jail. The session's own, empty.
        private: &["history"],
        // `tmp/bin` holds the tools it downloads and runs (ripgrep): yours read-only, a new one the
        // session's own.
        views: &[View {
            name: "tmp/bin",
            fresh: &[],
        }],
        per_project: None,
        jail_store: None,
        entry_points: &[
            ep(
                ".gemini/settings.json",
                EMPTY_JSON,
                "Gemini CLI: hooks, mcpServers, discoveryCommand",
            ),
            ep(
                ".gemini/trustedFolders.json",
                EMPTY_JSON,
                "Gemini CLI: folder trust",
            ),
            ep(
                ".gemini/trusted_hooks.json",
                EMPTY_JSON,
                "Gemini CLI: hooks trusted to run",
            ),
            ep(
                ".gemini/.env",
                EMPTY,
                "Gemini CLI: GEMINI_CLI_TRUST_WORKSPACE, environment",
            ),
            ep(
                ".gemini/GEMINI.md",
                EMPTY,
                "Gemini CLI: the user's instructions and memory, read by every session",
            ),
            ep(
                ".gemini/system.md",
                EMPTY,
                "Gemini CLI: a system prompt that replaces its own (GEMINI_SYSTEM_MD)",
            ),
            ep(
                ".gemini/commands",
                Stub::Dir,
                "Gemini CLI: commands with !{...}",
            ),
            ep(".gemini/extensions", Stub::Dir, "Gemini CLI: extensions"),
            ep(".gemini/skills", Stub::Dir, "Gemini CLI: skills"),
            ep(".gemini/agents", Stub::Dir, "Gemini CLI: subagents"),
            ep(
                ".gemini/policies",
                Stub::Dir,
                "Gemini CLI: policies (tools allowed without asking)",
            ),
        ],
    }],
    project: &[project(
        ".gemini",
        "Gemini CLI: settings.json hooks and mcpServers, commands, .env",
    )],
    hook_file: Some(".gemini/settings.json"),
    hosts: &[
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    ],
};

pub(crate) const CURSOR: Runtime = Runtime {
    name: "Cursor CLI",
    commands: &["cursor-agent"],
    state: &[StateDir {
        path: ".cursor",
        writable: Writable::Unmeasured,
        private: &[],
        views: &[],
        per_project: None,
        jail_store: None,
        entry_points: &[
            ep(".cursor/hooks.json", EMPTY_JSON, "Cursor: hooks"),
            ep(
                ".cursor/mcp.json",
                EMPTY_JSON,
                "Cursor: MCP server commands",
            ),
            ep(".cursor/rules", Stub::Dir, "Cursor: the user's rules"),
        ],
    }],
    project: &[project(".cursor", "Cursor: hooks.json, mcp.json")],
    hook_file: Some(".cursor/hooks.json"),
    hosts: &["api2.cursor.sh", "api.cursor.com"],
};

pub(crate) const OPENCODE: Runtime = Runtime {
    name: "OpenCode",
    commands: &["opencode"],
    // Its configuration and plugins are under `~/.config/opencode` (read-only in the jail, as all
    // of `~/.config`); the tools it downloads under `~/.cache/opencode/bin` (a cache layer).
    state: &[
        StateDir {
            path: ".local/share/opencode",
            writable: Writable::Only {
                measured: "1.18.33",
                names: &[
                    "auth.json",
                    "mcp-auth.json",
                    "opencode.db",
                    "opencode.db-journal",
                    "opencode.db-wal",
                    "opencode.db-shm",
                    "log/",
                    "snapshot/",
                    "storage/",
                    "tool-output/",
                    "worktree/",
                    "repos/",
                    "plans/",
                    "*.lock",
                    "*.tmp",
                ],
            },
            private: &[],
            views: &[],
            per_project: None,
            jail_store: None,
            entry_points: &[],
        },
        StateDir {
            path: ".local/state/opencode",
            writable: Writable::Only {
                measured: "1.18.33",
                names: &[
                    "model.json",
                    "plugin-meta.json",
                    "kv.json",
                    "prompt-history.jsonl",
                    "frecency.jsonl",
                    "locks/",
                    "*.lock",
                    "*.tmp",
                ],
            },
            private: &[],
            views: &[],
            per_project: None,
            jail_store: None,
            entry_points: &[],
        },
    ],
    project: &[
        project(".opencode", "OpenCode: plugins loaded at startup"),
        project("opencode.json", "OpenCode: plugins and MCP commands"),
        project("opencode.jsonc", "OpenCode: plugins and MCP commands"),
    ],
    hook_file: None,
    hosts: &["opencode.ai", "models.dev"],
};

/// pi: no state directory known (its files under `$HOME` are read-only in the jail).
pub(crate) const PI: Runtime = Runtime {
    name: "pi",
    commands: &["pi"],
    state: &[],
    project: &[],
    hook_file: None,
    hosts: &[],
};

/// Claude Code's directory name for a project (`~/.claude/projects/<slug>`): the working directory
/// with every character but ASCII letters and digits made `-`; past 200 characters, the first 200,
/// `-` and a base-36 hash of the whole (a 32-bit string hash over UTF-16 code units).
pub(crate) fn claude_project_slug(cwd: &str) -> String {
    const MAX: usize = 200;
    let slug: String = cwd
        .encode_utf16()
        .map(|u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if slug.len() <= MAX {
        return slug;
    }
    let mut h: i32 = 0;
    for u in cwd.encode_utf16() {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
    }
    let mut n = h.unsigned_abs();
    let mut digits = Vec::new();
    while n > 0 || digits.is_empty() {
        digits.push(char::from_digit(n % 36, 36).expect("a base-36 digit"));
        n /= 36;
    }
    let hash: String = digits.iter().rev().collect();
    format!("{}-{hash}", &slug[..MAX])
}

/// Every runtime.
pub(crate) const ALL: &[&Runtime] = &[&CLAUDE, &CODEX, &GEMINI, &CURSOR, &OPENCODE, &PI];

/// Every state directory of every runtime.
pub(crate) fn state_dirs() -> impl Iterator<Item = &'static StateDir> {
    ALL.iter().flat_map(|r| r.state.iter())
}

/// The runtime started by `command` (its file name), if any.
pub(crate) fn by_command(command: &str) -> Option<&'static Runtime> {
    ALL.iter().copied().find(|r| r.commands.contains(&command))
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
