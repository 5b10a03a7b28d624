//! The filtering ssh agent: ssh from the jail without the keys' full power (docs/ssh.md).
//!
//! Guards against the jail using the human's ssh agent as the human: the real `$SSH_AUTH_SOCK`
//! stays masked; with `[ssh] allow` set, the launcher serves an agent of its own for the session
//! (`serve`, a process outside the jail), its socket bound read-only into the jail (`layout::SSH_DIR`)
//! and named by the jail's `$SSH_AUTH_SOCK`. It forwards to the real agent only the listing (the
//! allowed keys only), the `session-bind@openssh.com` extension, and signatures the policy allows
//! (`judge`): a login to an allowed host whose key the human's `known_hosts` holds (`known_hosts`),
//! on a connection the real agent verified as bound to that key, over that session's own request;
//! or a git commit signature when `sign_commits` is on. Adding, removing, locking and every other
//! request is refused without being forwarded; a refused signature is an `ssh-refused` alert.

pub(crate) mod judge;
pub(crate) mod known_hosts;
pub(crate) mod serve;
pub(crate) mod wire;

use crate::host::{self, HostEnv};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `[ssh]` of one configuration file, as written.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SshTable {
    pub allow: Option<Vec<String>>,
    pub keys: Option<Vec<String>>,
    pub sign_commits: Option<bool>,
}

/// `[ssh]` merged over the files.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SshConfig {
    /// The hosts the jail may log in to, as `known_hosts` names them (`known_hosts::normalize`).
    pub allow: Vec<String>,
    /// The keys, by fingerprint; `None`: every key the agent holds.
    pub keys: Option<Vec<String>>,
    pub sign_commits: bool,
}

/// Why a `[ssh]` table was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MergeError {
    Loosens(&'static str),
    BadHost(String),
    BadKey(String),
}

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MergeError::Loosens(k) => write!(f, "`ssh.{k}` loosens the policy"),
            MergeError::BadHost(h) => write!(
                f,
                "allow: {h:?} is not a host name as known_hosts writes it (`name` or \
                 `[name]:port`; patterns are not honoured)"
            ),
            MergeError::BadKey(k) => write!(
                f,
                "keys: {k:?} is not a key fingerprint as `ssh-keygen -lf` prints it (SHA256:...)"
            ),
        }
    }
}

/// Merge one file's `[ssh]` table; the workspace file may only tighten: no host, no commit
/// signing, and `keys` only narrows the list in force.
pub(crate) fn merge(c: &mut SshConfig, t: SshTable, workspace: bool) -> Result<(), MergeError> {
    if let Some(allow) = t.allow {
        if workspace && !allow.is_empty() {
            return Err(MergeError::Loosens("allow"));
        }
        for a in allow {
            let n = known_hosts::normalize(&a).ok_or(MergeError::BadHost(a))?;
            if !c.allow.contains(&n) {
                c.allow.push(n);
            }
        }
    }
    if let Some(keys) = t.keys {
        if let Some(bad) = keys.iter().find(|k| !is_fingerprint(k)) {
            return Err(MergeError::BadKey(bad.clone()));
        }
        c.keys = match (&c.keys, workspace) {
            (Some(now), true) => Some(keys.into_iter().filter(|k| now.contains(k)).collect()),
            _ if keys.is_empty() && !workspace => None,
            _ => Some(keys),
        };
    }
    if let Some(sign) = t.sign_commits {
        if workspace && sign && !c.sign_commits {
            return Err(MergeError::Loosens("sign_commits"));
        }
        c.sign_commits = sign;
    }
    Ok(())
}

fn is_fingerprint(k: &str) -> bool {
    k.strip_prefix("SHA256:").is_some_and(|b| {
        b.len() == 43
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
    })
}

