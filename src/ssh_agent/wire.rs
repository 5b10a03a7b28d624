//! The ssh-agent protocol's framing and the few messages the filter reads (draft-miller-ssh-agent;
//! OpenSSH's PROTOCOL.agent): `uint32 length || byte type || contents`, strings as `uint32 length
//! || bytes`.
//!
//! Guards against hostile framing from the jail: every message is read with a length bound
//! (`MAX_MESSAGE`), a length of zero or above the bound closes the connection, and every field is
//! read with bounds checks (`Reader`): truncated or trailing garbage is a parse failure, never a
//! panic.

use std::io::{self, Read, Write};

/// The largest message the filter reads from either side (OpenSSH's own agent uses 256 KiB).
pub(crate) const MAX_MESSAGE: usize = 256 * 1024;

pub(crate) const FAILURE: u8 = 5;
pub(crate) const SUCCESS: u8 = 6;
pub(crate) const REQUEST_IDENTITIES: u8 = 11;
pub(crate) const IDENTITIES_ANSWER: u8 = 12;
pub(crate) const SIGN_REQUEST: u8 = 13;
pub(crate) const EXTENSION: u8 = 27;

/// The extension OpenSSH ≥ 8.9 sends after key exchange (PROTOCOL.agent, "session-bind").
pub(crate) const SESSION_BIND: &[u8] = b"session-bind@openssh.com";

/// The first byte of a userauth request, after the session id (RFC 4252, `SSH_MSG_USERAUTH_REQUEST`).
pub(crate) const USERAUTH_REQUEST: u8 = 50;

/// The magic preamble of what `ssh-keygen -Y sign` asks the agent to sign (OpenSSH's PROTOCOL.sshsig).
pub(crate) const SSHSIG_MAGIC: &[u8] = b"SSHSIG";

/// Why a frame could not be read: the connection is closed.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// End of file before a message began: the peer closed.
    Closed,
    /// A zero or oversized length: closed at once.
    BadLength(usize),
    Io(io::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Closed => f.write_str("closed"),
            FrameError::BadLength(n) => write!(f, "a message of {n} bytes (at most {MAX_MESSAGE})"),
            FrameError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Read one message (its type byte and contents, without the length).
pub(crate) fn read_frame(r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(FrameError::Io(e)),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n == 0 || n > MAX_MESSAGE {
        return Err(FrameError::BadLength(n));
    }
    let mut body = vec![0u8; n];
    r.read_exact(&mut body).map_err(FrameError::Io)?;
    Ok(body)
}

/// Write one message (`body`: its type byte and contents).
pub(crate) fn write_frame(w: &mut impl Write, body: &[u8]) -> io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("message too long"))?;
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    w.write_all(&out)
}

/// A bounds-checked reader over a message's bytes.
pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader(bytes)
    }

    pub(crate) fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b)
    }

    pub(crate) fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `string` as the protocol writes it.
pub(crate) fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&u32::try_from(s.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(s);
}

/// A message from the jail, as far as the filter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request<'a> {
    Identities,
    Sign {
        key: &'a [u8],
        data: &'a [u8],
        flags: u32,
    },
    /// `session-bind@openssh.com`: the server's host key, the session identifier, the host key's
    /// signature over it, and whether the connection forwards the agent further.
    Bind {
        host_key: &'a [u8],
        session_id: &'a [u8],
        forwarding: bool,
    },
    /// Another extension, by name (refused).
    Extension(&'a [u8]),
    /// Any other type, or a known one whose contents do not parse (refused).
    Other(u8),
}

/// Read a message's body (type byte first). Never fails: what does not parse is `Other`.
pub(crate) fn parse(body: &[u8]) -> Request<'_> {
    let mut r = Reader::new(body);
    let Some(kind) = r.byte() else {
        return Request::Other(0);
    };
    let parsed = match kind {
        REQUEST_IDENTITIES => r.is_empty().then_some(Request::Identities),
        SIGN_REQUEST => (|| {
            let key = r.string()?;
            let data = r.string()?;
            let flags = r.u32()?;
            r.is_empty().then_some(Request::Sign { key, data, flags })
        })(),
        EXTENSION => (|| {
            let name = r.string()?;
            if name != SESSION_BIND {
                return Some(Request::Extension(name));
            }
            let host_key = r.string()?;
            let session_id = r.string()?;
            let _signature = r.string()?;
            let forwarding = match r.byte()? {
                0 => false,
                1 => true,
                _ => return None,
            };
            r.is_empty().then_some(Request::Bind {
                host_key,
                session_id,
                forwarding,
            })
        })(),
        _ => None,
    };
    parsed.unwrap_or(Request::Other(kind))
}

/// The identities of an `IDENTITIES_ANSWER` (key blob, comment); `None` if it does not parse.
pub(crate) fn identities(body: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut r = Reader::new(body);
    if r.byte()? != IDENTITIES_ANSWER {
        return None;
    }
    let n = r.u32()?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push((r.string()?, r.string()?));
    }
    r.is_empty().then_some(out)
}

