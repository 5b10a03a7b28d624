//! `claude-sandbox explain`: the policy for this workspace and user, in plain words or JSON.
//!
//! Guards against a false sense of safety: it says what is writable, what is sealed and who would run
//! it, what is masked and why, what is hidden, what the watcher has to cover, and what is not covered.

use crate::error::Result;
use crate::jail::launch::{plan_input, RunOptions};
use crate::jail::plan::{plan, Plan};
use crate::jail::policy::HomeBind;
use std::io::Write;
use std::path::PathBuf;

/// What the jail does not cover; printed by `explain` and kept in README.md.
pub const NOT_COVERED: &[&str] = &[
    "in network mode `host` (the default): network egress and abstract unix sockets (docs/network.md)",
    "in network mode `allowlist`: what the allowed hosts accept (an API or registry can carry data)",
    "deleting or corrupting workspace data the agent may write (including .git objects and refs)",
    "writable PATH directories and new repositories' hooks: sealed only by the watcher",
    "entry points created below the workspace root (e.g. sub/.envrc); existing ones are sealed",
    "poisoned caches in writable holes (~/.cache, ~/.npm)",
    "kernel exploits and a compromised image",
];

/// Writable PATH directories (the watcher's job), existing or not.
pub fn writable_path_dirs(plan: &Plan, path_env: &std::ffi::OsStr) -> Vec<PathBuf> {
    std::env::split_paths(path_env)
        .filter(|d| d.is_absolute() && plan.jail_can_write(d))
        .collect()
}

pub fn explain(opts: &RunOptions, json: bool) -> Result<()> {
    let mut opts = opts.clone();
    opts.command = vec!["true".into()];
    let (input, config) = plan_input(&opts, "explain")?;
    let plan = plan(&input)?;
    let watched = writable_path_dirs(&plan, &input.path_env);
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "workspace": plan.policy.workspace,
            "home": plan.policy.home,
            "policy": plan.policy,
            "placeholders": plan.placeholders,
            "repositories": plan.repos.iter().map(|r| &r.git_dir).collect::<Vec<_>>(),
            "watched_path_dirs": watched,
            "config_files": config.sources,
            "warnings": plan.warnings,
            "not_covered": NOT_COVERED,
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).expect("serialisable")
        );
        return Ok(());
    }
    let p = &plan.policy;
    let _ = writeln!(out, "Workspace (writable): {}", p.workspace.display());
    let _ = writeln!(out, "\n$HOME ({}): a private directory for the session; its existing entries are bound read-only,", p.home.display());
    let _ = writeln!(out, "new top-level files are discarded, ~/.claude.json is a private copy merged back (MCP servers and trust kept).");
    let _ = writeln!(out, "\nWritable:");
    for w in &p.writable {
        let _ = writeln!(out, "  {}", w.display());
    }
    for e in p
        .home_entries
        .iter()
        .filter(|e| e.bind == HomeBind::Writable)
    {
        let _ = writeln!(out, "  {}", p.home.join(&e.name).display());
    }
    let _ = writeln!(out, "  /tmp (private, empty, discarded)");
    let _ = writeln!(
        out,
        "\nRead-only: everything else, and these entry points inside writable places:"
    );
    for s in &p.sealed {
        let tag = if s.placeholder {
            " [missing: placeholder while a session runs]"
        } else {
            ""
        };
        let _ = writeln!(out, "  {}{tag}\n      runs: {}", s.path.display(), s.runs);
    }
    let _ = writeln!(out, "\nMasked:");
    for m in &p.masks {
        let _ = writeln!(out, "  {}  ({})", m.path.display(), m.why);
    }
    let _ = writeln!(
        out,
        "\nHidden: {}",
        p.hidden
            .iter()
            .chain(p.private.iter().skip(1))
            .map(|h| h.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "Unset in the jail: {}", p.unsetenv.join(" "));
    for line in crate::net::describe(&p.network) {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\nWatched (writable PATH directories):");
    if watched.is_empty() {
        let _ = writeln!(out, "  none");
    }
    for w in &watched {
        let _ = writeln!(out, "  {}", w.display());
    }
    let _ = writeln!(out, "\nRepositories: {}", plan.repos.len());
    if !config.sources.is_empty() {
        let _ = writeln!(
            out,
            "Configuration: {}",
            config
                .sources
                .iter()
                .map(|s| s.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for w in &plan.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let _ = writeln!(out, "\nNot covered:");
    for n in NOT_COVERED {
        let _ = writeln!(out, "  - {n}");
    }
    Ok(())
}
