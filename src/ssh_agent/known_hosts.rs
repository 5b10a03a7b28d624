//! The host keys of the allowed hosts, read from the human's `known_hosts` files outside the jail
//! at launch (`~/.ssh/known_hosts`, `/etc/ssh/ssh_known_hosts`).
//!
//! Guards against a host key granted by a pattern nobody meant: only exact names match — a plain
//! name (port 22), `[name]:port`, or a hashed entry (`|1|salt|hash`, HMAC-SHA1 of the name as
//! written, keyed by the salt, as OpenSSH hashes them). Wildcard patterns (`*`, `?`) never grant;
//! a line with a negated pattern (`!name`) grants nothing; `@cert-authority` lines grant nothing
//! (a host certificate is not followed to its CA), and a key on an `@revoked` line is never
//! allowed, whatever other line names it.

use super::judge::{fingerprint, HostKey};
use std::path::Path;

/// One line's names and key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Entry {
    names: Names,
    pub blob: Vec<u8>,
    revoked: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum Names {
    Hashed {
        salt: Vec<u8>,
        hash: Vec<u8>,
    },
    /// The exact names of the line (wildcard patterns left out).
    Plain(Vec<String>),
}

/// The entries of `known_hosts` text; lines that do not parse are skipped (as ssh skips them).
pub(crate) fn parse(text: &str) -> Vec<Entry> {
    text.lines().filter_map(line).collect()
}

fn line(l: &str) -> Option<Entry> {
    let mut fields = l.split_whitespace().peekable();
    let first = fields.peek()?;
    if first.starts_with('#') {
        return None;
    }
    let mut revoked = false;
    if let Some(marker) = first.strip_prefix('@') {
        match marker {
            "revoked" => revoked = true,
            _ => return None,
        }
        fields.next();
    }
    let hosts = fields.next()?;
    let _key_type = fields.next()?;
    let blob = crate::handback::identity::base64url(fields.next()?)?;
    let names = if let Some(rest) = hosts.strip_prefix("|1|") {
        let (salt, hash) = rest.split_once('|')?;
        Names::Hashed {
            salt: crate::handback::identity::base64url(salt)?,
            hash: crate::handback::identity::base64url(hash)?,
        }
    } else {
        let patterns: Vec<&str> = hosts.split(',').collect();
        if patterns.iter().any(|p| p.starts_with('!')) && !revoked {
            return None;
        }
        Names::Plain(
            patterns
                .into_iter()
                .filter(|p| !p.contains(['*', '?', '!']) && !p.is_empty())
                .map(str::to_ascii_lowercase)
                .collect(),
        )
    };
    Some(Entry {
        names,
        blob,
        revoked,
    })
}

impl Entry {
    /// Whether the line names `host` exactly (`host` as `known_hosts` writes it: `name` or
    /// `[name]:port`, lower case).
    fn names(&self, host: &str) -> bool {
        match &self.names {
            Names::Plain(names) => names.iter().any(|n| n == host),
            Names::Hashed { salt, hash } => hmac_sha1(salt, host.as_bytes()).as_slice() == hash,
        }
    }

    fn plain_name(&self) -> Option<&str> {
        match &self.names {
            Names::Plain(n) => n.first().map(String::as_str),
            Names::Hashed { .. } => None,
        }
    }
}

/// `[ssh] allow`'s entry as `known_hosts` writes the name: lower case, `[name]:22` as `name`.
/// `None`: not an exact name (a pattern, an empty name, a bad port).
pub(crate) fn normalize(entry: &str) -> Option<String> {
    let e = entry.trim().to_ascii_lowercase();
    let exact = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
    };
    if let Some(rest) = e.strip_prefix('[') {
        let (name, port) = rest.split_once("]:")?;
        let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
        if !exact(name) {
            return None;
        }
        return Some(if port == 22 {
            name.to_string()
        } else {
            format!("[{name}]:{port}")
        });
    }
    // A bare IPv6 address is written as it is; a name with a port must use the bracket form.
    (exact(&e) && (!e.contains(':') || e.parse::<std::net::Ipv6Addr>().is_ok())).then_some(e)
}

