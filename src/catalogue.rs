//! The catalogue of entry points: the files through which what the jail writes would later run
//! outside it, as the human, named once with who runs them and what stands in for a missing one.
//! Data only: the walk that finds them in a workspace is `entrypoints`, the agents' own names are
//! in `runtimes`, git's in `git`.
//!
//! Guards against a fact written twice and read two ways: discovery, the planner, the agents' hook
//! adapter (`agent_hooks`), the watcher and the docs (`docs/entry-points.md`, checked by a test)
//! read the same rows. A new per-directory name of a tool is one row of `TOOLS`; a new file git
//! reads from a git directory is one row of `git::FILES`.

pub(crate) mod git;
#[cfg(test)]
pub(crate) mod pass;

/// The workspace's own configuration file (`config`): an entry point itself, since it is the next
/// session's policy.
pub(crate) const WORKSPACE_FILE: &str = ".claude-sandbox.toml";

/// What a missing entry point is replaced with. A directory is the default because every reader we
/// checked treats a directory where it expects a file as absent (rustup, pyenv, npm, git's untracked
/// listing), while an empty *file* changes behaviour (an empty `rust-toolchain.toml` breaks cargo, an
/// empty `.python-version` switches pyenv to the system python). Files inside `.git` are the exception:
/// git refuses a directory there, so they get content git reads as "nothing set".
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stub {
    /// An empty directory.
    Dir,
    /// A file with this content.
    File(&'static str),
}

/// One catalogued name: where it is looked for, who runs what it holds.
#[derive(Debug, Clone, Copy)]
pub struct Catalogued {
    pub name: &'static str,
    pub stub: Stub,
    pub runs: &'static str,
    /// The commands that read it. When none of them is installed (on PATH or in a conventional user
    /// bin directory), a missing one gets no placeholder: nothing outside would run it, and one
    /// created during the session is alerted at its end (`jail::plan::readers`). Empty: always
    /// placeholdered (read by editors and agents that need not be on PATH, or by us).
    pub read_by: &'static [&'static str],
    /// Set in the jail while the name is a placeholder, for a reader that fails on a directory.
    pub jail_env: Option<(&'static str, &'static str)>,
    /// `jail_env` only while the installed reader named here is older than this major version
    /// (or its version cannot be read): newer ones need nothing, and npm warns of every unknown
    /// `npm_config_*` name.
    pub jail_env_below: Option<(&'static str, u64)>,
    /// Never a placeholder: its reader fails on a directory (and a file placeholder would be
    /// committed by `git add -A`). One created during the session is held at its end for the
    /// review (moved aside; accepting it puts it back byte for byte).
    pub held: bool,
    /// Also not sealed where it exists: the jail edits it, and a change is held at the session's
    /// end unless it is the work (its repository tracks it: `git diff` shows it). For a file an
    /// agent edits as part of everyday work and that runs only on a deliberate act of the human
    /// (`git commit`), not on `cd` (`jail::launch::edited`).
    pub edits_held: bool,
}

const LEFTHOOK: &[&str] = &["lefthook"];
const CARGO: &[&str] = &["cargo", "rustup", "rustc"];
/// npm reads a `.npmrc` in the directory it runs in even without a `package.json`.
const NODE_PMS: &[&str] = &["npm", "npx", "pnpm", "yarn", "bun", "corepack"];

/// Always placeholdered when missing (also the agents' project names, `runtimes`: the agent that
/// reads one may run as an editor's extension, not from PATH).
pub(crate) const fn dir(name: &'static str, runs: &'static str) -> Catalogued {
    Catalogued {
        name,
        stub: Stub::Dir,
        runs,
        read_by: &[],
        jail_env: None,
        jail_env_below: None,
        held: false,
        edits_held: false,
    }
}

/// Never placeholdered; held at the session's end when created (`Catalogued::held`).
pub(crate) const fn held(name: &'static str, runs: &'static str) -> Catalogued {
    Catalogued {
        held: true,
        ..dir(name, runs)
    }
}

/// An instruction file an agent reads from every directory it works in (`CLAUDE.md`, `AGENTS.md`):
/// never a placeholder and never sealed, since agents write them as part of their task; a new or
/// changed one is held at the session's end unless it is the work (its repository tracks it).
pub(crate) const fn instructions(name: &'static str, runs: &'static str) -> Catalogued {
    Catalogued {
        held: true,
        edits_held: true,
        ..dir(name, runs)
    }
}

/// Placeholdered when missing only if one of `read_by` is installed.
pub(crate) const fn read_by(
    name: &'static str,
    read_by: &'static [&'static str],
    runs: &'static str,
) -> Catalogued {
    Catalogued {
        name,
        stub: Stub::Dir,
        runs,
        read_by,
        jail_env: None,
        jail_env_below: None,
        held: false,
        edits_held: false,
    }
}

