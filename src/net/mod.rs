//! Network: the jail's own network namespace and the per-domain egress allowlist.
//!
//! Guards against the agent sending what it can read to any host, and against the container's
//! abstract unix sockets (X11, D-Bus, IDE and tool IPC), which live in the network namespace: in
//! `none` and `allowlist` modes the jail has a namespace of its own with only a loopback. In
//! `allowlist` mode the only way out is a unix socket bound into the jail (`bridge`) that leads to a
//! proxy in the launcher (`proxy`), which decides on the requested host name and on the address it
//! resolves (`pattern`). Clients that ignore the proxy variables fail closed (no route); Node's
//! `fetch` on releases without `NODE_USE_ENV_PROXY` is sent to the proxy by a preload
//! (`node_proxy.cjs`) rather than left failing.

pub(crate) mod allow;
pub(crate) mod bridge;
pub(crate) mod doctor;
pub(crate) use doctor::{netns_refused, NO_NETNS_FIX};
pub(crate) mod error;
pub(crate) mod loopback;
pub(crate) mod pattern;
pub(crate) mod proxy;
pub(crate) mod upstream;

use crate::jail::layout;
use serde::Serialize;

/// How the jail reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The container's network, as outside the jail (abstract unix sockets reachable too).
    Host,
    /// Own network namespace; egress only through the proxy, to allowed names.
    Allowlist,
    /// Own network namespace with only a loopback.
    None,
}

impl Mode {
    /// The mode when no configuration file and no `--network` names one (see docs/network.md).
    pub const DEFAULT: Mode = Mode::Allowlist;

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "host" => Some(Mode::Host),
            "allowlist" => Some(Mode::Allowlist),
            "none" => Some(Mode::None),
            _ => None,
        }
    }

    /// Whether bwrap gives the jail a network namespace of its own.
    pub fn unshares(self) -> bool {
        self != Mode::Host
    }
}

/// The default allow list: the agents' own APIs and sign-in (`runtimes`: each runtime's `hosts`),
/// then the common package registries. Every entry is also a way out for data (an attacker's API
/// key, a package upload): `deny` removes any of them.
pub fn default_allow() -> impl Iterator<Item = &'static str> {
    crate::runtimes::ALL
        .iter()
        .flat_map(|r| r.hosts.iter().copied())
        .chain(REGISTRIES.iter().copied())
}

/// Package registries and git hosts for dependencies (in the default allow list).
const REGISTRIES: &[&str] = &[
    // npm, PyPI, crates.io, Go modules
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    "proxy.golang.org",
    "sum.golang.org",
    // git over https/ssh for dependencies
    "github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
];

/// `[network]` of one configuration file, as written (`config` reads the file, `merge` merges this):
/// a new key of the table is a field here, and nothing in `config`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetTable {
    pub mode: Option<String>,
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
    pub loopback: Option<Vec<loopback::Entry>>,
    pub ide: Option<bool>,
}

/// `[network]` in the configuration, merged over the files and the command line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NetConfig {
    /// `None`: the default (`Mode::DEFAULT`).
    pub mode: Option<Mode>,
    /// Added to `default_allow()` (system and user files, `--allow-domain`).
    pub allow: Vec<String>,
    /// Wins over every allow entry, default ones included.
    pub deny: Vec<String>,
    /// Ports of the container's loopback bridged into the jail's (system and user files).
    pub loopback: Vec<loopback::Listed>,
    /// `[network] ide = false`: live IDE integrations are not bridged (their tools act outside
    /// the jail: docs/network.md, "IDE integrations").
    pub ide_off: bool,
}

impl NetConfig {
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::DEFAULT)
    }

    /// The resolved network policy of a launch.
    pub fn policy(&self) -> NetPolicy {
        let mode = self.mode();
        let mut allow: Vec<String> = Vec::new();
        if mode == Mode::Allowlist {
            allow = default_allow().map(str::to_string).collect();
            for a in &self.allow {
                if !allow.contains(a) {
                    allow.push(a.clone());
                }
            }
        }
        NetPolicy {
            mode,
            allow,
            deny: if mode == Mode::Allowlist {
                self.deny.clone()
            } else {
                Vec::new()
            },
            upstream: None,
            loopback: if mode == Mode::Allowlist {
                loopback::bridged(&self.loopback, &[])
            } else {
                Vec::new()
            },
            inject: Vec::new(),
        }
    }
}