/// The filter a launch runs, decided when planning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Filter {
    /// The session's directory of the socket, bound at `layout::SSH_DIR`.
    pub dir: PathBuf,
    /// The human's agent (`$SSH_AUTH_SOCK` outside).
    pub upstream: PathBuf,
    /// The allowed names, as configured (for `explain`).
    pub allow: Vec<String>,
    /// The `allow_ssh_agent` alias: every host `known_hosts` names exactly.
    pub every_host: bool,
    /// The allowed host keys found, one per name.
    pub host_keys: Vec<String>,
    pub keys: Option<Vec<String>>,
    pub sign_commits: bool,
    #[serde(skip)]
    pub(crate) policy: judge::Policy,
    #[serde(skip)]
    pub(crate) entries: Vec<known_hosts::Entry>,
}

/// The `known_hosts` files read (the human's and the system's).
fn known_hosts_files(home: &Path) -> [PathBuf; 2] {
    [
        home.join(".ssh/known_hosts"),
        PathBuf::from("/etc/ssh/ssh_known_hosts"),
    ]
}

/// The filter for this launch, if one is asked for and the human has an agent; what is worth
/// saying goes to `warnings`. `legacy`: `allow_ssh_agent = true`.
pub(crate) fn plan(
    ssh: &SshConfig,
    legacy: bool,
    env: &HostEnv,
    home: &Path,
    session_home: &Path,
    warnings: &mut Vec<String>,
) -> Option<Filter> {
    if legacy {
        warnings.push(
            "allow_ssh_agent is deprecated: it now runs the filtering ssh agent with every host \
             your known_hosts names, every key and commit signing; name them in [ssh] instead \
             (docs/ssh.md)"
                .into(),
        );
    }
    if ssh.allow.is_empty() && !legacy {
        return None;
    }
    let upstream = match env.get(host::SSH_AUTH_SOCK).map(PathBuf::from) {
        Some(p) if p.is_absolute() => p,
        _ => {
            warnings.push(
                "[ssh] is configured but $SSH_AUTH_SOCK is not set: the jail has no ssh agent"
                    .into(),
            );
            return None;
        }
    };
    if let Err(e) = std::os::unix::net::UnixStream::connect(&upstream) {
        warnings.push(format!(
            "[ssh] is configured but the ssh agent at {} does not answer ({e}): the jail has no \
             ssh agent",
            crate::escape::visible_path(&upstream)
        ));
        return None;
    }
    let files = known_hosts_files(home);
    let entries = known_hosts::read(&files.each_ref().map(PathBuf::as_path));
    let hosts = known_hosts::allowed(&entries, &ssh.allow, legacy);
    for a in &ssh.allow {
        if !hosts.iter().any(|h| &h.name == a) {
            warnings.push(format!(
                "[ssh] allow: {a} has no key in ~/.ssh/known_hosts or /etc/ssh/ssh_known_hosts: \
                 logins there are refused (connect once outside the jail to record it)"
            ));
        }
    }
    let host_keys = hosts
        .iter()
        .map(|h| format!("{} {}", h.name, judge::fingerprint(&h.blob)))
        .collect();
    Some(Filter {
        dir: crate::runtime_dir::SessionDir::of_home(session_home).ssh_agent(),
        upstream,
        allow: ssh.allow.clone(),
        every_host: legacy,
        host_keys,
        keys: ssh.keys.clone(),
        sign_commits: ssh.sign_commits || legacy,
        policy: judge::Policy {
            hosts,
            keys: ssh.keys.clone(),
            sign_commits: ssh.sign_commits || legacy,
        },
        entries,
    })
}

/// The jail's environment for `filter`.
pub(crate) fn jail_env() -> (String, String) {
    (
        host::SSH_AUTH_SOCK.into(),
        format!(
            "{}/{}",
            crate::jail::layout::SSH_DIR,
            crate::jail::layout::SSH_SOCKET
        ),
    )
}

