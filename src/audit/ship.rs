//! Shipping: each audit record, once it is in the chain, also goes to the team's log pipeline —
//! syslog (RFC 5424) and OpenTelemetry logs over OTLP/HTTP — so that a fleet's records are read in
//! one place, and a record cut off the end of a local file is still seen elsewhere.
//!
//! Guards against two things. A pipeline the agent could redirect or silence: the targets are read
//! from the system configuration only (`[audit]` in `/etc/claude-sandbox/config.toml`; a user's or
//! a workspace's file that names one is refused), and the jail never ships (it writes no record).
//! And a pipeline in the way of the work: a record is handed to a bounded queue and a thread of its
//! own sends it; a slow, dead or unreachable collector costs the launch nothing. What could not be
//! sent is counted, and the count is written into the chain itself (`ship_dropped` on the next
//! record, or a `ship-dropped` record when the process ends), so a gap in the shipped copy is
//! explained by the local one. Before a process exits it waits for the queue at most `timeout_ms`.
//! The launcher holds the thread back until it has forked its sealer (`release`): a fork is only
//! sound while a process runs one thread, and a second thread there made every launch execute the
//! sealer instead (+4 ms of CPU, measured with farm-bench).

mod otlp;
mod syslog;

use super::Record;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Records waiting to be sent; past this they are dropped (and counted).
const QUEUE: usize = 1024;
/// Records sent in one OTLP request, at most.
const BATCH: usize = 64;
/// A target that failed is not tried again for this long (its records are counted as dropped), so
/// that a dead collector does not turn every record into a timeout.
const BACKOFF: Duration = Duration::from_secs(30);
/// The default for connecting, writing and the wait at exit.
const TIMEOUT_MS: u64 = 500;

/// `[audit]` as written in the system file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShipTable {
    syslog: Option<String>,
    syslog_facility: Option<String>,
    otlp: Option<String>,
    timeout_ms: Option<u64>,
}

/// Where records go, checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Ship {
    pub syslog: Option<syslog::Target>,
    pub facility: u8,
    pub otlp: Option<otlp::Endpoint>,
    pub timeout: Duration,
}

