//! The terminal's hang-up: a closed terminal (SIGHUP from the kernel or from the shell that owned
//! it, or the terminal found hung up by `poll`) ends the session within a bounded time, and the
//! launcher then does the usual end of a session — the final sweep, the merge back, the release of
//! placeholders and diversions — as after any other end.
//!
//! Guards against a session that outlives its terminal: a jailed command that ignores SIGHUP (a
//! build, a `nohup`, an agent that traps it) kept running, its launcher waiting with nobody to see
//! it, `.git/config` diverted and nothing carried back — exactly the window in which a reopened
//! terminal starts a session beside it. So SIGHUP goes to every process of the jail, then, after
//! `GRACE`, SIGTERM, then, after `GRACE` again, SIGKILL to the jail's init (which takes every
//! process of its PID namespace with it). Each signal is sent only while the jail still runs: a pid
//! is checked to be the jail's init (bwrap's child) before anything is sent to it or below it.

use crate::process::signal_process;
use rustix::process::Signal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long each step waits for the jail to end before the next, harder signal.
pub(super) const GRACE: Duration = Duration::from_secs(2);

/// One jail's hang-up: started once, by whichever notices first.
#[derive(Clone)]
pub(super) struct Hangup {
    started: Arc<AtomicBool>,
    /// The last step was taken: the jail's init was killed (its status is then ours, not the
    /// command's).
    killed: Arc<AtomicBool>,
    bwrap: i32,
    status: Arc<Mutex<super::supervise::Status>>,
}

impl Hangup {
    pub(super) fn new(bwrap: i32, status: Arc<Mutex<super::supervise::Status>>) -> Hangup {
        Hangup {
            started: Arc::default(),
            killed: Arc::default(),
            bwrap,
            status,
        }
    }

    /// Whether the hang-up had to kill the jail (its exit status is then 128 + SIGHUP).
    pub(super) fn killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// The jail's init while the jail runs: bwrap's child, bwrap not done.
    fn init(&self) -> Option<i32> {
        let s = self.status.lock().ok()?;
        if s.exit_code.is_some() {
            return None;
        }
        let init = s.child_pid?;
        (parent_of(init) == Some(self.bwrap)).then_some(init)
    }

    /// Begin ending the session (once): on a thread of its own, so the signal forwarder goes on.
    pub(super) fn begin(&self, why: &'static str) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::info!("{why}: ending the session (SIGHUP, then SIGTERM, then SIGKILL)");
        let me = self.clone();
        let _ = std::thread::Builder::new()
            .name("hangup".into())
            .spawn(move || me.escalate());
    }

    fn escalate(&self) {
        for sig in [Signal::HUP, Signal::TERM] {
            let Some(init) = self.init() else { return };
            for pid in descendants(init) {
                let _ = signal_process(pid, sig);
            }
            let t0 = Instant::now();
            while t0.elapsed() < GRACE {
                if self.init().is_none() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Some(init) = self.init() {
            tracing::info!("the jail did not end on SIGHUP and SIGTERM: SIGKILL");
            self.killed.store(true, Ordering::SeqCst);
            let _ = signal_process(init, Signal::KILL);
        }
    }
}

/// Watch the launcher's terminal (the first of stdin, stdout, stderr that is one), once per
/// launcher: when it is hung up, the launcher sends itself SIGHUP, which reaches whichever jail
/// runs then (`supervise`'s forwarder begins its hang-up). Nothing when there is no terminal, or one
/// already hung up.
pub(super) fn watch_terminal() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Some(fd) = [0, 1, 2].into_iter().find(|fd| {
            // SAFETY: a standard fd number, only borrowed for the check.
            rustix::termios::isatty(unsafe { rustix::fd::BorrowedFd::borrow_raw(*fd) })
        }) else {
            return;
        };
        // SAFETY: as above; duplicated so that the thread owns what it polls.
        let borrowed = unsafe { rustix::fd::BorrowedFd::borrow_raw(fd) };
        let Ok(tty) = rustix::io::fcntl_dupfd_cloexec(borrowed, 3) else {
            return;
        };
        if hung_up(&tty, 0) {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("terminal".into())
            .spawn(move || {
                if hung_up(&tty, -1) {
                    tracing::info!("the terminal went away");
                    let _ = rustix::process::kill_process(rustix::process::getpid(), Signal::HUP);
                }
            });
    });
}

/// Whether `fd` reports a hang-up within `timeout_ms` (-1: wait for it). Only POLLHUP and POLLERR
/// are asked for: input waiting on the terminal (the agent's) does not wake it.
fn hung_up(fd: &rustix::fd::OwnedFd, timeout_ms: i32) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let timeout = (timeout_ms >= 0).then(|| rustix::event::Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    });
    loop {
        let mut fds = [PollFd::new(fd, PollFlags::empty())];
        match poll(&mut fds, timeout.as_ref()) {
            Err(rustix::io::Errno::INTR) => {}
            Err(_) | Ok(0) => return false,
            Ok(_) => {
                return fds[0]
                    .revents()
                    .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
            }
        }
    }
}

/// Field 4 (ppid) of `/proc/PID/stat`.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Every process below `init` (its PID namespace's every process: orphans are re-parented to it),
/// children before their children.
pub(super) fn descendants(init: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut next = vec![init];
    while let Some(p) = next.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            for c in children
                .split_whitespace()
                .filter_map(|c| c.parse::<i32>().ok())
            {
                if c > 1 && !out.contains(&c) && out.len() < 100_000 {
                    out.push(c);
                    next.push(c);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process tree below a process: its children and theirs, not itself.
    #[test]
    fn descendants_are_the_whole_tree_below() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let t0 = Instant::now();
        let mut found = Vec::new();
        while found.len() < 2 && t0.elapsed() < Duration::from_secs(10) {
            found = descendants(i32::try_from(std::process::id()).unwrap());
            found.retain(|p| parent_of(*p) == Some(pid));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(found.len(), 2, "{found:?}");
        let all = descendants(i32::try_from(std::process::id()).unwrap());
        assert!(all.contains(&pid) && found.iter().all(|p| all.contains(p)));
        for p in found {
            let _ = signal_process(p, Signal::KILL);
        }
        child.wait().unwrap();
    }
}
