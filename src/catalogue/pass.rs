//! The last catalogue pass (docs/entry-points.md, "The catalogue pass"): what each catalogued tool
//! and runtime was seen reading from a project directory or `$HOME` — under
//! `strace -f -e trace=%file` (`.ci/catalogue-pass`), or from its documentation where it is not
//! installable here — and the verdict on each file.
//!
//! Guards against the catalogue and the runtimes' tables drifting from what the tools really read:
//! a runtime re-measured at a new version without a new pass, a name a runtime declares that no
//! pass found, an entry point the pass found that the catalogue lost or treats otherwise, and the
//! docs' table of the pass out of date. Test data only.

use super::Catalogued;

/// How the catalogue must treat a per-directory entry point (`Catalogued`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Treatment {
    /// Sealed where it exists, a placeholder at the root when missing (`!held`).
    Sealed,
    /// Sealed where it exists, no placeholder; a new one held at the session's end.
    Held,
    /// Written freely; new or changed ones held at the session's end unless tracked.
    EditsHeld,
}

impl Treatment {
    pub(crate) fn of(c: &Catalogued) -> Self {
        match (c.held, c.edits_held) {
            (_, true) => Self::EditsHeld,
            (true, false) => Self::Held,
            (false, false) => Self::Sealed,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Self::Sealed => "sealed",
            Self::Held => "held when made",
            Self::EditsHeld => "held when made or changed",
        }
    }
}

/// The verdict on one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A per-directory entry point; the path's first component is its catalogued name.
    Project(Treatment),
    /// An entry point in a runtime's state directory (`~/...`): one of its `entry_points`, or in
    /// one of its private directories or views.
    State,
    /// A file of `git::FILES` (`.git/<rel>`).
    Git,
    /// Not writable by the jail where the human's tool reads it, for the reason given.
    Covered(&'static str),
    /// Read, but nothing in it runs or chooses a program: the reason.
    Data(&'static str),
    /// An entry point left open (docs/entry-points.md, "Not sealed"): why.
    Open(&'static str),
}

impl Verdict {
    /// As docs/entry-points.md's table of the pass says it.
    pub(crate) fn text(self) -> String {
        match self {
            Self::Project(t) => format!("entry point, {}", t.word()),
            Self::State => "entry point of its state directory".into(),
            Self::Git => "entry point, git's table".into(),
            Self::Covered(why) => format!("covered: {why}"),
            Self::Data(why) => format!("data: {why}"),
            Self::Open(why) => format!("open: {why}"),
        }
    }
}

/// How the read was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    Strace,
    Docs,
}

/// One file one tool reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Read {
    /// The tool; a runtime by its `Runtime::name`.
    pub tool: &'static str,
    /// The version looked at (a runtime's is its `measured` one).
    pub version: &'static str,
    /// Relative to the project directory, or `~/...`.
    pub path: &'static str,
    pub seen: Seen,
    pub verdict: Verdict,
}

const fn r(
    tool: &'static str,
    version: &'static str,
    path: &'static str,
    seen: Seen,
    verdict: Verdict,
) -> Read {
    Read {
        tool,
        version,
        path,
        seen,
        verdict,
    }
}

use Seen::{Docs, Strace};
use Treatment::{EditsHeld, Held, Sealed};
use Verdict::{Covered, Data, Git, Open, Project, State};

const HOME_TOP: Verdict = Covered("the top of `$HOME` and `~/.config`: read-only, not creatable");
const HOME_LAYER: Verdict = Covered("the jail's own layer (`~/.local`, `~/.cargo`, caches)");
const JAILS_OWN: Verdict = Covered("in the jail's own state directory: yours is read-only");
const THE_WORK: Verdict = Data("tracked by the project: the work, reviewed in `git diff`");
const IGNORE: Verdict = Data("which files it lists; a name it hides is still held (by the index)");
const UPWARD: Verdict = Covered("above the workspace: outside the writable roots");

// The versions of the last pass (2026-12-02).
const GIT: &str = "2.47.3";
const DIRENV: &str = "2.32.1";
const NPM: &str = "11.19.1";
const PNPM: &str = "12.23.0";
const PY: &str = "3.11.7 (pyenv 2.6.30)";
const PIP: &str = "23.2.1";
const CARGO: &str = "1.95.0 (rustup 1.29.0)";
const CLAUDE: &str = "2.1.197";
const CODEX: &str = "0.171.0";
const GEMINI: &str = "0.61.0";
const OPENCODE: &str = "1.18.33";
const NOT_HERE: &str = "not installed";

