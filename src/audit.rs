//! The audit trail: every decision that matters, one JSON object per line, written by the launcher
//! and the human's own commands where the jail cannot write, hash-chained so that a line removed,
//! edited, reordered or inserted is visible (`claude-sandbox audit verify`).
//!
//! Guards against a record the agent rewrites: the directory (`~/.local/state/claude-sandbox/audit`,
//! `CLAUDE_SANDBOX_AUDIT_DIR` overrides it) is hidden in the jail like the runtime directory, so no
//! process of the jail reads or writes it. Against the human's own account it guards only by the
//! chain: a process outside running as the human can still cut the newest lines off the end, which
//! only a copy shipped elsewhere shows (docs/audit.md).
//!
//! Never in the way: a record that cannot be written is said once on stderr (through `tracing`) and
//! counted in the next record that can (`lost`); a launch never fails for it.
//!
//! Schema `v` 1 (docs/audit.md): `v`, `seq` (1, 2, ... across rotations), `time` (RFC 3339 UTC),
//! `host`, `uid`, `session` (or none), `event`, the event's own fields, `prev` (the previous record's
//! `hash`, 64 zeros for the first), `hash` (SHA-256, hex, of the line as written without `hash`).

mod chain;
mod ship;

pub(crate) use chain::verify;
pub(crate) use ship::{
    configure as configure_shipping, release as release_shipping, Ship, ShipTable,
};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The schema version every record carries.
pub(crate) const SCHEMA: u32 = 1;

/// The current file; rotated ones are `audit.jsonl.1` (newest) to `.KEEP`.
pub(crate) const FILE: &str = "audit.jsonl";
/// The lock every writer holds while it appends (several sessions, the human's commands).
const LOCK: &str = "audit.lock";
/// A file past this many bytes is rotated before the next record.
const ROTATE_AT: u64 = 8 << 20;
/// How many rotated files are kept.
pub(crate) const KEEP: usize = 4;

/// Records that could not be written since the last one that was.
static LOST: AtomicU64 = AtomicU64::new(0);

/// One record as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub v: u32,
    pub seq: u64,
    pub time: String,
    pub host: String,
    pub uid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub event: String,
    /// The event's own fields (kept in key order: the serialisation is the hashed text).
    #[serde(flatten)]
    pub fields: Map<String, Value>,
    pub prev: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hash: String,
}

/// The audit directory for this `$HOME`.
pub(crate) fn dir(home: &Path, env: &crate::host::HostEnv) -> PathBuf {
    env.get(crate::host::AUDIT_DIR)
        .filter(|v| v.as_encoded_bytes().first() == Some(&b'/'))
        .map_or_else(
            || home.join(".local/state/claude-sandbox/audit"),
            PathBuf::from,
        )
}

/// An event to record: its name and fields; `session` where one is concerned.
pub(crate) struct Event<'a> {
    pub name: &'a str,
    pub session: Option<&'a str>,
    pub fields: Map<String, Value>,
}

impl<'a> Event<'a> {
    pub(crate) fn new(name: &'a str, session: Option<&'a str>) -> Self {
        Event {
            name,
            session,
            fields: Map::new(),
        }
    }

    pub(crate) fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.fields.insert(key.to_string(), value.into());
        self
    }
}

/// Record `event` in the process's own audit directory; never fails (see the module's doc).
/// Nothing is written inside the jail: the directory is not there, and the jail's word is not the
/// launcher's. The line as written, when it was: the alert store keeps the same record
/// (`alerts::Store::add`).
pub(crate) fn record(event: Event<'_>) -> Option<String> {
    let env = crate::host::HostEnv::capture();
    if crate::jail::nested::inside_this_jail(&env) {
        return None;
    }
    // The crate's unit tests add alerts and acks by the hundred: never into the real home's trail
    // (a test that wants one names its directory).
    if cfg!(test) && env.get(crate::host::AUDIT_DIR).is_none() {
        return None;
    }
    let home = env.get(crate::host::HOME).map(PathBuf::from)?;
    record_in(&dir(&home, &env), event).ok()
}

/// Before the process exits: the shipping queue's bounded wait, and what was dropped written into
/// the chain (`ship::flush`). Nothing when no record was shipped.
pub(crate) fn finish() {
    let env = crate::host::HostEnv::capture();
    if let Some(home) = env.get(crate::host::HOME).map(PathBuf::from) {
        ship::flush(&dir(&home, &env));
    }
}

/// The longest string a record keeps of any field; past it the rest is elided and its length
/// said. Records stay well under what the appender reads back and what a datagram carries.
const MAX_TEXT: usize = 4096;

/// `text` cut at `max` bytes (on a character boundary), with how much was left out.
pub(crate) fn bounded_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[+{} bytes]", &text[..end], text.len() - end)
}

/// Every string in `v` bounded (`MAX_TEXT`), and an array's elements past 256 left out.
fn bound(v: &mut Value) {
    match v {
        Value::String(s) if s.len() > MAX_TEXT => *s = bounded_text(s, MAX_TEXT),
        Value::Array(a) => {
            if a.len() > 256 {
                let more = a.len() - 256;
                a.truncate(256);
                a.push(Value::from(format!("…[+{more} more]")));
            }
            a.iter_mut().for_each(bound);
        }
        Value::Object(o) => o.values_mut().for_each(bound),
        _ => {}
    }
}

