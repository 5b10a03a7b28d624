//! Each runtime's definition (`super::Runtime`): what was measured, and why each name is where it is.

use super::*;
use crate::catalogue::{dir, held, instructions, Stub};
use crate::handback::identity::Format;

const fn ep(rel: &'static str, stub: Stub, runs: &'static str) -> StateEntry {
    StateEntry {
        rel,
        stub,
        runs,
        jails_own: false,
    }
}

/// An entry point the agent saves its choices in: the jail's own copy, seeded from yours
/// (`StateEntry::jails_own`); `seed` is what the copy starts as when you have none.
const fn own(rel: &'static str, seed: Stub, runs: &'static str) -> StateEntry {
    StateEntry {
        rel,
        stub: seed,
        runs,
        jails_own: true,
    }
}

/// Every runtime.
pub(crate) const ALL: &[&Runtime] = &[&CLAUDE, &CODEX, &GEMINI, &CURSOR, &OPENCODE, &PI];

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
        // Plugins carry hooks and MCP servers. Yours are seen read-only; 2.1.332 writes
        // `plugins/store/` at every start (and clones marketplaces there when online): the
        // session's own, in the view's tmpfs.
        views: &[View {
            name: "plugins",
            fresh: &["store"],
        }],
        identity: &[(".credentials.json", Format::ClaudeCredentials)],
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
            // 2.1.197 reads it at every start; its `scripts/*.js` are what a workflow runs.
            ep(
                ".claude/workflows",
                Stub::Dir,
                "Claude Code: workflows and the scripts they run",
            ),
        ],
    }],
    project: &[
        dir(
            ".claude",
            "Claude Code: settings hooks, statusLine, commands, agents, skills",
        ),
        dir(".mcp.json", "Claude Code: stdio MCP server commands"),
        // Read from every directory from the root of the repository to the one it starts in
        // (2.1.197, measured); `CLAUDE.local.md` is the private one, usually ignored by git.
        instructions(
            "CLAUDE.md",
            "Claude Code, OpenCode: the project's instructions",
        ),
        instructions("CLAUDE.local.md", "Claude Code: your private instructions"),
    ],
    hooks: Some(Hooks {
        name: "claude",
        file: ".claude/settings.json",
        protocol: Protocol::ClaudeCode,
    }),
    // Measured with 2.1.197 in allowlist mode (docs/network.md, "The default list"): the API, its
    // telemetry and feature flags (`/api/event_logging`, `/api/eval`) and WebFetch's domain check
    // all go to api.anthropic.com; the first interactive start stops ("Unable to connect to
    // Anthropic services") unless platform.claude.com answers (`/v1/oauth/hello`; also its OAuth
    // token URL); the official plugin marketplace and the native installer's updates come from
    // downloads.claude.ai. It asks for neither statsig.anthropic.com, console.anthropic.com nor
    // claude.ai (there only pages opened in your browser).
    hosts: &[
        "api.anthropic.com",
        "platform.claude.com",
        "downloads.claude.ai",
    ],
    npm: Some("@anthropic-ai/claude-code"),
    // `.claude/settings.local.json` ("don't ask again") is the jail's own, bound in this view
    // (`jail::ownfiles` says how Claude Code saves it and why a view is needed).
    project_views: &[".claude"],
    home_views: &[],
    // `claude -w NAME` (2.1.332 and 2.1.197): `git worktree add .claude/worktrees/NAME`.
    project_work: &[".claude/worktrees"],
    // 2.1.332: "could not confirm that this repository's .git entry belongs to the folder it is
    // in" for any `.git` directory with a `commondir` (2.1.197 does not check).
    refuses_in_git_dir: &["commondir"],
    // Its API key, a gateway token, and the token `claude setup-token` prints.
    api_keys: &[
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
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
                "*.lock",
                // Temporary files of atomic saves (`.tmpXXXXXX`).
                ".tmp?*",
            ],
        },
        // Shell snapshots are sourced into the shells it starts; `.tmp` holds the plugin
        // marketplace it installs from; `tmp/` its helpers, which a running Codex puts on its own
        // PATH (`tmp/arg0/codex-arg0*/`, links to its binary by a name per process): yours outside
        // would run a `git` planted there.
        private: &["shell_snapshots", ".tmp", "tmp"],
        // Its bundled skills, `skills/.system`, are removed and written anew at every start (measured:
        // `remove_dir_all` first, so a read-only `skills/` makes it fail); your skills stay read-only.
        views: &[View {
            name: "skills",
            fresh: &[".system"],
        }],
        identity: &[("auth.json", Format::CodexAuth)],
        // Threads, logs, goals and memories (`memories_1.sqlite` steers later sessions): SQLite with
        // WAL files made and removed beside each, which neither a copy nor a file bind keeps sound.
        jail_store: Some(JailStore {
            name: ".claude-sandbox-sqlite",
            env: "CODEX_SQLITE_HOME",
            fresh: &["memories_*"],
        }),
        entry_points: &[
            // Codex saves folder trust (`[projects."/path"] trust_level`, the TUI's first question)
            // and `codex features enable` here, by `.tmpXXXXXX` beside it and rename (0.171.0,
            // strace): sealed, the trust could not be saved and was asked every session.
            own(
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
    project: &[
        dir(
            ".codex",
            "Codex CLI: project config.toml (mcp_servers, notify), hooks.json",
        ),
        // 0.171.0 reads `.agents/skills` in every directory from the repository's root to its own
        // (OpenCode 1.18.33 reads `.agents` too): skills carry scripts.
        dir(".agents", "Codex CLI, OpenCode: skills with scripts"),
        instructions(
            "AGENTS.md",
            "Codex CLI, OpenCode: the project's instructions",
        ),
        instructions(
            "AGENTS.override.md",
            "Codex CLI: instructions read instead of AGENTS.md",
        ),
    ],
    hooks: Some(Hooks {
        name: "codex",
        file: ".codex/hooks.json",
        protocol: Protocol::ClaudeCode,
    }),
    // Measured with 0.171.0: the API, its sign-in, and chatgpt.com (the ChatGPT-plan backend, the
    // curated plugins). Left out, and refused at each start (one `info` alert each): its
    // metrics (ab.chatgpt.com, `/otlp/v1/metrics`) and its update check (api.github.com).
    hosts: &["api.openai.com", "auth.openai.com", "chatgpt.com"],
    npm: Some("@openai/codex"),
    project_views: &[],
    home_views: &[],
    project_work: &[],
    refuses_in_git_dir: &[],
    api_keys: &["OPENAI_API_KEY", "CODEX_API_KEY"],
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
        // `tmp/<project>/` holds chats, logs and plans, and `memory/` (the project's memory and
        // the skills it saves there), read by every later session in that project.
        // `trustedFolders.json` is the jail's own (as every name off the list): sealed, trusting
        // a folder failed and Gemini CLI 0.61.0 exited (status 52); yours stays as it is, so your
        // Gemini never trusts what the jail trusted (battery `gemini-trusted-folders`).
        identity: &[
            ("oauth_creds.json", Format::GoogleOauth),
            ("google_accounts.json", Format::GoogleAccounts),
            ("mcp-oauth-tokens.json", Format::TokensByName),
            ("a2a-oauth-tokens.json", Format::TokensByName),
        ],
        jail_store: None,
        entry_points: &[
            // Gemini CLI saves the auth method chosen (`security.auth.selectedType`) and other
            // choices here, in place (`O_WRONLY|O_CREAT|O_TRUNC`, 0.61.0, strace): sealed, the
            // choice could not be saved and was asked every session.
            own(
                ".gemini/settings.json",
                EMPTY_JSON,
                "Gemini CLI: hooks, mcpServers, discoveryCommand",
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
            // A directory, not an empty file, where you have none: 0.61.0 counts an empty file as
            // "1 GEMINI.md file" loaded, and skips a directory at that name (`EISDIR`) as absent.
            ep(
                ".gemini/GEMINI.md",
                Stub::Dir,
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
    project: &[
        dir(
            ".gemini",
            "Gemini CLI: settings.json hooks and mcpServers, commands, .env",
        ),
        instructions(
            "GEMINI.md",
            "Gemini CLI: the project's instructions and memory",
        ),
    ],
    hooks: Some(Hooks {
        name: "gemini",
        file: ".gemini/settings.json",
        protocol: Protocol::Gemini,
    }),
    // Measured with 0.61.0: the Gemini API; Code Assist and OAuth for a Google sign-in. Left out,
    // and refused at each start (one `info` alert): its usage statistics (play.googleapis.com,
    // Clearcut; `"usageStatisticsEnabled": false` in its settings stops them).
    hosts: &[
        "generativelanguage.googleapis.com",
        "cloudcode-pa.googleapis.com",
        "oauth2.googleapis.com",
    ],
    npm: Some("@google/gemini-cli"),
    project_views: &[],
    home_views: &[],
    project_work: &[],
    refuses_in_git_dir: &[],
    api_keys: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
};

pub(crate) const CURSOR: Runtime = Runtime {
    name: "Cursor CLI",
    commands: &["cursor-agent"],
    state: &[StateDir {
        path: ".cursor",
        writable: Writable::Unmeasured,
        private: &[],
        views: &[],
        identity: &[],
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
    project: &[
        dir(".cursor", "Cursor: hooks.json, mcp.json"),
        // Its documentation (not installed here): the legacy rules file at a project's root.
        instructions(".cursorrules", "Cursor: the project's rules (legacy)"),
    ],
    hooks: Some(Hooks {
        name: "cursor",
        file: ".cursor/hooks.json",
        protocol: Protocol::Cursor,
    }),
    hosts: &["api2.cursor.sh", "api.cursor.com"],
    npm: None,
    project_views: &[],
    home_views: &[],
    project_work: &[],
    refuses_in_git_dir: &[],
    api_keys: &["CURSOR_API_KEY"],
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
            identity: &[("auth.json", Format::OpenCodeAuth)],
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
            identity: &[],
            jail_store: None,
            entry_points: &[],
        },
    ],
    project: &[
        dir(".opencode", "OpenCode: plugins loaded at startup"),
        // No placeholder: OpenCode 1.18.33 cannot read a directory there ("Unexpected server
        // error", EISDIR at its first request), neither in the jail nor yours outside during the
        // session, and a file placeholder would be taken by `git add -A`. One made in the session
        // is held at its end for the review (docs/entry-points.md).
        held("opencode.json", "OpenCode: plugins and MCP commands"),
        held("opencode.jsonc", "OpenCode: plugins and MCP commands"),
        // 1.18.33 reads it beside `AGENTS.md` and `CLAUDE.md` (an older name of its own).
        instructions(
            "CONTEXT.md",
            "OpenCode: the project's instructions (older name)",
        ),
    ],
    hooks: None,
    // Measured with 1.18.33: OpenCode Zen (opencode.ai/zen, its default free model) and the model
    // catalogue it fetches at each start (models.opencode.ai, `OPENCODE_MODELS_URL`; not
    // models.dev any more). Its plugins and update check use the npm registry.
    hosts: &["opencode.ai", "models.opencode.ai"],
    npm: Some("opencode-ai"),
    // At every start it writes `.opencode/.gitignore` and its plugins' dependencies there
    // (measured with 1.18.33: "FileSystem.writeFile (.../.opencode/.gitignore)" on a read-only one).
    project_views: &[".opencode"],
    // Its configuration and plugins, where it installs the plugins' dependencies at every start
    // (1.18.33: "EROFS: read-only file system, mkdir '~/.config/opencode'").
    home_views: &[".config/opencode"],
    project_work: &[],
    refuses_in_git_dir: &[],
    // The providers it signs in to with a key of the environment.
    api_keys: &[
        "OPENCODE_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    ],
};

/// pi: no state directory known (its files under `$HOME` are read-only in the jail).
pub(crate) const PI: Runtime = Runtime {
    name: "pi",
    commands: &["pi"],
    state: &[],
    project: &[],
    hooks: None,
    hosts: &[],
    npm: None,
    project_views: &[],
    home_views: &[],
    project_work: &[],
    refuses_in_git_dir: &[],
    api_keys: &[
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "OPENROUTER_API_KEY",
    ],
};