/// The network part of a `Policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetPolicy {
    pub mode: Mode,
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// The launcher's own proxy the allowlist proxy chains through, described with its
    /// credentials masked (`upstream`); set from the launcher's environment when planning.
    pub upstream: Option<String>,
    /// Allowlist mode: the container's loopback ports the jail reaches, each on the same port of
    /// its own loopback (the listed ones, then the live IDEs' found when planning).
    pub loopback: Vec<loopback::Bridged>,
    /// `[secrets] inject`: the credentials the proxy puts into requests to their hosts (never
    /// shown: `explain` names the hosts from the config).
    #[serde(skip)]
    pub inject: Vec<crate::secrets::inject::Credential>,
}

impl Default for NetPolicy {
    fn default() -> Self {
        NetPolicy {
            mode: Mode::Host,
            allow: Vec::new(),
            deny: Vec::new(),
            upstream: None,
            loopback: Vec::new(),
            inject: Vec::new(),
        }
    }
}

/// `explain`'s lines for the network policy; `list` joins a list as `explain` does (a few items
/// and a count by default, every one with `--full`).
pub fn describe(p: &NetPolicy, list: impl Fn(&[String]) -> String) -> Vec<String> {
    let mut out = vec![match p.mode {
        Mode::Host => {
            "Network: host — the container's network; egress is not filtered and abstract \
                       unix sockets are reachable (set [network] mode = \"allowlist\" or \"none\")"
                .to_string()
        }
        Mode::None => {
            "Network: none — a network namespace of its own with only a loopback".to_string()
        }
        Mode::Allowlist => format!(
            "Network: allowlist — out only through the proxy at 127.0.0.1:{PORT} (the *_PROXY \
             variables), to these names; internal addresses refused"
        ),
    }];
    if p.mode == Mode::Allowlist {
        out.push(format!("  allow: {}", list(&p.allow)));
        if !p.deny.is_empty() {
            out.push(format!("  deny (wins): {}", list(&p.deny)));
        }
        // Said only when there is one: direct connections are the ordinary case.
        if let Some(u) = &p.upstream {
            out.push(format!(
                "  upstream proxy (the launcher's HTTPS_PROXY/HTTP_PROXY): {u}"
            ));
        }
        out.extend(loopback_lines(&p.loopback));
    }
    out
}

/// The bridged loopback ports, one line each (`explain`, `doctor`).
pub(crate) fn loopback_lines(ports: &[loopback::Bridged]) -> Vec<String> {
    if ports.is_empty() {
        return vec![
            "  container loopback: nothing reachable (list ports in [network] loopback)".into(),
        ];
    }
    let mut out = vec![
        "  container loopback reachable at the same port of the jail's 127.0.0.1 (nothing else):"
            .to_string(),
    ];
    out.extend(ports.iter().map(|b| format!("    {}: {}", b.port, b.why)));
    out
}

/// The loopback port inside the jail where the bridge serves both HTTP and SOCKS5 (the jail has a
/// namespace of its own, so no port of the container is taken).
pub const PORT: u16 = 3128;

/// The preload that sends Node's `fetch` through the proxy where Node does not read the proxy
/// variables itself (docs/network.md, "Node"); written into the proxy's directory at launch.
pub(crate) const NODE_PRELOAD: &str = include_str!("node_proxy.cjs");
/// Its file name in that directory (`layout::NET_DIR` in the jail).
pub(crate) const NODE_PRELOAD_FILE: &str = "node-proxy.cjs";

/// The environment that points every common client at the proxy (allowlist mode);
/// `node_options`: the launcher's `NODE_OPTIONS`, kept before the preload's `--require`.
pub fn proxy_env(hook_bin: Option<&str>, node_options: Option<&str>) -> Vec<(String, String)> {
    let http = format!("http://127.0.0.1:{PORT}");
    let socks = format!("socks5h://127.0.0.1:{PORT}");
    let mut env = Vec::new();
    for (k, v) in [
        ("HTTP_PROXY", http.as_str()),
        ("HTTPS_PROXY", http.as_str()),
        ("ALL_PROXY", socks.as_str()),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
    ] {
        env.push((k.to_string(), v.to_string()));
        env.push((k.to_ascii_lowercase(), v.to_string()));
    }
    env.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
    let preload = format!("--require {}/{NODE_PRELOAD_FILE}", layout::NET_DIR);
    env.push((
        "NODE_OPTIONS".into(),
        match node_options.map(str::trim).filter(|o| !o.is_empty()) {
            Some(o) => format!("{o} {preload}"),
            None => preload,
        },
    ));
    env.push((
        crate::host::NET_BRIDGE.into(),
        format!("{}/{}", layout::NET_DIR, layout::NET_SOCKET),
    ));
    if let Some(bin) = hook_bin {
        env.push((
            "GIT_SSH_COMMAND".into(),
            format!("ssh -o ProxyCommand='{bin} {} %h %p'", bridge::CONNECT),
        ));
    }
    env
}

