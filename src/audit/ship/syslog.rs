//! Syslog (RFC 5424): one message per record, to a local socket (`unix:/dev/log`), or to a host
//! over UDP (one datagram each) or TCP (octet-counted framing, RFC 6587).
//!
//! The message is the record's JSON line as the chain holds it, so a receiver can check its hash;
//! the structured data `[audit@32473 ...]` repeats the fields a filter needs (`event`, `seq`,
//! `session`, `kind`, `severity`, `hash`). 32473 is the enterprise number RFC 5612 sets aside for
//! documentation: the SD-ID says whose it is without claiming a registration we do not have.
//! Every header field is reduced to printable ASCII: the record carries bytes the jail chose (a
//! path, a command), and those stay inside the JSON message, escaped by JSON.

use super::{severity, Item};
use crate::audit::Record;
use std::fmt::Write as _;
use std::io::Write;
use std::time::Duration;

/// A datagram (UDP, a local socket) carries at most this much of a message; the rest is cut (RFC
/// 5424 allows it), the record's `hash` still in the structured data, so one long record can never
/// fail the target (EMSGSIZE) and take the records after it down with it.
const MAX_DATAGRAM: usize = 60_000;

/// `auth` (4): a security record.
pub(super) const DEFAULT_FACILITY: u8 = 4;

const FACILITIES: [&str; 24] = [
    "kern",
    "user",
    "mail",
    "daemon",
    "auth",
    "syslog",
    "lpr",
    "news",
    "uucp",
    "cron",
    "authpriv",
    "ftp",
    "ntp",
    "security",
    "console",
    "solaris-cron",
    "local0",
    "local1",
    "local2",
    "local3",
    "local4",
    "local5",
    "local6",
    "local7",
];

/// A facility by its name (`auth`, `local0`, ...).
pub(super) fn facility(name: &str) -> Result<u8, String> {
    FACILITIES
        .iter()
        .position(|f| *f == name)
        .and_then(|i| u8::try_from(i).ok())
        .ok_or_else(|| {
            format!(
                "[audit] syslog_facility `{}` is not a facility: one of {}",
                crate::escape::visible(name),
                FACILITIES.join(", ")
            )
        })
}

/// Where syslog messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Unix(std::path::PathBuf),
    Udp(String),
    Tcp(String),
}

