//! The prompt-hook check: whether alerts will reach this person's prompt.
//!
//! Guards against a hook that silently never runs (another rc file replaced `PROMPT_COMMAND`), and
//! against the opposite mistake: calling that a failure where no prompt exists (a devcontainer's
//! postStartCommand, CI), which taught people to ignore doctor.

use super::{fail, not_applicable, pass, warn, Check};
use crate::host::{self, HostEnv};
use std::path::{Path, PathBuf};

/// The prompt hook doctor looks for; `CLAUDE_SANDBOX_PROFILE_HOOK` points it elsewhere (tests, a
/// `--sysconfdir` install).
fn profile_hook(env: &HostEnv) -> PathBuf {
    env.get(host::PROFILE_HOOK).map_or_else(
        || PathBuf::from(crate::jail::plan::PROFILE_HOOK),
        PathBuf::from,
    )
}

/// The login shell: `$SHELL`, else the passwd entry (a devcontainer's `postStartCommand` may run
/// without `$SHELL`).
fn login_shell(env: &HostEnv) -> String {
    match env.get_str(host::SHELL) {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => nix::unistd::User::from_uid(nix::unistd::getuid())
            .ok()
            .flatten()
            .map(|u| u.shell.display().to_string())
            .unwrap_or_default(),
    }
}

/// What the prompt-hook check says, decided from plain facts.
pub(crate) fn hook_verdict(
    installed: bool,
    interactive: bool,
    hook_var: Option<&str>,
    parent_pid: &str,
) -> Check {
    const NAME: &str = "prompt hook";
    match hook_var {
        // A process started by `docker exec` (`devcontainer exec`) has no parent in the container's
        // PID namespace: an empty parent is no shell, whatever the variable says.
        Some(v) if !parent_pid.is_empty() && v == parent_pid => pass(NAME, "active in this shell"),
        // The hook runs at an interactive prompt; from a script (a postStartCommand, CI, an
        // environment probe that exported the variable empty) there is nothing to check.
        _ if !interactive => not_applicable(
            NAME,
            if installed {
                "installed; not an interactive shell, so whether it runs at your prompt cannot be checked here (run doctor in a terminal)"
            } else {
                "not installed, and not an interactive shell (alerts show only with `claude-sandbox alerts`)"
            },
        ),
        Some("") => fail(NAME, "not active in this shell: loaded but it never ran (something later replaced PROMPT_COMMAND, your ~/.bashrc?), or an empty value inherited from another process", "source /etc/profile.d/claude-sandbox.sh at the end of your ~/.bashrc"),
        Some(_) => warn(NAME, "inherited from another shell, not active in this one", "check that /etc/bash.bashrc or /etc/zsh/zshrc sources /etc/profile.d/claude-sandbox.sh"),
        None if installed => fail(NAME, "installed but not loaded in this shell", "open a new terminal; check that /etc/bash.bashrc sources /etc/profile.d/claude-sandbox.sh"),
        None => warn(NAME, "not installed: alerts show only with `claude-sandbox alerts`", super::installer_command("")),
    }
}

pub(super) fn check_hook(env: &HostEnv) -> Vec<Check> {
    let mut out = Vec::new();
    let installed = profile_hook(env).exists();
    let shell = login_shell(env);
    let name = Path::new(&shell)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_string();
    if !matches!(name.as_str(), "bash" | "zsh") {
        out.push(warn(
            "prompt hook",
            format!("your login shell is {shell:?}: the prompt hook supports bash and zsh"),
            "use bash or zsh, or run `claude-sandbox alerts` yourself",
        ));
    }
    let parent = rustix::process::getppid()
        .map(|p| p.as_raw_nonzero().get().to_string())
        .unwrap_or_default();
    let interactive = rustix::termios::isatty(std::io::stdin());
    let var = env.get_str(host::PROMPT_HOOK);
    out.push(hook_verdict(installed, interactive, var, &parent));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::Mark;

    #[test]
    fn the_prompt_hook_is_not_applicable_outside_an_interactive_shell() {
        let v = |installed, interactive, var: Option<&str>| {
            hook_verdict(installed, interactive, var, "42").mark
        };
        // A postStartCommand: no terminal, the variable exported empty by an environment probe.
        assert_eq!(v(true, false, Some("")), Mark::NotApplicable);
        assert_eq!(v(true, false, None), Mark::NotApplicable);
        assert_eq!(v(false, false, Some("7")), Mark::NotApplicable);
        // In a terminal the same facts are failures.
        assert_eq!(v(true, true, Some("")), Mark::Fail);
        assert_eq!(v(true, true, None), Mark::Fail);
        assert_eq!(v(false, true, None), Mark::Warn);
        assert_eq!(v(true, true, Some("7")), Mark::Warn);
        assert_eq!(v(true, true, Some("42")), Mark::Pass);
        assert_eq!(v(true, false, Some("42")), Mark::Pass);
    }

    #[test]
    fn a_process_without_a_parent_in_its_namespace_has_no_active_hook() {
        // `devcontainer exec` after its environment probe exported the variable empty: getppid is 0.
        assert_eq!(
            hook_verdict(true, false, Some(""), "").mark,
            Mark::NotApplicable
        );
        assert_eq!(hook_verdict(true, true, Some(""), "").mark, Mark::Fail);
    }
}