/// The host keys of `allow` (normalized names) in `entries`; `every`: of every line that names a
/// host exactly (the `allow_ssh_agent` alias). Revoked keys are never among them.
pub(crate) fn allowed(entries: &[Entry], allow: &[String], every: bool) -> Vec<HostKey> {
    let revoked: Vec<&[u8]> = entries
        .iter()
        .filter(|e| e.revoked)
        .map(|e| e.blob.as_slice())
        .collect();
    let mut out: Vec<HostKey> = Vec::new();
    for e in entries.iter().filter(|e| !e.revoked) {
        if revoked.contains(&e.blob.as_slice()) || out.iter().any(|h| h.blob == e.blob) {
            continue;
        }
        let name = if every {
            match &e.names {
                Names::Plain(n) if n.is_empty() => None,
                _ => Some(
                    e.plain_name()
                        .unwrap_or("a hashed known_hosts entry")
                        .to_string(),
                ),
            }
        } else {
            allow.iter().find(|a| e.names(a)).cloned()
        };
        if let Some(name) = name {
            out.push(HostKey {
                blob: e.blob.clone(),
                name,
            });
        }
    }
    out
}

/// How a refusal names the host behind `blob`: its plain `known_hosts` name if it has one, and its
/// key's fingerprint.
pub(crate) fn describe(entries: &[Entry], blob: &[u8]) -> String {
    let fp = fingerprint(blob);
    match entries
        .iter()
        .filter(|e| e.blob == blob)
        .find_map(Entry::plain_name)
    {
        Some(n) => format!("{} (host key {fp})", crate::escape::visible(n)),
        None => format!("a host whose key is {fp}"),
    }
}

/// Every entry of the files that exist and can be read.
pub(crate) fn read(files: &[&Path]) -> Vec<Entry> {
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| parse(&t))
        .collect()
}

