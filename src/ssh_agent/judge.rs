//! **Pure**: what the filter does with one message from the jail (`judge`), and what a connection
//! has learnt so far (`ConnState`). No I/O: the serving loop forwards, filters or refuses as told.
//!
//! Guards against the jail using the human's keys beyond the policy: a signature for user
//! authentication only on a connection whose session the real agent verified as bound to an
//! allowed host's key, and only over that session's own userauth request; a commit signature only
//! over an SSHSIG blob of git's namespace, when allowed; never on a connection that forwards the
//! agent further; never with a key off the list; nothing that changes the agent.

use super::wire::{self, Reader, Request};

/// An allowed host's key, as `known_hosts` gave it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct HostKey {
    pub blob: Vec<u8>,
    /// The `[ssh] allow` entry it was found for (for messages).
    pub name: String,
}

/// The resolved policy of the filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Policy {
    /// The host keys a connection may be bound to for user authentication.
    pub hosts: Vec<HostKey>,
    /// The keys the jail may see and use, by fingerprint (`SHA256:...`); `None`: every key.
    pub keys: Option<Vec<String>>,
    /// Whether SSHSIG signatures in git's namespace are allowed (`git commit -S`).
    pub sign_commits: bool,
}

impl Policy {
    pub(crate) fn key_allowed(&self, blob: &[u8]) -> bool {
        self.keys
            .as_ref()
            .is_none_or(|keys| keys.contains(&fingerprint(blob)))
    }
}

/// What one connection from the jail has established.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConnState {
    /// The last binding the real agent accepted: (host key, session identifier).
    pub bound: Option<(Vec<u8>, Vec<u8>)>,
    /// A bind asked for forwarding the agent further: no signature on this connection.
    pub forwarding: bool,
}

impl ConnState {
    /// A `session-bind` was read; `verified`: the real agent answered success.
    pub(crate) fn bind(&mut self, host_key: &[u8], session_id: &[u8], fwd: bool, verified: bool) {
        // Recorded whatever the agent answered: a refused bind cannot lift the refusal.
        self.forwarding |= fwd;
        if verified {
            self.bound = Some((host_key.to_vec(), session_id.to_vec()));
        }
    }
}

/// What to do with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Forward it and pass the answer back (a sign request allowed).
    Forward,
    /// Forward it and answer with the allowed identities only.
    Identities,
    /// Forward it, answer as the agent did, and record the binding on success (`ConnState::bind`).
    Bind,
    /// Answer `SSH_AGENT_FAILURE` without forwarding.
    Refuse(Refusal),
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A request that changes the agent or is not a query (add, remove, lock, smartcard, unknown).
    Change(u8),
    /// An extension other than `session-bind`.
    Extension(Vec<u8>),
    /// The connection forwards the agent further (a bind with `is_forwarding`).
    Forwarding,
    /// A key off `[ssh] keys`.
    Key(String),
    /// A userauth signature on a connection no verified binding names.
    Unbound,
    /// The connection is bound to a host key no allowed host has.
    Host(String),
    /// The data does not begin with the bound session's identifier and a userauth request.
    NotThisSession,
    /// An SSHSIG blob with `sign_commits` off, or of another namespace.
    Sshsig(Vec<u8>),
}

