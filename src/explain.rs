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
    "network: what allowed hosts accept (an upload, an attacker's API key); in mode `host` all egress and abstract sockets (docs/network.md)",
    "deleting or corrupting workspace data the agent may write (including .git objects and refs)",
    "writable PATH directories and new repositories' hooks: sealed only by the watcher",
    "entry points created below the workspace root (e.g. sub/.envrc) until the session ends: then they are held for review",
    "the jail's own layers (caches, tools' data) are the agent's: a tool inside the jail runs what an earlier session left there (never a tool outside)",
    "a unix socket opened outside after launch, for its first milliseconds (then covered in the jail: docs/network.md)",
    "a sealed workspace file your editor replaces during a session: writable for ~2 ms until sealed again (alerted at the end)",
    "kernel exploits and a compromised image",
];

/// For an agent's state directory: how much of it is writable.
fn allowlist_note(home: &std::path::Path, dir: &std::path::Path) -> String {
    let Some(sd) = crate::runtimes::state_dirs().find(|s| home.join(s.path) == dir) else {
        return String::new();
    };
    match sd.measured() {
        Some(v) => format!(" (only what the agent writes, measured with {v}: docs/runtimes.md)"),
        None => " (but for its entry points; not measured: docs/runtimes.md)".into(),
    }
}

/// What the jail's own top level of a state directory holds (`jail::statedir`).
fn state_note(binds: &[crate::jail::policy::StateBind]) -> String {
    use crate::jail::policy::How;
    let count = |f: fn(&How) -> bool| binds.iter().filter(|b| f(&b.how)).count();
    format!(
        " (the jail's own, kept: {} of your files judged on the way back, {} read-only, {} \
         history shared; the rest stays the jail's)",
        count(|h| *h == How::Copied),
        count(|h| matches!(h, How::ReadOnly | How::Stub(_))),
        count(|h| *h == How::Writable),
    )
}

/// Writable PATH directories (the watcher's job), existing or not.
pub fn writable_path_dirs(plan: &Plan, path_env: &std::ffi::OsStr) -> Vec<PathBuf> {
    let mut seen = std::collections::HashSet::new();
    // Once each, however often PATH lists it.
    std::env::split_paths(path_env)
        .filter(|d| d.is_absolute() && plan.jail_can_write(d) && seen.insert(d.clone()))
        .collect()
}

/// How many items a short `explain` lists before "... and N more".
const SHORT_LIST: usize = 6;

/// `items` joined, at most `SHORT_LIST` of them unless `full`.
fn some(items: &[String], full: bool) -> String {
    if full {
        return items.join(", ");
    }
    // At most SHORT_LIST items and about 100 columns: a long socket path must not widen the screen.
    let mut shown: Vec<&str> = Vec::new();
    let mut width = 0;
    for item in items.iter().take(SHORT_LIST) {
        if width + item.len() > 100 {
            break;
        }
        width += item.len() + 2;
        shown.push(item);
    }
    match items.len() - shown.len() {
        0 => shown.join(", "),
        rest if shown.is_empty() => format!("{rest} (--full lists them)"),
        rest => format!("{}, ... and {rest} more", shown.join(", ")),
    }
}