impl Ship {
    /// Check `[audit]`; the error is the sentence for the file's line.
    pub(crate) fn from_table(t: &ShipTable) -> Result<Ship, String> {
        Ok(Ship {
            syslog: t.syslog.as_deref().map(syslog::Target::parse).transpose()?,
            facility: t
                .syslog_facility
                .as_deref()
                .map_or(Ok(syslog::DEFAULT_FACILITY), syslog::facility)?,
            otlp: t.otlp.as_deref().map(otlp::Endpoint::parse).transpose()?,
            // At most 2 s: the network proxy flushes before its summary, which the launcher
            // waits for that long.
            timeout: Duration::from_millis(t.timeout_ms.unwrap_or(TIMEOUT_MS).clamp(10, 2_000)),
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.syslog.is_none() && self.otlp.is_none()
    }

    /// One line per target, for `explain`.
    pub(crate) fn describe(&self) -> Vec<String> {
        self.probe_with(false).into_iter().map(|(l, _)| l).collect()
    }

    /// Each target's line and whether it can be reached now (`doctor`): a TCP target is connected
    /// to, a UDP one resolved, a local socket looked for.
    pub(crate) fn probe(&self) -> Vec<(String, Result<(), String>)> {
        self.probe_with(true)
    }

    fn probe_with(&self, reach: bool) -> Vec<(String, Result<(), String>)> {
        let connect = |authority: &str| -> Result<(), String> {
            let addr = otlp::resolve(authority).map_err(|e| e.to_string())?;
            std::net::TcpStream::connect_timeout(&addr, self.timeout)
                .map(drop)
                .map_err(|e| e.to_string())
        };
        let mut out = Vec::new();
        if let Some(t) = &self.syslog {
            let reached = match t {
                _ if !reach => Ok(()),
                syslog::Target::Tcp(a) => connect(a),
                syslog::Target::Udp(a) => otlp::resolve(a).map(drop).map_err(|e| e.to_string()),
                syslog::Target::Unix(p) => {
                    use std::os::unix::fs::FileTypeExt;
                    match std::fs::metadata(p) {
                        Ok(m) if m.file_type().is_socket() => Ok(()),
                        Ok(_) => Err("not a socket".into()),
                        Err(e) => Err(e.to_string()),
                    }
                }
            };
            out.push((format!("syslog (RFC 5424) to {t}"), reached));
        }
        if let Some(e) = &self.otlp {
            let reached = if reach {
                connect(e.authority())
            } else {
                Ok(())
            };
            out.push((
                format!("OpenTelemetry logs (OTLP/HTTP, JSON) to {e}"),
                reached,
            ));
        }
        out
    }
}

/// One record to send: its fields and the exact line in the chain.
struct Item {
    record: Record,
    line: String,
    at: SystemTime,
}

/// The process's shipper: the queue's sending end and what the thread reports back.
pub(super) struct Shipper {
    tx: SyncSender<Item>,
    state: Arc<Shared>,
    timeout: Duration,
    /// The thread not started yet, and its queue's receiving end: the launcher holds it back
    /// until the sealer is forked (`release`), which it may do only while it has one thread
    /// (`jail::seal::single_threaded`); records wait in the queue meanwhile.
    unstarted: Mutex<Option<(Receiver<Item>, Worker)>>,
}

#[derive(Default)]
struct Shared {
    /// Records not delivered to every target, not yet written into the chain.
    dropped: AtomicU64,
    /// Records queued and not yet handled by the thread.
    pending: Mutex<usize>,
    idle: Condvar,
}

/// Each process's shipper, by pid: a process forked from the launcher (the network proxy) has a
/// copy of the launcher's memory, whose shipper's thread does not exist there; it gets its own.
/// (Forks happen while the launcher has one thread, so the lock is never held across one.)
static SHIPPERS: Mutex<Vec<(u32, &'static Option<Shipper>)>> = Mutex::new(Vec::new());

/// This process's shipper, made by `make` the first time.
fn this_process(make: impl FnOnce() -> Option<Shipper>) -> Option<&'static Shipper> {
    let pid = std::process::id();
    let mut all = SHIPPERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, s)) = all.iter().find(|(p, _)| *p == pid) {
        return s.as_ref();
    }
    // One per process for its whole life: leaked on purpose.
    let s: &'static Option<Shipper> = Box::leak(Box::new(make()));
    all.push((pid, s));
    s.as_ref()
}

/// This process's shipper, if it has made one (`flush`, `release`: never made there).
fn existing() -> Option<&'static Shipper> {
    let pid = std::process::id();
    SHIPPERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .find(|(p, _)| *p == pid)
        .and_then(|(_, s)| s.as_ref())
}

/// Use `ship` for this process (the launcher passes the configuration it loaded), its thread held
/// back until `release`. The first call, or the first record, decides.
pub(crate) fn configure(ship: &Ship) {
    let _ = this_process(|| Shipper::new(ship, true));
}

/// Start the thread that sends (the launcher, once its sealer is forked).
pub(crate) fn release() {
    if let Some(s) = existing() {
        s.release();
    }
}

/// This process's shipper: configured, or read from the system file on the first record.
pub(super) fn shipper() -> Option<&'static Shipper> {
    this_process(|| {
        let env = crate::host::HostEnv::capture();
        match crate::config::system_only(&env) {
            Ok(c) => Shipper::new(&c.audit, false),
            Err(e) => {
                tracing::warn!("audit records are not shipped: {e}");
                None
            }
        }
    })
}

