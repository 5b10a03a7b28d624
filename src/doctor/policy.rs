//! `doctor`'s view of the image's policy: whether the system file locks it, whether a launch fails
//! closed, whether the audit trail can be written, and whether each shipping target answers.
//!
//! Guards against a fleet policy that is not what its author thinks: a lock or `fail_closed` that a
//! typo left out, a collector nobody can reach (records counted as dropped, silently to the team).

use super::{fail, not_applicable, pass, warn, Check};
use crate::host::HostEnv;

pub(super) fn check_policy(env: &HostEnv) -> Vec<Check> {
    let c = match crate::config::system_only(env) {
        Ok(c) => c,
        Err(e) => {
            return vec![fail(
                "policy",
                e.to_string(),
                "fix the line it names (docs/config.md)",
            )]
        }
    };
    let mut out = Vec::new();
    let file =
        crate::config::ConfigPaths::new(std::path::Path::new("/"), std::path::Path::new("/"), env)
            .system;
    out.push(match (c.system.locked, c.system.fail_closed) {
        (false, false) => not_applicable(
            "policy",
            format!("{} neither locks the policy nor fails closed (a fleet's image sets locked and fail_closed: docs/config.md)", file.display()),
        ),
        (locked, closed) => pass(
            "policy",
            format!(
                "{}:{}{}",
                file.display(),
                if locked { " locked (your file and the command line may only tighten)" } else { "" },
                if closed {
                    " fail_closed (a launch whose guard would be less than the policy does not start: the jail check above ran under it)"
                } else {
                    ""
                }
            ),
        ),
    });
    out.push(check_trail(env, c.system.fail_closed));
    for (line, reached) in c.audit.probe() {
        out.push(match reached {
            Ok(()) => pass("audit shipping", line),
            Err(e) => warn(
                "audit shipping",
                format!("{line}: not reachable now ({e}); what is not delivered is counted as ship_dropped in the trail"),
                "start the collector or fix [audit] in the system configuration",
            ),
        });
    }
    out
}

/// The audit directory can be written (made if missing, as the first record would).
fn check_trail(env: &HostEnv, fail_closed: bool) -> Check {
    let Ok(home) = env.home_dir() else {
        return not_applicable("audit trail", "no $HOME");
    };
    let dir = crate::audit::dir(&home, env);
    crate::audit::ensure(&dir);
    let probe = dir.join(".doctor-probe");
    let writable = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    match (writable, fail_closed) {
        (true, _) => pass(
            "audit trail",
            format!(
                "{} (`claude-sandbox audit verify` checks its chain)",
                dir.display()
            ),
        ),
        (false, true) => fail(
            "audit trail",
            format!(
                "{} cannot be written: with fail_closed no launch starts",
                dir.display()
            ),
            "make it writable by you (or set CLAUDE_SANDBOX_AUDIT_DIR)",
        ),
        (false, false) => warn(
            "audit trail",
            format!(
                "{} cannot be written: records are lost (counted once it can)",
                dir.display()
            ),
            "make it writable by you (or set CLAUDE_SANDBOX_AUDIT_DIR)",
        ),
    }
}
