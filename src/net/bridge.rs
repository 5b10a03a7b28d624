//! Inside the jail: the bridge from `127.0.0.1:PORT` to the proxy's unix socket, the bridges of
//! the chosen loopback ports (`loopback`: each connection to the jail's `127.0.0.1:N` becomes a
//! `CONNECT 127.0.0.1:N` through the same socket, so the proxy's limits hold for them too), and
//! `__connect`, the `ProxyCommand` that takes `ssh` (git over ssh) through the proxy.
//!
//! Guards against a way out that outlives the jail or precedes its seals: the bridge is forked by the
//! exec helper after the gate, just before the command is executed, with its listening socket bound
//! first (so the command never races it) and `PR_SET_PDEATHSIG` set, so it dies with the command.

use super::error::BridgeError;
use crate::jail::layout;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::os::unix::net::UnixStream;

/// argv[1] of the `ProxyCommand`: `claude-sandbox __connect HOST PORT`.
pub const CONNECT: &str = "__connect";

/// In the exec helper: when `host::NET_BRIDGE` names a socket, listen on the jail's loopback and fork a
/// child that bridges every connection to it. The variable is removed from the command's
/// environment. Called while the helper is single-threaded.
pub(crate) fn start_from_env() -> Result<(), BridgeError> {
    // Claude Code's IDE locks of the bridged ports, where the jail's Claude Code looks for them
    // (in every mode: an earlier allowlist session's copies go).
    let claude_ide = std::env::var_os("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".claude")))
        .map(|d| d.join("ide"));
    let Some(socket) = std::env::var_os(crate::host::NET_BRIDGE) else {
        if let Some(dir) = &claude_ide {
            super::loopback::place_locks(std::path::Path::new(layout::NET_DIR), dir, &[]);
        }
        return Ok(());
    };
    let ports = std::env::var(crate::host::NET_LOOPBACK)
        .map(|v| super::loopback::parse_env_value(&v))
        .unwrap_or_default();
    // SAFETY: the exec helper is single-threaded.
    unsafe {
        std::env::remove_var(crate::host::NET_BRIDGE);
        std::env::remove_var(crate::host::NET_LOOPBACK);
    };
    let listener =
        TcpListener::bind(("127.0.0.1", super::PORT)).map_err(|source| BridgeError::Listen {
            port: super::PORT,
            source,
        })?;
    let staged = std::path::Path::new(layout::NET_DIR);
    if let Some(dir) = &claude_ide {
        super::loopback::place_locks(staged, dir, &ports);
    }
    // Node's os.tmpdir(), where Gemini CLI looks.
    let tmp = ["TMPDIR", "TMP", "TEMP"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|v| !v.is_empty()))
        .map_or_else(
            || std::path::PathBuf::from("/tmp"),
            std::path::PathBuf::from,
        );
    super::loopback::place_gemini(staged, &tmp.join("gemini").join("ide"));
    // All bound before the command runs, so it never finds a port free that is meant to be the
    // service outside (and never races the bridge for it).
    let mut chosen = Vec::new();
    for port in ports {
        chosen.push((
            port,
            TcpListener::bind(("127.0.0.1", port))
                .map_err(|source| BridgeError::Loopback { port, source })?,
        ));
        // ::1 too where the jail has IPv6 (a client of `localhost` may try it first).
        if let Ok(v6) = TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, port)) {
            chosen.push((port, v6));
        }
    }
    let parent = rustix::process::getpid();
    // SAFETY: the helper is single-threaded, so the child may do anything the parent could.
    match unsafe { libc::fork() } {
        -1 => Err(BridgeError::Fork(std::io::Error::last_os_error())),
        0 => {
            let dies = rustix::process::set_parent_process_death_signal(Some(
                rustix::process::Signal::KILL,
            ));
            if dies.is_err() || rustix::process::getppid() != Some(parent) {
                // SAFETY: ending this child only.
                unsafe { libc::_exit(0) };
            }
            quiet_stdio();
            for (port, l) in chosen {
                let socket = std::path::PathBuf::from(&socket);
                std::thread::spawn(move || serve_loopback(&l, port, &socket));
            }
            serve(&listener, std::path::Path::new(&socket));
            // SAFETY: ending this child only.
            unsafe { libc::_exit(0) }
        }
        _ => Ok(()),
    }
}