/// `full` (`explain --full`) lists every sealed entry point with who runs it, and every mask;
/// the default is a screenful.
// One screen of text, written in the order it prints.
#[allow(clippy::too_many_lines)]
pub fn explain(
    opts: &RunOptions,
    json: bool,
    full: bool,
    env: &crate::host::HostEnv,
) -> Result<()> {
    let mut opts = opts.clone();
    opts.command = vec!["true".into()];
    let (input, config) = plan_input(&opts, "explain", env)?;
    let plan = plan(&input)?;
    // The conventional user bin directories, and those an `.envrc` adds, are watched whether or
    // not PATH has them yet (`watch::shellpath`).
    let home = &plan.policy.home;
    let npm =
        crate::watch::shellpath::npm_prefix(home, input.host.get(crate::host::NPM_CONFIG_PREFIX));
    let conventional = crate::watch::shellpath::conventional(home, npm.as_deref());
    let judged = std::env::join_paths(
        (plan.envrc_path_dirs.iter().cloned())
            .chain(conventional)
            .chain(std::env::split_paths(&input.path_env)),
    )
    .unwrap_or_else(|_| input.path_env.clone());
    let mut watched = writable_path_dirs(&plan, &judged);
    let mut seen = std::collections::HashSet::new();
    watched.retain(|d| seen.insert(d.clone()));
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
            "gaps": plan.gaps,
            "locked": config.system.locked,
            "fail_closed": config.system.fail_closed,
            "audit_shipping": config.audit.describe(),
            "not_covered": NOT_COVERED,
        });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&v).expect("serialisable")
        );
        return Ok(());
    }
    // The text names what the jail may have shaped (names in the workspace, in `$HOME`): written
    // into a buffer, then shown line by line through the escaping function.
    drop(out);
    let mut buf: Vec<u8> = Vec::new();
    let out = &mut buf;
    let p = &plan.policy;
    let access = if p.read_only_workspace {
        "read-only: it is read-only to you"
    } else {
        "writable"
    };
    let _ = writeln!(out, "Workspace ({access}): {}", p.workspace.display());
    let _ = writeln!(out, "\n$HOME ({}): a private directory for the session; its existing entries are bound read-only,", p.home.display());
    let _ = writeln!(out, "new top-level files are discarded, ~/.claude.json is a private copy merged back (MCP servers and trust kept).");
    let _ = writeln!(out, "\nWritable:");
    let home_writable = p
        .home_entries
        .iter()
        .filter(|e| e.bind == HomeBind::Writable)
        .map(|e| p.home.join(&e.name));
    for w in p.writable.iter().cloned().chain(home_writable) {
        let git = if plan.git_roots.contains(&w) {
            " (the workspace's git directory: commits there; hooks, config, info/ sealed; the tree \
             around read-only)"
        } else {
            ""
        };
        let _ = writeln!(out, "  {}{git}{}", w.display(), allowlist_note(&p.home, &w));
    }
    for w in &p.work_in_seals {
        let _ = writeln!(
            out,
            "  {} (worktrees, kept after the session: writable inside the sealed parent)",
            w.display()
        );
    }
    for w in &plan.watched_not_sealed {
        let _ = writeln!(
            out,
            "  {} is not blocked for the agent launched (it refuses a placeholder there): \
             the watcher takes a new one out at once",
            w.display()
        );
    }
    for e in &p.home_entries {
        if let HomeBind::State { binds, .. } = &e.bind {
            let _ = writeln!(
                out,
                "  {}{}",
                p.home.join(&e.name).display(),
                state_note(binds)
            );
        }
    }
    let _ = writeln!(out, "  /tmp (private, empty, discarded)");
    let own: Vec<String> = p
        .state_private
        .iter()
        .map(|d| d.display().to_string())
        .chain(
            p.state_views
                .iter()
                .map(|(d, _)| format!("{} (yours in it read-only)", d.display())),
        )
        .collect();
    if !own.is_empty() {
        let _ = writeln!(out, "  the session's own, discarded: {}", some(&own, full));
    }
    caches(out, p, full);
    // Chosen as the launcher chooses them (the sealer mounts them; `gitcopy` says why).
    let copies = crate::jail::gitcopy::choose(p, &plan.repos);
    if full {
        let _ = writeln!(
            out,
            "\nRead-only: everything else, and these entry points inside writable places:"
        );
        for s in &p.sealed {
            let tag = if s.placeholder {
                " [missing: placeholder while a session runs]"
            } else if copies.iter().any(|c| c.real == s.path) {
                " [the jail writes its own copy; merged back at exit without keys that run programs]"
            } else {
                ""
            };
            let _ = writeln!(out, "  {}{tag}\n      runs: {}", s.path.display(), s.runs);
        }
        if !plan.unread.is_empty() {
            let _ = writeln!(
                out,
                "\nNot blocked (nothing installed here reads them; alerted if made during a session):"
            );
            for u in &plan.unread {
                let _ = writeln!(out, "  {}", u.display());
            }
        }
        let _ = writeln!(out, "\nMasked:");
        for m in &p.masks {
            let _ = writeln!(out, "  {}  ({})", m.path.display(), m.why);
        }
    } else {
        let missing = p.sealed.iter().filter(|s| s.placeholder).count();
        let unread = match plan.unread.len() {
            0 => String::new(),
            n => format!("; {n} unread here: not blocked"),
        };
        let _ = writeln!(
            out,
            "\nRead-only: everything else, and {} entry points inside writable places ({missing} missing: \
             placeholders during sessions{unread})",
            p.sealed.len()
        );
        let names: Vec<String> = p
            .masks
            .iter()
            .map(|m| m.path.display().to_string())
            .collect();
        let _ = writeln!(
            out,
            "Masked: {} paths: {}",
            names.len(),
            some(&names, false)
        );
        let _ = writeln!(
            out,
            "  (`claude-sandbox explain --full` lists every entry point, who runs it, and every mask)"
        );
    }
    let _ = writeln!(
        out,
        "\nFixed views (as at launch; sockets made later are not in the jail):"
    );
    if let Some(run) = &p.run_view {
        let keep: Vec<String> = run.keep.iter().map(|k| k.display().to_string()).collect();
        let _ = writeln!(out, "  /run: only {}", some(&keep, full));
    }
    for e in &p.home_entries {
        if let HomeBind::Filtered(keep) = &e.bind {
            let names: Vec<String> = keep
                .iter()
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            let _ = writeln!(
                out,
                "  {}: only {}",
                p.home.join(&e.name).display(),
                some(&names, full)
            );
        }
    }
    let hidden: Vec<String> = p
        .hidden
        .iter()
        .chain(p.private.iter().skip(1))
        .map(|h| h.display().to_string())
        .collect();
    let _ = writeln!(out, "\nHidden: {}", some(&hidden, full));
    let _ = writeln!(out, "Unset in the jail: {}", some(&p.unsetenv, full));
    // Said only when there is something to say (the short view fits a screen).
    if !plan.withheld_env.is_empty() {
        let _ = writeln!(
            out,
            "Withheld as secrets (by name or value; the agents' own API keys kept): {}",
            plan.withheld_env.join(", ")
        );
    }
    if !p.views.is_empty() {
        let views: Vec<String> = p
            .views
            .iter()
            .map(|v| v.path.display().to_string())
            .collect();
        let _ = writeln!(
            out,
            "Masked views (secret values read as `{}`): {}",
            crate::secrets::views::MASK,
            views.join(", ")
        );
    }
    for line in crate::net::describe(&p.network, |items| some(items, full)) {
        let _ = writeln!(out, "{line}");
    }
    // The default (masked, no [ssh]) is said by the unset variables above; the rest always.
    let ssh_set = !config.ssh.allow.is_empty() || config.allow_ssh_agent;
    if full || ssh_set {
        let (ssh, legacy) = (&config.ssh, config.allow_ssh_agent);
        for line in crate::ssh_agent::describe(p.ssh.as_ref(), ssh, legacy) {
            let _ = writeln!(out, "{line}");
        }
    }
    if full || config.containers.docker {
        let on = config.containers.docker;
        for line in crate::docker::describe(p.docker.as_ref(), on) {
            let _ = writeln!(out, "{line}");
        }
    }
    if !p.devices.is_empty() {
        let nodes: Vec<String> = p
            .devices
            .iter()
            .map(|(_, at)| at.display().to_string())
            .collect();
        let _ = writeln!(out, "GPU devices ([devices] gpu): {}", some(&nodes, full));
    }
    // One line, as `Hidden` (the short view fits a screen).
    let watched: Vec<String> = watched.iter().map(|w| w.display().to_string()).collect();
    let _ = writeln!(
        out,
        "\nWatched (writable PATH directories): {}",
        if watched.is_empty() {
            "none".to_string()
        } else {
            some(&watched, full)
        }
    );
    let _ = write!(out, "\nRepositories: {}", plan.repos.len());
    let _ = match copies.len() {
        0 => writeln!(out),
        n => writeln!(
            out,
            " ({n} git configs the jail's own copy, merged back at exit; keys that run programs \
             held for `claude-sandbox review`)"
        ),
    };
    for note in crate::jail::local_remotes::notes(&plan, Some(&p.home)) {
        let _ = writeln!(out, "  {note}");
    }
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
    if config.system.locked || config.system.fail_closed {
        let _ = writeln!(
            out,
            "System policy:{}{}",
            if config.system.locked {
                " locked (your file and the command line may only tighten)"
            } else {
                ""
            },
            if config.system.fail_closed {
                " fail_closed (a gap below stops the launch)"
            } else {
                ""
            }
        );
    }
    for line in config.audit.describe() {
        let _ = writeln!(out, "Audit records shipped: {line}");
    }
    for w in &plan.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for g in &plan.gaps {
        let _ = writeln!(out, "gap: {g}");
    }
    let _ = writeln!(out, "\nNot covered:");
    for n in NOT_COVERED {
        let _ = writeln!(out, "  - {n}");
    }
    let mut stdout = std::io::stdout().lock();
    // Each line escaped on its own (the last newline ends the last line, not an empty one).
    for line in buf
        .strip_suffix(b"\n")
        .unwrap_or(&buf)
        .split(|b| *b == b'\n')
    {
        let _ = writeln!(stdout, "{}", crate::escape::visible_bytes(line));
    }
    Ok(())
}

