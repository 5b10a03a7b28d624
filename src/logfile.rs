//! Where diagnostics go while a jailed command owns the terminal.
//!
//! Guards against the launcher drawing over the agent's screen: the watcher runs in the launcher, and
//! a ` WARN critical: ... shadows /usr/bin/cat` written to the shared stderr lands in the middle of
//! Claude Code's TUI. From the moment the command may start until the jail ends, log lines go to
//! `RUNTIME/claude-sandbox.log` (the runtime directory is hidden from the jail, so the agent cannot
//! edit it); alerts still go to the store and the human's prompt. With `-v` (or `RUST_LOG`) they stay
//! live on stderr: the person asked for them.
//!
//! Log lines name what the jail shaped (file names, keys, hosts): every line is written through
//! `crate::escape` (its newline kept), so no byte the jail chose reaches a terminal as a control —
//! which is why the log has no colours.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The log file's name in the runtime directory.
/// Past this size the log is moved to `claude-sandbox.log.1` when a session starts.
const ROTATE_BYTES: u64 = 1 << 20;

static DIVERTED: Mutex<Option<File>> = Mutex::new(None);
static LIVE: AtomicBool = AtomicBool::new(true);
static LINES: AtomicUsize = AtomicUsize::new(0);

/// The `tracing` writer: the log file while diverted, else stderr.
pub(crate) struct Writer;

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut shown = Vec::with_capacity(buf.len() + 16);
        for (i, line) in buf.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                shown.push(b'\n');
            }
            shown.extend_from_slice(crate::escape::visible_bytes(line).as_bytes());
        }
        let buf_len = buf.len();
        let buf = &shown[..];
        let mut diverted = DIVERTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match diverted.as_mut() {
            Some(f) => {
                // Not worth the bytecount crate for a log's newlines.
                #[allow(clippy::naive_bytecount)]
                let lines = buf.iter().filter(|&&b| b == b'\n').count();
                LINES.fetch_add(lines, Ordering::Relaxed);
                f.write_all(buf).map(|()| buf_len)
            }
            None => std::io::stderr().write_all(buf).map(|()| buf_len),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Whether log lines stay on stderr during sessions (`-v`, `RUST_LOG`).
pub(crate) fn set_live(live: bool) {
    LIVE.store(live, Ordering::Relaxed);
}

pub(crate) fn live() -> bool {
    LIVE.load(Ordering::Relaxed)
}

/// From now on, log lines go to `runtime/claude-sandbox.log` (unless live). A log that cannot be
/// opened leaves them on stderr: better drawn over a screen than lost.
pub(crate) fn divert(runtime: &Path, session: &str) {
    if live() {
        return;
    }
    let path = log_path(runtime);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > ROTATE_BYTES) {
        let mut rotated = path.clone().into_os_string();
        rotated.push(".1");
        let _ = std::fs::rename(&path, rotated);
    }
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path);
    if let Ok(mut f) = opened {
        let _ = writeln!(f, "--- session {session} (pid {})", std::process::id());
        LINES.store(0, Ordering::Relaxed);
        *DIVERTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(f);
    }
}

/// In a process of the session's own (the network proxy): its log lines go to the same file from
/// the start, under a line naming it (unless live).
pub(crate) fn divert_process(runtime: &Path, what: &str) {
    if live() {
        return;
    }
    let opened = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_path(runtime));
    if let Ok(mut f) = opened {
        let _ = writeln!(f, "--- {what} (pid {})", std::process::id());
        *DIVERTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(f);
    }
}

/// Back to stderr (the command's terminal is the human's again); says where the lines went, if any.
pub(crate) fn restore(runtime: &Path) {
    let was = DIVERTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    let n = LINES.swap(0, Ordering::Relaxed);
    if was.is_some() && n > 0 {
        note(&format!(
            "{n} diagnostic line(s) from this session are in {} (-v shows them live)",
            log_path(runtime).display()
        ));
    }
}

/// One line for the human on stderr, `claude-sandbox: ` first. Never fails: after a hang-up the
/// terminal is gone (writes fail with EIO), and the end of the session must still be done
/// (`eprintln!` would panic there).
pub(crate) fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "claude-sandbox: {line}");
}

pub(crate) fn log_path(runtime: &Path) -> PathBuf {
    crate::runtime_dir::RuntimeDir::new(runtime).log()
}
