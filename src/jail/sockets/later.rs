//! Sockets opened during the session where the jail can reach them: a unix socket a process of the
//! human's binds in the workspace after launch (a dev server, an ssh `ControlPath` set there, a
//! language server) is reachable from the jail, since connecting needs no write access. The launch's
//! masks (`plan::masks`) only know the sockets listening then.
//!
//! Guards against a listener outside the jail being served to it. Two sources tell of new sockets:
//! the watcher, of each made in the workspace tree it watches (`watch`, with the walk's skip rule:
//! `walk`), and the launcher's `/proc/net/unix`, read every 100 ms, of each bound anywhere the jail
//! sees as the same file, read-only places too (`new_in_table`). A thread here finds who listens on
//! each — the sockets bound to a path of that name (`/proc/net/unix` of the launcher's and of the
//! jail's network namespace), their holders (`socket:[N]` in `/proc/*/fd`), each holder's view of
//! the path (`/proc/PID/root` or `cwd`) — and compares each holder's PID namespace with the jail's.
//! A listener outside the jail, or one not found (raced away, another user's, an unknown name), is
//! covered: `__seal` joins the jail's mount namespace and binds `/dev/null` over the socket there
//! (`reseal::seal_into`), so a connect from the jail is refused; the human's view is untouched. A
//! listener of the jail's own (its dev server, a test's socket) is left alone. A cover where the
//! jail can write is alerted (`socket-opened`); one elsewhere is logged only (`Telling`).
//!
//! This is a window, not a wall: a connect between the bind and the cover succeeds, and a connection
//! made then stays open (docs/network.md, "Sockets opened during the session", has the measure).

use crate::jail::mounts::Mount;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A socket bound to a path, as `/proc/net/unix` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The socket's inode (sockfs: the number in `socket:[N]`), not its file's.
    pub inode: u64,
    /// The path as given to `bind` (relative to the binder's directory then, when relative);
    /// abstract names start with `@`.
    pub path: String,
    /// Unconnected: a listener, one bound and about to listen (the file appears at `bind`, before
    /// `listen`), a datagram socket: what a connect or a send from the jail would reach. Not an
    /// accepted connection's socket nor one still queued on the listener (they carry its path, and
    /// the queued ones have no holder yet).
    pub listening: bool,
}

/// The bound sockets of a `/proc/net/unix` text (`Num RefCount Protocol Flags Type St Inode Path`);
/// unbound ones are left out. Pure.
pub(crate) fn parse_net_unix(text: &str) -> Vec<Bound> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let mut rest = line.trim_start();
            let mut fields = [""; 7];
            for f in &mut fields {
                let (field, after) = rest.split_once(' ').unwrap_or((rest, ""));
                *f = field;
                rest = after;
            }
            let hex = |f: &str| u32::from_str_radix(f, 16).ok();
            let (flags, state) = (hex(fields[3])?, hex(fields[5])?);
            // `__SO_ACCEPTCON` or `SS_UNCONNECTED`.
            let listening = flags & 0x1_0000 != 0 || state == 1;
            // One space follows the inode; the path keeps its own (it may hold spaces).
            (!rest.is_empty()).then_some(Bound {
                inode: fields[6].parse().ok()?,
                path: rest.to_string(),
                listening,
            })
        })
        .collect()
}

/// Who holds a socket bound to the new socket's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Holder {
    /// A process in the jail's PID namespace.
    Jail,
    /// A process outside it, by its command name (`/proc/PID/comm`).
    Outside(String),
    /// A socket bound to a path that may be this file, whose holder is not visible (another user's
    /// process) or whose path cannot be told apart (relative).
    Unseen,
}

/// What to do about a new socket the jail can reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Served by the jail alone: its own socket keeps working.
    Leave,
    /// Bind `/dev/null` over it in the jail; `holder`: the first outside holder's name, if one was
    /// seen.
    Cover { holder: Option<String> },
}

