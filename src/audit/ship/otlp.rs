//! OpenTelemetry logs over OTLP/HTTP, JSON encoding (`application/json`, which every OTLP/HTTP
//! receiver accepts): one `ExportLogsServiceRequest` per batch, sent to the collector in a POST.
//!
//! Each record is a `LogRecord` whose body is the chain's line as written (so the receiver can check
//! the hash) and whose attributes are the record's fields under `claude_sandbox.` (`event.name` is
//! the event as well, the name OpenTelemetry's semantic conventions give it). Plain `http://` only:
//! the collector is expected beside the container (an agent, a sidecar) and forwards over TLS
//! itself; no credential is configured here, because the system file is readable in the jail.

use super::{severity, Item};
use serde_json::{json, Map, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, UNIX_EPOCH};

/// `http://HOST:PORT/PATH`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `HOST:PORT`.
    authority: String,
    /// `/v1/logs` unless the URL names a path.
    path: String,
}

impl Endpoint {
    /// `http://collector:4318` (the path `/v1/logs` added, as OTLP's base endpoint) or a full URL
    /// with its own path (used as it is, as OTLP's per-signal endpoint).
    pub(super) fn parse(url: &str) -> Result<Endpoint, String> {
        let bad = |why: &str| format!("[audit] otlp = \"{}\": {why}", crate::escape::visible(url));
        if url.starts_with("https://") {
            return Err(bad(
                "https is not built in: point it at an OpenTelemetry Collector beside the \
                 container over http (http://127.0.0.1:4318), which forwards over TLS",
            ));
        }
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("write http://HOST:PORT"))?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let port_ok = authority
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !port_ok || authority.contains('@') {
            return Err(bad(
                "write http://HOST:PORT (the port is needed; 4318 is OTLP/HTTP's)",
            ));
        }
        if path.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("the path has a space or a control character"));
        }
        Ok(Endpoint {
            authority: authority.to_string(),
            path: if path.is_empty() || path == "/" {
                "/v1/logs".into()
            } else {
                path.to_string()
            },
        })
    }

    pub(super) fn authority(&self) -> &str {
        &self.authority
    }

    /// POST `batch`; `Ok` on a 2xx answer.
    pub(super) fn send(&self, batch: &[Item], timeout: Duration) -> std::io::Result<()> {
        let body = serde_json::to_vec(&request(batch)).map_err(std::io::Error::other)?;
        let mut s = TcpStream::connect_timeout(&resolve(&self.authority)?, timeout)?;
        s.set_write_timeout(Some(timeout))?;
        s.set_read_timeout(Some(timeout))?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\nUser-Agent: claude-sandbox\r\n\r\n",
            self.path,
            self.authority,
            body.len()
        );
        s.write_all(head.as_bytes())?;
        s.write_all(&body)?;
        let mut status = [0u8; 12];
        s.read_exact(&mut status)?;
        // "HTTP/1.1 200"
        match &status[9..12] {
            [b'2', _, _] => Ok(()),
            code => Err(std::io::Error::other(format!(
                "the collector answered {}",
                String::from_utf8_lossy(code)
            ))),
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

/// The first address of `HOST:PORT`.
pub(super) fn resolve(authority: &str) -> std::io::Result<SocketAddr> {
    authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{authority}: no address")))
}

/// A JSON value as OTLP's `AnyValue` (64-bit integers as strings, as its JSON mapping writes them).
fn any(v: &Value) -> Value {
    match v {
        Value::Null => json!({}),
        Value::Bool(b) => json!({ "boolValue": b }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "intValue": n.to_string() }),
        Value::Number(n) => json!({ "doubleValue": n.as_f64() }),
        Value::String(s) => json!({ "stringValue": s }),
        Value::Array(a) => {
            json!({ "arrayValue": { "values": a.iter().map(any).collect::<Vec<_>>() } })
        }
        Value::Object(o) => json!({ "kvlistValue": { "values": attributes(o, "") } }),
    }
}

fn attributes(o: &Map<String, Value>, prefix: &str) -> Vec<Value> {
    o.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| json!({ "key": format!("{prefix}{k}"), "value": any(v) }))
        .collect()
}

/// The `ExportLogsServiceRequest` for `batch`.
fn request(batch: &[Item]) -> Value {
    let records: Vec<Value> = batch
        .iter()
        .map(|item| {
            let r = &item.record;
            let nanos = item
                .at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
                .to_string();
            let (_, number, text) = severity(r);
            let mut head = Map::new();
            head.insert("v".into(), r.v.into());
            head.insert("seq".into(), r.seq.into());
            head.insert("time".into(), r.time.clone().into());
            head.insert("uid".into(), r.uid.into());
            head.insert("event".into(), r.event.clone().into());
            if let Some(s) = &r.session {
                head.insert("session".into(), s.clone().into());
            }
            head.insert("hash".into(), r.hash.clone().into());
            let mut attrs =
                vec![json!({ "key": "event.name", "value": { "stringValue": r.event } })];
            attrs.extend(attributes(&head, "claude_sandbox."));
            attrs.extend(attributes(&r.fields, "claude_sandbox."));
            json!({
                "timeUnixNano": nanos,
                "observedTimeUnixNano": nanos,
                "severityNumber": number,
                "severityText": text,
                "body": { "stringValue": item.line },
                "attributes": attrs,
            })
        })
        .collect();
    let host = batch
        .first()
        .map(|i| i.record.host.clone())
        .unwrap_or_default();
    json!({
        "resourceLogs": [{
            "resource": { "attributes": [
                { "key": "service.name", "value": { "stringValue": "claude-sandbox" } },
                { "key": "service.version", "value": { "stringValue": env!("CARGO_PKG_VERSION") } },
                { "key": "host.name", "value": { "stringValue": host } },
            ] },
            "scopeLogs": [{
                "scope": { "name": "claude-sandbox.audit", "version": crate::audit::SCHEMA.to_string() },
                "logRecords": records,
            }],
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        let e = Endpoint::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(e.to_string(), "http://127.0.0.1:4318/v1/logs");
        let e = Endpoint::parse("http://otel.internal:80/custom/logs").unwrap();
        assert_eq!(e.to_string(), "http://otel.internal:80/custom/logs");
        for bad in [
            "http://host",
            "ftp://h:1",
            "https://h:4318",
            "http://u@h:1",
            "http://h:1/a b",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_map_onto_any_value() {
        assert_eq!(any(&json!(5)), json!({"intValue": "5"}));
        assert_eq!(
            any(&json!(["a"])),
            json!({"arrayValue": {"values": [{"stringValue": "a"}]}})
        );
        assert_eq!(
            any(&json!({"k": true, "n": null})),
            json!({"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": true}}]}})
        );
    }
}