/// Wait until the queue is sent, at most the configured timeout; then write what was dropped into
/// the chain in `dir`. Every process that records calls it before it ends (`audit::finish`).
pub(crate) fn flush(dir: &std::path::Path) {
    let Some(s) = existing() else {
        return;
    };
    // A launch that stopped before its sealer still ships what it recorded.
    s.release();
    let deadline = Instant::now() + s.timeout;
    let mut pending = s
        .state
        .pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while *pending > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        pending = s
            .state
            .idle
            .wait_timeout(pending, left)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
    // What is still queued will not be sent by this process.
    let unsent = *pending as u64;
    drop(pending);
    let dropped = s.state.dropped.swap(0, Ordering::Relaxed) + unsent;
    if dropped > 0 {
        let event = super::Event::new("ship-dropped", None).with("count", dropped);
        if let Err(e) = super::chain::append(dir, &event) {
            tracing::warn!("the audit record `ship-dropped` was not written: {e}");
        }
    }
}

impl Shipper {
    /// A shipper for `ship` (none when it names no target); its thread started now unless `held`.
    fn new(ship: &Ship, held: bool) -> Option<Shipper> {
        if ship.is_empty() {
            return None;
        }
        let (tx, rx) = sync_channel(QUEUE);
        let state = Arc::new(Shared::default());
        let worker = Worker {
            syslog: ship
                .syslog
                .clone()
                .map(|t| syslog::Sender::new(t, ship.facility)),
            otlp: ship.otlp.clone(),
            timeout: ship.timeout,
            down: [None, None],
            said: [false, false],
            state: Arc::clone(&state),
        };
        let s = Shipper {
            tx,
            state,
            timeout: ship.timeout,
            unstarted: Mutex::new(Some((rx, worker))),
        };
        if !held {
            s.release();
        }
        Some(s)
    }

    /// Start the thread if it is not running (a failure to start it: what waits is dropped at
    /// `flush`, counted).
    fn release(&self) {
        let unstarted = self
            .unstarted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((rx, worker)) = unstarted {
            let started = std::thread::Builder::new()
                .name("audit-ship".into())
                .spawn(move || worker.run(&rx));
            if let Err(e) = started {
                tracing::warn!("audit records are not shipped: {e}");
            }
        }
    }

    /// Queue `record` (never blocks: a full queue drops it, counted).
    pub(super) fn send(&self, record: Record, line: String) {
        let item = Item {
            record,
            line,
            at: SystemTime::now(),
        };
        *self
            .state
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(item) {
            self.state.done(1, true);
        }
    }

    /// Records dropped since the last call: the next record carries the count.
    pub(super) fn take_dropped(&self) -> u64 {
        self.state.dropped.swap(0, Ordering::Relaxed)
    }
}

impl Shared {
    fn done(&self, n: usize, dropped: bool) {
        if dropped {
            self.dropped.fetch_add(n as u64, Ordering::Relaxed);
        }
        let mut p = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *p = p.saturating_sub(n);
        if *p == 0 {
            self.idle.notify_all();
        }
    }
}

/// The thread that sends: its targets' connections and when each last failed.
struct Worker {
    syslog: Option<syslog::Sender>,
    otlp: Option<otlp::Endpoint>,
    timeout: Duration,
    /// Per target (syslog, OTLP): not tried again before this instant.
    down: [Option<Instant>; 2],
    /// Per target: its failure was said once.
    said: [bool; 2],
    state: Arc<Shared>,
}

impl Worker {
    fn run(mut self, rx: &Receiver<Item>) {
        while let Ok(first) = rx.recv() {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(i) => batch.push(i),
                    Err(_) => break,
                }
            }
            let mut lost = false;
            if self.syslog.is_some() {
                lost |= !self.attempt(0, &batch);
            }
            if self.otlp.is_some() {
                lost |= !self.attempt(1, &batch);
            }
            self.state.done(batch.len(), lost);
        }
    }

    /// Send `batch` to target `i` unless it is backing off; whether it was delivered.
    fn attempt(&mut self, i: usize, batch: &[Item]) -> bool {
        if self.down[i].is_some_and(|t| Instant::now() < t) {
            return false;
        }
        let result = match i {
            0 => self
                .syslog
                .as_mut()
                .map_or(Ok(()), |s| s.send(batch, self.timeout)),
            _ => self
                .otlp
                .as_ref()
                .map_or(Ok(()), |e| e.send(batch, self.timeout)),
        };
        match result {
            Ok(()) => {
                self.down[i] = None;
                true
            }
            Err(e) => {
                // Not a warning: it would land on the agent's screen at every launch while the
                // collector is down; the trail counts what was dropped and `doctor` names the
                // target (`-v` shows this line).
                if !std::mem::replace(&mut self.said[i], true) {
                    let what = if i == 0 { "syslog" } else { "OTLP" };
                    tracing::info!("shipping audit records ({what}): {e}; counted in the trail as ship_dropped");
                }
                self.down[i] = Some(Instant::now() + BACKOFF);
                false
            }
        }
    }
}

