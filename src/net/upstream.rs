//! The launcher's own proxy settings (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY`, either
//! case), through which the allowlist proxy chains: a corporate proxy, credentials in its URL.
//!
//! Guards against two things. A container whose only way out is a proxy: without chaining, the
//! allowlist would let nothing out, and the human would turn it off. And the jail choosing where its
//! traffic goes: the settings are read from the launcher's environment only (the jail's own
//! variables point at the allowlist proxy, and nothing in the jail reaches the launcher's), and the
//! allowlist decides before anything is sent upstream. The credentials never appear in a log line,
//! an error or `explain` (`Display` masks them).

use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::net::IpAddr;
use std::os::unix::ffi::OsStrExt;

/// An `http://` proxy URL, split.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProxyUrl {
    pub host: String,
    pub port: u16,
    /// `Basic …`, from the URL's user and password (percent-decoded).
    pub authorization: Option<String>,
}

impl std::fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let who = if self.authorization.is_some() {
            "***@"
        } else {
            ""
        };
        write!(f, "http://{who}{host}:{}", self.port)
    }
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// A proxy variable the allowlist proxy cannot chain through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadProxy {
    #[error(
        "{var} is a {scheme}:// proxy: the sandbox's network proxy chains only to an http:// \
         proxy (CONNECT); set {var} to the proxy's http:// address, or run with --network host"
    )]
    Scheme { var: String, scheme: String },
    #[error("{var} is not a proxy URL (http://[user:password@]host[:port]): {why}")]
    Url { var: String, why: &'static str },
}

/// The launcher's proxy settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Upstream {
    /// For tunnels (CONNECT, SOCKS5, ssh): `https_proxy`, else `all_proxy`.
    pub tunnel: Option<ProxyUrl>,
    /// For plain HTTP: `http_proxy`, else `all_proxy`.
    pub http: Option<ProxyUrl>,
    pub no_proxy: NoProxy,
}

impl Upstream {
    /// From the launcher's environment (`get`: a variable's value); lower case first, as curl.
    pub(crate) fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Result<Upstream, BadProxy> {
        let var = |name: &str| -> Option<(String, String)> {
            [name.to_ascii_lowercase(), name.to_string()]
                .into_iter()
                .find_map(|n| get(&n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))
        };
        let parse = |found: Option<(String, String)>| -> Result<Option<ProxyUrl>, BadProxy> {
            found.map(|(n, v)| parse_url(&n, &v)).transpose()
        };
        let all = var("ALL_PROXY");
        let tunnel = parse(var("HTTPS_PROXY").or_else(|| all.clone()))?;
        let http = parse(var("HTTP_PROXY").or(all))?;
        let no_proxy = var("NO_PROXY")
            .map(|(_, v)| NoProxy::parse(&v))
            .unwrap_or_default();
        Ok(Upstream {
            tunnel,
            http,
            no_proxy,
        })
    }

    /// The proxy for a connection to `host` (a tunnel or plain HTTP), unless `NO_PROXY` names it.
    pub(crate) fn for_host(&self, host: &str, tunnel: bool) -> Option<&ProxyUrl> {
        let proxy = if tunnel { &self.tunnel } else { &self.http };
        proxy.as_ref().filter(|_| !self.no_proxy.matches(host))
    }

    /// `doctor`'s and `explain`'s line, credentials masked.
    pub(crate) fn describe(&self) -> Option<String> {
        let (t, h) = (self.tunnel.as_ref(), self.http.as_ref());
        let mut parts = Vec::new();
        match (t, h) {
            (None, None) => return None,
            (Some(t), Some(h)) if t == h => parts.push(format!("{t}")),
            _ => {
                if let Some(t) = t {
                    parts.push(format!("{t} (https, tunnels)"));
                }
                if let Some(h) = h {
                    parts.push(format!("{h} (plain http)"));
                }
            }
        }
        if !self.no_proxy.0.is_empty() {
            parts.push(format!("not for {}", self.no_proxy.0.join(",")));
        }
        Some(parts.join("; "))
    }
}

