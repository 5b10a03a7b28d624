//! The egress proxy: HTTP CONNECT, plain-HTTP absolute-URI forwarding and SOCKS5 on one unix
//! socket, in a process of its own beside the launcher, outside the jail (allowlist mode only).
//!
//! Guards against egress the human did not allow: the decision is on the *requested name* (the
//! jail never resolves anything itself: it has no route), then on the address the proxy resolved,
//! which is the one it connects to (no second lookup an attacker's DNS could answer differently).
//! A refusal is an HTTP 403 with a sentence an agent reads as final, a log line, and one alert per
//! host and session (retries are counted, not alerted). The rules are the launch's plus what the
//! human allowed for this session alone (`session_allow`), read outside the jail's view.
//!
//! And against the jail starving the guard: the proxy is a process of its own (`process`), so its
//! descriptors and threads are never the watcher's and the quarantine's, which run in the launcher;
//! within it, every connection is bounded (`serve`: pending heads, one deadline per head, tunnels)
//! and a plain-HTTP connection carries one request, read to the end of its body and no further
//! (`http`).

mod http;
mod inject;
mod limits;
mod process;
mod relay;
mod serve;
pub(crate) mod session_allow;
mod socks;
pub(crate) mod tls;
mod worker;

use super::error::ProxyError;
use super::pattern::{normalize, Refusal};
use super::upstream::{self, ProxyUrl, Upstream};
use super::NetPolicy;
use crate::alerts::{Action, Alert, AlertKind, Severity};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub(crate) use limits::Limits;
pub(crate) use process::{exec_main, prepare as prepare_process, Running, SUBCOMMAND};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The sentence a refused client reads (an agent reads it too: it must not look like a fault, and
/// it says the one thing that helps: the human's `claude-sandbox allow`).
pub(crate) fn denial_sentence(host: &str, why: &Refusal) -> String {
    format!(
        "claude-sandbox: the connection to {host} is not allowed by the sandbox's network policy \
         ({}). This is a deliberate block, not a network fault: retrying another way (another \
         tool, an IP address, another port, without the proxy) will not work. {}\n",
        why.reason(),
        remedy(host, why)
    )
}

/// What the human can do about a refusal of `host` (the command only for a plain name or address:
/// it is meant to be pasted).
pub(crate) fn remedy(host: &str, why: &Refusal) -> String {
    let allow = match why {
        Refusal::Denied => {
            return "The user's configuration denies it (`deny` in [network]); only they can \
                    change that."
                .into();
        }
        Refusal::NotAllowed => super::allow::suggestion(host),
        Refusal::PrivateAddress(ip) => super::allow::suggestion(&ip.to_string()),
    };
    match allow {
        Some(cmd) => format!(
            "If the task needs it, stop and ask the user to allow it: they run `{cmd}` outside the \
             sandbox, and a session started after that reaches it; or `{cmd} --session`, and this \
             session reaches it at once, until it ends."
        ),
        None => "It is not a host name the sandbox can allow.".into(),
    }
}

/// Everything the proxy process needs, handed over whole (by memory when forked, as JSON when
/// executed).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Config {
    allow: Vec<String>,
    deny: Vec<String>,
    /// Test resolver (`host::TEST_HOSTS`): consulted before DNS.
    hosts: Vec<(String, IpAddr)>,
    /// Where denials become alerts: the runtime directory and the session id.
    alerts: Option<(PathBuf, String)>,
    limits: Limits,
    /// The launcher's own proxy, chained through (`upstream`).
    upstream: Upstream,
    /// This session's own additions (`session_allow`), outside the jail's view.
    #[serde(default)]
    session_allow: Option<PathBuf>,
    /// Ports of the container's loopback the jail may reach (`loopback`), and no other.
    #[serde(default)]
    loopback: Vec<u16>,
    /// `[secrets] inject`: the credentials and the session CA (`tls`).
    #[serde(default)]
    inject: Option<tls::InjectConfig>,
}

/// Counters for the summary and the load figures (docs/network.md).
#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicUsize,
    /// Pending connections closed to make room for a newer one.
    evicted: AtomicUsize,
    /// Pending connections whose head did not arrive in time.
    timed_out: AtomicUsize,
    /// Complete heads refused because every tunnel was taken.
    busy: AtomicUsize,
    /// Tunnels open now.
    tunnels: AtomicUsize,
    max_pending: AtomicUsize,
    max_tunnels: AtomicUsize,
}

impl Counts {
    fn note_pending(&self, n: usize) {
        self.max_pending.fetch_max(n, Ordering::Relaxed);
    }
    fn note_tunnels(&self, n: usize) {
        self.max_tunnels.fetch_max(n, Ordering::Relaxed);
    }
}

