//! TLS terminated for the hosts of `[secrets] inject` alone: a CA made for the session at launch
//! (its key only in the launcher's and the proxy's memory, never in a file), a leaf certificate per
//! host made on first use, and the connection re-made to the real host, verified against the
//! launcher's roots. Between the two, the requests pass through `inject::Rewrite`.
//!
//! Guards against the injected credential reaching anyone but its host: the proxy itself verifies
//! the host it sends the real value to (the jail's own verification is of our CA, which proves
//! nothing about the server); and against the CA vouching for more than it must: only the jail's
//! bundle holds it, it lives one session, and it signs only names listed in `inject` (its name
//! constraints say so too, for clients that read them). Every other CONNECT stays a tunnel the
//! proxy cannot read.

use super::inject::{Refused, Rewrite};
use crate::secrets::inject::Credential;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tunnel with nothing moving either way is closed after this long.
const IDLE: Duration = Duration::from_secs(300);
const CHUNK: usize = 16 * 1024;

/// What the proxy process is handed: the credentials, the CA and the roots to verify hosts with.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct InjectConfig {
    pub credentials: Vec<Credential>,
    pub ca_cert_pem: String,
    pub ca_key_pem: String,
    /// The session's id (the CA's name; `ca_params` makes the same name again).
    pub session: String,
    /// The PEM text of the roots the real hosts are verified against.
    pub roots_pem: String,
}

impl std::fmt::Debug for InjectConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InjectConfig({:?})", self.credentials)
    }
}

/// The session CA's parameters: the same in the launcher, which signs it, and in the proxy, which
/// signs with it (rcgen needs the issuer's name and key usages, not its certificate).
fn ca_params(session: &str, hosts: &[String]) -> Result<rcgen::CertificateParams, rcgen::Error> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("claude-sandbox session {session} (jail only)"),
    );
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let names: Vec<rcgen::GeneralSubtree> = hosts
        .iter()
        .filter(|h| h.parse::<std::net::IpAddr>().is_err())
        .map(|h| rcgen::GeneralSubtree::DnsName(h.clone()))
        .collect();
    if !names.is_empty() && names.len() == hosts.len() {
        p.name_constraints = Some(rcgen::NameConstraints {
            permitted_subtrees: names,
            excluded_subtrees: Vec::new(),
        });
    }
    Ok(p)
}

/// A new session CA for `credentials`' hosts: `(certificate PEM, key PEM)`.
pub(crate) fn new_ca(
    session: &str,
    credentials: &[Credential],
) -> Result<(String, String), String> {
    let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
    let cert = ca_params(session, &hosts(credentials))
        .and_then(|p| p.self_signed(&key))
        .map_err(|e| e.to_string())?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn hosts(credentials: &[Credential]) -> Vec<String> {
    let mut h: Vec<String> = credentials.iter().map(|c| c.host.clone()).collect();
    h.sort();
    h.dedup();
    h
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The proxy's TLS state: the issuer, a server config per host, one client config.
pub(crate) struct Tls {
    pub(crate) credentials: Vec<Credential>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    ca_der: CertificateDer<'static>,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
    client: Arc<rustls::ClientConfig>,
}

impl Tls {
    pub(crate) fn new(c: &InjectConfig) -> Result<Tls, String> {
        let key = rcgen::KeyPair::from_pem(&c.ca_key_pem).map_err(|e| e.to_string())?;
        let params = ca_params(&c.session, &hosts(&c.credentials)).map_err(|e| e.to_string())?;
        let ca_der = CertificateDer::from_pem_slice(c.ca_cert_pem.as_bytes())
            .map_err(|e| format!("the session CA: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(
            CertificateDer::pem_slice_iter(c.roots_pem.as_bytes()).flatten(),
        );
        if added == 0 {
            return Err("no root certificate to verify the real hosts with".into());
        }
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            credentials: c.credentials.clone(),
            issuer: rcgen::Issuer::new(params, key),
            ca_der,
            leaves: Mutex::new(HashMap::new()),
            client: Arc::new(client),
        })
    }

    /// Whether a CONNECT to `host:port` is terminated (a listed host with a credential).
    pub(crate) fn intercepts(&self, host: &str, port: u16) -> bool {
        self.credentials
            .iter()
            .any(|c| c.host == host && c.port == port)
    }

    /// The two TLS connections for `host`: towards the jail (`first`: what the client already
    /// sent) and towards the real host.
    fn connections(
        &self,
        host: &str,
        first: &[u8],
    ) -> Result<(rustls::Connection, rustls::Connection), String> {
        let name = ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let mut down =
            rustls::ServerConnection::new(self.server_config(host)?).map_err(|e| e.to_string())?;
        let up = rustls::ClientConnection::new(Arc::clone(&self.client), name)
            .map_err(|e| e.to_string())?;
        if !first.is_empty() {
            down.read_tls(&mut &first[..]).map_err(|e| e.to_string())?;
        }
        Ok((down.into(), up.into()))
    }

    /// The server side for `host`, its leaf made on first use.
    fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut leaves = self.leaves.lock().map_err(|_| "poisoned".to_string())?;
        if let Some(c) = leaves.get(host) {
            return Ok(Arc::clone(c));
        }
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            rcgen::CertificateParams::new(vec![host.to_string()]).map_err(|e| e.to_string())?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host.to_string());
        let leaf = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| e.to_string())?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(vec![leaf.der().clone(), self.ca_der.clone()], der)
            .map_err(|e| e.to_string())?;
        // HTTP/1.1 only: the rewrite reads HTTP/1 heads.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        leaves.insert(host.to_string(), Arc::clone(&config));
        Ok(config)
    }
}