/// `explain`'s and `doctor`'s lines for the ssh policy.
pub fn describe(filter: Option<&Filter>, ssh: &SshConfig, legacy: bool) -> Vec<String> {
    let Some(f) = filter else {
        return vec![if ssh.allow.is_empty() && !legacy {
            "ssh agent: none — $SSH_AUTH_SOCK is masked (set [ssh] allow to let the jail log in \
             to chosen hosts through a filter)"
                .to_string()
        } else {
            "ssh agent: none — [ssh] is configured but no agent answers at $SSH_AUTH_SOCK".into()
        }];
    };
    let hosts = if f.every_host {
        "every host your known_hosts names exactly (allow_ssh_agent)".to_string()
    } else {
        f.allow.join(", ")
    };
    let mut out = vec![
        format!(
            "ssh agent: filtered — logins to {hosts} only (on connections bound to the host's key: \
             OpenSSH 8.9+)"
        ),
        "  refused: changes to the agent, forwarding it further, every other signature".into(),
        format!(
            "  keys: {}",
            f.keys
                .as_ref()
                .map_or_else(|| "every key the agent holds".into(), |k| k.join(", "))
        ),
        format!(
            "  commit signing: {}",
            if f.sign_commits { "allowed" } else { "refused" }
        ),
    ];
    out.extend(f.host_keys.iter().map(|h| format!("  host key: {h}")));
    out.push(
        "  not covered: what the key may do on these hosts (a push to any repository it reaches \
         there); agents without session-bind get no login signature (docs/ssh.md)"
            .into(),
    );
    out
}