/// What the proxy process tells the launcher when the session ends.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// Refused host -> (attempts, reason).
    pub refused: BTreeMap<String, (u32, String)>,
    pub accepted: usize,
    pub evicted: usize,
    pub timed_out: usize,
    pub busy: usize,
    pub max_pending: usize,
    pub max_tunnels: usize,
    pub limits: Limits,
}

impl Summary {
    /// One line per refused host, and one for connections dropped by the limits.
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .refused
            .iter()
            .map(|(host, (n, why))| format!("{host}: {n} attempt(s) refused ({why})"))
            .collect();
        if self.evicted + self.timed_out + self.busy > 0 {
            out.push(format!(
                "{} connection(s) closed by the proxy's limits: {} waiting for their request \
                 beyond the {} pending allowed, {} whose request did not arrive in time, {} beyond \
                 the open connections allowed (docs/network.md, \"Limits\")",
                self.evicted + self.timed_out + self.busy,
                self.evicted,
                self.limits.pending,
                self.timed_out,
                self.busy
            ));
        }
        out
    }
}

/// The proxy's state in its process.
struct Shared {
    rules: session_allow::SessionRules,
    hosts: Vec<(String, IpAddr)>,
    alerts: Option<(PathBuf, String)>,
    limits: Limits,
    upstream: Upstream,
    loopback: Vec<u16>,
    /// `[secrets] inject`: the hosts whose TLS the proxy terminates (`tls`).
    inject: Option<tls::Tls>,
    denied: Mutex<BTreeMap<String, (u32, String)>>,
    counts: Counts,
}

/// A bound proxy socket, not yet serving.
pub(crate) struct Proxy {
    listener: UnixListener,
    config: Config,
}

impl Proxy {
    /// Bind `dir/proxy.sock` (the directory is made, 0700) for `policy`; `test_hosts`: names
    /// resolved without DNS (`host::TEST_HOSTS`); `limits`: `host::TEST_NET_LIMITS`; `upstream`:
    /// the launcher's own proxy.
    pub(crate) fn bind(
        dir: &Path,
        policy: &NetPolicy,
        alerts: Option<(PathBuf, String)>,
        test_hosts: Option<&str>,
        limits: Option<&str>,
        upstream: Upstream,
    ) -> Result<Proxy, ProxyError> {
        super::pattern::Rules::new(&policy.allow, &policy.deny)?;
        let create = |source| ProxyError::Create {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(create)?;
        // Read-only: the jail's Node processes load it (`NODE_OPTIONS`); a copy the jail changed
        // (the directory is writable there) would only change the jail's own processes.
        let preload = dir.join(super::NODE_PRELOAD_FILE);
        let _ = std::fs::remove_file(&preload);
        std::fs::write(&preload, super::NODE_PRELOAD).map_err(create)?;
        std::fs::set_permissions(
            &preload,
            std::os::unix::fs::PermissionsExt::from_mode(0o444),
        )
        .map_err(create)?;
        let path = dir.join(crate::jail::layout::NET_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = bind_unix(dir, &path).map_err(|source| ProxyError::Bind {
            path: path.clone(),
            source,
        })?;
        Ok(Proxy {
            listener,
            config: Config {
                allow: policy.allow.clone(),
                deny: policy.deny.clone(),
                hosts: test_hosts.map(parse_hosts).unwrap_or_default(),
                alerts,
                limits: limits.map_or_else(Limits::default, |s| Limits::default().with(s)),
                upstream,
                session_allow: None,
                loopback: policy.loopback.iter().map(|b| b.port).collect(),
                inject: None,
            },
        })
    }
}

/// Bind the unix socket `path` in `dir`. A runtime directory given by `CLAUDE_SANDBOX_RUNTIME_DIR`
/// or `XDG_RUNTIME_DIR` can make the path longer than a socket address holds (108 bytes); then the
/// name is bound through the directory's descriptor (`/proc/self/fd/N/NAME`), which names the same
/// directory in a few bytes, instead of refusing the launch.
pub(crate) fn bind_unix(dir: &Path, path: &Path) -> std::io::Result<UnixListener> {
    const SUN_PATH: usize = 108;
    if path.as_os_str().len() < SUN_PATH {
        return UnixListener::bind(path);
    }
    let d = std::fs::File::open(dir)?;
    let name = path.file_name().unwrap_or_default();
    let short = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&d).to_string())
        .join(name);
    UnixListener::bind(short)
}