/// Where each cache layer lives: one line by default, one per layer with `--full`.
fn caches(out: &mut impl Write, p: &crate::jail::policy::Policy, full: bool) {
    type Layer = crate::jail::policy::Layer;
    type Pick = fn(&&Layer) -> bool;
    let _ = writeln!(
        out,
        "\nCaches, tools' data, the home PATH directories: the jail's own layers, kept, never read outside (`cache ls`; `adopt NAME`):"
    );
    if full {
        for l in &p.layers {
            use crate::jail::policy::LayerMount;
            let how = match l.mount() {
                LayerMount::Overlay => format!(
                    "overlay: yours read-only beneath, writes in {}",
                    l.upper.display()
                ),
                LayerMount::Yours => "no overlay here: yours, read-only".to_string(),
                LayerMount::Own => format!(
                    "its own directory {} (yours not visible)",
                    l.own_dir().display()
                ),
            };
            let _ = writeln!(out, "  {}  ({how})", l.path.display());
        }
        return;
    }
    let name = |l: &&Layer| {
        l.path.strip_prefix(&p.home).map_or_else(
            |_| l.path.display().to_string(),
            |r| format!("~/{}", r.display()),
        )
    };
    let groups: [(&str, Pick); 4] = [
        ("over yours (read-only)", |l| l.overlay && l.human),
        ("instead of yours", |l| !l.overlay && l.human && !l.data),
        ("yours, read-only (no overlay)", |l| {
            !l.overlay && l.human && l.data
        }),
        ("yours missing", |l| !l.human),
    ];
    for (label, pick) in groups {
        let names: Vec<String> = p.layers.iter().filter(pick).map(|l| name(&l)).collect();
        if !names.is_empty() {
            let _ = writeln!(out, "  {label}: {}", names.join(", "));
        }
    }
}