/// The verdict on a socket whose holders are `holders`. Fails closed: only a socket every found
/// holder of which is in the jail is left; none found (raced away, not visible) is covered. Pure.
pub(crate) fn decide(holders: &[Holder]) -> Verdict {
    let outside = holders.iter().find_map(|h| match h {
        Holder::Outside(comm) => Some(comm.clone()),
        _ => None,
    });
    let all_jail = !holders.is_empty() && holders.iter().all(|h| *h == Holder::Jail);
    if all_jail {
        Verdict::Leave
    } else {
        Verdict::Cover { holder: outside }
    }
}

/// The socket inode in a `/proc/PID/fd` link's text (`socket:[N]`). Pure.
fn socket_inode(link: &Path) -> Option<u64> {
    link.to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The holders of sockets bound to the file `path` (device and inode `id`), seen from outside; the
/// jail is the one whose first process is `jail`.
pub(crate) fn holders(path: &Path, id: (u64, u64), jail: i32) -> Vec<Holder> {
    let Some(name) = path.file_name() else {
        return Vec::new();
    };
    // Bound sockets whose path ends in this name, in both network namespaces (one in host mode).
    let mut bound: HashMap<u64, PathBuf> = HashMap::new();
    for table in [
        "/proc/self/net/unix".to_string(),
        format!("/proc/{jail}/net/unix"),
    ] {
        let Ok(text) = std::fs::read_to_string(&table) else {
            continue;
        };
        for b in parse_net_unix(&text) {
            let p = PathBuf::from(&b.path);
            if b.listening && !b.path.starts_with('@') && p.file_name() == Some(name) {
                bound.insert(b.inode, p);
            }
        }
    }
    if bound.is_empty() {
        return Vec::new();
    }
    let jail_ns = std::fs::read_link(format!("/proc/{jail}/ns/pid")).ok();
    let all = pids();
    let in_jail: Vec<i32> = all
        .iter()
        .copied()
        .filter(|p| {
            jail_ns.is_some() && std::fs::read_link(format!("/proc/{p}/ns/pid")).ok() == jail_ns
        })
        .collect();
    // The jail's processes first: when each socket of that name has a holder there, it is the
    // jail's own (its dev server, a test's socket) and the descriptors of every other process,
    // most of the cost, need not be read.
    let inodes: HashSet<u64> = bound.keys().copied().collect();
    let mut held = held_by(&inodes, &in_jail);
    if !inodes.iter().all(|i| held.contains_key(i)) {
        held = held_by(&inodes, &all);
    }
    let same = |p: &Path| std::fs::metadata(p).is_ok_and(|m| (m.dev(), m.ino()) == id);
    let mut out = Vec::new();
    for (ino, p) in &bound {
        let Some(pids) = held.get(ino) else {
            // Not visible: this file if its path names it here (or cannot be told: relative).
            if p.is_relative() || same(p) {
                out.push(Holder::Unseen);
            }
            continue;
        };
        for &pid in pids {
            // The path as the holder resolves it (its root for an absolute path, its directory for
            // a relative one).
            let (base, rel) = match p.strip_prefix("/") {
                Ok(rel) => (format!("/proc/{pid}/root"), rel),
                Err(_) => (format!("/proc/{pid}/cwd"), p.as_path()),
            };
            if !same(&Path::new(&base).join(rel)) {
                continue;
            }
            let ns = std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
            out.push(if ns.is_some() && ns == jail_ns {
                Holder::Jail
            } else {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim_end().to_string())
                    .unwrap_or_default();
                Holder::Outside(comm)
            });
        }
    }
    out
}

/// Which of the processes `pids` hold each of the sockets `inodes` (`socket:[N]` in
/// `/proc/PID/fd`; another user's are not visible).
fn held_by(inodes: &HashSet<u64>, pids: &[i32]) -> HashMap<u64, Vec<i32>> {
    let mut held: HashMap<u64, Vec<i32>> = HashMap::new();
    for &pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let ino = std::fs::read_link(fd.path())
                .ok()
                .and_then(|l| socket_inode(&l));
            if let Some(ino) = ino.filter(|i| inodes.contains(i)) {
                let pids = held.entry(ino).or_default();
                if !pids.contains(&pid) {
                    pids.push(pid);
                }
            }
        }
    }
    held
}