/// The proxy a launch needs, started: one in allowlist mode (`net_dir`: the host directory of its
/// socket), none otherwise. Called while the launcher runs one thread, so the proxy is forked.
pub(crate) fn for_policy(
    net_dir: Option<&Path>,
    network: &NetPolicy,
    runtime: &Path,
    session: &str,
    env: &crate::host::HostEnv,
) -> crate::error::Result<Option<Running>> {
    let Some(dir) = net_dir else {
        return Ok(None);
    };
    let err = |e: String| crate::error::Error::Jail(format!("starting the network proxy: {e}"));
    let upstream = upstream_of(env).map_err(|e| err(e.to_string()))?;
    let mut proxy = Proxy::bind(
        dir,
        network,
        Some((runtime.to_path_buf(), session.to_string())),
        env.get_str(crate::host::TEST_HOSTS),
        env.get_str(crate::host::TEST_NET_LIMITS),
        upstream,
    )
    .map_err(|e| err(e.to_string()))?;
    proxy.config.session_allow = Some(
        crate::runtime_dir::RuntimeDir::new(runtime)
            .session(session)
            .network_allow(),
    );
    if !network.inject.is_empty() {
        let inject = tls::prepare(dir, session, &network.inject, env);
        proxy.config.inject = Some(inject.map_err(|e| err(e.to_string()))?);
    }
    super::loopback::stage_locks(dir, &network.loopback);
    let exec = env.get_str(crate::host::SEAL) == Some("exec");
    process::start(proxy, exec)
        .map(Some)
        .map_err(|e| err(e.to_string()))
}

/// The launcher's proxy settings (never the jail's: these are the launcher's own variables).
pub(crate) fn upstream_of(env: &crate::host::HostEnv) -> Result<Upstream, upstream::BadProxy> {
    Upstream::from_env(&|k| env.get_str(k).map(str::to_string))
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

/// What a connection upstream is for (a tunnel, or one plain-HTTP request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    Tunnel,
    Http,
}

/// A connection made upstream.
struct Opened {
    stream: TcpStream,
    route: Route,
}

/// Where a connection made upstream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// To the server itself.
    Direct,
    /// To the launcher's upstream proxy (plain HTTP is then sent in absolute form), with its
    /// `Proxy-Authorization` value if it has one, and its address as messages show it.
    Proxy { auth: Option<String>, shown: String },
}

impl Shared {
    fn new(config: Config) -> Result<Shared, ProxyError> {
        Ok(Shared {
            rules: session_allow::SessionRules::new(
                &config.allow,
                &config.deny,
                config.session_allow,
            )?,
            hosts: config.hosts,
            alerts: config.alerts,
            limits: config.limits,
            upstream: config.upstream,
            loopback: config.loopback,
            inject: (config.inject.as_ref())
                .map(tls::Tls::new)
                .transpose()
                .map_err(ProxyError::Inject)?,
            denied: Mutex::new(BTreeMap::new()),
            counts: Counts::default(),
        })
    }

    fn summary(&self) -> Summary {
        let c = &self.counts;
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        Summary {
            refused: self.denied.lock().map(|d| d.clone()).unwrap_or_default(),
            accepted: get(&c.accepted),
            evicted: get(&c.evicted),
            timed_out: get(&c.timed_out),
            busy: get(&c.busy),
            max_pending: get(&c.max_pending),
            max_tunnels: get(&c.max_tunnels),
            limits: self.limits,
        }
    }

    /// Decide on `host:port` and connect: to the address that passed, or through the launcher's
    /// upstream proxy (by name, once the name passed, and its address where it resolves here).
    fn open(&self, host: &str, port: u16, purpose: Purpose) -> Result<Opened, Failure> {
        let name = normalize(host);
        if let Some(result) = self.bridged_loopback(&name, port) {
            return result;
        }
        let result = match self.upstream.for_host(&name, purpose == Purpose::Tunnel) {
            Some(proxy) => self.through(proxy, &name, port, purpose),
            None => self.decide(&name, port).and_then(|addr| {
                TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
                    .map(|stream| Opened {
                        stream,
                        route: Route::Direct,
                    })
                    .map_err(|e| Failure::Upstream(format!("connecting to {addr}: {e}")))
            }),
        };
        match &result {
            Ok(o) if o.route == Route::Direct => tracing::info!("network: allowed {name}:{port}"),
            Ok(_) => tracing::info!("network: allowed {name}:{port} (through the upstream proxy)"),
            Err(Failure::Refused(r)) => self.refused(&name, port, r),
            Err(Failure::Upstream(e)) => {
                tracing::info!("network: allowed {name}:{port}, but the connection failed: {e}");
            }
        }
        result
    }