impl Target {
    /// `unix:/dev/log`, `udp:HOST:PORT`, `tcp:HOST:PORT`.
    pub(super) fn parse(s: &str) -> Result<Target, String> {
        let hostport = |rest: &str| {
            rest.rsplit_once(':')
                .filter(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0))
                .map(|_| rest.to_string())
        };
        let bad = || {
            format!(
                "[audit] syslog = \"{}\": write unix:/dev/log, udp:HOST:PORT or tcp:HOST:PORT",
                crate::escape::visible(s)
            )
        };
        match s.split_once(':') {
            Some(("unix", p)) if p.starts_with('/') => Ok(Target::Unix(p.into())),
            Some(("udp", rest)) => hostport(rest).map(Target::Udp).ok_or_else(bad),
            Some(("tcp", rest)) => hostport(rest).map(Target::Tcp).ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Unix(p) => write!(f, "unix:{}", p.display()),
            Target::Udp(a) => write!(f, "udp:{a}"),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

/// Printable ASCII without spaces, at most `max` characters, `-` when empty (RFC 5424's NILVALUE).
fn header(s: &str, max: usize) -> String {
    let out: String = s.chars().filter(char::is_ascii_graphic).take(max).collect();
    if out.is_empty() {
        "-".into()
    } else {
        out
    }
}

/// A structured-data parameter value: `"`, `\` and `]` escaped (RFC 5424 6.3.3), control
/// characters left out.
fn param(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().filter(|c| !c.is_control()) {
        if matches!(c, '"' | '\\' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The RFC 5424 message for `r`, whose chain line is `line`.
pub(super) fn format(r: &Record, line: &str, facility: u8, pid: u32) -> String {
    let (sev, _, _) = severity(r);
    let pri = u16::from(facility) * 8 + u16::from(sev);
    let mut sd = format!(
        "[audit@32473 v=\"{}\" seq=\"{}\" event=\"{}\"",
        r.v,
        r.seq,
        param(&r.event)
    );
    if let Some(s) = &r.session {
        let _ = write!(sd, " session=\"{}\"", param(s));
    }
    for key in ["kind", "severity"] {
        if let Some(v) = r.fields.get(key).and_then(serde_json::Value::as_str) {
            let _ = write!(sd, " {key}=\"{}\"", param(v));
        }
    }
    let _ = write!(sd, " hash=\"{}\"]", param(&r.hash));
    format!(
        "<{pri}>1 {} {} claude-sandbox {pid} {} {sd} {line}",
        header(&r.time, 64),
        header(&r.host, 255),
        header(&r.event, 32),
    )
}

/// The sending end, kept open between records (a TCP connection is made again after a failure).
pub(super) struct Sender {
    target: Target,
    facility: u8,
    tcp: Option<std::net::TcpStream>,
}

impl Sender {
    pub(super) fn new(target: Target, facility: u8) -> Sender {
        Sender {
            target,
            facility,
            tcp: None,
        }
    }

    pub(super) fn send(&mut self, batch: &[Item], timeout: Duration) -> std::io::Result<()> {
        let pid = std::process::id();
        for item in batch {
            let msg = format(&item.record, &item.line, self.facility, pid);
            let datagram = || crate::audit::bounded_text(&msg, MAX_DATAGRAM);
            match &self.target {
                Target::Unix(path) => {
                    let msg = datagram();
                    let s = std::os::unix::net::UnixDatagram::unbound()?;
                    s.set_write_timeout(Some(timeout))?;
                    s.send_to(msg.as_bytes(), path)?;
                }
                Target::Udp(addr) => {
                    let msg = datagram();
                    let to = super::otlp::resolve(addr)?;
                    let local = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
                    let s = std::net::UdpSocket::bind(local)?;
                    s.send_to(msg.as_bytes(), to)?;
                }
                Target::Tcp(addr) => {
                    if self.tcp.is_none() {
                        let s = std::net::TcpStream::connect_timeout(
                            &super::otlp::resolve(addr)?,
                            timeout,
                        )?;
                        s.set_write_timeout(Some(timeout))?;
                        self.tcp = Some(s);
                    }
                    let framed = format!("{} {msg}", msg.len());
                    let written = self
                        .tcp
                        .as_mut()
                        .map_or(Ok(()), |s| s.write_all(framed.as_bytes()));
                    if let Err(e) = written {
                        self.tcp = None;
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!(
            Target::parse("unix:/dev/log").unwrap(),
            Target::Unix("/dev/log".into())
        );
        assert_eq!(
            Target::parse("tcp:[::1]:6514").unwrap(),
            Target::Tcp("[::1]:6514".into())
        );
        for bad in [
            "udp:host",
            "udp::514",
            "tcp:h:0",
            "tcp:h:70000",
            "file:/x",
            "unix:x",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(facility("local0"), Ok(16));
        assert!(facility("nope").is_err());
    }

    #[test]
    fn a_message_is_rfc5424_with_the_line_as_written_and_jail_bytes_kept_out_of_the_header() {
        let mut fields = serde_json::Map::new();
        fields.insert("kind".into(), "git-hook".into());
        fields.insert("severity".into(), "high".into());
        let r = Record {
            v: 1,
            seq: 7,
            time: "2026-12-03T05:00:00Z".into(),
            host: "box one\n".into(),
            uid: 1000,
            session: Some("s\"]x".into()),
            event: "alert".into(),
            fields,
            prev: String::new(),
            hash: "ab".into(),
        };
        let m = format(&r, "{\"seq\":7}", 4, 42);
        assert_eq!(
            m,
            "<36>1 2026-12-03T05:00:00Z boxone claude-sandbox 42 alert \
             [audit@32473 v=\"1\" seq=\"7\" event=\"alert\" session=\"s\\\"\\]x\" kind=\"git-hook\" \
             severity=\"high\" hash=\"ab\"] {\"seq\":7}"
        );
    }
}
