//! Already inside the jail: a nested `claude-sandbox run` (a wrapped agent started from
//! `claude-sandbox run -- bash`, or a copy of the binary in the workspace) runs its command directly,
//! and a shell started in the jail says where it is.
//!
//! Guards against two things. A nested launch cannot work (bwrap and claude-sandbox are masked in the
//! jail) and used to fail with "bwrap not found ... apt-get install bubblewrap", a fix that would be
//! wrong. And a spoofed "you are inside" must not weaken anything: running directly is chosen only
//! when all three jail-made facts hold at once — `CLAUDE_SANDBOX=1` (set by the launcher), no usable
//! bwrap (masked in the jail), and a user namespace that maps exactly one uid (bwrap's
//! `--unshare-user`). Outside, someone who sets `CLAUDE_SANDBOX=1` meets a bwrap that exists and the
//! launch goes on as always; where bwrap is missing outside, the single-uid map is still missing and
//! the launch fails closed as before.
//!
//! The launcher sets `host::IN_JAIL` in the jail (shells can show it in a prompt:
//! `PS1='${CLAUDE_SANDBOX:+(jail) }'"$PS1"`).

use crate::host::{self, HostEnv, IN_JAIL};
use std::ffi::OsStr;
use std::os::unix::process::CommandExt;

/// Whether `/proc/self/uid_map` maps exactly one uid (bwrap's user namespace). A container's map
/// covers a range (`0 0 4294967295`, or rootless `0 1000 1` followed by a subordinate range).
pub(crate) fn single_uid_map(uid_map: &str) -> bool {
    let mut lines = uid_map.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next();
    lines.next().is_none() && first.is_some_and(|l| l.split_whitespace().nth(2) == Some("1"))
}

/// The decision: inside the jail only when every jail-made fact holds.
pub(crate) fn inside_jail(flag: Option<&OsStr>, bwrap_usable: bool, uid_map: &str) -> bool {
    flag == Some(OsStr::new("1")) && !bwrap_usable && single_uid_map(uid_map)
}

/// This process (`env`: its environment), judged by [`inside_jail`].
pub(crate) fn inside_this_jail(env: &HostEnv) -> bool {
    let flag = env.get(IN_JAIL);
    if flag.is_none() {
        return false;
    }
    let uid_map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    inside_jail(flag, env.find_bwrap().is_ok(), &uid_map)
}

/// `run` inside the jail: say so and exec COMMAND directly (the surrounding jail still applies).
/// Returns only on failure, with the exit status (126/127 as `run` would).
pub(crate) fn exec_directly(command: &[std::ffi::OsString], env: &HostEnv) -> crate::Result<i32> {
    let Some(cmd) = command.first() else {
        return Err(crate::Error::Usage(
            "run: no COMMAND given; usage: claude-sandbox run [--] COMMAND [ARGS...]".into(),
        ));
    };
    let cwd = std::env::current_dir()
        .map_err(|e| crate::Error::io("reading the current directory", e))?;
    let resolved = host::resolve_command(cmd, env.path(), &cwd)?;
    eprintln!(
        "claude-sandbox: already inside the jail; running {} directly",
        cmd.to_string_lossy()
    );
    let err = std::process::Command::new(&resolved)
        .arg0(cmd)
        .args(&command[1..])
        .exec();
    Err(crate::Error::NotExecutable(
        cmd.to_string_lossy().into_owned(),
        format!(" ({err})"),
    ))
}

/// What a shell started in the jail is told first (only on a terminal: a script's stderr stays its
/// own).
pub(crate) fn greeting(command: &OsStr, terminal: bool) -> Option<String> {
    let name = std::path::Path::new(command).file_name()?.to_str()?;
    let shell = matches!(
        name,
        "bash" | "zsh" | "sh" | "dash" | "fish" | "ksh" | "mksh" | "tcsh" | "csh"
    );
    (terminal && shell).then(|| {
        format!(
            "claude-sandbox: you are inside the jail ({IN_JAIL}=1); the workspace and agent state are \
             writable, entry points are sealed; `exit` leaves it"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_only_when_every_jail_fact_holds() {
        let jail_map = "         0          0          1\n";
        let one = Some(OsStr::new("1"));
        assert!(inside_jail(one, false, jail_map));
        // Spoofed outside: bwrap is there, or the map is a container's.
        assert!(!inside_jail(one, true, jail_map));
        assert!(!inside_jail(one, false, "0 0 4294967295\n"));
        assert!(!inside_jail(one, false, "0 1000 1\n1 100000 65536\n"));
        assert!(!inside_jail(one, false, ""));
        assert!(!inside_jail(None, false, jail_map));
        assert!(!inside_jail(Some(OsStr::new("yes")), false, jail_map));
    }

    #[test]
    fn shells_on_a_terminal_are_greeted() {
        assert!(greeting(OsStr::new("bash"), true).is_some());
        assert!(greeting(OsStr::new("/usr/bin/zsh"), true).is_some());
        assert!(greeting(OsStr::new("bash"), false).is_none());
        assert!(greeting(OsStr::new("claude"), true).is_none());
    }
}