/// The severity of a record for the pipeline: (syslog severity, OpenTelemetry severity number, its
/// text). Alerts keep their own; a launch that failed is a warning; the rest is informational.
fn severity(r: &Record) -> (u8, u8, &'static str) {
    match r.fields.get("severity").and_then(serde_json::Value::as_str) {
        Some("critical") => (2, 21, "critical"),
        Some("high") => (4, 13, "high"),
        _ if r.fields.get("how").and_then(serde_json::Value::as_str) == Some("setup-failed") => {
            (4, 13, "warning")
        }
        _ => (6, 9, "info"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(toml_text: &str) -> Result<Ship, String> {
        let t: ShipTable = toml::from_str(toml_text).map_err(|e| e.to_string())?;
        Ship::from_table(&t)
    }

    #[test]
    fn targets_are_checked_and_described() {
        let s =
            table("syslog = \"udp:127.0.0.1:514\"\notlp = \"http://127.0.0.1:4318\"\n").unwrap();
        assert_eq!(
            s.describe(),
            [
                "syslog (RFC 5424) to udp:127.0.0.1:514",
                "OpenTelemetry logs (OTLP/HTTP, JSON) to http://127.0.0.1:4318/v1/logs"
            ]
        );
        assert_eq!(s.timeout, Duration::from_millis(TIMEOUT_MS));
        assert!(table("").unwrap().is_empty());
        for bad in [
            "syslog = \"127.0.0.1:514\"",
            "syslog = \"unix:relative\"",
            "otlp = \"https://collector:4318\"",
            "syslog_facility = \"kernel-ish\"",
            "colour = 1",
        ] {
            assert!(table(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_dead_collector_is_counted_and_never_waited_for_past_the_timeout() {
        // A port nothing listens on: refused at once, then backing off; every record is counted.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ship = table(&format!(
            "otlp = \"http://127.0.0.1:{port}\"\nsyslog = \"tcp:127.0.0.1:{port}\"\ntimeout_ms = 200\n"
        ))
        .unwrap();
        let s = Shipper::new(&ship, true).unwrap();
        // Held: queued, nothing sent, until released.
        s.send(r_for_test(), "{}".into());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(*s.state.pending.lock().unwrap(), 1);
        s.release();
        let r = r_for_test();
        let t0 = Instant::now();
        for _ in 0..4 {
            s.send(r.clone(), "{}".into());
        }
        assert!(t0.elapsed() < Duration::from_millis(100), "send blocked");
        let mut p = s.state.pending.lock().unwrap();
        while *p > 0 {
            p = s
                .state
                .idle
                .wait_timeout(p, Duration::from_secs(5))
                .unwrap()
                .0;
        }
        drop(p);
        assert_eq!(s.take_dropped(), 5);
    }

    fn r_for_test() -> Record {
        Record {
            v: 1,
            seq: 1,
            time: String::new(),
            host: String::new(),
            uid: 0,
            session: None,
            event: "launch".into(),
            fields: serde_json::Map::new(),
            prev: String::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn severities_follow_the_alert() {
        let mut r = r_for_test();
        r.event = "alert".into();
        assert_eq!(severity(&r).0, 6);
        r.fields.insert("severity".into(), "high".into());
        assert_eq!(severity(&r), (4, 13, "high"));
        r.fields.insert("severity".into(), "critical".into());
        assert_eq!(severity(&r).0, 2);
    }
}