/// Merge one file's `[network]` table. The workspace file (and the user's when the system file
/// locks the policy) may only tighten: a stricter mode, more deny entries. Returns the key that
/// would loosen the policy, for the caller's error.
pub(crate) fn merge(
    net: &mut NetConfig,
    table: NetTable,
    workspace: bool,
) -> Result<(), MergeError> {
    let NetTable {
        mode,
        allow,
        deny,
        loopback,
        ide,
    } = table;
    if let Some(on) = ide {
        // Turning the IDE bridge back on loosens what an earlier file turned off.
        if workspace && on && net.ide_off {
            return Err(MergeError::Loosens("ide"));
        }
        net.ide_off = !on;
    }
    if let Some(m) = mode.as_deref() {
        let m = Mode::parse(m).ok_or(MergeError::BadMode)?;
        if workspace && m < net.mode() {
            return Err(MergeError::Loosens("mode"));
        }
        net.mode = Some(m);
    }
    if let Some(allow) = allow {
        if workspace && !allow.is_empty() {
            return Err(MergeError::Loosens("allow"));
        }
        for a in &allow {
            pattern::Pattern::parse(a).map_err(MergeError::BadPattern)?;
        }
        net.allow.extend(allow);
    }
    for d in deny.unwrap_or_default() {
        pattern::Pattern::parse(&d).map_err(MergeError::BadPattern)?;
        net.deny.push(d);
    }
    if let Some(ports) = loopback {
        // Each listed port is a way to a service outside: only the human's own files open one.
        if workspace && !ports.is_empty() {
            return Err(MergeError::Loosens("loopback"));
        }
        for e in &ports {
            net.loopback
                .push(e.parse().map_err(MergeError::BadLoopback)?);
        }
    }
    Ok(())
}

