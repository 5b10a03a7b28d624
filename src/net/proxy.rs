//! The egress proxy: HTTP CONNECT, plain-HTTP absolute-URI forwarding and SOCKS5 on one unix
//! socket, run by the launcher outside the jail (allowlist mode only).
//!
//! Guards against egress the human did not allow: the decision is on the *requested name* (the
//! jail never resolves anything itself: it has no route), then on the address the proxy resolved,
//! which is the one it connects to (no second lookup an attacker's DNS could answer differently).
//! A refusal is an HTTP 403 with a sentence an agent reads as final, a log line, and one alert per
//! host and session (retries are counted, not alerted).
//!
//! One thread per connection, std only: a session has a handful of connections at a time, and the
//! launcher's start-up cost for `host` and `none` modes stays what it was (nothing of this runs).

use super::error::ProxyError;
use super::pattern::{normalize, Refusal, Rules};
use super::NetPolicy;
use crate::alerts::{Action, Alert, AlertKind, Severity};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_HEAD: usize = 64 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// The sentence a refused client reads (an agent reads it too: it must not look like a fault).
pub(crate) fn denial_sentence(host: &str, reason: &str) -> String {
    format!(
        "claude-sandbox: the connection to {host} is not allowed by the sandbox's network policy \
         ({reason}). This is a deliberate block, not a network fault: retrying another way (another \
         tool, an IP address, another port, without the proxy) will not work. If the task needs \
         this host, ask the user to allow it (claude-sandbox run --allow-domain {host}, or `allow` \
         in [network] of ~/.config/claude-sandbox/config.toml).\n"
    )
}

struct Shared {
    rules: Rules,
    /// Test resolver (`ENV_TEST_HOSTS`): consulted before DNS.
    hosts: Vec<(String, IpAddr)>,
    /// Where denials become alerts: the runtime directory and the session id.
    alerts: Option<(PathBuf, String)>,
    /// Refused host -> (attempts, reason).
    denied: Mutex<BTreeMap<String, (u32, String)>>,
}

/// A bound proxy socket, not yet serving.
pub(crate) struct Proxy {
    listener: UnixListener,
    shared: Arc<Shared>,
}

/// A serving proxy: the accept loop runs on a thread until the launcher exits.
pub(crate) struct Running {
    shared: Arc<Shared>,
}