/// The bridge keeps no terminal or pipe of the command open (a reader waiting for end of file).
fn quiet_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = rustix::stdio::dup2_stdin(&null);
        let _ = rustix::stdio::dup2_stdout(&null);
        let _ = rustix::stdio::dup2_stderr(&null);
    }
}

fn serve(listener: &TcpListener, socket: &std::path::Path) {
    for tcp in listener.incoming().flatten() {
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            let Ok(unix) = UnixStream::connect(&socket) else {
                return;
            };
            pipe(tcp, unix);
        });
    }
}

/// A chosen loopback port: each connection is a tunnel the proxy opens to the container's
/// `127.0.0.1:port`; one it refuses (over its limits, or nothing listening outside) is closed.
fn serve_loopback(listener: &TcpListener, port: u16, socket: &std::path::Path) {
    for tcp in listener.incoming().flatten() {
        let socket = socket.to_path_buf();
        std::thread::spawn(move || {
            let Ok(mut unix) = UnixStream::connect(&socket) else {
                return;
            };
            let req =
                format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
            if unix.write_all(req.as_bytes()).is_err() || !established(&mut unix) {
                return;
            }
            pipe(tcp, unix);
        });
    }
}

/// Read the proxy's answer to a CONNECT, byte by byte (what follows is the service's: a database
/// speaks first); whether it is `200`.
fn established(sock: &mut UnixStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match sock.read(&mut byte) {
            Ok(1) if head.len() < 64 * 1024 => head.push(byte[0]),
            _ => return false,
        }
    }
    String::from_utf8_lossy(&head).split_whitespace().nth(1) == Some("200")
}

/// Carry bytes both ways until both sides are done.
fn pipe(tcp: std::net::TcpStream, unix: UnixStream) {
    // What the proxy hands back goes to the client at once (Nagle would hold a second small write
    // for the client's delayed ACK: 40 ms per request on a kept-alive connection).
    let _ = tcp.set_nodelay(true);
    let (Ok(mut t_read), Ok(mut u_write)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut t_read, &mut u_write);
        let _ = u_write.shutdown(Shutdown::Write);
    });
    let (mut u_read, mut t_write) = (unix, tcp);
    let _ = std::io::copy(&mut u_read, &mut t_write);
    let _ = t_write.shutdown(Shutdown::Write);
    let _ = up.join();
}

/// `claude-sandbox __connect HOST PORT`: a CONNECT through the proxy, then stdin/stdout are the
/// tunnel (ssh's `ProxyCommand`). On a refusal the proxy's sentence goes to stderr, status 1.
pub fn connect_main(args: &[OsString]) -> i32 {
    let [host, port] = args else {
        eprintln!("claude-sandbox: {CONNECT} is internal: {CONNECT} HOST PORT");
        return crate::error::EXIT_USAGE;
    };
    let (host, port) = (host.to_string_lossy(), port.to_string_lossy());
    let path = format!("{}/{}", layout::NET_DIR, layout::NET_SOCKET);
    let mut sock = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "claude-sandbox: no network proxy at {path} ({e}): is this jail in allowlist mode?"
            );
            return 1;
        }
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.into_owned()
    };
    let req = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    if sock.write_all(req.as_bytes()).is_err() {
        return 1;
    }
    // Byte by byte: nothing of the tunnel may be read into a buffer that is then dropped.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match sock.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return 1,
        }
    }
    let status = String::from_utf8_lossy(&head);
    if status.split_whitespace().nth(1) != Some("200") {
        let mut body = String::new();
        let _ = sock.read_to_string(&mut body);
        eprint!("{body}");
        return 1;
    }
    let Ok(mut s_write) = sock.try_clone() else {
        return 1;
    };
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut s_write);
        let _ = s_write.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut sock, &mut std::io::stdout().lock());
    0
}