/// HMAC-SHA1 (RFC 2104): how OpenSSH hashes a `known_hosts` name.
fn hmac_sha1(key: &[u8], msg: &[u8]) -> Vec<u8> {
    use sha1::{Digest, Sha1};
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..20].copy_from_slice(&Sha1::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |x: u8| k.iter().map(|b| b ^ x).collect::<Vec<u8>>();
    let inner = Sha1::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha1::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as ssh-keyscan and `ssh-keygen -H` write them (keys shortened to valid base64).
    const KEY_A: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIKEYAAAA";
    const KEY_B: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIKEYBBBB";

    fn blob(k: &str) -> Vec<u8> {
        crate::handback::identity::base64url(k).unwrap()
    }

    fn names(text: &str, allow: &[&str]) -> Vec<String> {
        let allow: Vec<String> = allow.iter().map(|a| normalize(a).unwrap()).collect();
        allowed(&parse(text), &allow, false)
            .into_iter()
            .map(|h| h.name)
            .collect()
    }

    #[test]
    fn the_hmac_is_rfc_2202s() {
        // RFC 2202, test case 2.
        let mac = hmac_sha1(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            crate::baseline::hex(&mac),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"
        );
    }

    #[test]
    fn a_hashed_entry_matches_its_name_as_ssh_keygen_hashed_it() {
        // `ssh-keygen -H` of "[127.0.0.1]:2222 ssh-ed25519 ...": salt and HMAC-SHA1 of the name.
        let salt = b"0123456789abcdefghij";
        let hash = hmac_sha1(salt, b"[127.0.0.1]:2222");
        let b64 = |b: &[u8]| crate::net::upstream::base64(b);
        let text = format!("|1|{}|{} ssh-ed25519 {KEY_A}\n", b64(salt), b64(&hash));
        assert_eq!(names(&text, &["[127.0.0.1]:2222"]), ["[127.0.0.1]:2222"]);
        assert!(names(&text, &["127.0.0.1"]).is_empty());
        assert!(names(&text, &["[127.0.0.1]:2223"]).is_empty());
    }

    #[test]
    fn lines_ssh_keygen_hashed_match_their_names_only() {
        // `ssh-keygen -H` (OpenSSH 9.2) of a `[127.0.0.1]:2222` line and a `github.com` line.
        let text = "\
|1|Gw3qHINu9ylai11jvYnhEu/qJ2E=|iYYf77SG+g8tVIdayCuyVSBMO8w= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILrjEAk9cEEuieu23oRBa1WmXdH+emsulVvhQvoltdl6
|1|VX1JpT+A3/dSBzvAC+TDAIAs0n4=|i3jgJcYTcNJNAkWf/lJXtqedRzE= ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl
";
        let allow = ["[127.0.0.1]:2222".to_string(), "gitlab.com".to_string()];
        let keys = allowed(&parse(text), &allow, false);
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert_eq!(
            fingerprint(&keys[0].blob),
            "SHA256:lWjL0C3S5+B8ePwi/DFRh00bqCJl9Ng5J+uTx5VRZF0"
        );
        assert_eq!(names(text, &["github.com"]), ["github.com"]);
        // Every hashed line names a host: the deprecated alias takes both.
        assert_eq!(allowed(&parse(text), &[], true).len(), 2);
    }

    #[test]
    fn plain_names_ports_and_case_match_exactly_and_patterns_never_grant() {
        let text = format!(
            "# comment\n\
             GitHub.com,140.82.112.3 ssh-ed25519 {KEY_A}\n\
             [127.0.0.1]:2222 ssh-ed25519 {KEY_B}\n\
             *.example.com ssh-ed25519 {KEY_A}CCCC\n\
             git.example.org,!evil.example.org ssh-ed25519 {KEY_A}DDDD\n\
             garbage\n"
        );
        assert_eq!(names(&text, &["github.com"]), ["github.com"]);
        assert_eq!(names(&text, &["[github.com]:22"]), ["github.com"]);
        assert_eq!(names(&text, &["[127.0.0.1]:2222"]), ["[127.0.0.1]:2222"]);
        assert!(names(&text, &["127.0.0.1"]).is_empty());
        assert!(names(&text, &["a.example.com"]).is_empty());
        assert!(names(&text, &["git.example.org"]).is_empty());
        let keys = allowed(&parse(&text), &[], true);
        assert_eq!(keys.len(), 2, "{keys:?}");
    }

    #[test]
    fn a_revoked_key_is_never_allowed() {
        let text = format!(
            "github.com ssh-ed25519 {KEY_A}\n@revoked * ssh-ed25519 {KEY_A}\n\
             @cert-authority *.corp ssh-ed25519 {KEY_B}\n"
        );
        assert!(names(&text, &["github.com"]).is_empty());
        assert!(allowed(&parse(&text), &[], true).is_empty());
    }

    #[test]
    fn allow_entries_must_be_exact_names() {
        assert_eq!(normalize("GitHub.com").as_deref(), Some("github.com"));
        assert_eq!(normalize("[h]:22").as_deref(), Some("h"));
        assert_eq!(normalize("[h]:2222").as_deref(), Some("[h]:2222"));
        assert_eq!(normalize("::1").as_deref(), Some("::1"));
        for bad in [
            "*.github.com",
            "",
            "[h]:0",
            "[h]",
            "h:2222",
            "!h",
            "a b",
            "[h]:x",
        ] {
            assert_eq!(normalize(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_refused_host_is_named_by_its_plain_name_and_fingerprint() {
        let text = format!("evil.example\x1b[2J ssh-ed25519 {KEY_B}\n");
        let d = describe(&parse(&text), &blob(KEY_B));
        assert!(d.starts_with("evil.example") && !d.contains('\x1b'), "{d}");
        assert!(d.contains("(host key SHA256:"), "{d}");
        assert!(describe(&[], b"k").starts_with("a host whose key is SHA256:"));
    }
}