fn parse_url(var: &str, value: &str) -> Result<ProxyUrl, BadProxy> {
    let bad = |why| BadProxy::Url {
        var: var.to_string(),
        why,
    };
    let value = value.trim();
    let rest = match value.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
        Some((scheme, _)) => {
            return Err(BadProxy::Scheme {
                var: var.to_string(),
                scheme: scheme.to_ascii_lowercase(),
            })
        }
        None => value,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    // curl's default proxy port.
    let (host, port) = super::proxy::split_host_port(hostport, Some(1080))
        .ok_or_else(|| bad("no host, or a port that is not a number"))?;
    let authorization = match userinfo {
        None => None,
        Some(u) => {
            let (user, pass) = u.split_once(':').unwrap_or((u, ""));
            let user = percent_decode(user).ok_or_else(|| bad("a bad %-escape in the user"))?;
            let pass = percent_decode(pass).ok_or_else(|| bad("a bad %-escape in the password"))?;
            let mut plain = user;
            plain.push(b':');
            plain.extend_from_slice(&pass);
            Some(format!("Basic {}", base64(&plain)))
        }
    };
    Ok(ProxyUrl {
        host,
        port,
        authorization,
    })
}

/// The launcher's variables the jail does not get when it has a network of its own (allowlist and
/// none mode): every client's proxy setting (a name ending in `_proxy`, any case: `https_proxy`,
/// `npm_config_https_proxy`, `YARN_HTTPS_PROXY`, `PIP_PROXY`, ...), which points past the allowlist
/// proxy and may carry the upstream's credentials (allowlist mode sets its own `*_PROXY` after), and
/// every variable whose value holds the credentials of a proxy URL among them (a
/// `JAVA_TOOL_OPTIONS` with `-Dhttps.proxyPassword=`, a copy under another name).
pub(crate) fn withheld<'a>(vars: impl Iterator<Item = (&'a OsStr, &'a OsStr)>) -> Vec<String> {
    let vars: Vec<(&OsStr, &[u8])> = vars.map(|(k, v)| (k, v.as_bytes())).collect();
    let is_proxy = |k: &OsStr| {
        k.to_str()
            .is_some_and(|k| k.to_ascii_lowercase().ends_with("_proxy"))
    };
    let secrets: Vec<Vec<u8>> = vars
        .iter()
        .filter(|(k, _)| is_proxy(k))
        .filter_map(|(_, v)| std::str::from_utf8(v).ok())
        .flat_map(credentials_in)
        .collect();
    let mut out: Vec<String> = vars
        .iter()
        .filter(|(k, v)| {
            is_proxy(k)
                || secrets
                    .iter()
                    .any(|s| v.windows(s.len()).any(|w| w == s.as_slice()))
        })
        .filter_map(|(k, _)| k.to_str().map(str::to_string))
        .collect();
    out.dedup();
    out
}

/// What of a proxy URL is secret, in each form it may be copied in: the user and password as
/// written, the password as written and decoded, the `Basic` token. Shorter than 4 bytes is
/// left out (it would match unrelated values; the URL form still matches).
fn credentials_in(url: &str) -> Vec<Vec<u8>> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let Some((userinfo, _)) = authority.rsplit_once('@') else {
        return Vec::new();
    };
    let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let mut out = vec![userinfo.as_bytes().to_vec(), pass.as_bytes().to_vec()];
    if let (Some(mut plain), Some(pass)) = (percent_decode(user), percent_decode(pass)) {
        out.push(pass.clone());
        plain.push(b':');
        plain.extend_from_slice(&pass);
        out.push(base64(&plain).into_bytes());
    }
    out.retain(|s| s.len() >= 4);
    out
}