/// How often the launcher's table of bound sockets is read for new ones (`new_in_table`).
const TABLE_TICK: Duration = Duration::from_millis(100);

/// The sockets bound in the launcher's network namespace (the human's, and the jail's in `host`
/// mode) since the last look, wherever they are, as the paths the jail would connect to: those it
/// sees as the same file (not a launch mask, not a fixed view's or its private `/tmp`'s). Each
/// socket is looked at once (`seen`).
fn new_in_table(seen: &mut HashSet<u64>, jail: i32) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/net/unix") else {
        return Vec::new();
    };
    let (mut out, mut relative) = (Vec::new(), Vec::new());
    for b in parse_net_unix(&text) {
        if !b.listening || b.path.starts_with('@') || !seen.insert(b.inode) {
            continue;
        }
        let p = PathBuf::from(b.path);
        if p.is_absolute() {
            out.push(p);
        } else {
            relative.push((b.inode, p));
        }
    }
    if !relative.is_empty() {
        // Bound by a relative name: where its holders are.
        let held = held_by(&relative.iter().map(|(i, _)| *i).collect(), &pids());
        for (ino, p) in relative {
            for pid in held.get(&ino).into_iter().flatten() {
                if let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) {
                    out.push(cwd.join(&p));
                }
            }
        }
    }
    let id = |p: &Path| {
        std::fs::symlink_metadata(p)
            .ok()
            .filter(|m| m.file_type().is_socket())
            .map(|m| (m.dev(), m.ino()))
    };
    out.retain(|p| {
        let inside =
            Path::new(&format!("/proc/{jail}/root")).join(p.strip_prefix("/").unwrap_or(p));
        id(p).is_some() && id(p) == id(&inside)
    });
    out
}

/// The process IDs `/proc` lists.
fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether the jail under `bwrap` still runs: bwrap is there and not a zombie, with a child. (Its
/// `children` file missing while bwrap runs — a kernel without it — is a jail not found, a miss.)
fn jail_running(bwrap: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{bwrap}/stat")) else {
        return false;
    };
    // The state follows the command's name, which is in parentheses and may hold any byte.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    if matches!(state, Some("Z" | "X" | "x")) {
        return false;
    }
    std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children"))
        .map_or(true, |c| !c.trim().is_empty())
}

/// The running judge of new sockets; stops (without being joined) when dropped.
pub(crate) struct Covering {
    stop: Arc<AtomicBool>,
}