/// An `IDENTITIES_ANSWER` holding `keys`.
pub(crate) fn identities_answer(keys: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = vec![IDENTITIES_ANSWER];
    out.extend_from_slice(&u32::try_from(keys.len()).unwrap_or(0).to_be_bytes());
    for (blob, comment) in keys {
        put_string(&mut out, blob);
        put_string(&mut out, comment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut b = vec![SIGN_REQUEST];
        put_string(&mut b, key);
        put_string(&mut b, data);
        b.extend_from_slice(&0u32.to_be_bytes());
        b
    }

    #[test]
    fn frames_are_bounded_and_a_short_one_is_an_error() {
        let mut ok = Vec::new();
        write_frame(&mut ok, &[REQUEST_IDENTITIES]).unwrap();
        assert_eq!(
            read_frame(&mut ok.as_slice()).unwrap(),
            [REQUEST_IDENTITIES]
        );
        assert!(matches!(read_frame(&mut &b""[..]), Err(FrameError::Closed)));
        assert!(matches!(
            read_frame(&mut &[0u8, 0, 0, 0][..]),
            Err(FrameError::BadLength(0))
        ));
        let huge = u32::try_from(MAX_MESSAGE + 1).unwrap().to_be_bytes();
        assert!(matches!(
            read_frame(&mut &huge[..]),
            Err(FrameError::BadLength(_))
        ));
        // A length promising more than arrives.
        assert!(matches!(
            read_frame(&mut &[0u8, 0, 0, 9, 11][..]),
            Err(FrameError::Io(_))
        ));
    }

    #[test]
    fn requests_parse_and_anything_malformed_is_other() {
        assert_eq!(parse(&[REQUEST_IDENTITIES]), Request::Identities);
        assert_eq!(parse(&[REQUEST_IDENTITIES, 0]), Request::Other(11));
        let s = sign(b"K", b"D");
        assert_eq!(
            parse(&s),
            Request::Sign {
                key: b"K",
                data: b"D",
                flags: 0
            }
        );
        // Every truncation of a sign request, and trailing bytes, are refused as `Other`.
        for n in 1..s.len() {
            assert_eq!(parse(&s[..n]), Request::Other(SIGN_REQUEST), "{n}");
        }
        let mut long = s.clone();
        long.push(0);
        assert_eq!(parse(&long), Request::Other(SIGN_REQUEST));
        // A string length beyond the message.
        assert_eq!(
            parse(&[SIGN_REQUEST, 0xff, 0xff, 0xff, 0xff, 1]),
            Request::Other(SIGN_REQUEST)
        );
        assert_eq!(parse(&[]), Request::Other(0));
        assert_eq!(parse(&[19]), Request::Other(19));
        let mut ext = vec![EXTENSION];
        put_string(&mut ext, b"query");
        assert_eq!(parse(&ext), Request::Extension(b"query"));
    }

    #[test]
    fn a_session_bind_is_read_with_its_forwarding_flag() {
        let bind = |fwd: u8| {
            let mut b = vec![EXTENSION];
            put_string(&mut b, SESSION_BIND);
            put_string(&mut b, b"HOSTKEY");
            put_string(&mut b, b"SID");
            put_string(&mut b, b"SIG");
            b.push(fwd);
            b
        };
        assert_eq!(
            parse(&bind(1)),
            Request::Bind {
                host_key: b"HOSTKEY",
                session_id: b"SID",
                forwarding: true
            }
        );
        assert!(matches!(
            parse(&bind(0)),
            Request::Bind {
                forwarding: false,
                ..
            }
        ));
        assert_eq!(parse(&bind(2)), Request::Other(EXTENSION));
        let b = bind(0);
        assert_eq!(parse(&b[..b.len() - 1]), Request::Other(EXTENSION));
    }

    #[test]
    fn identities_round_trip_and_garbage_is_none() {
        let a = identities_answer(&[(b"k1", b"c1"), (b"k2", b"")]);
        assert_eq!(
            identities(&a).unwrap(),
            vec![(&b"k1"[..], &b"c1"[..]), (&b"k2"[..], &b""[..])]
        );
        assert!(identities(&a[..a.len() - 1]).is_none());
        assert!(identities(&[IDENTITIES_ANSWER, 0, 0, 0, 9]).is_none());
        assert!(identities(&[FAILURE]).is_none());
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic generator: every prefix of pseudo-random messages.
        let mut x: u32 = 0x1234_5678;
        for _ in 0..2000 {
            let n = (x % 64) as usize;
            let mut m = Vec::with_capacity(n);
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                m.push(u8::try_from(x & 0xff).unwrap());
            }
            let _ = parse(&m);
            let _ = identities(&m);
            let _ = read_frame(&mut m.as_slice());
        }
    }
}