impl Refusal {
    /// One alert per session for each of these (the alert's fingerprint).
    pub(crate) fn class(&self) -> &'static str {
        match self {
            Refusal::Change(_) => "change",
            Refusal::Extension(_) => "extension",
            Refusal::Forwarding => "forwarding",
            Refusal::Key(_) => "key",
            Refusal::Unbound => "unbound",
            Refusal::Host(_) => "host",
            Refusal::NotThisSession => "session",
            Refusal::Sshsig(_) => "sshsig",
        }
    }

    /// Whether this is an attempt on the agent itself rather than a use the policy leaves out.
    pub(crate) fn is_attempt(&self) -> bool {
        matches!(self, Refusal::Change(_) | Refusal::Forwarding)
    }

    /// What was refused, for the log and the alert; the jail's bytes escaped.
    pub(crate) fn describe(&self) -> String {
        let vis = crate::escape::visible_bytes;
        match self {
            Refusal::Change(t) => format!(
                "a request of type {t} ({}) to the agent, which the filter never forwards",
                type_name(*t)
            ),
            Refusal::Extension(n) => format!("the agent extension {}", vis(n)),
            Refusal::Forwarding => "a signature on a connection that forwards the agent further \
                 (ssh -A from the jail)"
                .to_string(),
            Refusal::Key(fp) => format!("a signature with the key {fp}, not in [ssh] keys"),
            Refusal::Unbound => "a signature for a connection the agent could not bind to a \
                 host key (an ssh older than 8.9, or an agent without session-bind)"
                .to_string(),
            Refusal::Host(h) => format!("a signature to log in to {h}, not in [ssh] allow"),
            Refusal::NotThisSession => {
                "a signature over data that is not this connection's own login".to_string()
            }
            Refusal::Sshsig(ns) if ns == b"git" => {
                "a git commit or tag signature ([ssh] sign_commits is off)".to_string()
            }
            Refusal::Sshsig(ns) => format!("an ssh signature in the namespace {}", vis(ns)),
        }
    }
}

fn type_name(t: u8) -> &'static str {
    match t {
        17 | 25 => "add identity",
        18 => "remove identity",
        19 => "remove all identities",
        20 | 26 => "add smartcard key",
        21 => "remove smartcard key",
        22 => "lock",
        23 => "unlock",
        _ => "not a query the filter knows",
    }
}

/// The verdict on `req` under `policy` for a connection in `state`. `host_name` names a host key
/// that no allowed host has, for the refusal (`known_hosts`).
pub(crate) fn judge(
    policy: &Policy,
    state: &ConnState,
    req: &Request<'_>,
    host_name: &dyn Fn(&[u8]) -> String,
) -> Verdict {
    match req {
        Request::Identities => Verdict::Identities,
        Request::Bind { .. } => Verdict::Bind,
        Request::Extension(name) => Verdict::Refuse(Refusal::Extension(name.to_vec())),
        Request::Other(t) => Verdict::Refuse(Refusal::Change(*t)),
        Request::Sign { key, data, .. } => match sign(policy, state, key, data, host_name) {
            Ok(()) => Verdict::Forward,
            Err(r) => Verdict::Refuse(r),
        },
    }
}

fn sign(
    policy: &Policy,
    state: &ConnState,
    key: &[u8],
    data: &[u8],
    host_name: &dyn Fn(&[u8]) -> String,
) -> Result<(), Refusal> {
    if state.forwarding {
        return Err(Refusal::Forwarding);
    }
    if !policy.key_allowed(key) {
        return Err(Refusal::Key(fingerprint(key)));
    }
    if let Some(rest) = data.strip_prefix(wire::SSHSIG_MAGIC) {
        let namespace = Reader::new(rest).string().unwrap_or_default();
        return if namespace == b"git" && policy.sign_commits {
            Ok(())
        } else {
            Err(Refusal::Sshsig(namespace.to_vec()))
        };
    }
    let Some((host_key, session_id)) = &state.bound else {
        return Err(Refusal::Unbound);
    };
    if !policy.hosts.iter().any(|h| &h.blob == host_key) {
        return Err(Refusal::Host(host_name(host_key)));
    }
    let mut r = Reader::new(data);
    if r.string() != Some(session_id.as_slice()) || r.byte() != Some(wire::USERAUTH_REQUEST) {
        return Err(Refusal::NotThisSession);
    }
    Ok(())
}

