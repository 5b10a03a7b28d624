//! The exec helper: the jail's first process, which restores what bwrap must not have and runs the
//! command.
//!
//! Guards against a terminal signal killing the jail from the outside. bwrap's outer process stays in
//! the terminal's foreground process group with the command (the command needs the terminal for its
//! TUI), and it dies of SIGINT/SIGQUIT/SIGHUP by default, taking the whole jail with it
//! (`--die-with-parent`): Ctrl-C would kill Claude Code instead of cancelling a turn. So the launcher
//! starts bwrap with those signals ignored, and this helper, run inside the jail through an inherited fd
//! on the claude-sandbox binary (the binary's path itself is masked), closes that fd, restores the
//! default actions, gives the command the real stderr back (bwrap's own stderr is a pipe to the
//! launcher, so that a setup failure is reported as one line) and `exec`s the command: the command
//! sees exactly the signal dispositions and stdio it would have had outside.

use nix::sys::signal::{signal, SigHandler, Signal};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;

/// The byte that opens the gate.
pub const GO: u8 = b'G';

/// Signals ignored in bwrap's outer process and restored here.
pub const IGNORED_IN_BWRAP: &[Signal] = &[Signal::SIGINT, Signal::SIGQUIT, Signal::SIGHUP];

/// Set the signals bwrap must survive to "ignore" (called between fork and exec: async-signal-safe).
pub fn ignore_terminal_signals() -> std::io::Result<()> {
    for s in IGNORED_IN_BWRAP {
        // SAFETY: installing SIG_IGN runs no handler code.
        unsafe { signal(*s, SigHandler::SigIgn) }.map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// `claude-sandbox __exec EXE_FD STDERR_FD [READY_FD GO_FD CWD] -- COMMAND ARGS...`: never returns on
/// success.
///
/// With the gate (`READY_FD`, `GO_FD)`: say "ready" (bwrap's setup is done, the launcher may seal), then
/// wait for one byte on `GO_FD`. End of file instead means the launcher gave up (a failed seal, a
/// failed baseline): exit without running anything. Then enter CWD.
pub fn main(args: &[OsString]) -> i32 {
    let fd = |s: &OsString| s.to_string_lossy().parse::<i32>().ok().filter(|fd| *fd > 2);
    let (exe_fd, stderr_fd, gate, command) = match args {
        [exe, err, sep, cmd @ ..] if sep == "--" && !cmd.is_empty() => {
            (fd(exe), fd(err), None, cmd)
        }
        [exe, err, ready, go, cwd, sep, cmd @ ..] if sep == "--" && !cmd.is_empty() => {
            let gate = fd(ready).zip(fd(go)).map(|(r, g)| (r, g, cwd));
            (fd(exe), fd(err), gate, cmd)
        }
        _ => {
            eprintln!(
                "claude-sandbox: __exec is internal: __exec EXE_FD STDERR_FD [READY_FD GO_FD CWD] -- COMMAND [ARGS...]"
            );
            return crate::error::EXIT_USAGE;
        }
    };
    // SAFETY: the launcher passed these fds for this helper alone; nothing else here uses them.
    let take =
        |fd: i32| unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    if let Some((ready, go, cwd)) = gate {
        let (ready, go) = (take(ready), take(go));
        let _ = rustix::io::write(&ready, b"R");
        drop(ready);
        let mut byte = [0u8; 1];
        if !matches!(rustix::io::read(&go, &mut byte), Ok(1)) || byte[0] != GO {
            return crate::error::EXIT_JAIL;
        }
        // Entered by name only now, after the sealer's mounts: a working directory taken before
        // them would point into the mount underneath (an anchor can cover the workspace itself),
        // where a relative path would reach the unsealed files; and the workspace may not even
        // have been there (the sealer binds it).
        if let Err(e) = std::env::set_current_dir(cwd) {
            eprintln!(
                "claude-sandbox: cannot enter {} after sealing: {e}",
                Path::new(cwd).display()
            );
            return crate::error::EXIT_JAIL;
        }
        // SAFETY: this process is single-threaded (it only reads two fds before this point).
        unsafe { std::env::set_var("PWD", cwd) };
    }
    if let Some(fd) = stderr_fd {
        let saved = take(fd);
        let _ = rustix::stdio::dup2_stderr(&saved);
    }
    if let Some(fd) = exe_fd {
        drop(take(fd));
    }
    // Allowlist mode: the loopback bridge to the proxy, forked while the terminal signals are still
    // ignored (so Ctrl-C, sent to the whole foreground group, leaves it alone).
    if let Err(e) = crate::net::bridge::start_from_env() {
        eprintln!("claude-sandbox: {e}");
        return crate::error::EXIT_JAIL;
    }
    for s in IGNORED_IN_BWRAP {
        // SAFETY: restoring the default action runs no handler code.
        let _ = unsafe { signal(*s, SigHandler::SigDfl) };
    }
    if let Some(line) =
        super::nested::greeting(&command[0], rustix::termios::isatty(std::io::stdin()))
    {
        eprintln!("{line}");
    }
    let err = std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec();
    eprintln!("claude-sandbox: {}: {err}", command[0].to_string_lossy());
    match err.kind() {
        std::io::ErrorKind::NotFound => crate::error::EXIT_NOT_FOUND,
        _ => crate::error::EXIT_NOT_EXECUTABLE,
    }
}