impl Drop for Covering {
    /// Nothing is covered once the jail is over (its bwrap's PID may be another process's by then);
    /// the thread ends when the watcher, which sends it sockets, does.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Where the judge alerts, and about what.
pub(crate) struct Telling {
    /// The session's directory (`runtime_dir::SessionDir`).
    pub session_dir: PathBuf,
    /// What the jail can write (`Policy::writable_roots`): a socket covered there is alerted; one
    /// covered elsewhere (another session's, your terminal multiplexer's under `/var/tmp`) is the
    /// machine's ordinary life, logged only.
    pub writable: Vec<PathBuf>,
}

/// Judge each socket `sockets` tells of for the jail of `bwrap`.
pub(crate) fn start(sockets: Receiver<PathBuf>, bwrap: i32, telling: Telling) -> Covering {
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let spawned = std::thread::Builder::new()
        .name("sockets".into())
        .spawn(move || judge(&sockets, bwrap, &telling, &stopped));
    if let Err(e) = spawned {
        tracing::warn!("not judging sockets opened during the session: {e}");
    }
    Covering { stop }
}

fn judge(sockets: &Receiver<PathBuf>, bwrap: i32, telling: &Telling, stop: &AtomicBool) {
    let (Ok(exe), Ok(jail)) = (
        std::env::current_exe(),
        super::super::reseal::jail_init(bwrap),
    ) else {
        // The judge starts after the gate: a command as short as `true` is over by then, and a
        // jail that is over has no socket open to judge. Only a jail still running is a miss.
        if jail_running(bwrap) {
            tracing::warn!("not judging sockets opened during the session: the jail is not found");
        } else {
            tracing::debug!("no sockets to judge: the jail was over before the judge started");
        }
        return;
    };
    let mut seen: HashSet<(PathBuf, u64, u64)> = HashSet::new();
    let mut in_table: HashSet<u64> = HashSet::new();
    let mut next_table = Instant::now();
    loop {
        let mut batch = Vec::new();
        match sockets.recv_timeout(next_table.saturating_duration_since(Instant::now())) {
            Ok(path) => batch.push(path),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            // The watcher is over: so is the session.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
        // What queued meanwhile goes in the same `__seal`.
        batch.extend(sockets.try_iter());
        if Instant::now() >= next_table {
            batch.extend(new_in_table(&mut in_table, jail));
            next_table = Instant::now() + TABLE_TICK;
        }
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let t0 = Instant::now();
        let mut cover: Vec<(PathBuf, Option<String>)> = Vec::new();
        for path in batch {
            let Ok(m) = std::fs::symlink_metadata(&path) else {
                continue; // gone again
            };
            if !m.file_type().is_socket() || !seen.insert((path.clone(), m.dev(), m.ino())) {
                continue;
            }
            let t = Instant::now();
            let holders = holders(&path, (m.dev(), m.ino()), jail);
            tracing::debug!(
                path = %crate::escape::visible_path(&path),
                ?holders,
                ms = t.elapsed().as_secs_f64() * 1e3,
                "new socket"
            );
            if let Verdict::Cover { holder } = decide(&holders) {
                cover.push((path, holder));
            }
        }
        let judged_ms = t0.elapsed().as_secs_f64() * 1e3;
        if cover.is_empty() || stop.load(Ordering::SeqCst) {
            continue;
        }
        let ops = cover
            .iter()
            .map(|(p, _)| Mount::MaskFile(p.clone()))
            .collect();
        let result = super::super::reseal::seal_into(bwrap, ops, &exe);
        tracing::debug!(
            ms = t0.elapsed().as_secs_f64() * 1e3,
            judged_ms,
            n = cover.len(),
            ok = result.is_ok(),
            "sockets opened outside the jail covered in it"
        );
        match &result {
            // Over meanwhile (a short command): nothing is left in the jail to reach the socket.
            Err(e) if !jail_running(bwrap) => {
                tracing::debug!(
                    "a socket opened outside the jail, not covered: the jail is over ({e})"
                );
            }
            Err(e) => tracing::warn!("a socket opened outside the jail was not covered in it: {e}"),
            Ok(()) => {}
        }
        for (path, holder) in &cover {
            if telling.writable.iter().any(|w| path.starts_with(w)) {
                alert(
                    &telling.session_dir,
                    path,
                    holder.as_deref(),
                    result.is_ok(),
                );
            } else {
                tracing::info!(
                    path = %crate::escape::visible_path(path),
                    holder = %crate::escape::visible(holder.as_deref().unwrap_or("not visible")),
                    covered = result.is_ok(),
                    "a socket opened outside the jail where it only reads"
                );
            }
        }
    }
}

/// Tell the human, during the session, of a socket covered (or not) in the jail.
fn alert(session_dir: &Path, path: &Path, holder: Option<&str>, covered: bool) {
    use crate::alerts::{Action, AlertKind};
    let by = holder.map_or_else(
        || "its listener is not visible from outside".to_string(),
        |c| format!("served by {c}, outside the jail"),
    );
    let (detail, action) = if covered {
        (
            format!(
                "a unix socket opened during the session where the jail can reach it ({by}); \
                 /dev/null is bound over it in the jail since (a connection made before stays \
                 open); your own view is unchanged"
            ),
            Action::Neutralised,
        )
    } else {
        (
            format!(
                "a unix socket opened during the session where the jail can reach it ({by}) \
                 could not be covered in the jail: the jail can connect to it"
            ),
            Action::Failed,
        )
    };
    crate::alerts::in_session(session_dir, AlertKind::SocketOpened, path, &detail, action);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jail_is_running_while_its_bwrap_has_a_child_and_over_once_it_is_a_zombie_or_gone() {
        // A stand-in for bwrap: a shell with one child while the jail runs.
        let mut bwrap = std::process::Command::new("sh")
            .args(["-c", "sleep 3 & wait"])
            .spawn()
            .unwrap();
        let pid = i32::try_from(bwrap.id()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !jail_running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(jail_running(pid), "a bwrap with a child is a running jail");
        // SAFETY: kill only sends a signal, to our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while jail_running(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!jail_running(pid), "a zombie bwrap is a jail that is over");
        bwrap.wait().unwrap();
        assert!(!jail_running(pid), "a bwrap reaped is a jail that is over");
        // A bwrap without a child: its command is over.
        let mut lone = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(!jail_running(i32::try_from(lone.id()).unwrap()));
        lone.kill().unwrap();
        lone.wait().unwrap();
    }

    #[test]
    fn a_socket_served_in_the_jail_alone_is_left_and_any_other_is_covered() {
        let out = |c: &str| Holder::Outside(c.into());
        assert_eq!(decide(&[Holder::Jail]), Verdict::Leave);
        assert_eq!(decide(&[Holder::Jail, Holder::Jail]), Verdict::Leave);
        assert_eq!(
            decide(&[out("python3")]),
            Verdict::Cover {
                holder: Some("python3".into())
            }
        );
        // A holder of the jail's beside one outside (a name the jail bound first, then renamed
        // away): outside wins.
        assert_eq!(
            decide(&[Holder::Jail, out("ssh")]),
            Verdict::Cover {
                holder: Some("ssh".into())
            }
        );
        // Fail closed: none found (raced away), or one not visible.
        assert_eq!(decide(&[]), Verdict::Cover { holder: None });
        assert_eq!(
            decide(&[Holder::Jail, Holder::Unseen]),
            Verdict::Cover { holder: None }
        );
    }

    #[test]
    fn proc_net_unix_gives_each_bound_socket_its_inode_and_whole_path() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23456 /work/ws/dev.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 23457\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23458 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 23459 rel dir/s p.sock\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 23460 /work/ws/dev.sock\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 23461 /work/ws/log.sock\n";
        let b = parse_net_unix(text);
        assert_eq!(
            b,
            [
                Bound {
                    inode: 23456,
                    path: "/work/ws/dev.sock".into(),
                    listening: true,
                },
                Bound {
                    inode: 23458,
                    path: "@/tmp/.X11-unix/X0".into(),
                    listening: true,
                },
                Bound {
                    inode: 23459,
                    path: "rel dir/s p.sock".into(),
                    listening: true,
                },
                // An accepted (or queued) connection carries its listener's path.
                Bound {
                    inode: 23460,
                    path: "/work/ws/dev.sock".into(),
                    listening: false,
                },
                Bound {
                    inode: 23461,
                    path: "/work/ws/log.sock".into(),
                    listening: true,
                },
            ]
        );
        assert_eq!(socket_inode(Path::new("socket:[23456]")), Some(23456));
        assert_eq!(socket_inode(Path::new("pipe:[1]")), None);
    }

    #[test]
    fn a_listener_is_found_through_proc_and_a_socket_file_nobody_binds_has_none() {
        // This process stands for the jail: its listener is in "the jail's" PID namespace.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let m = std::fs::symlink_metadata(&path).unwrap();
        let me = i32::try_from(std::process::id()).unwrap();
        let found = holders(&path, (m.dev(), m.ino()), me);
        assert_eq!(found, [Holder::Jail], "its own namespace: the jail's");
        drop(listener);
        // A socket file made by mknod: no socket is bound to it (a name of its own, so that no
        // other test's socket shares it).
        let lone = dir.path().join(format!("lone-{me}.sock"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &lone,
            rustix::fs::FileType::Socket,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let m = std::fs::symlink_metadata(&lone).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(holders(&lone, (m.dev(), m.ino()), me), []);
        assert_eq!(decide(&[]), Verdict::Cover { holder: None });
    }
}