/// `run --network MODE --allow-domain D`: the human's command line may loosen.
pub(crate) fn apply_cli(
    net: &mut NetConfig,
    mode: Option<Mode>,
    allow: &[String],
    locked: bool,
) -> crate::error::Result<()> {
    let refused = |flag: &str| crate::error::Error::Usage(crate::config::locked_refusal(flag));
    if let Some(m) = mode {
        if locked && m < net.mode() {
            return Err(refused("--network"));
        }
        net.mode = Some(m);
    }
    if locked && !allow.is_empty() {
        return Err(refused("--allow-domain"));
    }
    for d in allow {
        pattern::Pattern::parse(d)
            .map_err(|e| crate::error::Error::Usage(format!("--allow-domain: {e}")))?;
        net.allow.push(d.clone());
    }
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MergeError {
    BadMode,
    Loosens(&'static str),
    BadPattern(error::BadPattern),
    BadLoopback(loopback::BadEntry),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(
        mode: Option<&str>,
        allow: Option<Vec<String>>,
        deny: Option<Vec<String>>,
    ) -> NetTable {
        NetTable {
            mode: mode.map(str::to_string),
            allow,
            deny,
            loopback: None,
            ide: None,
        }
    }

    #[test]
    fn the_workspace_may_only_tighten() {
        let mut n = NetConfig::default();
        merge(&mut n, table(Some("allowlist"), None, None), true).unwrap();
        assert_eq!(n.mode(), Mode::Allowlist);
        assert_eq!(
            merge(&mut n, table(Some("host"), None, None), true),
            Err(MergeError::Loosens("mode"))
        );
        assert_eq!(
            merge(&mut n, table(None, Some(vec!["x.com".into()]), None), true),
            Err(MergeError::Loosens("allow"))
        );
        merge(
            &mut n,
            table(Some("none"), None, Some(vec!["*.x.com".into()])),
            true,
        )
        .unwrap();
        assert_eq!((n.mode(), n.deny.len()), (Mode::None, 1));
        merge(
            &mut n,
            table(Some("host"), Some(vec!["x.com".into()]), None),
            false,
        )
        .unwrap();
        assert_eq!(n.mode(), Mode::Host);
        assert_eq!(
            merge(&mut n, table(Some("open"), None, None), false),
            Err(MergeError::BadMode)
        );
        assert!(matches!(
            merge(
                &mut n,
                table(None, Some(vec!["http://x".into()]), None),
                false
            ),
            Err(MergeError::BadPattern(_))
        ));
    }

    #[test]
    fn loopback_ports_come_from_the_humans_files_only() {
        let ports = |v: Vec<loopback::Entry>| NetTable {
            loopback: Some(v),
            ..NetTable::default()
        };
        let mut n = NetConfig::default();
        merge(
            &mut n,
            ports(vec![
                loopback::Entry::Port(5432),
                loopback::Entry::Text("mcp:8931".into()),
            ]),
            false,
        )
        .unwrap();
        assert_eq!(n.loopback.len(), 2);
        assert_eq!(
            merge(&mut n, ports(vec![loopback::Entry::Port(6379)]), true),
            Err(MergeError::Loosens("loopback"))
        );
        merge(&mut n, ports(vec![]), true).unwrap();
        assert!(matches!(
            merge(&mut n, ports(vec![loopback::Entry::Port(0)]), false),
            Err(MergeError::BadLoopback(_))
        ));
        assert_eq!(n.loopback.len(), 2);
        // Bridged in allowlist mode only: `none` means none, `host` reaches everything anyway.
        for (mode, want) in [(Mode::Allowlist, 2), (Mode::None, 0), (Mode::Host, 0)] {
            n.mode = Some(mode);
            assert_eq!(n.policy().loopback.len(), want, "{mode:?}");
        }
    }

    #[test]
    fn ide_bridging_is_on_until_a_file_turns_it_off_and_the_workspace_cannot_turn_it_back() {
        let ide = |on| NetTable {
            ide: Some(on),
            ..NetTable::default()
        };
        let mut n = NetConfig::default();
        assert!(!n.ide_off);
        merge(&mut n, ide(true), true).unwrap();
        merge(&mut n, ide(false), true).unwrap();
        assert!(n.ide_off, "the workspace may turn it off");
        assert_eq!(
            merge(&mut n, ide(true), true),
            Err(MergeError::Loosens("ide"))
        );
        merge(&mut n, ide(true), false).unwrap();
        assert!(!n.ide_off, "your own file may turn it on again");
        // Off: no IDE is looked for, even one serving now.
        let t = tempfile::tempdir().unwrap();
        let lock = t.path().join(".claude/ide");
        std::fs::create_dir_all(&lock).unwrap();
        std::fs::write(
            lock.join("40001.lock"),
            format!(r#"{{"pid":{}}}"#, std::process::id()),
        )
        .unwrap();
        let env = crate::host::HostEnv::of(&[("TMPDIR", t.path().to_str().unwrap())]);
        assert_eq!(loopback::ides_for(&n, t.path(), &env).len(), 1);
        n.ide_off = true;
        assert!(loopback::ides_for(&n, t.path(), &env).is_empty());
    }

    #[test]
    fn the_policy_lists_defaults_then_additions_and_only_in_allowlist_mode() {
        let n = NetConfig {
            mode: Some(Mode::Allowlist),
            allow: vec!["api.example.com".into(), "github.com".into()],
            deny: vec!["github.com".into()],
            loopback: vec![loopback::Entry::Port(5432).parse().unwrap()],
            ide_off: false,
        };
        let p = n.policy();
        assert_eq!(p.allow.len(), default_allow().count() + 1);
        assert_eq!(p.allow.last().unwrap(), "api.example.com");
        assert_eq!(p.deny, vec!["github.com".to_string()]);
        assert_eq!(
            p.loopback.iter().map(|b| b.port).collect::<Vec<_>>(),
            [5432]
        );
        let p = NetConfig {
            mode: Some(Mode::None),
            ..n
        }
        .policy();
        assert!(p.allow.is_empty() && p.deny.is_empty() && p.loopback.is_empty());
        for d in default_allow() {
            pattern::Pattern::parse(d).unwrap();
        }
    }

    #[test]
    fn every_client_variable_is_set_in_both_cases() {
        let env = proxy_env(Some("/b/cs"), Some("--max-old-space-size=512"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("https_proxy"), Some("http://127.0.0.1:3128"));
        assert_eq!(get("ALL_PROXY"), Some("socks5h://127.0.0.1:3128"));
        assert_eq!(get("no_proxy"), get("NO_PROXY"));
        assert_eq!(get("NODE_USE_ENV_PROXY"), Some("1"));
        assert_eq!(
            get("NODE_OPTIONS"),
            Some("--max-old-space-size=512 --require /tmp/.claude-sandbox-net/node-proxy.cjs")
        );
        let alone = proxy_env(None, None);
        assert!(alone.contains(&(
            "NODE_OPTIONS".into(),
            "--require /tmp/.claude-sandbox-net/node-proxy.cjs".into()
        )));
        assert_eq!(
            get("GIT_SSH_COMMAND"),
            Some("ssh -o ProxyCommand='/b/cs __connect %h %p'")
        );
    }
}
