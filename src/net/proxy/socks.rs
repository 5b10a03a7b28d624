//! SOCKS5 (RFC 1928) as the proxy reads it, incrementally: the greeting, then the request. Pure.
//!
//! Guards against a handshake that holds the proxy: each step is parsed from what has arrived so
//! far, without waiting in a read, so the serving loop can give the whole handshake one deadline.

use std::net::IpAddr;

/// What the bytes so far hold.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Not enough bytes yet.
    More,
    /// The greeting, `len` bytes; whether it offers "no authentication".
    Greeting { len: usize, no_auth: bool },
    /// The request, `len` bytes.
    Request {
        len: usize,
        command: u8,
        host: String,
        port: u16,
    },
    /// Not SOCKS5, or an address type that does not exist: the reply code to send, if any.
    Bad(Option<u8>),
}

/// The greeting: `5, n, methods[n]`.
pub(super) fn greeting(buf: &[u8]) -> Step {
    match buf {
        [5, n, rest @ ..] if rest.len() >= usize::from(*n) => Step::Greeting {
            len: 2 + usize::from(*n),
            no_auth: rest[..usize::from(*n)].contains(&0),
        },
        [5] | [5, _, ..] => Step::More,
        _ => Step::Bad(None),
    }
}

/// The request after the greeting: `5, cmd, 0, atyp, addr, port`.
pub(super) fn request(buf: &[u8]) -> Step {
    let [version, command, _, atyp, rest @ ..] = buf else {
        return if buf.first().is_some_and(|v| *v != 5) {
            Step::Bad(None)
        } else {
            Step::More
        };
    };
    if *version != 5 {
        return Step::Bad(None);
    }
    let (addr_len, host): (usize, Option<String>) = match atyp {
        1 => (
            4,
            rest.get(..4)
                .map(|a| IpAddr::from(<[u8; 4]>::try_from(a).unwrap()).to_string()),
        ),
        4 => (
            16,
            rest.get(..16)
                .map(|a| IpAddr::from(<[u8; 16]>::try_from(a).unwrap()).to_string()),
        ),
        3 => match rest.first() {
            Some(n) => (
                1 + usize::from(*n),
                rest.get(1..=usize::from(*n))
                    .map(|name| String::from_utf8_lossy(name).into_owned()),
            ),
            None => return Step::More,
        },
        _ => return Step::Bad(Some(8)), // address type not supported
    };
    let (Some(host), Some(port)) = (host, rest.get(addr_len..addr_len + 2)) else {
        return Step::More;
    };
    Step::Request {
        len: 4 + addr_len + 2,
        command: *command,
        host,
        port: u16::from_be_bytes([port[0], port[1]]),
    }
}

/// A reply with `code` (0 succeeded, 1 general failure, 2 not allowed by ruleset, 4 host
/// unreachable, 7 command not supported, 8 address type not supported).
pub(super) fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}