/// How an intercepted connection ended early.
pub(super) enum Ended {
    Refused(Refused),
    Failed(String),
}

/// Serve one terminated connection: TLS with the client (`first`: bytes it sent after CONNECT),
/// TLS to the real host over `server`, requests rewritten between them.
pub(super) fn intercept<C, S>(
    tls: &Tls,
    client: &mut C,
    server: &mut S,
    first: &[u8],
    host: &str,
    port: u16,
) -> Result<(), Ended>
where
    C: Read + Write + AsFd + super::relay::Shut,
    S: Read + Write + AsFd + super::relay::Shut,
{
    let failed = |e: String| Ended::Failed(e);
    let (mut down, mut up) = tls.connections(host, first).map_err(failed)?;
    client.nonblocking().map_err(|e| failed(e.to_string()))?;
    server.nonblocking().map_err(|e| failed(e.to_string()))?;
    let mut rewrite = Rewrite::new(host, port, &tls.credentials);
    // Plaintext read from one side, not yet taken by the other's TLS writer.
    let (mut to_up, mut to_down) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; CHUNK];
    let mut last = Instant::now();
    let mut outcome = Ok(());
    // The real host failed (its certificate, most often): the client's handshake is finished, so
    // that it hears why rather than a cut connection.
    let mut up_failed: Option<String> = None;
    loop {
        if let Some(e) = up_failed.as_ref().filter(|_| !down.is_handshaking()) {
            tell_failure(&mut down, host, port, e);
            outcome = Err(Ended::Failed(e.clone()));
            break;
        }
        push(&mut up, &mut to_up);
        push(&mut down, &mut to_down);
        if up_failed.is_none() {
            flush(&mut up, server).map_err(failed)?;
        }
        flush(&mut down, client).map_err(failed)?;
        if last.elapsed() >= IDLE {
            return Ok(());
        }
        let want = |c: &rustls::Connection, pending: bool| {
            let mut f = PollFlags::empty();
            if c.wants_read() && !pending {
                f |= PollFlags::IN;
            }
            if c.wants_write() {
                f |= PollFlags::OUT;
            }
            f
        };
        let cf = want(&down, !to_up.is_empty());
        let sf = match up_failed {
            Some(_) => PollFlags::empty(),
            None => want(&up, !to_down.is_empty()),
        };
        let mut fds = [
            PollFd::from_borrowed_fd(client.as_fd(), cf),
            PollFd::from_borrowed_fd(server.as_fd(), sf),
        ];
        let t = IDLE.saturating_sub(last.elapsed());
        let timeout = Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(300),
            tv_nsec: 0,
        };
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(failed(e.to_string())),
        }
        let (cr, sr) = (fds[0].revents(), fds[1].revents());
        let readable = PollFlags::IN | PollFlags::HUP | PollFlags::ERR;
        if cr.intersects(readable) && to_up.is_empty() {
            last = Instant::now();
            let Some(plain) = take(&mut down, client, &mut buf).map_err(failed)? else {
                up.send_close_notify();
                break;
            };
            let mut out = Vec::new();
            if let Err(r) = rewrite.feed(&plain, &mut out) {
                // The refusal, in the client's own TLS, and the end.
                let refusal = super::http::respond("403 Forbidden", &r.sentence(host));
                let _ = down.writer().write_all(&refusal);
                outcome = Err(Ended::Refused(r));
                down.send_close_notify();
                break;
            }
            to_up.extend_from_slice(&out);
        }
        if sr.intersects(readable) && to_down.is_empty() && up_failed.is_none() {
            last = Instant::now();
            let taken = match take(&mut up, server, &mut buf) {
                Ok(t) => t,
                Err(e) => {
                    up_failed = Some(e);
                    continue;
                }
            };
            let Some(plain) = taken else {
                push(&mut down, &mut to_down);
                down.send_close_notify();
                break;
            };
            to_down.extend_from_slice(&plain);
        }
    }
    // What is left to say goes out before the sockets close (blocking, for a moment).
    finish(&mut down, client, &mut to_down);
    finish(&mut up, server, &mut to_up);
    outcome
}

