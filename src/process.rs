//! Signals sent to exactly the process meant, and to nothing else.
//!
//! Guards against a signal that lands on the wrong processes. `kill(2)` treats its first argument
//! specially at 0 (the caller's own group), -1 (every process the caller may signal: as root, all
//! but init) and 1 (init), and a `kill` *program* may parse `-12345` as an option and call
//! `kill(-1, ...)` instead (procps-ng 4.0.2 does). So nothing here runs a program to signal, and
//! every id is checked before the system call: an id of 1 or less is refused, never sent.

use rustix::process::{Pid, Signal};

/// Why a signal was not sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignalError {
    #[error("refusing to signal id {0}: ids of 1 or less address init, the caller's group or every process")]
    Reserved(i32),
    #[error("signalling {what} {id}: {source}")]
    Sys {
        what: &'static str,
        id: i32,
        #[source]
        source: rustix::io::Errno,
    },
}

fn checked(id: i32) -> Result<Pid, SignalError> {
    if id <= 1 {
        return Err(SignalError::Reserved(id));
    }
    Pid::from_raw(id).ok_or(SignalError::Reserved(id))
}

/// Send `sig` to the one process `pid` (> 1).
pub(crate) fn signal_process(pid: i32, sig: Signal) -> Result<(), SignalError> {
    rustix::process::kill_process(checked(pid)?, sig).map_err(|source| SignalError::Sys {
        what: "process",
        id: pid,
        source,
    })
}

/// Send `sig` to every member of the process group `pgid` (> 1), by the system call.
pub(crate) fn signal_group(pgid: i32, sig: Signal) -> Result<(), SignalError> {
    rustix::process::kill_process_group(checked(pgid)?, sig).map_err(|source| SignalError::Sys {
        what: "process group",
        id: pgid,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_ids_are_refused_before_any_system_call() {
        for id in [-1, 0, 1, i32::MIN] {
            assert!(matches!(
                signal_group(id, Signal::KILL),
                Err(SignalError::Reserved(i)) if i == id
            ));
            assert!(matches!(
                signal_process(id, Signal::KILL),
                Err(SignalError::Reserved(i)) if i == id
            ));
        }
    }

    #[test]
    fn a_group_of_our_own_is_signalled_and_only_it() {
        use std::os::unix::process::CommandExt;
        use std::os::unix::process::ExitStatusExt;
        let mut ours = std::process::Command::new("sleep");
        ours.arg("30").process_group(0);
        let mut ours = ours.spawn().unwrap();
        let mut other = std::process::Command::new("sleep");
        other.arg("30").process_group(0);
        let mut other = other.spawn().unwrap();
        signal_group(
            rustix::process::Pid::from_child(&ours)
                .as_raw_nonzero()
                .get(),
            Signal::KILL,
        )
        .unwrap();
        let status = ours.wait().unwrap();
        assert_eq!(status.signal(), Some(9));
        assert!(other.try_wait().unwrap().is_none(), "another group was hit");
        signal_process(
            rustix::process::Pid::from_child(&other)
                .as_raw_nonzero()
                .get(),
            Signal::KILL,
        )
        .unwrap();
        other.wait().unwrap();
    }
}