/// Names sealed at the workspace root (blocked when missing) and wherever they exist below it,
/// besides the agent runtimes' own (`runtimes`; both together: `per_directory`).
/// Missing ones below the root are not blocked: a placeholder per name per directory would cost a
/// mount each (about 0.4 ms apiece at launch) for directories the human rarely opens as a project.
pub(crate) const TOOLS: &[Catalogued] = &[
    dir(
        ".vscode",
        "VS Code: tasks.json folderOpen tasks, settings naming executables, launch.json",
    ),
    dir(
        ".devcontainer",
        "Dev Containers: initializeCommand on the host, post*Command, features",
    ),
    dir(
        ".devcontainer.json",
        "Dev Containers: the same, read when there is no .devcontainer/",
    ),
    dir(".idea", "JetBrains IDEs: run configurations, startup tasks"),
    read_by(
        ".husky",
        &["npm", "pnpm", "yarn", "bun", "husky"],
        "husky: git hooks run by every commit",
    ),
    read_by(".lefthook", LEFTHOOK, "lefthook: hook scripts"),
    read_by(
        ".cargo",
        CARGO,
        "cargo: config.toml runner, rustc-wrapper, linker for every cargo command",
    ),
    read_by(".envrc", &["direnv"], "direnv: shell code run on cd"),
    read_by(
        ".npmrc",
        NODE_PMS,
        "npm: node-options, script-shell, git, editor",
    ),
    read_by(
        ".yarnrc.yml",
        &["yarn", "corepack"],
        "yarn: yarnPath runs a JavaScript file",
    ),
    Catalogued {
        // pnpm before 12 `require`s it, and a directory fails every install: while it is a
        // placeholder the jail's pnpm reads `/dev/null` instead (an empty module: no hooks). Not an
        // empty file, which `git add -A` would commit. pnpm 12 (measured: 12.23.0) takes the
        // directory for no pnpmfile, and fails on `/dev/null` given as `pnpm_config_pnpmfile`.
        jail_env: Some(("npm_config_pnpmfile", "/dev/null")),
        jail_env_below: Some(("pnpm", 12)),
        ..read_by(
            ".pnpmfile.cjs",
            &["pnpm", "corepack"],
            "pnpm: hooks run on install",
        )
    },
    // pnpm 12.23.0 loads it as it loads `.pnpmfile.cjs`, and takes a directory there for none.
    read_by(
        ".pnpmfile.mjs",
        &["pnpm", "corepack"],
        "pnpm: hooks run on install (an ES module)",
    ),
    // pnpm 12.23.0 fails every command on a directory there ("Is a directory"), and agents edit it
    // as part of their task (`packages:`, `pnpm approve-builds`): held when made or changed, as
    // `package.json` a tracked one is the work.
    Catalogued {
        held: true,
        edits_held: true,
        ..read_by(
            "pnpm-workspace.yaml",
            &["pnpm", "corepack"],
            "pnpm: scriptShell runs every `pnpm run`, settings of every pnpm command",
        )
    },
    // Yarn's Plug'n'Play loader, written by `yarn install`: `pnpm run` requires it into every node
    // script (measured with pnpm 12.23.0). Held, not sealed: sealed, a PnP project's install fails.
    Catalogued {
        held: true,
        edits_held: true,
        ..read_by(
            ".pnp.cjs",
            &["pnpm", "yarn", "corepack"],
            "pnpm/yarn: Plug'n'Play loader required into every node script",
        )
    },
    // Yarn 1 (not installed here: from its docs). No placeholder: how it reads a directory there
    // was not measured.
    Catalogued {
        held: true,
        ..read_by(
            ".yarnrc",
            &["yarn"],
            "yarn 1: yarn-path runs a JavaScript file",
        )
    },
    read_by("bunfig.toml", &["bun", "bunx"], "bun: preload scripts"),
    read_by(
        "mise.toml",
        &["mise"],
        "mise: [hooks] enter/cd, [env] _.source on cd",
    ),
    read_by(
        ".mise.toml",
        &["mise"],
        "mise: [hooks] enter/cd, [env] _.source on cd",
    ),
    read_by(
        ".tool-versions",
        &["asdf", "mise"],
        "asdf/mise: `path:` tool versions run by shims",
    ),
    read_by(
        ".python-version",
        &["pyenv", "uv", "rye"],
        "pyenv: selects the python that shims run",
    ),
    read_by(
        "rust-toolchain.toml",
        CARGO,
        "rustup: `path =` toolchain run by cargo/rustc proxies",
    ),
    read_by(
        "rust-toolchain",
        CARGO,
        "rustup: toolchain run by cargo/rustc proxies",
    ),
    read_by("lefthook.yml", LEFTHOOK, "lefthook: hook commands"),
    read_by(".lefthook.yml", LEFTHOOK, "lefthook: hook commands"),
    read_by("lefthook-local.yml", LEFTHOOK, "lefthook: hook commands"),
    // An agent adds a project's hook as part of its task; it runs at the human's next commit,
    // after `git diff` showed it (docs/entry-points.md, "pre-commit and mise").
    Catalogued {
        held: true,
        edits_held: true,
        ..read_by(
            ".pre-commit-config.yaml",
            &["pre-commit", "prek"],
            "pre-commit/prek: `repo: local` entry commands on commit",
        )
    },
    read_by("hk.pkl", &["hk"], "hk: hook commands"),
    read_by(
        ".exrc",
        &["vi", "vim", "nvim", "ex", "view"],
        "vi/vim with `exrc`: ex commands",
    ),
    dir(WORKSPACE_FILE, "claude-sandbox: the next session's policy"),
];