pub(crate) fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Standard base64 with padding (RFC 4648), for `Proxy-Authorization: Basic`.
pub(crate) fn base64(input: &[u8]) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(TABLE[((n >> shift) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `NO_PROXY`: names (each also matching its subdomains; a leading `.` or `*.` the same), IP
/// addresses, CIDR blocks, `*` for everything; a `:port` on an entry is ignored (as most clients
/// do).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NoProxy(pub Vec<String>);

impl NoProxy {
    pub(crate) fn parse(v: &str) -> NoProxy {
        NoProxy(
            v.split([',', ' '])
                .map(|e| e.trim().to_ascii_lowercase())
                .filter(|e| !e.is_empty())
                .collect(),
        )
    }

    pub(crate) fn matches(&self, host: &str) -> bool {
        let host = super::pattern::normalize(host);
        let ip = host.parse::<IpAddr>().ok();
        self.0.iter().any(|entry| {
            if entry == "*" {
                return true;
            }
            if let Some((net, bits)) = entry.split_once('/') {
                return match (ip, net.parse::<IpAddr>(), bits.parse::<u8>()) {
                    (Some(ip), Ok(net), Ok(bits)) => in_cidr(ip, net, bits),
                    _ => false,
                };
            }
            let entry = strip_port(entry);
            let entry = entry.trim_start_matches("*.").trim_start_matches('.');
            let entry = super::pattern::normalize(entry);
            if let (Some(ip), Ok(e)) = (ip, entry.parse::<IpAddr>()) {
                return ip == e;
            }
            !entry.is_empty()
                && (host == entry
                    || (host.len() > entry.len()
                        && host.ends_with(entry.as_str())
                        && host.as_bytes()[host.len() - entry.len() - 1] == b'.'))
        })
    }
}

fn strip_port(entry: &str) -> &str {
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match entry.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => entry,
    }
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) if bits <= 32 => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            (u32::from(a) & mask) == (u32::from(n) & mask)
        }
        (IpAddr::V6(a), IpAddr::V6(n)) if bits <= 128 => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            (u128::from(a) & mask) == (u128::from(n) & mask)
        }
        _ => false,
    }
}

/// What a client reads when the upstream proxy refuses the launcher's credentials (`407`).
pub(crate) const AUTH_REQUIRED: &str = "it asks for credentials (407): they are the launcher's, \
    not the jail's; give them in the launcher's HTTPS_PROXY and HTTP_PROXY \
    (http://user:password@host:port, %-escaped), or check them";

/// What the upstream proxy answered to `CONNECT`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Established,
    /// 407: the credentials are missing or wrong.
    AuthRequired,
    Other(String),
}

/// The `CONNECT` request for `host:port` through `proxy`.
pub(crate) fn connect_request(proxy: &ProxyUrl, host: &str, port: u16) -> String {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let auth = proxy
        .authorization
        .as_ref()
        .map(|a| format!("Proxy-Authorization: {a}\r\n"))
        .unwrap_or_default();
    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n")
}