impl Proxy {
    /// Bind `dir/proxy.sock` (the directory is made, 0700) for `policy`; `test_hosts`: names
    /// resolved without DNS (`host::TEST_HOSTS`).
    pub(crate) fn bind(
        dir: &Path,
        policy: &NetPolicy,
        alerts: Option<(PathBuf, String)>,
        test_hosts: Option<&str>,
    ) -> Result<Proxy, ProxyError> {
        let rules = Rules::new(&policy.allow, &policy.deny)?;
        std::fs::create_dir_all(dir).map_err(|source| ProxyError::Create {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(crate::jail::layout::NET_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(|source| ProxyError::Bind {
            path: path.clone(),
            source,
        })?;
        let hosts = test_hosts.map(parse_hosts).unwrap_or_default();
        Ok(Proxy {
            listener,
            shared: Arc::new(Shared {
                rules,
                hosts,
                alerts,
                denied: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    pub(crate) fn start(self) -> Running {
        let shared = Arc::clone(&self.shared);
        let listener = self.listener;
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || {
                    if let Err(e) = serve(conn, &shared) {
                        tracing::debug!("network proxy: {e}");
                    }
                });
            }
        });
        Running {
            shared: self.shared,
        }
    }
}

impl Running {
    /// One line per refused host: `host: N attempt(s), reason`.
    pub(crate) fn summary(&self) -> Vec<String> {
        let denied = self
            .shared
            .denied
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default();
        denied
            .into_iter()
            .map(|(host, (n, why))| format!("{host}: {n} attempt(s) refused ({why})"))
            .collect()
    }
}

/// The proxy a launch needs: one in allowlist mode (`net_dir`: the host directory of its socket),
/// none otherwise.
pub(crate) fn for_policy(
    net_dir: Option<&Path>,
    network: &NetPolicy,
    runtime: &Path,
    session: &str,
    env: &crate::host::HostEnv,
) -> crate::error::Result<Option<Proxy>> {
    let Some(dir) = net_dir else {
        return Ok(None);
    };
    Proxy::bind(
        dir,
        network,
        Some((runtime.to_path_buf(), session.to_string())),
        env.get_str(crate::host::TEST_HOSTS),
    )
    .map(Some)
    .map_err(|e| crate::error::Error::Jail(format!("starting the network proxy: {e}")))
}

fn parse_hosts(v: &str) -> Vec<(String, IpAddr)> {
    v.split(',')
        .filter_map(|pair| {
            let (name, ip) = pair.split_once('=')?;
            Some((normalize(name), ip.trim().parse().ok()?))
        })
        .collect()
}

/// Why a connection was not made.
enum Failure {
    Refused(Refusal),
    Upstream(String),
}

impl Shared {
    /// Decide on `host:port` and connect to the address that passed.
    fn open(&self, host: &str, port: u16) -> Result<TcpStream, Failure> {
        let name = normalize(host);
        let result = self.decide(&name, port).and_then(|addr| {
            TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                .map_err(|e| Failure::Upstream(format!("connecting to {addr}: {e}")))
        });
        match &result {
            Ok(_) => tracing::info!("network: allowed {name}:{port}"),
            Err(Failure::Refused(r)) => self.refused(&name, port, r),
            Err(Failure::Upstream(e)) => {
                tracing::info!("network: allowed {name}:{port}, but the connection failed: {e}");
            }
        }
        result
    }

    fn decide(&self, name: &str, port: u16) -> Result<SocketAddr, Failure> {
        self.rules.check_name(name).map_err(Failure::Refused)?;
        let addrs: Vec<IpAddr> = if let Ok(ip) = name.parse::<IpAddr>() {
            vec![ip]
        } else if let Some((_, ip)) = self.hosts.iter().find(|(n, _)| n == name) {
            vec![*ip]
        } else {
            (name, port)
                .to_socket_addrs()
                .map_err(|e| Failure::Upstream(format!("cannot resolve {name}: {e}")))?
                .map(|a| a.ip())
                .collect()
        };
        let mut first_refusal = None;
        for ip in addrs {
            match self.rules.check_addr(ip) {
                Ok(()) => return Ok(SocketAddr::new(ip, port)),
                Err(r) => {
                    first_refusal.get_or_insert(r);
                }
            }
        }
        Err(match first_refusal {
            Some(r) => Failure::Refused(r),
            None => Failure::Upstream(format!("{name} has no address")),
        })
    }

    /// Log every refusal; alert once per host and session.
    fn refused(&self, host: &str, port: u16, why: &Refusal) {
        let reason = why.reason();
        tracing::info!("network: refused {host}:{port}: {reason}");
        let first = match self.denied.lock() {
            Ok(mut d) => {
                let e = d.entry(host.to_string()).or_insert((0, reason.clone()));
                e.0 += 1;
                e.0 == 1
            }
            Err(_) => false,
        };
        let Some((runtime, session)) = self.alerts.as_ref().filter(|_| first) else {
            return;
        };
        let detail = format!(
            "the jail tried to reach {host}:{port}; refused because {reason} (further attempts in \
             this session are counted, not alerted; see docs/network.md)"
        );
        let path = PathBuf::from(format!("{host}:{port}"));
        let alert = Alert {
            id: crate::alerts::new_id("n"),
            ..Alert::new(
                AlertKind::NetworkDenied,
                Severity::Info,
                &path,
                detail,
                session,
            )
        }
        .action(Action::Denied)
        .fingerprint(format!("network:{session}:{host}"));
        if let Err(e) = crate::alerts::Store::new(runtime).add(&alert) {
            tracing::warn!("network: the alert for {host} was not recorded: {e}");
        }
    }
}

fn serve(mut conn: UnixStream, shared: &Shared) -> std::io::Result<()> {
    // A client that never finishes its request does not hold a thread for ever; once the tunnel
    // is up, idle connections (a long poll, a websocket) are the client's business.
    conn.set_read_timeout(Some(HEAD_TIMEOUT))?;
    let mut first = [0u8; 1];
    conn.read_exact(&mut first)?;
    if first[0] == 5 {
        socks5(conn, shared)
    } else {
        http(conn, first[0], shared)
    }
}

/// Read an HTTP head (to the blank line); returns it and whatever followed it.
fn read_head(conn: &mut UnixStream, first: u8) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = vec![first];
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::Error::other("request head too long"));
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `host:port` (IPv6 in brackets) with a default port.
pub(crate) fn split_host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default?,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Some((h.to_string(), p.parse().ok()?)),
        Some(_) => None,
        None => Some((authority.to_string(), default?)),
    }
    .filter(|(h, _)| !h.is_empty())
}

fn respond(conn: &mut UnixStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\nX-Claude-Sandbox: network-policy\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body.as_bytes())
}

