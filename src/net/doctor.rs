//! `doctor`'s network check: which mode a launch here gets, whether a network namespace of its own
//! can be made, and what fails in `allowlist` mode by design.
//!
//! Guards against a surprise: a program that ignores the proxy variables fails with "no route" or a
//! name-resolution error in `allowlist` mode, which reads like a broken network unless it is said.

use super::Mode;
use crate::doctor::{Check, Mark};

const NAME: &str = "network";

fn check(mark: Mark, why: String, fix: Option<&str>) -> Check {
    Check {
        name: NAME,
        mark,
        why,
        fix: fix.map(String::from),
    }
}

pub(crate) fn check_network(env: &crate::host::HostEnv) -> Vec<Check> {
    let opts = crate::jail::launch::RunOptions {
        command: vec!["true".into()],
        ..Default::default()
    };
    let planned = crate::jail::launch::plan_input(&opts, "doctor", env).ok();
    let mode = planned
        .as_ref()
        .map_or(Mode::DEFAULT, |(_, c)| c.network.mode());
    let mut out = Vec::new();
    out.push(match mode {
        Mode::Host => check(
            Mark::Warn,
            "network mode `host`: the jail shares the container's network; egress is not filtered \
             and abstract unix sockets (X11, D-Bus, IDE IPC) are reachable"
                .into(),
            Some("[network] mode = \"allowlist\" in ~/.config/claude-sandbox/config.toml, or run --network allowlist (docs/network.md)"),
        ),
        Mode::Allowlist => check(
            Mark::Pass,
            format!(
                "network mode `allowlist`: egress only through the proxy at 127.0.0.1:{} to allowed \
                 names. Programs that ignore HTTP_PROXY/HTTPS_PROXY/ALL_PROXY (raw sockets, ping, \
                 direct DNS, some Go/Rust/Java clients) fail with \"no route\" or a resolution \
                 error: that is the block working, not a fault",
                super::PORT
            ),
            None,
        ),
        Mode::None => check(
            Mark::Pass,
            "network mode `none`: only the jail's own loopback".into(),
            None,
        ),
    });
    out.extend(upstream_check(env, mode));
    if mode == Mode::Allowlist {
        let net = planned
            .as_ref()
            .map(|(_, c)| c.network.clone())
            .unwrap_or_default();
        let home = planned
            .as_ref()
            .map(|(p, _)| p.home.clone())
            .unwrap_or_default();
        let ports =
            super::loopback::bridged(&net.loopback, &super::loopback::ides_for(&net, &home, env));
        out.push(loopback_check(&ports));
    }
    if mode != Mode::Host {
        out.push(namespace_works());
    }
    out
}

/// The container's loopback ports a launch here bridges (listed, and live IDEs' now).
fn loopback_check(ports: &[super::loopback::Bridged]) -> Check {
    let why = if ports.is_empty() {
        "container loopback: nothing reachable from the jail (list ports in [network] loopback; \
         live IDE lock files are bridged at launch)"
            .to_string()
    } else {
        let each: Vec<String> = ports
            .iter()
            .map(|b| format!("{} ({})", b.port, b.why))
            .collect();
        format!(
            "container loopback reachable from the jail, at the same port of its 127.0.0.1, and \
             nothing else: {}",
            each.join(", ")
        )
    };
    check(Mark::Pass, why, None)
}

/// The launcher's own proxy (`upstream`), which allowlist mode chains through: named with its
/// credentials masked; one it cannot chain through fails the check in allowlist mode (the launch
/// stops), warns otherwise.
fn upstream_check(env: &crate::host::HostEnv, mode: Mode) -> Option<Check> {
    match super::proxy::upstream_of(env) {
        Ok(u) => u.describe().map(|d| {
            check(
                Mark::Pass,
                format!(
                    "upstream proxy (this environment's HTTPS_PROXY/HTTP_PROXY): {d}; allowlist \
                     mode chains through it (CONNECT, TLS end to end), the jail never sees it"
                ),
                None,
            )
        }),
        Err(e) => Some(check(
            if mode == Mode::Allowlist {
                Mark::Fail
            } else {
                Mark::Warn
            },
            format!("upstream proxy: {e}"),
            Some("an http:// proxy URL in HTTPS_PROXY and HTTP_PROXY (docs/network.md, \"Chaining\")"),
        )),
    }
}

/// What to do where a jail with a network namespace of its own cannot start (the launch's error and
/// `doctor`'s check say the same).
pub(crate) const NO_NETNS_FIX: &str = "the network mode (`allowlist` by default) needs a network \
     namespace of its own, which this container refuses: allow network namespaces for user \
     namespaces (docs/network.md, \"Where the jail cannot have a network of its own\"), or choose \
     [network] mode = \"host\" in ~/.config/claude-sandbox/config.toml (egress unfiltered)";

/// Whether bwrap can make a user namespace here but not a network namespace in it: asked only
/// after a launch failed, to say which of the two the container refuses.
pub(crate) fn netns_refused(bwrap: &std::path::Path) -> bool {
    let trial = |net: bool| {
        let mut c = std::process::Command::new(bwrap);
        c.args(["--unshare-user", "--ro-bind", "/", "/"]);
        if net {
            c.arg("--unshare-net");
        }
        c.arg("true")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    trial(false) && !trial(true)
}

/// `run --network none -- true` in a throwaway workspace.
fn namespace_works() -> Check {
    let out = std::env::current_exe()
        .ok()
        .and_then(|exe| crate::doctor::trial_launch(&exe, "net", &[], &["--network", "none"]));
    let Some(out) = out else {
        return check(
            Mark::Fail,
            "cannot try a jail with its own network namespace (no binary or no /var/tmp)".into(),
            Some("make /var/tmp writable"),
        );
    };
    match out {
        Ok(o) if o.status.success() => check(
            Mark::Pass,
            "a jail with a network namespace of its own starts (--unshare-net)".into(),
            None,
        ),
        Ok(o) => check(
            Mark::Fail,
            format!(
                "`run --network none -- true` failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Some(NO_NETNS_FIX),
        ),
        Err(e) => check(Mark::Fail, e.to_string(), Some("reinstall claude-sandbox")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::HostEnv;

    #[test]
    fn the_upstream_is_named_masked_or_its_fault_said() {
        let env = HostEnv::of(&[("HTTPS_PROXY", "http://u:secret@proxy.corp:3128")]);
        let c = upstream_check(&env, Mode::Allowlist).unwrap();
        assert_eq!(c.mark, Mark::Pass);
        assert!(c.why.contains("http://***@proxy.corp:3128"), "{}", c.why);
        assert!(!c.why.contains("secret"), "{}", c.why);
        let env = HostEnv::of(&[("https_proxy", "socks5://proxy.corp:1080")]);
        assert_eq!(
            upstream_check(&env, Mode::Allowlist).unwrap().mark,
            Mark::Fail
        );
        assert_eq!(upstream_check(&env, Mode::Host).unwrap().mark, Mark::Warn);
        assert!(upstream_check(&HostEnv::of(&[]), Mode::Allowlist).is_none());
    }

    #[test]
    fn the_bridged_ports_are_named_with_their_reason() {
        let listed = [super::super::loopback::Entry::Text("db:5432".into())
            .parse()
            .unwrap()];
        let c = loopback_check(&super::super::loopback::bridged(&listed, &[]));
        assert!(
            c.why.contains("5432 ([network] loopback (db))"),
            "{}",
            c.why
        );
        assert!(loopback_check(&[]).why.contains("nothing reachable"));
    }
}
