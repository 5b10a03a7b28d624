//! Sealing from outside: the entry-point seals, anchors and masks mounted into a running jail by a
//! short-lived process that enters the jail's namespaces, before the jail's first process may run
//! the command.
//!
//! Why: bwrap spends ~0.4 ms per bind mount (it resolves every path component and re-reads
//! `/proc/self/mountinfo` for each one), so the 60–70 seals of an ordinary workspace cost it 25–30 ms;
//! the same mounts made directly cost ~1 ms. bwrap still builds the jail (namespaces, the read-only
//! root, `/dev`, `/proc`, the private `/tmp`, seccomp, no capabilities); this module makes the rest
//! of the jail's mounts (`mounts`, from `Mount::Stage` on: `/run`'s view, `$HOME`, the layers, the
//! writable roots, anchors, hidden directories, sealed entry points, masks), in the same order, while
//! the jail's first process waits on the gate (see `exec`).
//!
//! Guards against a weaker jail than the policy: the command starts only after every operation here
//! succeeded (the launcher opens the gate after `__seal` exits 0); any failure leaves the gate shut,
//! and the launcher then starts a fresh jail with every mount given to bwrap instead. No process of
//! the jail ever holds a capability: the mounts are made by this separate process, which gains
//! capabilities only in the jail's user namespace, by entering it as that namespace's owner.
//!
//! bwrap builds two user namespaces when it mounts `/dev` (devpts needs uid 0): the mount namespace
//! belongs to the outer one, so that is the one entered (`NS_GET_USERNS` on the mount namespace).

use super::mounts::Mount;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

/// argv[1] that selects the sealer.
pub const SUBCOMMAND: &str = "__seal";

/// `CLAUDE_SANDBOX_SEAL=fail-halfway` (tests): `__seal` makes half the mounts, then fails, so that
/// the fallback to bwrap's own sealing can be exercised on a machine where sealing works.
pub const FAIL_HALFWAY: &str = "fail-halfway";

/// `CLAUDE_SANDBOX_SEAL=die-halfway` (tests): half the mounts, then the sealer dies without answering,
/// as if killed.
pub const DIE_HALFWAY: &str = "die-halfway";

/// What the launcher sends to `__seal` on its stdin.
#[derive(Debug, Serialize, Deserialize)]
pub struct SealRequest {
    /// A process of the jail (outer PID), whose mount namespace is sealed.
    pub pid: i32,
    /// The sealer's part of the jail's mounts (`mounts::the_sealers`).
    pub ops: Vec<Mount>,
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("cannot enter the jail's namespaces: {0}")]
    Enter(String),
    #[error("__seal: bad request: {0}")]
    Request(serde_json::Error),
    #[error("__seal: reading the request: {0}")]
    ReadRequest(std::io::Error),
    #[error("talking to the sealer: {0}")]
    Pipe(std::io::Error),
    /// The sealer's own one-line reason, relayed.
    #[error("{0}")]
    Refused(String),
    #[error("the sealer ended without answering")]
    Silent,
    #[error("cannot seal {path}: {what}: {err}")]
    Mount {
        path: PathBuf,
        what: &'static str,
        err: std::io::Error,
    },
}

/// `claude-sandbox __seal`: read a `SealRequest` from stdin, enter the jail, mount. Single-threaded
/// by construction (joining a user namespace requires it). Used when the launcher cannot fork a
/// sealer (it already runs threads: a second attempt).
pub fn main() -> i32 {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("claude-sandbox: __seal: reading the request: {e}");
        return crate::error::EXIT_JAIL;
    }
    match serve(&text) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            crate::error::EXIT_JAIL
        }
    }
}

/// Parse one request and carry it out.
fn serve(text: &str) -> Result<(), SealError> {
    let req: SealRequest = serde_json::from_str(text).map_err(SealError::Request)?;
    // For the tests of the fallback: half the mounts, then a failure (or a death without a word).
    let mode = std::env::var(crate::host::SEAL).unwrap_or_default();
    let fail_halfway = mode == FAIL_HALFWAY || mode == DIE_HALFWAY;
    let ops = if fail_halfway {
        &req.ops[..req.ops.len() / 2]
    } else {
        &req.ops[..]
    };
    enter(req.pid).and_then(|()| apply(ops))?;
    if mode == DIE_HALFWAY {
        // SAFETY: ends the process at once, as a kill would.
        unsafe { libc::_exit(1) };
    }
    if fail_halfway {
        return Err(SealError::Enter(format!(
            "{}={FAIL_HALFWAY}",
            crate::host::SEAL
        )));
    }
    Ok(())
}

/// The forked sealer's answer when every mount is in place.
const ANSWER_SEALED: &str = "sealed";

/// A sealer forked from the launcher (no second exec of this binary: ~1.5 ms of CPU saved on the
/// cores bwrap needs). It waits for its request on a pipe and answers on another: `sealed`, or the
/// reason for the failure.
pub struct Forked {
    pub pid: rustix::process::Pid,
    request: OwnedFd,
    answer: OwnedFd,
}