fn http(mut conn: UnixStream, first: u8, shared: &Shared) -> std::io::Result<()> {
    let (head, rest) = read_head(&mut conn, first)?;
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut parts = request.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return respond(
            &mut conn,
            "400 Bad Request",
            "claude-sandbox: malformed request\n",
        );
    };
    let (connect, host, port, path) = if method.eq_ignore_ascii_case("CONNECT") {
        match split_host_port(target, None) {
            Some((h, p)) => (true, h, p, String::new()),
            None => {
                return respond(
                    &mut conn,
                    "400 Bad Request",
                    "claude-sandbox: CONNECT needs host:port\n",
                )
            }
        }
    } else if let Some(after) = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
    {
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], after[i..].to_string()),
            None => (after, "/".to_string()),
        };
        match split_host_port(authority, Some(80)) {
            Some((h, p)) => (false, h, p, path),
            None => return respond(&mut conn, "400 Bad Request", "claude-sandbox: bad URL\n"),
        }
    } else {
        return respond(
            &mut conn,
            "400 Bad Request",
            "claude-sandbox: this is the sandbox's egress proxy: send CONNECT host:port or an absolute http:// URL\n",
        );
    };
    let mut upstream = match shared.open(&host, port) {
        Ok(s) => s,
        Err(Failure::Refused(r)) => {
            return respond(
                &mut conn,
                "403 Forbidden",
                &denial_sentence(&host, &r.reason()),
            )
        }
        Err(Failure::Upstream(e)) => {
            return respond(
                &mut conn,
                "502 Bad Gateway",
                &format!(
                    "claude-sandbox: {host}:{port} is allowed, but the connection failed: {e}\n"
                ),
            )
        }
    };
    if connect {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")?;
    } else {
        // Origin form, one request per connection (a keep-alive connection could name another host).
        // `Host` is the authority that was checked, never the client's (a different `Host` to an
        // allowed front would reach whatever the front serves under that name).
        let shown = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let authority = if port == 80 {
            shown
        } else {
            format!("{shown}:{port}")
        };
        let mut out = format!("{method} {path} {version}\r\nHost: {authority}\r\n");
        for line in lines.filter(|l| !l.is_empty()) {
            let name = line.split(':').next().unwrap_or_default().trim();
            let hop = [
                "host",
                "proxy-connection",
                "proxy-authorization",
                "connection",
                "keep-alive",
            ];
            if !hop.iter().any(|h| name.eq_ignore_ascii_case(h)) {
                out.push_str(line);
                out.push_str("\r\n");
            }
        }
        out.push_str("Connection: close\r\n\r\n");
        upstream.write_all(out.as_bytes())?;
    }
    upstream.write_all(&rest)?;
    splice(conn, upstream)
}

fn socks5(mut conn: UnixStream, shared: &Shared) -> std::io::Result<()> {
    let mut n = [0u8; 1];
    conn.read_exact(&mut n)?;
    let mut methods = vec![0u8; n[0] as usize];
    conn.read_exact(&mut methods)?;
    if !methods.contains(&0) {
        return conn.write_all(&[5, 0xff]);
    }
    conn.write_all(&[5, 0])?;
    let mut req = [0u8; 4];
    conn.read_exact(&mut req)?;
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            conn.read_exact(&mut a)?;
            IpAddr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            conn.read_exact(&mut a)?;
            IpAddr::from(a).to_string()
        }
        3 => {
            conn.read_exact(&mut n)?;
            let mut name = vec![0u8; n[0] as usize];
            conn.read_exact(&mut name)?;
            String::from_utf8_lossy(&name).into_owned()
        }
        _ => return conn.write_all(&[5, 8, 0, 1, 0, 0, 0, 0, 0, 0]),
    };
    let mut port = [0u8; 2];
    conn.read_exact(&mut port)?;
    let reply = |code: u8| [5, code, 0, 1, 0, 0, 0, 0, 0, 0];
    if req[0] != 5 || req[1] != 1 {
        return conn.write_all(&reply(7)); // only CONNECT
    }
    match shared.open(&host, u16::from_be_bytes(port)) {
        Ok(upstream) => {
            conn.write_all(&reply(0))?;
            splice(conn, upstream)
        }
        // 2: "connection not allowed by ruleset"; SOCKS has no room for the sentence.
        Err(Failure::Refused(_)) => conn.write_all(&reply(2)),
        Err(Failure::Upstream(_)) => conn.write_all(&reply(4)),
    }
}

/// Copy both ways until both sides have closed.
fn splice(conn: UnixStream, upstream: TcpStream) -> std::io::Result<()> {
    conn.set_read_timeout(None)?;
    let (mut c_read, mut u_write) = (conn.try_clone()?, upstream.try_clone()?);
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut c_write) = (upstream, conn);
    let _ = std::io::copy(&mut u_read, &mut c_write);
    let _ = c_write.shutdown(Shutdown::Write);
    let _ = up.join();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities() {
        let s = |h: &str, p: u16| Some((h.to_string(), p));
        assert_eq!(split_host_port("a.com:443", None), s("a.com", 443));
        assert_eq!(split_host_port("a.com", Some(80)), s("a.com", 80));
        assert_eq!(split_host_port("a.com", None), None);
        assert_eq!(split_host_port("[::1]:8080", None), s("::1", 8080));
        assert_eq!(split_host_port("u:p@a.com:81", Some(80)), s("a.com", 81));
        assert_eq!(split_host_port("::1:80", None), None);
        assert_eq!(split_host_port(":80", None), None);
    }

    #[test]
    fn the_sentence_says_it_is_final() {
        let s = denial_sentence("evil.example", "it is not on the allow list");
        assert!(s.contains("not allowed by the sandbox"));
        assert!(s.contains("will not work"));
        assert!(s.contains("--allow-domain evil.example"));
    }

    #[test]
    fn test_hosts() {
        let h = parse_hosts("A.test.=127.0.0.1, bad, b.test=::1");
        assert_eq!(h.len(), 2);
        assert_eq!(h[0].0, "a.test");
    }
}
