//! Carrying bytes between the jail's connection and the upstream one: one thread and two
//! descriptors per connection, both directions served by one `poll`.
//!
//! Guards against a tunnel that costs more than its share (a thread and a descriptor pair each
//! way would double both), and against a direction carrying what it must not: what the client
//! sends passes through a `Stage` that may end it (a plain-HTTP request ends with its body: what
//! follows is never read), what the server sends through another (the response head rewritten).

use rustix::event::{poll, PollFd, PollFlags};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// What one direction does with the bytes it reads.
pub(super) trait Stage {
    /// Take `input`; append what is to be written to `out`. `Ok(true)`: this direction is over
    /// (nothing more is read from its source).
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()>;
}

/// Bytes pass as they are (a tunnel).
pub(super) struct Pass;

impl Stage for Pass {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<bool, ()> {
        out.extend_from_slice(input);
        Ok(false)
    }
}

/// When the relay ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// A tunnel: when both directions have closed (each end of file passed on as a half-close),
    /// or one has and nothing moved for `HALF_CLOSED_IDLE`.
    BothClosed,
    /// A plain-HTTP exchange: when the server's side has closed and its bytes are written.
    ServerClosed,
}

/// A half-closed tunnel with nothing moving is given up after this long (an idle tunnel with both
/// sides open is the client's business: a long poll, a websocket).
const HALF_CLOSED_IDLE: Duration = Duration::from_secs(60);
const CHUNK: usize = 16 * 1024;
/// A direction stops reading while this much waits to be written.
const BACKLOG: usize = 64 * 1024;

struct Direction<'s> {
    stage: &'s mut dyn Stage,
    out: Vec<u8>,
    /// Still reading from the source.
    reading: bool,
    /// The destination was told (shutdown) that nothing more comes.
    shut: bool,
    /// The source said end of file (or failed).
    eof: bool,
}

impl<'s> Direction<'s> {
    fn new(stage: &'s mut dyn Stage) -> Direction<'s> {
        Direction {
            stage,
            out: Vec::new(),
            reading: true,
            shut: false,
            eof: false,
        }
    }

    fn finished(&self) -> bool {
        !self.reading && self.out.is_empty()
    }
}

/// Relay between `client` and `server` until `end`; `first` goes to the server before anything
/// else (bytes the client sent with its request head). Both sockets are made non-blocking.
pub(super) fn relay<C, S>(
    client: &mut C,
    server: &mut S,
    up: &mut dyn Stage,
    down: &mut dyn Stage,
    first: &[u8],
    end: End,
) where
    C: Read + Write + AsFd + Shut,
    S: Read + Write + AsFd + Shut,
{
    if client.nonblocking().is_err() || server.nonblocking().is_err() {
        return;
    }
    let mut up = Direction::new(up);
    let mut down = Direction::new(down);
    match up.stage.feed(first, &mut up.out) {
        Ok(done) => up.reading = !done,
        Err(()) => return,
    }
    let mut buf = vec![0u8; CHUNK];
    let mut last_move = Instant::now();
    // A side that hung up entirely (POLLHUP) is left out of `poll`, which reports it for ever.
    let (mut c_gone, mut s_gone) = (false, false);
    loop {
        if c_gone && !up.reading {
            // Nobody is left to read what the server sends.
            down.reading = false;
            down.out.clear();
        }
        if s_gone && !down.reading {
            up.reading = false;
            up.out.clear();
        }
        if (end == End::ServerClosed && down.finished()) || (up.finished() && down.finished()) {
            return;
        }
        if end == End::BothClosed {
            // Each end of file is passed on as a half-close.
            if up.finished() && !up.shut {
                up.shut = true;
                let _ = server.shut_write();
            }
            if down.finished() && !down.shut {
                down.shut = true;
                let _ = client.shut_write();
            }
        }
        // Given up: a half-closed tunnel, or an exchange whose client left, with nothing moving.
        let idle_matters = match end {
            End::BothClosed => up.finished() || down.finished(),
            End::ServerClosed => up.eof,
        };
        if idle_matters && last_move.elapsed() >= HALF_CLOSED_IDLE {
            return;
        }
        let timeout = idle_matters.then(|| HALF_CLOSED_IDLE.saturating_sub(last_move.elapsed()));
        let c = (!c_gone).then_some(&*client);
        let s = (!s_gone).then_some(&*server);
        let Some((c_ready, s_ready)) = wait(c, s, &up, &down, timeout) else {
            return;
        };
        match step(
            client, server, &mut up, &mut down, &mut buf, c_ready, s_ready,
        ) {
            Ok(true) => last_move = Instant::now(),
            Ok(false) => {}
            Err(()) => return,
        }
        // Hung up, and nothing more to read from it: it is left out from now on.
        let gone = PollFlags::HUP | PollFlags::ERR;
        c_gone |= c_ready.intersects(gone) && !up.reading;
        s_gone |= s_ready.intersects(gone) && !down.reading;
    }
}

/// Wait until either side can do what its directions want; their events (empty for a side left
/// out). `None`: `poll` failed.
fn wait(
    client: Option<&impl AsFd>,
    server: Option<&impl AsFd>,
    up: &Direction<'_>,
    down: &Direction<'_>,
    timeout: Option<Duration>,
) -> Option<(PollFlags, PollFlags)> {
    let want = |read: bool, write: bool| {
        let mut f = PollFlags::empty();
        if read {
            f |= PollFlags::IN;
        }
        if write {
            f |= PollFlags::OUT;
        }
        f
    };
    let c_flags = want(up.reading && up.out.len() < BACKLOG, !down.out.is_empty());
    let s_flags = want(down.reading && down.out.len() < BACKLOG, !up.out.is_empty());
    let mut fds = Vec::with_capacity(2);
    if let Some(c) = client {
        fds.push(PollFd::from_borrowed_fd(c.as_fd(), c_flags));
    }
    if let Some(s) = server {
        fds.push(PollFd::from_borrowed_fd(s.as_fd(), s_flags));
    }
    let timeout = timeout.map(|d| rustix::event::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(60),
        tv_nsec: i64::from(d.subsec_nanos()),
    });
    match poll(&mut fds, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(_) => return None,
    }
    let mut revents = fds.iter().map(PollFd::revents);
    let mut next = |present: bool| {
        if present {
            revents.next().unwrap_or(PollFlags::empty())
        } else {
            PollFlags::empty()
        }
    };
    let c = next(client.is_some());
    let s = next(server.is_some());
    Some((c, s))
}

