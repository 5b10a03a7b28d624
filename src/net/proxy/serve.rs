//! The proxy's serving loop: accepting, and reading every request head, on one thread with `poll`;
//! a worker thread per connection only once its head is complete.
//!
//! Guards against the jail starving the proxy (and, before the proxy had a process of its own, the
//! watcher beside it): a connection costs one descriptor and no thread until its head is in; at
//! most `Limits::pending` wait for theirs, and a new one beyond that closes the one that has waited
//! longest (a flood of idle connections keeps pushing out its own oldest, while a client that sends
//! its head at once is served within the turn); each head has one deadline for the whole of it, not
//! per read (a slow drip of one byte every few seconds is closed when it is spent); at most
//! `Limits::tunnels` are served at once, and one more is refused with a sentence.

use super::http;
use super::socks::{self, Step};
use super::Shared;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection whose head is still coming.
struct Pending {
    conn: UnixStream,
    buf: Vec<u8>,
    since: Instant,
    /// SOCKS5: the greeting's length, once it was answered.
    greeted: Option<usize>,
}

/// What a complete head asks for, handed to a worker with the bytes that followed it.
pub(super) enum Head {
    Http {
        head: Vec<u8>,
        rest: Vec<u8>,
    },
    Socks {
        host: String,
        port: u16,
        rest: Vec<u8>,
    },
}

/// What the bytes so far say.
enum Progress {
    More,
    Done(Head),
    /// Answer this (if anything) and close.
    Refuse(Vec<u8>),
}

fn progress(p: &mut Pending) -> Progress {
    if p.buf.first() == Some(&5) {
        let start = match p.greeted {
            Some(len) => len,
            None => match socks::greeting(&p.buf) {
                Step::More => return Progress::More,
                Step::Greeting { len, no_auth: true } => {
                    // Two bytes into an empty socket buffer: the write does not block.
                    if p.conn.write_all(&[5, 0]).is_err() {
                        return Progress::Refuse(Vec::new());
                    }
                    p.greeted = Some(len);
                    len
                }
                Step::Greeting { .. } => return Progress::Refuse(vec![5, 0xff]),
                _ => return Progress::Refuse(Vec::new()),
            },
        };
        return match socks::request(&p.buf[start..]) {
            Step::More => Progress::More,
            Step::Request {
                len,
                command: 1,
                host,
                port,
            } => Progress::Done(Head::Socks {
                host,
                port,
                rest: p.buf[start + len..].to_vec(),
            }),
            Step::Request { .. } => Progress::Refuse(socks::reply(7).to_vec()), // only CONNECT
            Step::Bad(code) => {
                Progress::Refuse(code.map(|c| socks::reply(c).to_vec()).unwrap_or_default())
            }
            Step::Greeting { .. } => Progress::Refuse(Vec::new()),
        };
    }
    if let Some(end) = p.buf.windows(4).position(|w| w == b"\r\n\r\n") {
        let rest = p.buf.split_off(end + 4);
        return Progress::Done(Head::Http {
            head: std::mem::take(&mut p.buf),
            rest,
        });
    }
    if p.buf.len() >= http::MAX_HEAD {
        return Progress::Refuse(http::respond(
            "431 Request Header Fields Too Large",
            "claude-sandbox: the request head is longer than 64 KiB\n",
        ));
    }
    Progress::More
}