impl Forked {
    /// Fork the sealer. Only sound while the calling process has a single thread: the child goes on
    /// to allocate and parse. The caller checks (`single_threaded`).
    pub fn start() -> std::io::Result<Forked> {
        let pipe = || {
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(std::io::Error::from)
        };
        let (request_r, request_w) = pipe()?;
        let (answer_r, answer_w) = pipe()?;
        // SAFETY: the process is single-threaded (checked by the caller), so the child may run any
        // code; it never returns into the caller (it `_exit`s).
        match unsafe { libc::fork() } {
            -1 => Err(std::io::Error::last_os_error()),
            0 => {
                drop((request_w, answer_r));
                child(request_r, answer_w)
            }
            pid => Ok(Forked {
                pid: rustix::process::Pid::from_raw(pid).expect("fork returns a positive pid"),
                request: request_w,
                answer: answer_r,
            }),
        }
    }

    /// Send the request and wait for the answer. The process is reaped by the caller.
    pub fn seal(self, request: &SealRequest) -> Result<(), SealError> {
        let text = serde_json::to_vec(request).map_err(SealError::Request)?;
        let mut request_w = std::fs::File::from(self.request);
        std::io::Write::write_all(&mut request_w, &text).map_err(SealError::Pipe)?;
        drop(request_w);
        let mut answer = String::new();
        std::fs::File::from(self.answer)
            .read_to_string(&mut answer)
            .map_err(SealError::Pipe)?;
        // Success must be said: a sealer killed halfway (Ctrl-C reaches its process group too)
        // closes the pipe without a word, and that is a failure, not a silence.
        match answer.lines().next() {
            Some(ANSWER_SEALED) => Ok(()),
            Some(line) => Err(SealError::Refused(line.trim().to_string())),
            None => Err(SealError::Silent),
        }
    }
}

/// The forked sealer: drop every inherited fd but its two pipes (a lock or a pipe end held here
/// would outlive the launcher's own close), serve one request, leave without running the
/// launcher's exit handlers.
fn child(request: OwnedFd, answer: OwnedFd) -> ! {
    let keep = [request.as_raw_fd(), answer.as_raw_fd()];
    if let Ok(rd) = std::fs::read_dir("/proc/self/fd") {
        let fds: Vec<i32> = rd
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect();
        for fd in fds.into_iter().filter(|fd| !keep.contains(fd)) {
            // SAFETY: closing inherited descriptors this process does not otherwise use.
            unsafe { libc::close(fd) };
        }
    }
    let mut text = String::new();
    let outcome = std::fs::File::from(request)
        .read_to_string(&mut text)
        .map_err(SealError::ReadRequest)
        .and_then(|_| serve(&text));
    let mut answer = std::fs::File::from(answer);
    let code = match outcome {
        Ok(()) => {
            let _ = std::io::Write::write_all(&mut answer, ANSWER_SEALED.as_bytes());
            0
        }
        Err(e) => {
            let _ = std::io::Write::write_all(&mut answer, e.to_string().as_bytes());
            crate::error::EXIT_JAIL
        }
    };
    drop(answer);
    // SAFETY: ends this forked process without the parent's atexit handlers or buffered output.
    unsafe { libc::_exit(code) }
}

/// Whether this process runs a single thread (`/proc/self/stat`, field 20).
pub fn single_threaded() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // The command name (field 2) is in parentheses and may contain spaces: count after it.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17)?.parse::<u32>().ok())
        == Some(1)
}

/// Join the user namespace that owns the jail's mount namespace, then the mount namespace.
fn enter(pid: i32) -> Result<(), SealError> {
    let enter_err = |what: &str, e: std::io::Error| SealError::Enter(format!("{what}: {e}"));
    let mnt = std::fs::File::open(format!("/proc/{pid}/ns/mnt"))
        .map_err(|e| enter_err("opening the mount namespace", e))?;
    // SAFETY: NS_GET_USERNS takes no argument and returns a new fd (or -1).
    let owner = unsafe { libc::ioctl(mnt.as_raw_fd(), NS_GET_USERNS) };
    if owner < 0 {
        return Err(enter_err(
            "finding its user namespace (NS_GET_USERNS)",
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: a fresh fd returned by the kernel, owned here alone.
    let owner = unsafe { OwnedFd::from_raw_fd(owner) };
    rustix::thread::move_into_link_name_space(
        owner.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::User),
    )
    .map_err(|e| enter_err("joining the user namespace", e.into()))?;
    rustix::thread::move_into_link_name_space(
        mnt.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Mount),
    )
    .map_err(|e| enter_err("joining the mount namespace", e.into()))?;
    Ok(())
}

/// `_IO(0xb7, 0x1)` from linux/nsfs.h.
const NS_GET_USERNS: libc::c_ulong = 0xb701;

mod mount;
pub use mount::apply;
mod overlay;
mod points;

pub(crate) use points::premake as premake_mount_points;