/// `doctor`'s check: what a launch here does with ssh-agent.
pub(crate) fn check_doctor(env: &HostEnv) -> Vec<crate::doctor::Check> {
    use crate::doctor::{Check, Mark};
    let opts = crate::jail::launch::RunOptions {
        command: vec!["true".into()],
        ..Default::default()
    };
    let Ok((input, config)) = crate::jail::launch::plan_input(&opts, "doctor", env) else {
        return Vec::new();
    };
    let mut warnings = Vec::new();
    let legacy = config.allow_ssh_agent;
    let f = plan(
        &config.ssh,
        legacy,
        env,
        &input.home,
        &input.session_home,
        &mut warnings,
    );
    let lines: Vec<String> = describe(f.as_ref(), &config.ssh, legacy)
        .iter()
        .map(|l| l.trim().to_string())
        .collect();
    let why = lines.join("; ");
    let why = why.strip_prefix("ssh agent: ").unwrap_or(&why).to_string();
    let mark = if warnings.is_empty() {
        Mark::Pass
    } else {
        Mark::Warn
    };
    let fix = (!warnings.is_empty()).then(|| warnings.join("; "));
    vec![Check {
        name: "ssh agent",
        mark,
        why: if f.is_some() {
            format!(
                "{why}. Logins need ssh and an agent of OpenSSH 8.9 or later (session-bind); \
                 older ones get no signature"
            )
        } else {
            why
        },
        fix,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    const FP: &str = "SHA256:lWjL0C3S5+B8ePwi/DFRh00bqCJl9Ng5J+uTx5VRZF0";
    const FP2: &str = "SHA256:2ZVS3ORjMcB2CdBuJzhNAFW4ULjqQgQKcwL4P7Jvf6U";

    fn table(allow: &[&str], keys: Option<&[&str]>, sign: Option<bool>) -> SshTable {
        let v = |s: &[&str]| s.iter().map(|x| (*x).to_string()).collect();
        SshTable {
            allow: Some(v(allow)),
            keys: keys.map(v),
            sign_commits: sign,
        }
    }

    #[test]
    fn the_workspace_may_only_tighten() {
        let mut c = SshConfig::default();
        merge(
            &mut c,
            table(&["GitHub.com", "[h]:2222"], Some(&[]), None),
            false,
        )
        .unwrap();
        assert_eq!(c.allow, ["github.com", "[h]:2222"]);
        assert_eq!(c.keys, None, "empty: every key");
        assert_eq!(
            merge(&mut c, table(&["x.org"], None, None), true),
            Err(MergeError::Loosens("allow"))
        );
        assert_eq!(
            merge(&mut c, table(&[], None, Some(true)), true),
            Err(MergeError::Loosens("sign_commits"))
        );
        merge(&mut c, table(&[], Some(&[FP]), Some(false)), true).unwrap();
        assert_eq!(c.keys, Some(vec![FP.to_string()]));
        // Narrowing a list never widens it: a key not in force stays out, and none left is none.
        merge(&mut c, table(&[], Some(&[FP2]), None), true).unwrap();
        assert_eq!(c.keys, Some(vec![]));
        merge(&mut c, table(&[], None, Some(true)), false).unwrap();
        merge(&mut c, table(&[], None, Some(false)), true).unwrap();
        assert!(!c.sign_commits);
    }

    #[test]
    fn hosts_and_keys_are_checked() {
        let mut c = SshConfig::default();
        assert!(matches!(
            merge(&mut c, table(&["*.github.com"], None, None), false),
            Err(MergeError::BadHost(_))
        ));
        assert!(matches!(
            merge(&mut c, table(&[], Some(&["MD5:aa"]), None), false),
            Err(MergeError::BadKey(_))
        ));
        assert!(is_fingerprint(FP) && !is_fingerprint("SHA256:short"));
    }

    #[test]
    fn no_filter_without_a_host_or_an_agent() {
        let t = tempfile::tempdir().unwrap();
        let mut w = Vec::new();
        let env = HostEnv::of(&[]);
        let c = SshConfig::default();
        assert!(plan(&c, false, &env, t.path(), &t.path().join("s/home"), &mut w).is_none());
        assert!(w.is_empty());
        let c = SshConfig {
            allow: vec!["no-such-host.invalid".into()],
            ..SshConfig::default()
        };
        assert!(plan(&c, false, &env, t.path(), &t.path().join("s/home"), &mut w).is_none());
        assert!(w[0].contains("$SSH_AUTH_SOCK is not set"), "{w:?}");
        let dead = t.path().join("dead.sock");
        let env = HostEnv::of(&[("SSH_AUTH_SOCK", dead.to_str().unwrap())]);
        assert!(plan(&c, false, &env, t.path(), &t.path().join("s/home"), &mut w).is_none());
        assert!(w[1].contains("does not answer"), "{w:?}");
        let live = t.path().join("live.sock");
        let _l = std::os::unix::net::UnixListener::bind(&live).unwrap();
        let env = HostEnv::of(&[("SSH_AUTH_SOCK", live.to_str().unwrap())]);
        let f = plan(&c, false, &env, t.path(), &t.path().join("s/home"), &mut w).unwrap();
        assert_eq!(f.dir, t.path().join("s/ssh"));
        assert!(w[2].contains("no-such-host.invalid has no key"), "{w:?}");
        assert!(describe(Some(&f), &c, false)[0].contains("logins to no-such-host.invalid only"));
        // The deprecated alias: every host known_hosts names exactly, every key, commit signing.
        std::fs::create_dir_all(t.path().join(".ssh")).unwrap();
        std::fs::write(
            t.path().join(".ssh/known_hosts"),
            "a.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEYAAAA\n\
             *.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKEYBBBB\n",
        )
        .unwrap();
        let mut w = Vec::new();
        let none = SshConfig::default();
        let f = plan(
            &none,
            true,
            &env,
            t.path(),
            &t.path().join("s/home"),
            &mut w,
        )
        .unwrap();
        assert!(w[0].contains("allow_ssh_agent is deprecated"), "{w:?}");
        // (A system /etc/ssh/ssh_known_hosts may add its own.)
        let hosts = &f.policy.hosts;
        assert!(hosts.iter().any(|h| h.name == "a.example"), "{hosts:?}");
        assert!(!hosts.iter().any(|h| h.name.contains('*')), "{hosts:?}");
        assert!(f.policy.sign_commits && f.policy.keys.is_none());
        assert!(describe(Some(&f), &none, true)[0].contains("every host your known_hosts names"));
    }
}