/// Do what the events allow: writes first (they make room for reads), then reads. `Ok(true)`
/// when something moved; `Err`: the relay is over.
fn step(
    client: &mut (impl Read + Write),
    server: &mut (impl Read + Write),
    up: &mut Direction<'_>,
    down: &mut Direction<'_>,
    buf: &mut [u8],
    c_ready: PollFlags,
    s_ready: PollFlags,
) -> Result<bool, ()> {
    let gone = PollFlags::HUP | PollFlags::ERR;
    let mut moved = false;
    if s_ready.contains(PollFlags::OUT) && !up.out.is_empty() {
        moved |= write_some(server, &mut up.out)?;
    }
    if c_ready.contains(PollFlags::OUT) && !down.out.is_empty() {
        moved |= write_some(client, &mut down.out)?;
    }
    if up.reading && c_ready.intersects(PollFlags::IN | gone) {
        moved |= read_into(client, buf, up)?;
    }
    if down.reading && s_ready.intersects(PollFlags::IN | gone) {
        moved |= read_into(server, buf, down)?;
    }
    Ok(moved)
}

/// Read once into `d` through its stage. `Ok(true)` when something moved.
fn read_into(src: &mut impl Read, buf: &mut [u8], d: &mut Direction<'_>) -> Result<bool, ()> {
    match src.read(buf) {
        Ok(0) => {
            d.reading = false;
            d.eof = true;
            Ok(true)
        }
        Ok(n) => {
            let done = d.stage.feed(&buf[..n], &mut d.out)?;
            if done {
                d.reading = false;
            }
            Ok(true)
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(false),
        // A reset reads as the end, so what is already buffered the other way still goes out.
        Err(_) => {
            d.reading = false;
            d.eof = true;
            Ok(true)
        }
    }
}

/// Write what `out` holds, as much as fits. `Ok(true)` when something was written.
fn write_some(dst: &mut impl Write, out: &mut Vec<u8>) -> Result<bool, ()> {
    match dst.write(out) {
        Ok(0) => Err(()),
        Ok(n) => {
            out.drain(..n);
            Ok(true)
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(false),
        Err(_) => Err(()),
    }
}

/// What the relay needs of a socket beyond reading and writing.
pub(super) trait Shut {
    fn shut_write(&self) -> std::io::Result<()>;
    fn nonblocking(&self) -> std::io::Result<()>;
}

impl Shut for std::os::unix::net::UnixStream {
    fn shut_write(&self) -> std::io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }
}

impl Shut for std::net::TcpStream {
    fn shut_write(&self) -> std::io::Result<()> {
        self.shutdown(std::net::Shutdown::Write)
    }
    fn nonblocking(&self) -> std::io::Result<()> {
        self.set_nonblocking(true)
    }
}