/// Record `event` in `dir`; never in the way (a failure is said once and counted), but returned for
/// the launch that must not start without its record (`fail_closed`).
pub(crate) fn record_in(dir: &Path, mut event: Event<'_>) -> Result<String, String> {
    event.fields.values_mut().for_each(bound);
    let lost = LOST.swap(0, Ordering::Relaxed);
    if lost > 0 {
        event.fields.insert("lost".into(), lost.into());
    }
    let shipper = ship::shipper();
    let dropped = shipper.map_or(0, ship::Shipper::take_dropped);
    if dropped > 0 {
        event.fields.insert("ship_dropped".into(), dropped.into());
    }
    match chain::append(dir, &event) {
        Ok((record, line)) => {
            if let Some(s) = shipper {
                s.send(record, line.clone());
            }
            Ok(line)
        }
        Err(e) => {
            let before = LOST.fetch_add(1 + lost, Ordering::Relaxed);
            if before == 0 {
                tracing::warn!("the audit record `{}` was not written: {e}", event.name);
            }
            Err(e.to_string())
        }
    }
}

/// Make the audit directory (0700) if it is missing; a failure is the first record's to report.
pub(crate) fn ensure(dir: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
}

/// `launch`: the session's command, workspace, network mode, the configuration files read, and
/// the policy digest: SHA-256 of those files' contents in order and the effective network policy
/// and writable paths, so that the same image and settings give the same digest across a fleet.
pub(crate) fn launch_event<'a>(
    plan: &crate::jail::plan::Plan,
    input: &crate::jail::plan::PlanInput,
    session: &'a str,
) -> Event<'a> {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    let mut sources = Vec::new();
    for s in &input.config.sources {
        let bytes = std::fs::read(s).unwrap_or_default();
        h.update(s.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(sha2::Sha256::digest(&bytes));
        sources.push(Value::from(s.to_string_lossy().into_owned()));
    }
    h.update(serde_json::to_vec(&plan.policy.network).unwrap_or_default());
    h.update(serde_json::to_vec(&plan.policy.writable).unwrap_or_default());
    let command: Vec<Value> = input
        .command
        .iter()
        .map(|a| Value::from(a.to_string_lossy().into_owned()))
        .collect();
    // The variables that move what the launch reads or how it seals (test overrides a human can
    // set): named, never their values, so a launch under another system file shows in the trail.
    let overrides: Vec<Value> = [
        crate::host::SYSTEM_CONFIG,
        crate::host::AUDIT_DIR,
        crate::host::BWRAP,
        crate::host::SEAL,
        crate::host::WATCH,
        crate::host::RUNTIME_DIR,
        crate::host::LAYERS_DIR,
        crate::host::TEST_DEV_ROOT,
        crate::host::TEST_HOSTS,
        crate::host::TEST_NET_LIMITS,
    ]
    .into_iter()
    .filter(|v| input.host.get(v).is_some())
    .map(Value::from)
    .collect();
    Event::new("launch", Some(session))
        .with("command", command)
        .with("overrides", overrides)
        .with("workspace", input.workspace.to_string_lossy().into_owned())
        .with(
            "network",
            format!("{:?}", plan.policy.network.mode).to_ascii_lowercase(),
        )
        .with("config", sources)
        .with("policy_digest", crate::baseline::hex(&h.finalize()))
}

/// `session-end`: how the session ended (the exit status, or the setup failure), and how long it ran.
pub(crate) fn end_event<'a>(
    result: &crate::Result<i32>,
    ran: std::time::Duration,
    session: &'a str,
) -> Event<'a> {
    let e = Event::new("session-end", Some(session))
        .with("ms", u64::try_from(ran.as_millis()).unwrap_or(u64::MAX));
    match result {
        Ok(code) => e.with("status", *code).with(
            "how",
            match *code {
                c if c > 128 => "signal",
                0 => "exit",
                _ => "exit-nonzero",
            },
        ),
        Err(err) => e.with("how", "setup-failed").with("error", err.to_string()),
    }
}

/// `alert`: every alert as the store records it (quarantines, held items, network denials, seals
/// that came off, ...): one record, written where the alert is. It carries every field of
/// `alerts::Alert` (the record's own `time` and `session` among them), so that the store's line is
/// this record itself: the prompt, `alerts` and the review read what the trail holds.
pub(crate) fn alert_event(a: &crate::alerts::Alert) -> Event<'_> {
    Event::new("alert", Some(&a.session))
        .with("fingerprint", a.fingerprint.clone())
        .with("id", a.id.clone())
        .with("kind", a.kind.as_str().to_string())
        .with("severity", a.severity.as_str())
        .with("path", a.path.to_string_lossy().into_owned())
        .with("action", a.action.clone())
        .with("detail", a.detail.clone())
        .with("quarantine_id", a.quarantine_id.clone())
        .with("sha256", a.sha256.clone())
}

/// The host's name, as records carry it (a container's id in Docker).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