/// Serve `listener` until `control` reads end of file (the launcher is done, or gone).
pub(super) fn serve(listener: &UnixListener, control: &UnixStream, shared: &Arc<Shared>) {
    let limits = shared.limits;
    let deadline = Duration::from_millis(limits.head_ms);
    if listener.set_nonblocking(true).is_err() || control.set_nonblocking(true).is_err() {
        return;
    }
    let mut pending: Vec<Pending> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let now = Instant::now();
        // Whole-head deadlines: a drip gets no more time than a silent connection.
        pending.retain(|p| {
            let alive = now.duration_since(p.since) < deadline;
            if !alive {
                shared.counts.timed_out.fetch_add(1, Ordering::Relaxed);
            }
            alive
        });
        let wait = pending
            .iter()
            .map(|p| deadline.saturating_sub(now.duration_since(p.since)))
            .min()
            .unwrap_or(Duration::from_secs(3600));
        let mut fds = Vec::with_capacity(pending.len() + 2);
        fds.push(PollFd::from_borrowed_fd(control.as_fd(), PollFlags::IN));
        fds.push(PollFd::from_borrowed_fd(listener.as_fd(), PollFlags::IN));
        fds.extend(
            pending
                .iter()
                .map(|p| PollFd::from_borrowed_fd(p.conn.as_fd(), PollFlags::IN)),
        );
        // A millisecond late rather than early: woken before a deadline, the loop would spin.
        let timeout = timespec(wait + Duration::from_millis(1));
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::warn!("network proxy: poll: {e}");
                return;
            }
        }
        let ready: Vec<PollFlags> = fds.iter().map(PollFd::revents).collect();
        drop(fds);
        if !ready[0].is_empty() && control_closed(control) {
            return;
        }
        // Heads first (the connections polled), then new connections: indices stay valid.
        let mut done: Vec<(usize, Option<Head>)> = Vec::new();
        for (i, flags) in ready[2..].iter().enumerate() {
            if flags.is_empty() {
                continue;
            }
            let p = &mut pending[i];
            let room = http::MAX_HEAD
                .saturating_sub(p.buf.len())
                .clamp(1, chunk.len());
            match p.conn.read(&mut chunk[..room]) {
                Ok(0) => done.push((i, None)),
                Ok(n) => {
                    p.buf.extend_from_slice(&chunk[..n]);
                    match progress(p) {
                        Progress::More => {}
                        Progress::Done(head) => done.push((i, Some(head))),
                        Progress::Refuse(answer) => {
                            let _ = p.conn.write_all(&answer);
                            done.push((i, None));
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => done.push((i, None)),
            }
        }
        // Highest index first: `swap_remove` then never moves one still to be removed.
        for (i, head) in done.into_iter().rev() {
            let p = pending.swap_remove(i);
            if let Some(head) = head {
                hand_off(p.conn, head, shared);
            }
        }
        if !ready[1].is_empty() {
            accept_all(listener, &mut pending, shared);
        }
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

/// The launcher closed its end (or died): the control socket reads end of file.
fn control_closed(control: &UnixStream) -> bool {
    let mut byte = [0u8; 64];
    let mut c = control;
    loop {
        match c.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return e.kind() != ErrorKind::WouldBlock,
        }
    }
}

fn accept_all(listener: &UnixListener, pending: &mut Vec<Pending>, shared: &Arc<Shared>) {
    // Bounded per turn, so that heads already waiting are read between batches.
    for _ in 0..256 {
        let conn = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                if e.kind() != ErrorKind::WouldBlock {
                    // EMFILE and the like: the backlog keeps the rest until a descriptor is free.
                    tracing::debug!("network proxy: accept: {e}");
                }
                return;
            }
        };
        if conn.set_nonblocking(true).is_err() {
            continue;
        }
        shared.counts.accepted.fetch_add(1, Ordering::Relaxed);
        if pending.len() >= shared.limits.pending {
            // The one that has waited longest goes (`pending` is not in arrival order after
            // `swap_remove`: look for it).
            if let Some(oldest) = pending
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| p.since)
                .map(|(i, _)| i)
            {
                pending.swap_remove(oldest);
                shared.counts.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
        let now = pending.len();
        shared.counts.note_pending(now + 1);
        pending.push(Pending {
            conn,
            buf: Vec::new(),
            since: Instant::now(),
            greeted: None,
        });
    }
}

/// A worker thread for a complete head, if the session has a tunnel left; else a refusal.
fn hand_off(conn: UnixStream, head: Head, shared: &Arc<Shared>) {
    let busy = |mut conn: UnixStream, head: &Head| {
        let answer = match head {
            Head::Http { .. } => http::respond(
                "503 Service Unavailable",
                &format!(
                    "claude-sandbox: the jail already has {} connections open through the \
                     sandbox's proxy, the most one session may have; close some and retry\n",
                    shared.limits.tunnels
                ),
            ),
            Head::Socks { .. } => socks::reply(1).to_vec(),
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
        let _ = conn.write_all(&answer);
        shared.counts.busy.fetch_add(1, Ordering::Relaxed);
    };
    let open = shared.counts.tunnels.fetch_add(1, Ordering::AcqRel);
    if open >= shared.limits.tunnels {
        shared.counts.tunnels.fetch_sub(1, Ordering::AcqRel);
        busy(conn, &head);
        return;
    }
    shared.counts.note_tunnels(open + 1);
    let worker = Arc::clone(shared);
    let spawned = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            super::worker::serve(conn, head, &worker);
            worker.counts.tunnels.fetch_sub(1, Ordering::AcqRel);
        });
    if spawned.is_err() {
        shared.counts.tunnels.fetch_sub(1, Ordering::AcqRel);
        shared.counts.busy.fetch_add(1, Ordering::Relaxed);
    }
}