/// Read the status line of the upstream's answer (`head`: up to its blank line).
pub(crate) fn answer(head: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(head);
    let line = text.lines().next().unwrap_or_default();
    match line.split_whitespace().nth(1) {
        Some(code) if code.starts_with('2') && line.starts_with("HTTP/1.") => Answer::Established,
        Some("407") => Answer::AuthRequired,
        _ => Answer::Other(crate::escape::visible(line.trim()).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn the_variables_lower_case_first_credentials_decoded() {
        let u = Upstream::from_env(&env(&[
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://us%40r:p%3Ass@proxy.corp:3128/"),
            ("HTTP_PROXY", "proxy.corp"),
            ("NO_PROXY", "localhost, .corp,10.0.0.0/8"),
        ]))
        .unwrap();
        let t = u.tunnel.as_ref().unwrap();
        assert_eq!((t.host.as_str(), t.port), ("proxy.corp", 3128));
        // base64("us@r:p:ss")
        assert_eq!(t.authorization.as_deref(), Some("Basic dXNAcjpwOnNz"));
        assert_eq!(t.to_string(), "http://***@proxy.corp:3128");
        assert_eq!(format!("{t:?}"), "http://***@proxy.corp:3128");
        let h = u.http.as_ref().unwrap();
        assert_eq!(
            (h.host.as_str(), h.port, &h.authorization),
            ("proxy.corp", 1080, &None)
        );
        assert!(u.for_host("api.anthropic.com", true).is_some());
        assert!(u.for_host("git.corp", true).is_none());
        assert!(u.for_host("10.1.2.3", false).is_none());
        assert!(!u.describe().unwrap().contains("us%40r"));
        let all = Upstream::from_env(&env(&[("ALL_PROXY", "http://a:8080")])).unwrap();
        assert_eq!(all.tunnel, all.http);
        assert_eq!(Upstream::from_env(&env(&[])).unwrap(), Upstream::default());
        assert!(Upstream::default().describe().is_none());
    }

    #[test]
    fn the_jail_gets_no_proxy_setting_of_the_launchers_nor_its_credentials() {
        let vars: Vec<(OsString, OsString)> = [
            ("HTTPS_PROXY", "http://cs%40user:s3cr%3At@proxy.corp:3128"),
            ("npm_config_https_proxy", "http://proxy.corp:3128"),
            ("no_proxy", "localhost"),
            ("JAVA_TOOL_OPTIONS", "-Dhttps.proxyPassword=s3cr:t"),
            ("COPY", "see cs%40user:s3cr%3At"),
            ("TOKEN", "Basic Y3NAdXNlcjpzM2NyOnQ="),
            ("PATH", "/usr/bin"),
            ("PROXY", "not a client's"),
            ("SHORT", "s3c"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        let w = withheld(vars.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str())));
        assert_eq!(
            w,
            [
                "HTTPS_PROXY",
                "npm_config_https_proxy",
                "no_proxy",
                "JAVA_TOOL_OPTIONS",
                "COPY",
                "TOKEN"
            ]
        );
        let none: Vec<(OsString, OsString)> = vec![("PATH".into(), "/bin".into())];
        assert!(withheld(none.iter().map(|(k, v)| (k.as_os_str(), v.as_os_str()))).is_empty());
    }

    #[test]
    fn a_proxy_it_cannot_chain_through_is_said() {
        let e = Upstream::from_env(&env(&[("HTTPS_PROXY", "https://p:443")])).unwrap_err();
        assert!(
            e.to_string().contains("HTTPS_PROXY is a https:// proxy"),
            "{e}"
        );
        let e = Upstream::from_env(&env(&[("all_proxy", "socks5h://p:1080")])).unwrap_err();
        assert!(e.to_string().contains("all_proxy is a socks5h://"), "{e}");
        let e = Upstream::from_env(&env(&[("HTTP_PROXY", "http://u:p@:80")])).unwrap_err();
        assert!(
            e.to_string().starts_with("HTTP_PROXY is not a proxy URL"),
            "{e}"
        );
        assert!(!e.to_string().contains("u:p"), "{e}");
        let e = Upstream::from_env(&env(&[("HTTP_PROXY", "http://u:%zz@p")])).unwrap_err();
        assert!(e.to_string().contains("password"), "{e}");
    }

    #[test]
    fn no_proxy_as_clients_read_it() {
        let n = NoProxy::parse(
            "localhost,.example.com, *.corp , 127.0.0.1,::1,10.0.0.0/8,fd00::/8,git.lab:8443",
        );
        for yes in [
            "localhost",
            "example.com",
            "a.example.com",
            "x.y.corp",
            "corp",
            "127.0.0.1",
            "[::1]",
            "10.200.0.1",
            "fd12::1",
            "git.lab",
            "GIT.LAB.",
        ] {
            assert!(n.matches(yes), "{yes}");
        }
        for no in [
            "badexample.com",
            "example.org",
            "11.0.0.1",
            "127.0.0.2",
            "fe80::1",
            "lab",
        ] {
            assert!(!n.matches(no), "{no}");
        }
        assert!(NoProxy::parse("*").matches("anything"));
        assert!(!NoProxy::default().matches("anything"));
    }

    #[test]
    fn base64_and_the_connect_exchange() {
        for (plain, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("user:pass", "dXNlcjpwYXNz"),
        ] {
            assert_eq!(base64(plain.as_bytes()), enc);
        }
        let p = ProxyUrl {
            host: "p".into(),
            port: 3128,
            authorization: Some("Basic dTpw".into()),
        };
        assert_eq!(
            connect_request(&p, "::1", 443),
            "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n"
        );
        assert_eq!(
            answer(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            Answer::Established
        );
        assert_eq!(answer(b"HTTP/1.0 200 OK\r\n\r\n"), Answer::Established);
        assert_eq!(
            answer(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"),
            Answer::AuthRequired
        );
        assert_eq!(
            answer(b"HTTP/1.1 403 Forbidden\r\n\r\n"),
            Answer::Other("HTTP/1.1 403 Forbidden".into())
        );
    }
}
