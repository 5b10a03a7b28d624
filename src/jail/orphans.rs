//! What a launcher killed during bwrap's start leaves running, ended by the next launch that finds
//! the dead session.
//!
//! Guards against a jail process that outlives its launcher. bwrap forks the jail's first process
//! into its new namespaces, and that child waits (on an eventfd) for its parent to write its user
//! namespace's maps before it sets its own `--die-with-parent`. The launcher's death kills the parent
//! (`PR_SET_PDEATHSIG`, `launch::supervise::fork_exec`); killed in that window, the child is left
//! waiting for ever, reparented, with no child of its own (`faults::killed_at_any_moment…`: 3 in 200
//! kills). Nothing of the session runs in it — the command never started — but it is a process
//! left behind, and nothing else will end it.
//!
//! Which process is such an orphan is decided by what cannot be true of a live one: its executable
//! is this launch's bwrap, it runs as this user, it is the first process (PID 1) of a PID namespace
//! of its own, its command line is one the launcher gave (it runs the `__exec` helper), it has no
//! child, and its parent is not a bwrap (a live jail's first process is its bwrap's child, even
//! while that one starts). The decision (`stuck`) does no I/O; `end_stuck` reads `/proc`.

use std::path::{Path, PathBuf};

/// What `/proc` tells of one process, as far as `stuck` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Process {
    pub uid: u32,
    /// The PID in the innermost PID namespace it is in (`NSpid`'s last number).
    pub inner_pid: u32,
    pub exe: Option<PathBuf>,
    /// The parent's executable (`None` for init, or a parent not ours to look at).
    pub parent_exe: Option<PathBuf>,
    pub runs_exec_helper: bool,
    pub children: usize,
}

/// Whether `p` is a jail's first process that its bwrap left before it could start: see the module.
pub(crate) fn stuck(p: &Process, uid: u32, bwrap: &Path) -> bool {
    p.uid == uid
        && p.inner_pid == 1
        && p.exe.as_deref() == Some(bwrap)
        && p.parent_exe.as_deref() != Some(bwrap)
        && p.runs_exec_helper
        && p.children == 0
}

/// Read what `stuck` needs of process `pid`; `None` if it is gone or not readable.
fn read(pid: u32) -> Option<Process> {
    let dir = Path::new("/proc").join(pid.to_string());
    let status = std::fs::read_to_string(dir.join("status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let uid = field("Uid:")?.split_whitespace().next()?.parse().ok()?;
    let inner_pid = field("NSpid:")?.split_whitespace().last()?.parse().ok()?;
    let parent: u32 = field("PPid:")?.parse().ok()?;
    let exe = |p: u32| std::fs::read_link(format!("/proc/{p}/exe")).ok();
    let cmdline = std::fs::read(dir.join("cmdline")).ok()?;
    let children = std::fs::read_to_string(dir.join(format!("task/{pid}/children"))).ok()?;
    Some(Process {
        uid,
        inner_pid,
        exe: exe(pid),
        parent_exe: exe(parent).filter(|_| parent > 1),
        runs_exec_helper: cmdline
            .split(|b| *b == 0)
            .any(|a| a == crate::jail::layout::HELPER.as_bytes()),
        children: children.split_whitespace().count(),
    })
}

/// End every jail process a dead launcher's bwrap left before it could start (`stuck`); how many.
/// Called when a launch finds a dead session (`liveness::sweep`), not at every launch: a look at
/// every process costs a few milliseconds.
pub(crate) fn end_stuck(bwrap: &Path) -> usize {
    let bwrap = std::fs::canonicalize(bwrap).unwrap_or_else(|_| bwrap.to_path_buf());
    let uid = rustix::process::getuid().as_raw();
    let mut ended = 0;
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if read(pid).is_some_and(|p| stuck(&p, uid, &bwrap)) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid.try_into().unwrap_or(0)) {
                if rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok() {
                    tracing::info!(
                        pid = pid.as_raw_nonzero().get(),
                        "ended a dead launcher's jail process, left before it started"
                    );
                    ended += 1;
                }
            }
        }
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_first_process_its_bwrap_left_before_it_started_is_stuck() {
        let bwrap = Path::new("/usr/bin/bwrap");
        let orphan = Process {
            uid: 1000,
            inner_pid: 1,
            exe: Some(bwrap.into()),
            parent_exe: None,
            runs_exec_helper: true,
            children: 0,
        };
        assert!(stuck(&orphan, 1000, bwrap));
        let reparented = Process {
            parent_exe: Some("/usr/lib/systemd/systemd".into()),
            ..orphan.clone()
        };
        assert!(stuck(&reparented, 1000, bwrap), "reparented to a subreaper");
        // Each thing a live jail, another user's, or another program's bwrap has.
        let not = [
            Process {
                uid: 0,
                ..orphan.clone()
            },
            Process {
                inner_pid: 7,
                ..orphan.clone()
            },
            Process {
                exe: Some("/usr/bin/flatpak-bwrap".into()),
                ..orphan.clone()
            },
            Process {
                parent_exe: Some(bwrap.into()),
                ..orphan.clone()
            },
            Process {
                runs_exec_helper: false,
                ..orphan.clone()
            },
            Process {
                children: 1,
                ..orphan.clone()
            },
        ];
        for p in not {
            assert!(!stuck(&p, 1000, bwrap), "{p:?}");
        }
    }

    /// A real process: this test's own is read, and is not one.
    #[test]
    fn this_tests_own_process_is_read_and_is_none() {
        let p = read(std::process::id()).expect("our own /proc entry");
        assert_eq!(p.uid, rustix::process::getuid().as_raw());
        assert!(p.exe.is_some() && !p.runs_exec_helper);
        assert!(!stuck(&p, p.uid, Path::new("/usr/bin/bwrap")));
    }
}