/// The last pass, tool by tool.
pub(crate) const PASS: &[Read] = &[
    r("git", GIT, ".git/config", Strace, Git),
    r("git", GIT, ".git/hooks/pre-commit", Strace, Git),
    r("git", GIT, ".git/info/exclude", Strace, Git),
    r("git", GIT, ".git/commondir", Strace, Git),
    r("git", GIT, ".git/config.worktree", Docs, Git),
    r(
        "git",
        GIT,
        ".git/objects/info/alternates",
        Strace,
        Data("objects of another store, checked by their hash"),
    ),
    r(
        "git",
        GIT,
        ".git/sequencer/todo",
        Strace,
        Open("`exec` lines run on `git rebase --continue`, which `git status` announces"),
    ),
    r("git", GIT, ".gitattributes", Strace, THE_WORK),
    r("git", GIT, ".gitignore", Strace, IGNORE),
    r(
        "git",
        GIT,
        ".gitmodules",
        Strace,
        Data("paths and URLs; git refuses `update = !cmd` from it"),
    ),
    r("git", GIT, "~/.gitconfig", Strace, HOME_TOP),
    r("git", GIT, "~/.config/git/attributes", Strace, HOME_TOP),
    r("bash", "5.2.15", "~/.bashrc", Strace, HOME_TOP),
    r("bash", "5.2.15", "~/.bash_profile", Strace, HOME_TOP),
    r("zsh", "5.9", "~/.zshrc.zwc", Strace, HOME_TOP),
    r("zsh", "5.9", "~/.terminfo", Strace, HOME_TOP),
    r("direnv", DIRENV, ".envrc", Strace, Project(Sealed)),
    r(
        "direnv",
        DIRENV,
        "~/.config/direnv/direnvrc",
        Strace,
        HOME_TOP,
    ),
    r("direnv", DIRENV, "~/.direnvrc", Strace, HOME_TOP),
    r(
        "direnv",
        DIRENV,
        "~/.local/share/direnv/allow",
        Strace,
        HOME_LAYER,
    ),
    r("npm", NPM, ".npmrc", Strace, Project(Sealed)),
    r("npm", NPM, "package.json", Strace, THE_WORK),
    r(
        "npm",
        NPM,
        "node_modules/.bin/sh",
        Strace,
        Covered("a writable PATH directory the watcher judges"),
    ),
    r("npm", NPM, "package-lock.json", Strace, THE_WORK),
    r("npm", NPM, "~/.npmrc", Strace, HOME_TOP),
    r("pnpm", PNPM, ".pnpmfile.cjs", Strace, Project(Sealed)),
    r("pnpm", PNPM, ".pnpmfile.mjs", Strace, Project(Sealed)),
    r(
        "pnpm",
        PNPM,
        "pnpm-workspace.yaml",
        Strace,
        Project(EditsHeld),
    ),
    r("pnpm", PNPM, ".pnp.cjs", Strace, Project(EditsHeld)),
    r("pnpm", PNPM, "binding.gyp", Strace, THE_WORK),
    r("pnpm", PNPM, "~/.config/pnpm/config.yaml", Strace, HOME_TOP),
    r("yarn", NOT_HERE, ".yarnrc.yml", Docs, Project(Sealed)),
    r("yarn", NOT_HERE, ".yarnrc", Docs, Project(Held)),
    r("python", PY, ".python-version", Strace, Project(Sealed)),
    r(
        "python",
        PY,
        "~/.local/lib/python3.11/site-packages",
        Strace,
        HOME_LAYER,
    ),
    r("pip", PIP, "~/.config/pip/pip.conf", Strace, HOME_TOP),
    r("pip", PIP, "~/.pip/pip.conf", Strace, HOME_TOP),
    r(
        "pip",
        PIP,
        ".venv/pip.conf",
        Docs,
        Data("names an index; a virtual environment is a build tree"),
    ),
    r(
        "cargo",
        CARGO,
        ".cargo/config.toml",
        Strace,
        Project(Sealed),
    ),
    r("cargo", CARGO, ".cargo/config", Strace, Project(Sealed)),
    r(
        "cargo",
        CARGO,
        "rust-toolchain.toml",
        Strace,
        Project(Sealed),
    ),
    r("cargo", CARGO, "rust-toolchain", Strace, Project(Sealed)),
    r("cargo", CARGO, "build.rs", Strace, THE_WORK),
    r("cargo", CARGO, "~/.cargo/config.toml", Strace, HOME_LAYER),
    r("vim", "9.0", ".exrc", Docs, Project(Sealed)),
    r("vim", "9.0", "~/.vim/plugin", Strace, HOME_TOP),
    r("tmux", "3.3a", "~/.tmux.conf", Strace, HOME_TOP),
    r(
        "Claude Code",
        CLAUDE,
        ".claude/settings.json",
        Strace,
        Project(Sealed),
    ),
    r(
        "Claude Code",
        CLAUDE,
        ".claude/workflows",
        Strace,
        Project(Sealed),
    ),
    r("Claude Code", CLAUDE, ".mcp.json", Strace, Project(Sealed)),
    r(
        "Claude Code",
        CLAUDE,
        "CLAUDE.md",
        Strace,
        Project(EditsHeld),
    ),
    r(
        "Claude Code",
        CLAUDE,
        "CLAUDE.local.md",
        Strace,
        Project(EditsHeld),
    ),
    r("Claude Code", CLAUDE, ".rgignore", Strace, IGNORE),
    r("Claude Code", CLAUDE, "../CLAUDE.md", Strace, UPWARD),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude/settings.json",
        Strace,
        State,
    ),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude/settings.local.json",
        Docs,
        State,
    ),
    r("Claude Code", CLAUDE, "~/.claude/CLAUDE.md", Strace, State),
    r("Claude Code", CLAUDE, "~/.claude/commands", Strace, State),
    r("Claude Code", CLAUDE, "~/.claude/agents", Strace, State),
    r("Claude Code", CLAUDE, "~/.claude/skills", Strace, State),
    r("Claude Code", CLAUDE, "~/.claude/rules", Strace, State),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude/output-styles",
        Strace,
        State,
    ),
    r("Claude Code", CLAUDE, "~/.claude/hooks", Docs, State),
    r("Claude Code", CLAUDE, "~/.claude/workflows", Strace, State),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude/plugins/installed_plugins.json",
        Strace,
        State,
    ),
    r("Claude Code", CLAUDE, "~/.claude/jobs", Strace, State),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude/.config.json",
        Strace,
        JAILS_OWN,
    ),
    r(
        "Claude Code",
        CLAUDE,
        "~/.claude.json",
        Strace,
        Covered("a private copy, merged back key by key"),
    ),
    r(
        "Claude Code",
        CLAUDE,
        "~/.config/anthropic/configs/default.json",
        Strace,
        HOME_TOP,
    ),
    r(
        "Codex CLI",
        CODEX,
        ".codex/config.toml",
        Docs,
        Project(Sealed),
    ),
    r(
        "Codex CLI",
        CODEX,
        ".agents/skills",
        Strace,
        Project(Sealed),
    ),
    r("Codex CLI", CODEX, "AGENTS.md", Strace, Project(EditsHeld)),
    r(
        "Codex CLI",
        CODEX,
        "AGENTS.override.md",
        Strace,
        Project(EditsHeld),
    ),
    r("Codex CLI", CODEX, "~/.codex/config.toml", Strace, State),
    r("Codex CLI", CODEX, "~/.codex/hooks.json", Strace, State),
    r("Codex CLI", CODEX, "~/.codex/AGENTS.md", Strace, State),
    r(
        "Codex CLI",
        CODEX,
        "~/.codex/AGENTS.override.md",
        Strace,
        State,
    ),
    r("Codex CLI", CODEX, "~/.codex/.env", Strace, State),
    r(
        "Codex CLI",
        CODEX,
        "~/.codex/rules/default.rules",
        Strace,
        State,
    ),
    r("Codex CLI", CODEX, "~/.codex/agents", Strace, State),
    r("Codex CLI", CODEX, "~/.codex/prompts", Docs, State),
    r("Codex CLI", CODEX, "~/.codex/plugins", Docs, State),
    r("Codex CLI", CODEX, "~/.codex/skills", Strace, State),
    r(
        "Codex CLI",
        CODEX,
        "~/.codex/shell_snapshots",
        Strace,
        State,
    ),
    r("Codex CLI", CODEX, "~/.codex/.tmp", Strace, State),
    r(
        "Codex CLI",
        CODEX,
        "~/.codex/environments.toml",
        Strace,
        JAILS_OWN,
    ),
    r("Codex CLI", CODEX, "~/.agents/skills", Strace, HOME_TOP),
    r(
        "Codex CLI",
        CODEX,
        "~/.codex-plugin/plugin.json",
        Strace,
        HOME_TOP,
    ),
    r(
        "Gemini CLI",
        GEMINI,
        ".gemini/settings.json",
        Strace,
        Project(Sealed),
    ),
    r(
        "Gemini CLI",
        GEMINI,
        "GEMINI.md",
        Strace,
        Project(EditsHeld),
    ),
    r("Gemini CLI", GEMINI, ".geminiignore", Strace, IGNORE),
    r(
        "Gemini CLI",
        GEMINI,
        ".env",
        Strace,
        Open("exported into it and the commands it runs; everyday work"),
    ),
    r("Gemini CLI", GEMINI, "../.env", Strace, UPWARD),
    r("Gemini CLI", GEMINI, "~/.env", Strace, HOME_TOP),
    r(
        "Gemini CLI",
        GEMINI,
        "~/.gemini/settings.json",
        Strace,
        State,
    ),
    r(
        "Gemini CLI",
        GEMINI,
        "~/.gemini/trusted_hooks.json",
        Docs,
        State,
    ),
    r("Gemini CLI", GEMINI, "~/.gemini/.env", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/GEMINI.md", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/system.md", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/commands", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/extensions", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/skills", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/agents", Docs, State),
    r("Gemini CLI", GEMINI, "~/.gemini/policies", Strace, State),
    r("Gemini CLI", GEMINI, "~/.gemini/history", Strace, State),
    r(
        "Gemini CLI",
        GEMINI,
        "~/.gemini/trustedFolders.json",
        Strace,
        JAILS_OWN,
    ),
    r("Gemini CLI", GEMINI, "~/.node_modules", Strace, HOME_TOP),
    r(
        "Cursor CLI",
        NOT_HERE,
        ".cursor/hooks.json",
        Docs,
        Project(Sealed),
    ),
    r(
        "Cursor CLI",
        NOT_HERE,
        ".cursorrules",
        Docs,
        Project(EditsHeld),
    ),
    r("Cursor CLI", NOT_HERE, "~/.cursor/hooks.json", Docs, State),
    r("Cursor CLI", NOT_HERE, "~/.cursor/mcp.json", Docs, State),
    r("Cursor CLI", NOT_HERE, "~/.cursor/rules", Docs, State),
    r("OpenCode", OPENCODE, "opencode.json", Strace, Project(Held)),
    r(
        "OpenCode",
        OPENCODE,
        "opencode.jsonc",
        Strace,
        Project(Held),
    ),
    r("OpenCode", OPENCODE, ".opencode", Strace, Project(Sealed)),
    r(
        "OpenCode",
        OPENCODE,
        "AGENTS.md",
        Strace,
        Project(EditsHeld),
    ),
    r(
        "OpenCode",
        OPENCODE,
        "CLAUDE.md",
        Strace,
        Project(EditsHeld),
    ),
    r(
        "OpenCode",
        OPENCODE,
        "CONTEXT.md",
        Strace,
        Project(EditsHeld),
    ),
    r("OpenCode", OPENCODE, ".agents", Strace, Project(Sealed)),
    r("OpenCode", OPENCODE, ".claude", Strace, Project(Sealed)),
    r(
        "OpenCode",
        OPENCODE,
        "~/.config/opencode/opencode.json",
        Strace,
        Covered("a view: yours read-only, what it writes the session's own"),
    ),
    r("OpenCode", OPENCODE, "~/.claude/CLAUDE.md", Strace, State),
    r("OpenCode", OPENCODE, "~/.claude/skills", Strace, State),
    r("OpenCode", OPENCODE, "~/.opencode", Strace, HOME_TOP),
];

mod tests;