/// A `502` with the reason, in the client's TLS, and its close.
fn tell_failure(down: &mut rustls::Connection, host: &str, port: u16, e: &str) {
    let why = format!(
        "claude-sandbox: {host}:{port} is listed in `[secrets] inject`, but the connection to it \
         failed: {e}\n"
    );
    let _ = down
        .writer()
        .write_all(&super::http::respond("502 Bad Gateway", &why));
    down.send_close_notify();
}

/// Hand `pending` plaintext to `conn`'s writer, as much as its buffer takes.
fn push(conn: &mut rustls::Connection, pending: &mut Vec<u8>) {
    if pending.is_empty() {
        return;
    }
    if let Ok(n) = conn.writer().write(pending) {
        pending.drain(..n);
    }
}

/// Write `conn`'s TLS records to `sock` while it takes them.
fn flush(conn: &mut rustls::Connection, sock: &mut impl Write) -> Result<(), String> {
    while conn.wants_write() {
        match conn.write_tls(sock) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(())
}

/// Read TLS from `sock` into `conn` and the plaintext that results. `None`: the side is done
/// (end of file, or its `close_notify`).
fn take(
    conn: &mut rustls::Connection,
    sock: &mut impl Read,
    buf: &mut [u8],
) -> Result<Option<Vec<u8>>, String> {
    let mut eof = false;
    match conn.read_tls(sock) {
        Ok(0) => eof = true,
        Ok(_) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => eof = true,
        Err(e) => return Err(e.to_string()),
    }
    let state = conn
        .process_new_packets()
        .map_err(|e| format!("TLS: {e}"))?;
    let mut plain = Vec::new();
    let mut closed = state.peer_has_closed();
    loop {
        match conn.reader().read(buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(n) => plain.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(_) => {
                closed = true;
                break;
            }
        }
    }
    if plain.is_empty() && (eof || closed) {
        return Ok(None);
    }
    Ok(Some(plain))
}

/// Blocking, with a short deadline: the pending plaintext and records written out.
fn finish<S: Write + super::relay::Shut>(
    conn: &mut rustls::Connection,
    sock: &mut S,
    pending: &mut Vec<u8>,
) {
    let until = Instant::now() + Duration::from_secs(2);
    while (!pending.is_empty() || conn.wants_write()) && Instant::now() < until {
        push(conn, pending);
        if flush(conn, sock).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = sock.shut_write();
}

/// The jail's bundle in the proxy's directory (`layout::NET_DIR` in the jail).
pub(crate) const BUNDLE_FILE: &str = "ca-bundle.pem";
/// The roots when the launcher's `SSL_CERT_FILE` names none.
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The variables that make the jail's tools trust the bundle (OpenSSL and its users, git, Node,
/// Python's requests, curl, pip; npm's `cafile`, which Debian's npm sets to the system bundle and
/// which replaces Node's roots, `NODE_EXTRA_CA_CERTS` included).
const TRUST_VARS: &[&str] = &[
    "SSL_CERT_FILE",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PIP_CERT",
    "NPM_CONFIG_CAFILE",
];

/// The jail's environment when `inject` is on: every trust variable at the bundle.
pub(crate) fn jail_env() -> Vec<(String, String)> {
    let path = format!("{}/{BUNDLE_FILE}", crate::jail::layout::NET_DIR);
    TRUST_VARS
        .iter()
        .map(|v| ((*v).to_string(), path.clone()))
        .collect()
}

/// At launch: the session CA made, the jail's bundle written in `dir` (read-only), the proxy's
/// part returned.
pub(crate) fn prepare(
    dir: &std::path::Path,
    session: &str,
    credentials: &[Credential],
    env: &crate::host::HostEnv,
) -> Result<InjectConfig, super::ProxyError> {
    use std::os::unix::fs::OpenOptionsExt;
    let e = super::ProxyError::Inject;
    let roots_file = env
        .get_str("SSL_CERT_FILE")
        .filter(|p| !p.is_empty())
        .unwrap_or(SYSTEM_ROOTS);
    let roots_pem = std::fs::read_to_string(roots_file)
        .map_err(|err| e(format!("reading the roots in {roots_file}: {err}")))?;
    if CertificateDer::pem_slice_iter(roots_pem.as_bytes())
        .flatten()
        .next()
        .is_none()
    {
        return Err(e(format!("{roots_file} holds no certificate")));
    }
    let (ca_cert_pem, ca_key_pem) = new_ca(session, credentials).map_err(e)?;
    let path = dir.join(BUNDLE_FILE);
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(&path)
        .and_then(|mut f| f.write_all(bundle(&roots_pem, &ca_cert_pem).as_bytes()))
        .map_err(|err| e(format!("writing {}: {err}", path.display())))?;
    Ok(InjectConfig {
        credentials: credentials.to_vec(),
        ca_cert_pem,
        ca_key_pem,
        session: session.to_string(),
        roots_pem,
    })
}

/// The bundle the jail's tools trust: the roots, then the session CA.
pub(crate) fn bundle(roots_pem: &str, ca_pem: &str) -> String {
    let mut b = roots_pem.trim_end().to_string();
    b.push('\n');
    b.push_str(ca_pem);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proxy_remakes_the_issuer_and_signs_leaves_the_ca_verifies() {
        let creds = vec![Credential {
            host: "git.test".into(),
            port: 443,
            placeholder: "csb-ph-x".into(),
            secret: "s".into(),
            source: "t".into(),
        }];
        let (cert, key) = new_ca("S1", &creds).unwrap();
        assert!(!key.is_empty() && cert.contains("BEGIN CERTIFICATE"));
        let tls = Tls::new(&InjectConfig {
            credentials: creds,
            ca_cert_pem: cert.clone(),
            ca_key_pem: key,
            session: "S1".into(),
            roots_pem: cert.clone(),
        })
        .unwrap();
        assert!(tls.intercepts("git.test", 443) && !tls.intercepts("git.test", 8443));
        let config = tls.server_config("git.test").unwrap();
        let again = tls.server_config("git.test").unwrap();
        assert!(Arc::ptr_eq(&config, &again), "one leaf per host");
        // A client trusting the CA alone completes a handshake for the leaf's name, not another.
        assert_eq!(handshake(&tls, config.clone(), "git.test"), Ok(()));
        assert!(handshake(&tls, config, "other.test").is_err());
    }

    fn handshake(
        tls: &Tls,
        server: Arc<rustls::ServerConfig>,
        name: &str,
    ) -> Result<(), rustls::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(tls.ca_der.clone()).unwrap();
        let cfg = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from(name.to_string()).unwrap();
        let mut c = rustls::ClientConnection::new(Arc::new(cfg), name).unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        for _ in 0..8 {
            let mut b = Vec::new();
            c.write_tls(&mut b).unwrap();
            s.read_tls(&mut &b[..]).unwrap();
            s.process_new_packets()?;
            let mut b = Vec::new();
            s.write_tls(&mut b).unwrap();
            c.read_tls(&mut &b[..]).unwrap();
            c.process_new_packets()?;
        }
        assert!(!c.is_handshaking());
        Ok(())
    }
}