    /// A listed port of the container's loopback, asked for by a loopback address or `localhost`
    /// (what the jail's bridge sends, and what a client of the proxy may send as well): connected
    /// to directly, never through the upstream, on IPv4 and else IPv6. `None`: not such a request
    /// (a loopback address with another port goes on to the rules, which refuse it).
    fn bridged_loopback(&self, name: &str, port: u16) -> Option<Result<Opened, Failure>> {
        let loopback = name == "localhost"
            || name
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.to_canonical().is_loopback());
        if !loopback || !self.loopback.contains(&port) {
            return None;
        }
        let v4 = SocketAddr::from(([127, 0, 0, 1], port));
        let v6 = SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT)
            .or_else(|e4| TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT).map_err(|_| e4));
        Some(match stream {
            Ok(stream) => {
                tracing::info!("network: bridged loopback port {port}");
                Ok(Opened {
                    stream,
                    route: Route::Direct,
                })
            }
            Err(e) => {
                tracing::info!("network: loopback port {port} is listed, but nothing answers: {e}");
                Err(Failure::Upstream(format!(
                    "nothing answers on the container's loopback port {port} ({e}): the service \
                     outside the sandbox is not running"
                )))
            }
        })
    }

    /// Through `proxy`: the name decided as always; its addresses, where this machine resolves it,
    /// judged too (the upstream resolves it again, by name: a corporate proxy filters by name, and
    /// the container may have no DNS of its own, so a name that does not resolve here goes on).
    fn through(
        &self,
        proxy: &ProxyUrl,
        name: &str,
        port: u16,
        purpose: Purpose,
    ) -> Result<Opened, Failure> {
        let rules = self.rules.current();
        rules.check_name(name).map_err(Failure::Refused)?;
        // The upstream picks the address, not us: every one this machine resolves must pass (a
        // name with a public and a loopback address would otherwise reach the loopback).
        if let Ok(addrs) = self.resolve(name, port) {
            if let Some(r) = addrs.into_iter().find_map(|ip| rules.check_addr(ip).err()) {
                return Err(Failure::Refused(r));
            }
        }
        let failed = |e: String| Failure::Upstream(format!("the upstream proxy {proxy}: {e}"));
        let addr = (proxy.host.as_str(), proxy.port)
            .to_socket_addrs()
            .map_err(|e| failed(format!("cannot resolve it: {e}")))?
            .next()
            .ok_or_else(|| failed("it has no address".into()))?;
        let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
            .map_err(|e| failed(format!("connecting to {addr}: {e}")))?;
        if purpose == Purpose::Http {
            return Ok(Opened {
                stream,
                route: Route::Proxy {
                    auth: proxy.authorization.clone(),
                    shown: proxy.to_string(),
                },
            });
        }
        let _ = stream.set_read_timeout(Some(CONNECT_TIMEOUT));
        stream
            .write_all(upstream::connect_request(proxy, name, port).as_bytes())
            .map_err(|e| failed(e.to_string()))?;
        // Byte by byte: what follows the answer is the tunnel's (an ssh server speaks first).
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte) {
                Ok(1) if head.len() < http::MAX_HEAD => head.push(byte[0]),
                Ok(_) => return Err(failed("it closed without answering".into())),
                Err(e) => return Err(failed(format!("no answer: {e}"))),
            }
        }
        let _ = stream.set_read_timeout(None);
        match upstream::answer(&head) {
            upstream::Answer::Established => Ok(Opened {
                stream,
                route: Route::Proxy {
                    auth: None,
                    shown: proxy.to_string(),
                },
            }),
            upstream::Answer::AuthRequired => Err(failed(upstream::AUTH_REQUIRED.into())),
            upstream::Answer::Other(line) => Err(failed(format!("it answered {line}"))),
        }
    }

    /// The addresses of `name`: a literal, the test resolver (a name listed twice has both), else
    /// DNS.
    fn resolve(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, Failure> {
        if let Ok(ip) = name.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let mapped: Vec<IpAddr> = (self.hosts.iter())
            .filter(|(n, _)| n == name)
            .map(|(_, ip)| *ip)
            .collect();
        if !mapped.is_empty() {
            return Ok(mapped);
        }
        Ok((name, port)
            .to_socket_addrs()
            .map_err(|e| Failure::Upstream(format!("cannot resolve {name}: {e}")))?
            .map(|a| a.ip())
            .collect())
    }

    fn decide(&self, name: &str, port: u16) -> Result<SocketAddr, Failure> {
        let rules = self.rules.current();
        rules.check_name(name).map_err(Failure::Refused)?;
        let addrs = self.resolve(name, port)?;
        let mut first_refusal = None;
        for ip in addrs {
            match rules.check_addr(ip) {
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
            "the jail tried to reach {host}:{port}; refused because {reason}. {} (Further attempts \
             in this session are counted, not alerted; see docs/network.md.)",
            remedy(host, why)
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

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
