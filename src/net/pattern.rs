//! Host patterns and address rules: the pure decisions of the egress proxy.
//!
//! Guards against an allowlist that says more than it means: names are compared case-insensitively
//! and without a trailing dot (`API.Example.com.` is `api.example.com`), `*.example.org` matches
//! strict subdomains only (not `example.org` itself, not `badexample.org`), a deny entry wins over
//! every allow entry, and an address is judged after resolution, so that a permitted name resolving
//! to a loopback, private, link-local, CGNAT or cloud-metadata address (DNS rebinding) is refused
//! unless that address itself is listed.

use super::error::BadPattern;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One allow or deny entry: an exact name, a `*.` suffix, or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pattern {
    Exact(String),
    /// `*.example.org`: stored as `.example.org`.
    Suffix(String),
    Ip(IpAddr),
}

/// Lower-case, without a trailing dot and without IPv6 brackets.
pub(crate) fn normalize(host: &str) -> String {
    let h = host.trim();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h);
    h.trim_end_matches('.').to_ascii_lowercase()
}

impl Pattern {
    /// Parse one entry; the error says what a valid entry looks like.
    pub(crate) fn parse(entry: &str) -> Result<Pattern, BadPattern> {
        let n = normalize(entry);
        if let Ok(ip) = n.parse::<IpAddr>() {
            return Ok(Pattern::Ip(ip));
        }
        let (suffix, name) = match n.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, n.as_str()),
        };
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if name.is_empty() || !name.split('.').all(label_ok) {
            return Err(BadPattern(entry.to_string()));
        }
        Ok(if suffix {
            Pattern::Suffix(format!(".{name}"))
        } else {
            Pattern::Exact(name.to_string())
        })
    }

    /// Whether this entry names `host` (already normalised).
    pub(crate) fn matches_name(&self, host: &str) -> bool {
        match self {
            Pattern::Exact(n) => n == host,
            Pattern::Suffix(s) => host.len() > s.len() && host.ends_with(s.as_str()),
            Pattern::Ip(ip) => host.parse::<IpAddr>().ok() == Some(*ip),
        }
    }
}

/// Parsed allow and deny lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    pub allow: Vec<Pattern>,
    pub deny: Vec<Pattern>,
}

/// Why a destination is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The name (or literal address) is on the deny list.
    Denied,
    /// The name is on no allow entry.
    NotAllowed,
    /// The name is allowed but resolves to an address the jail may not reach.
    PrivateAddress(IpAddr),
}

impl Refusal {
    pub(crate) fn reason(&self) -> String {
        match self {
            Refusal::Denied => "it is on the deny list".into(),
            Refusal::NotAllowed => "it is not on the allow list".into(),
            Refusal::PrivateAddress(ip) => {
                format!("it resolves to {ip}, a loopback, private, link-local or metadata address")
            }
        }
    }
}

impl Rules {
    pub(crate) fn new(allow: &[String], deny: &[String]) -> Result<Rules, BadPattern> {
        let parse = |l: &[String]| -> Result<Vec<Pattern>, BadPattern> {
            l.iter().map(|e| Pattern::parse(e)).collect()
        };
        Ok(Rules {
            allow: parse(allow)?,
            deny: parse(deny)?,
        })
    }

    /// The decision on the requested name, before any resolution. A literal IP address must be
    /// listed itself (as an IP entry): a name pattern never allows an address.
    pub(crate) fn check_name(&self, host: &str) -> Result<(), Refusal> {
        let host = normalize(host);
        if self.deny.iter().any(|p| p.matches_name(&host)) {
            return Err(Refusal::Denied);
        }
        if self.allow.iter().any(|p| p.matches_name(&host)) {
            Ok(())
        } else {
            Err(Refusal::NotAllowed)
        }
    }

    /// The decision on one resolved address: public addresses pass; the rest only when listed.
    pub(crate) fn check_addr(&self, ip: IpAddr) -> Result<(), Refusal> {
        let listed = |l: &[Pattern]| l.contains(&Pattern::Ip(ip));
        if listed(&self.deny) {
            return Err(Refusal::Denied);
        }
        if is_internal(ip) && !listed(&self.allow) {
            return Err(Refusal::PrivateAddress(ip));
        }
        Ok(())
    }
}