/// A key's fingerprint as `ssh-keygen -lf` prints it: `SHA256:` and the unpadded base64 of the
/// SHA-256 of its blob.
pub(crate) fn fingerprint(blob: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(blob);
    let b64 = crate::net::upstream::base64(&digest);
    format!("SHA256:{}", b64.trim_end_matches('='))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::put_string;

    const KEY: &[u8] = b"\0\0\0\x0bssh-ed25519\0\0\0\x20the-user-key-32-bytes-long......";
    const OTHER_KEY: &[u8] = b"\0\0\0\x0bssh-ed25519\0\0\0\x20another-key-32-bytes-long......";
    const GITHUB: &[u8] = b"github-host-key";
    const EVIL: &[u8] = b"evil-host-key";

    fn policy() -> Policy {
        Policy {
            hosts: vec![HostKey {
                blob: GITHUB.to_vec(),
                name: "github.com".into(),
            }],
            keys: None,
            sign_commits: false,
        }
    }

    fn userauth(sid: &[u8]) -> Vec<u8> {
        let mut d = Vec::new();
        put_string(&mut d, sid);
        d.push(wire::USERAUTH_REQUEST);
        put_string(&mut d, b"git");
        d
    }

    fn sshsig(ns: &[u8]) -> Vec<u8> {
        let mut d = wire::SSHSIG_MAGIC.to_vec();
        put_string(&mut d, ns);
        d
    }

    fn verdict(p: &Policy, s: &ConnState, key: &[u8], data: &[u8]) -> Verdict {
        let req = Request::Sign {
            key,
            data,
            flags: 0,
        };
        judge(p, s, &req, &|_| "elsewhere".into())
    }

    fn bound(host: &[u8], sid: &[u8]) -> ConnState {
        let mut s = ConnState::default();
        s.bind(host, sid, false, true);
        s
    }

    #[test]
    fn a_login_signature_needs_a_verified_binding_to_an_allowed_host_and_its_own_session() {
        let p = policy();
        let ok = bound(GITHUB, b"sid-1");
        assert_eq!(verdict(&p, &ok, KEY, &userauth(b"sid-1")), Verdict::Forward);
        // Another session's login, or arbitrary data, on the same connection.
        let not_this = Verdict::Refuse(Refusal::NotThisSession);
        assert_eq!(verdict(&p, &ok, KEY, &userauth(b"sid-2")), not_this);
        assert_eq!(verdict(&p, &ok, KEY, b"anything at all"), not_this);
        let mut no_msg = Vec::new();
        put_string(&mut no_msg, b"sid-1");
        assert_eq!(verdict(&p, &ok, KEY, &no_msg), not_this);
        // No binding, or one the agent did not verify.
        let none = ConnState::default();
        let unbound = Verdict::Refuse(Refusal::Unbound);
        assert_eq!(verdict(&p, &none, KEY, &userauth(b"sid-1")), unbound);
        let mut failed = ConnState::default();
        failed.bind(GITHUB, b"sid-1", false, false);
        assert_eq!(verdict(&p, &failed, KEY, &userauth(b"sid-1")), unbound);
        // Bound to a host that is not allowed: named.
        let evil = bound(EVIL, b"sid-1");
        assert_eq!(
            verdict(&p, &evil, KEY, &userauth(b"sid-1")),
            Verdict::Refuse(Refusal::Host("elsewhere".into()))
        );
        // The last verified bind counts.
        let mut rebound = bound(GITHUB, b"sid-1");
        rebound.bind(EVIL, b"sid-2", false, true);
        assert!(matches!(
            verdict(&p, &rebound, KEY, &userauth(b"sid-2")),
            Verdict::Refuse(Refusal::Host(_))
        ));
    }

    #[test]
    fn a_forwarding_bind_refuses_every_later_signature_even_if_the_agent_refused_it() {
        let mut p = policy();
        p.sign_commits = true;
        let mut s = bound(GITHUB, b"sid-1");
        s.bind(GITHUB, b"sid-2", true, false);
        assert!(s.forwarding);
        for data in [userauth(b"sid-1"), userauth(b"sid-2"), sshsig(b"git")] {
            assert_eq!(
                verdict(&p, &s, KEY, &data),
                Verdict::Refuse(Refusal::Forwarding)
            );
        }
        let mut s = bound(GITHUB, b"sid-1");
        s.bind(GITHUB, b"sid-3", true, true);
        assert_eq!(
            verdict(&p, &s, KEY, &userauth(b"sid-3")),
            Verdict::Refuse(Refusal::Forwarding)
        );
        assert!(Refusal::Forwarding.is_attempt());
    }

    #[test]
    fn keys_off_the_list_are_refused_by_fingerprint() {
        let mut p = policy();
        p.keys = Some(vec![fingerprint(KEY)]);
        let s = bound(GITHUB, b"sid");
        assert_eq!(verdict(&p, &s, KEY, &userauth(b"sid")), Verdict::Forward);
        assert_eq!(
            verdict(&p, &s, OTHER_KEY, &userauth(b"sid")),
            Verdict::Refuse(Refusal::Key(fingerprint(OTHER_KEY)))
        );
        assert!(p.key_allowed(KEY) && !p.key_allowed(OTHER_KEY));
        p.keys = None;
        assert!(p.key_allowed(OTHER_KEY));
    }

    #[test]
    fn commit_signatures_only_in_gits_namespace_and_only_when_allowed() {
        let mut p = policy();
        let s = ConnState::default();
        assert_eq!(
            verdict(&p, &s, KEY, &sshsig(b"git")),
            Verdict::Refuse(Refusal::Sshsig(b"git".to_vec()))
        );
        p.sign_commits = true;
        assert_eq!(verdict(&p, &s, KEY, &sshsig(b"git")), Verdict::Forward);
        assert_eq!(
            verdict(&p, &s, KEY, &sshsig(b"file")),
            Verdict::Refuse(Refusal::Sshsig(b"file".to_vec()))
        );
        // A truncated blob has no namespace.
        assert!(matches!(
            verdict(&p, &s, KEY, b"SSHSIG\0\0"),
            Verdict::Refuse(Refusal::Sshsig(_))
        ));
    }

    #[test]
    fn everything_else_is_refused_and_the_jails_bytes_are_escaped() {
        let p = policy();
        let s = ConnState::default();
        let name = |_: &[u8]| String::new();
        for t in [17u8, 18, 19, 20, 21, 22, 23, 25, 26, 99] {
            assert_eq!(
                judge(&p, &s, &Request::Other(t), &name),
                Verdict::Refuse(Refusal::Change(t))
            );
        }
        let ext = Request::Extension(b"evil\x1b]52;c;x\x07");
        let Verdict::Refuse(r) = judge(&p, &s, &ext, &name) else {
            panic!()
        };
        assert!(!r.describe().contains('\x1b'), "{}", r.describe());
        assert_eq!(
            judge(&p, &s, &Request::Identities, &name),
            Verdict::Identities
        );
        let bind = Request::Bind {
            host_key: EVIL,
            session_id: b"s",
            forwarding: false,
        };
        assert_eq!(judge(&p, &s, &bind, &name), Verdict::Bind);
    }

    #[test]
    fn the_fingerprint_is_ssh_keygens() {
        // ssh-keygen -lf of this public key prints SHA256:lWjL0C3S5+B8ePwi/DFRh00bqCJl9Ng5J+uTx5VRZF0
        let blob = crate::handback::identity::base64url(
            "AAAAC3NzaC1lZDI1NTE5AAAAILrjEAk9cEEuieu23oRBa1WmXdH+emsulVvhQvoltdl6",
        )
        .unwrap();
        assert_eq!(
            fingerprint(&blob),
            "SHA256:lWjL0C3S5+B8ePwi/DFRh00bqCJl9Ng5J+uTx5VRZF0"
        );
    }
}
