//! The agents' side of `doctor`: a `claude` that runs unguarded (no wrapper, or another one on
//! PATH first), the agents' versions against the ones the tests pin, and the installer command a
//! fix line names (by a path that exists here).

use super::*;

/// The command that runs the installer with `args`, by a path that exists here: the copy an install
/// keeps (`PREFIX/share/claude-sandbox/install.sh`, also in a Feature-installed container), else the
/// one in the npm package this binary came from, else the source's.
pub(crate) fn installer_command(args: &str) -> String {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_default();
    installer_command_for(&exe, args)
}

pub(super) fn installer_command_for(exe: &Path, args: &str) -> String {
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let found = [
        // PREFIX/bin/claude-sandbox and PREFIX/share/claude-sandbox/install.sh.
        "../share/claude-sandbox/install.sh",
        // npm: claude-sandbox/node_modules/@claude-sandbox/linux-ARCH/claude-sandbox (nested) or
        // @claude-sandbox/linux-ARCH/claude-sandbox beside claude-sandbox/ (hoisted).
        "../../../install.sh",
        "../../claude-sandbox/install.sh",
    ]
    .iter()
    .map(|rel| dir.join(rel))
    .find(|p| p.is_file())
    .and_then(|p| std::fs::canonicalize(p).ok());
    let args = if args.is_empty() {
        String::new()
    } else {
        format!(" {args}")
    };
    match found {
        Some(p) => format!("sudo bash {}{args}", p.display()),
        None => format!(
            "sudo bash installer/install.sh{args} (from the claude-sandbox source, or $(npm root -g)/claude-sandbox/install.sh)"
        ),
    }
}

/// Marker written into every wrapper by the installer.
pub const WRAPPER_MARK: &str = "# claude-sandbox wrapper";

pub(super) fn check_wrappers(env: &HostEnv) -> Vec<Check> {
    let mut out = Vec::new();
    for agent in crate::runtimes::commands() {
        let Some(found) = std::env::split_paths(env.path())
            .map(|d| d.join(agent))
            .find(|p| p.is_file())
        else {
            continue;
        };
        let text = std::fs::read(&found).unwrap_or_default();
        let guarded =
            text.len() < 64 * 1024 && String::from_utf8_lossy(&text).contains(WRAPPER_MARK);
        if guarded {
            out.push(pass(
                "agent wrappers",
                format!("`{agent}` is the guarded wrapper ({})", found.display()),
            ));
        } else {
            // Where this binary is, the wrapper would go (PREFIX/bin), and the installer refuses to
            // replace what is there: that fix would fail.
            let install = installer_command(&format!("--wrap {agent}"));
            let beside = std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .is_ok_and(|exe| exe.parent() == found.parent());
            let fix = if beside {
                format!("run `claude-sandbox run -- {agent}` (a wrapper would replace this {agent}: install {agent} under another prefix first, then {install})")
            } else {
                format!("{install}, or run `claude-sandbox run -- {agent}`")
            };
            out.push(warn(
                "agent wrappers",
                format!("`{agent}` runs unguarded ({})", found.display()),
                fix,
            ));
        }
    }
    if out.is_empty() {
        out.push(pass("agent wrappers", "no agent command found on PATH"));
    }
    out
}

/// Which release of each installed agent is here, and which one its state allowlist was measured
/// with (docs/runtimes.md): a newer one may write names the table does not know.
pub(super) fn check_agent_versions(env: &HostEnv) -> Vec<Check> {
    let path = env.path();
    let mut out = Vec::new();
    for r in crate::runtimes::ALL {
        let Some(measured) = r.state.iter().find_map(crate::runtimes::StateDir::measured) else {
            continue;
        };
        let Some(found) = r.commands.iter().find_map(|c| {
            std::env::split_paths(path)
                .map(|d| d.join(c))
                .find(|p| p.is_file())
        }) else {
            continue;
        };
        let installed = command_output(&found, &["--version"])
            .filter(|(ok, _)| *ok)
            .and_then(|(_, text)| text.lines().next().map(str::to_string))
            .unwrap_or_else(|| "(its --version failed)".into());
        let package = r.npm.map_or(String::new(), |p| format!(" ({p})"));
        if installed
            .split_whitespace()
            .any(|w| w.trim_start_matches('v') == measured)
        {
            out.push(pass(
                "agent versions",
                format!(
                    "{}{package}: {installed}, the release its state allowlist was measured with",
                    r.name
                ),
            ));
        } else {
            out.push(pass(
                "agent versions",
                format!(
                    "{}{package}: {installed} installed, its state allowlist measured with {measured} (docs/runtimes.md)",
                    r.name
                ),
            ));
        }
    }
    out
}