/// Loopback, private, link-local (cloud metadata), CGNAT, unspecified, multicast, reserved.
pub(crate) fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return internal_v4(v4);
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || (s[0] & 0xfe00) == 0xfc00 // unique local (fd00:ec2::254 metadata)
                || (s[0] & 0xffc0) == 0xfe80 // link-local
                || (s[0] & 0xff00) == 0xff00 // multicast
                // NAT64 (64:ff9b::/96) and IPv4-compatible addresses: judge the embedded IPv4.
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]
                    && internal_v4(Ipv4Addr::from((u32::from(s[6]) << 16) | u32::from(s[7]))))
                || (s[..6] == [0; 6] && v6 != Ipv6Addr::UNSPECIFIED)
        }
    }
}

fn internal_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254.169.254: cloud metadata
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // CGNAT 100.64/10 (Alibaba metadata 100.100.100.200)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // benchmarking
        || o[0] >= 240 // reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str]) -> Rules {
        let v = |l: &[&str]| {
            l.iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>()
        };
        Rules::new(&v(allow), &v(deny)).unwrap()
    }

    #[test]
    fn exact_and_suffix_names_case_and_trailing_dot() {
        let r = rules(&["api.example.com", "*.example.org"], &[]);
        assert!(r.check_name("api.example.com").is_ok());
        assert!(r.check_name("API.Example.COM.").is_ok());
        assert!(r.check_name("a.b.example.org").is_ok());
        assert!(r.check_name("x.example.org.").is_ok());
        assert_eq!(r.check_name("example.org"), Err(Refusal::NotAllowed));
        assert_eq!(r.check_name("badexample.org"), Err(Refusal::NotAllowed));
        assert_eq!(r.check_name("example.com"), Err(Refusal::NotAllowed));
        assert_eq!(
            r.check_name("api.example.com.evil.net"),
            Err(Refusal::NotAllowed)
        );
    }

    #[test]
    fn deny_wins() {
        let r = rules(&["*.example.org"], &["secret.example.org"]);
        assert!(r.check_name("pub.example.org").is_ok());
        assert_eq!(r.check_name("SECRET.example.org."), Err(Refusal::Denied));
        let r = rules(&["a.example.org"], &["*.example.org"]);
        assert_eq!(r.check_name("a.example.org"), Err(Refusal::Denied));
    }

    #[test]
    fn literal_addresses_need_an_ip_entry() {
        let r = rules(&["*.example.org", "203.0.113.7"], &[]);
        assert_eq!(r.check_name("93.184.216.34"), Err(Refusal::NotAllowed));
        assert!(r.check_name("203.0.113.7").is_ok());
        assert!(r.check_name("[::1]").is_err());
    }

    #[test]
    fn internal_addresses_are_refused_unless_listed() {
        let r = rules(&["*.example.org", "127.0.0.1"], &[]);
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "127.0.0.2",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "224.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(r.check_addr(ip), Err(Refusal::PrivateAddress(ip)), "{ip}");
        }
        assert!(r.check_addr("127.0.0.1".parse().unwrap()).is_ok());
        for ip in ["93.184.216.34", "2606:4700::1111", "64:ff9b::5db8:d822"] {
            assert!(r.check_addr(ip.parse().unwrap()).is_ok(), "{ip}");
        }
        let r = rules(&[], &["93.184.216.34"]);
        assert_eq!(
            r.check_addr("93.184.216.34".parse().unwrap()),
            Err(Refusal::Denied)
        );
    }

    #[test]
    fn bad_patterns_are_refused_with_the_shape_of_a_good_one() {
        for bad in [
            "",
            "*",
            "*.",
            "a..b",
            "http://x.com",
            "x.com/path",
            "*.*.x.com",
            "a b",
        ] {
            let e = Pattern::parse(bad).unwrap_err();
            assert_eq!(e, BadPattern(bad.to_string()));
            assert!(
                e.to_string().contains("is not a host pattern: give"),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            Pattern::parse("*.Example.org.").unwrap(),
            Pattern::Suffix(".example.org".into())
        );
    }
}
