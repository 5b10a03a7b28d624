//! Chosen loopback services: which ports of the container's loopback the jail reaches in
//! `allowlist` mode (`[network] loopback`, and the ports of live IDE integrations), each bridged on
//! its own port of the jail's loopback and carried through the proxy, which connects to that port
//! of the container's loopback and to no other.
//!
//! Guards against the jail reaching every service on the container's loopback (a database, a
//! Docker API on TCP, Jupyter, another tool's WebSocket) because one of them is needed: a port is
//! reachable only when it is listed, or when an IDE's lock file names it and the process that
//! wrote the file is alive now (a stale file from an IDE long gone names a port anyone may have
//! taken since). Pure parts here: the entries as written, the lock files read, the list merged.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// One `[network] loopback` entry: `5432` or `"5432"`, or `"label:5432"` (the label is shown by
/// `explain` and `doctor`, nothing else).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub(crate) enum Entry {
    Port(i64),
    Text(String),
}

/// A loopback port the configuration lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub port: u16,
    pub label: Option<String>,
}

/// An entry that is not a port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BadEntry {
    #[error(
        "loopback entry `{0}` is not a port: give a number from 1 to 65535 (5432) or \"label:port\" \
         (\"mcp:8931\")"
    )]
    NotAPort(String),
    #[error(
        "loopback port {} is the jail's own proxy port: the jail's proxy listens there; the \
         service must listen on another port",
        super::PORT
    )]
    ProxyPort,
}

impl Entry {
    pub(crate) fn parse(&self) -> Result<Listed, BadEntry> {
        let (label, port) = match self {
            Entry::Port(n) => (None, u16::try_from(*n).ok()),
            Entry::Text(s) => match s.rsplit_once(':') {
                Some((l, p)) => (Some(l.trim()), p.trim().parse().ok()),
                None => (None, s.trim().parse().ok()),
            },
        };
        let shown = || match self {
            Entry::Port(n) => n.to_string(),
            Entry::Text(s) => s.clone(),
        };
        let port = port
            .filter(|p| *p != 0)
            .ok_or_else(|| BadEntry::NotAPort(shown()))?;
        // A label is for people: a plain word (it is printed, never interpreted), and never one
        // that reads as a host (`127.0.0.1:80`, `localhost:80`: the port is always the loopback's).
        let word = |l: &str| {
            l.starts_with(|c: char| c.is_ascii_alphabetic())
                && l.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
                && !l.eq_ignore_ascii_case("localhost")
        };
        let label = match label {
            Some(l) if !word(l) => {
                return Err(BadEntry::NotAPort(shown()));
            }
            l => l.map(str::to_string),
        };
        if port == super::PORT {
            return Err(BadEntry::ProxyPort);
        }
        Ok(Listed { port, label })
    }
}

/// A port bridged into the jail, and why (for `explain` and `doctor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bridged {
    pub port: u16,
    pub why: String,
    /// The IDE's file for this port (Claude Code's lock, Gemini CLI's companion file), handed into
    /// the jail (`stage_locks`).
    #[serde(skip)]
    pub lock: Option<PathBuf>,
}

/// An IDE integration's server found on the container's loopback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ide {
    pub port: u16,
    pub pid: i32,
    pub what: &'static str,
    /// The file that named it (handed into the jail: `stage_locks`).
    pub lock: Option<PathBuf>,
}

/// Claude Code's IDE lock file (`<config>/ide/<port>.lock`, written by the VS Code and `JetBrains`
/// extensions): its name is the port, its JSON has the pid of the IDE that serves it.
pub(crate) fn claude_lock(name: &str, text: &str) -> Option<Ide> {
    let port: u16 = name.strip_suffix(".lock")?.parse().ok()?;
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let pid = i32::try_from(v.get("pid")?.as_i64()?).ok()?;
    Some(Ide {
        port,
        pid,
        what: "Claude Code IDE lock file",
        lock: None,
    })
}

/// Gemini CLI's IDE companion file (`$TMPDIR/gemini/ide/gemini-ide-server-<pid>-<port>.json`, with
/// `port` in its JSON): the pid in its name is the IDE's.
pub(crate) fn gemini_file(name: &str, text: &str) -> Option<Ide> {
    let rest = name
        .strip_prefix("gemini-ide-server-")?
        .strip_suffix(".json")?;
    let (pid, _) = rest.split_once('-')?;
    let pid: i32 = pid.parse().ok()?;
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let port = u16::try_from(v.get("port")?.as_u64()?).ok()?;
    Some(Ide {
        port,
        pid,
        what: "Gemini CLI IDE companion file",
        lock: None,
    })
}

/// Whether `pid` is a live process of this PID namespace (a signal 0 reaches it, or is refused
/// for permission: both say it exists).
pub(crate) fn alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) | Err(rustix::io::Errno::PERM) => true,
        Err(_) => false,
    }
}

/// The IDE servers whose file is in `claude_ide` (Claude Code's `ide/`) or `gemini_ide` and whose
/// process is alive. Files of another user are skipped (the IDE writes its own; one planted by
/// someone else must not choose a port for us).
pub(crate) fn live_ides(claude_ide: &Path, gemini_ide: &Path) -> Vec<Ide> {
    let mut out = Vec::new();
    for (dir, read) in [
        (claude_ide, claude_lock as fn(&str, &str) -> Option<Ide>),
        (gemini_ide, gemini_file),
    ] {
        let Ok(rd) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut found: Vec<Ide> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let meta = e.metadata().ok()?;
                let ours = std::os::unix::fs::MetadataExt::uid(&meta)
                    == rustix::process::geteuid().as_raw();
                // Small files only: these are a few hundred bytes.
                if !meta.is_file() || !ours || meta.len() > 64 * 1024 {
                    return None;
                }
                let ide = read(&name, &std::fs::read_to_string(e.path()).ok()?)?;
                Some(Ide {
                    lock: Some(e.path()),
                    ..ide
                })
            })
            .filter(|i| alive(i.pid))
            .collect();
        found.sort_by_key(|i| i.port);
        out.extend(found);
    }
    out
}

/// Where the IDE files are for this launcher's environment: Claude Code's `ide/` in
/// `CLAUDE_CONFIG_DIR` or `~/.claude`, Gemini CLI's under `TMPDIR` or `/tmp`.
pub(crate) fn ide_dirs(
    home: &Path,
    env: &crate::host::HostEnv,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let claude = env
        .get_str("CLAUDE_CONFIG_DIR")
        .filter(|d| !d.trim().is_empty())
        .map_or_else(|| home.join(".claude"), std::path::PathBuf::from)
        .join("ide");
    let tmp = env
        .get_str("TMPDIR")
        .filter(|d| !d.is_empty())
        .unwrap_or("/tmp");
    (claude, Path::new(tmp).join("gemini").join("ide"))
}

/// The IDE integrations a launch bridges: those serving now (`live_ides`), none where
/// `[network] ide = false`.
pub(crate) fn ides_for(
    net: &super::NetConfig,
    home: &Path,
    env: &crate::host::HostEnv,
) -> Vec<Ide> {
    if net.ide_off {
        return Vec::new();
    }
    let (claude, gemini) = ide_dirs(home, env);
    live_ides(&claude, &gemini)
}

/// The ports to bridge: the listed ones in their order, then the live IDEs' not listed already.
pub(crate) fn bridged(listed: &[Listed], ides: &[Ide]) -> Vec<Bridged> {
    let mut out: Vec<Bridged> = Vec::new();
    for l in listed {
        if out.iter().any(|b| b.port == l.port) {
            continue;
        }
        out.push(Bridged {
            port: l.port,
            why: l.label.as_ref().map_or_else(
                || "[network] loopback".into(),
                |l| format!("[network] loopback ({l})"),
            ),
            lock: None,
        });
    }
    for i in ides {
        if i.port == super::PORT || out.iter().any(|b| b.port == i.port) {
            continue;
        }
        out.push(Bridged {
            port: i.port,
            why: format!("{} (pid {} alive)", i.what, i.pid),
            lock: i.lock.clone(),
        });
    }
    out
}

/// How Gemini CLI's companion files are named (`gemini-ide-server-<pid>-<port>.json`).
const GEMINI_PREFIX: &str = "gemini-ide-server-";

/// Jail side, in the exec helper: Gemini CLI's staged companion files into the jail's own
/// `$TMPDIR/gemini/ide/` (`gemini_ide`; the jail's `/tmp` is a private tmpfs, new each session),
/// where Gemini CLI looks for them; it reads only files of its own user, as these are.
pub(crate) fn place_gemini(staged: &Path, gemini_ide: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(rd) = std::fs::read_dir(staged) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(n) = name.to_str().filter(|n| n.starts_with(GEMINI_PREFIX)) else {
            continue;
        };
        let Ok(text) = std::fs::read(e.path()) else {
            continue;
        };
        if std::fs::create_dir_all(gemini_ide).is_ok() {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(gemini_ide.join(n))
                .and_then(|mut f| std::io::Write::write_all(&mut f, &text));
        }
    }
}

/// The name of a staged lock file in the proxy's directory.
fn staged_name(port: u16) -> String {
    format!("ide-{port}.lock")
}

/// The lock file as the jail's Claude Code must read it: the IDE's pid is not in the jail's PID
/// namespace, so Claude Code there would judge the lock stale (`kill(pid, 0)` fails) and, in an IDE
/// terminal, find the IDE among none of its ancestors. Pid 1 of the jail is alive and an ancestor of
/// every process in it; the rest (port, token, workspace folders) is the IDE's, as written.
pub(crate) fn for_the_jail(text: &str) -> Option<String> {
    let mut v: serde_json::Value = serde_json::from_str(text).ok()?;
    *v.as_object_mut()?.get_mut("pid")? = serde_json::Value::from(1);
    serde_json::to_string(&v).ok()
}

/// Launcher side, before bwrap: Claude Code's live lock files of the bridged ports, made for the
/// jail, in the proxy's directory (0700, bound read-only at `layout::NET_DIR`). A lock that cannot
/// be read now is left out (the port is still bridged).
pub(crate) fn stage_locks(dir: &Path, ports: &[Bridged]) {
    use std::os::unix::fs::OpenOptionsExt;
    for b in ports {
        let Some(text) = b
            .lock
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l).ok())
        else {
            continue;
        };
        let gemini = b.lock.as_ref().and_then(|l| l.file_name()).and_then(|n| {
            let n = n.to_str()?;
            n.starts_with(GEMINI_PREFIX).then(|| n.to_string())
        });
        // Gemini CLI's file as it is (it checks no pid; its name is what it looks for), Claude
        // Code's made for the jail.
        let (name, text) = match gemini {
            Some(name) => (name, text),
            None => match for_the_jail(&text) {
                Some(t) => (staged_name(b.port), t),
                None => continue,
            },
        };
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(dir.join(name))
            .and_then(|mut f| std::io::Write::write_all(&mut f, text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(
                "the IDE lock file of port {} is not handed into the jail: {e}",
                b.port
            );
        }
    }
}

/// Jail side, in the exec helper: the jail's `ide/` of Claude Code (`claude_ide`) gets the staged
/// locks of this launch, and loses the copies earlier launches put there (their IDEs may be gone).
/// Only copies are touched — a lock whose `pid` is 1, which no IDE outside writes — so that where
/// that directory is yours after all (`CLAUDE_CONFIG_DIR` in the workspace, a writable hole), your
/// IDE's own lock files are neither removed nor overwritten.
pub(crate) fn place_locks(staged: &Path, claude_ide: &Path, ports: &[u16]) {
    let ours = |p: &Path| {
        std::fs::read(p)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v.get("pid").and_then(serde_json::Value::as_i64) == Some(1))
    };
    if let Ok(rd) = std::fs::read_dir(claude_ide) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(".lock") && ours(&e.path()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    for port in ports {
        let Ok(text) = std::fs::read(staged.join(staged_name(*port))) else {
            continue;
        };
        let target = claude_ide.join(format!("{port}.lock"));
        if std::fs::symlink_metadata(&target).is_ok() {
            continue; // the IDE's own, seen in the jail as it is
        }
        if std::fs::create_dir_all(claude_ide).is_ok() {
            let _ = std::fs::write(target, text);
        }
    }
}

/// The ports as the exec helper reads them (`host::NET_LOOPBACK`): `5432,8931`.
pub(crate) fn env_value(ports: &[Bridged]) -> String {
    ports
        .iter()
        .map(|b| b.port.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

pub(crate) fn parse_env_value(v: &str) -> Vec<u16> {
    v.split(',')
        .filter_map(|p| p.trim().parse().ok())
        .filter(|p| *p != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Entry {
        Entry::Text(s.into())
    }

    #[test]
    fn entries_are_ports_or_labelled_ports() {
        assert_eq!(
            Entry::Port(5432).parse(),
            Ok(Listed {
                port: 5432,
                label: None
            })
        );
        assert_eq!(
            text("mcp:8931").parse(),
            Ok(Listed {
                port: 8931,
                label: Some("mcp".into())
            })
        );
        assert_eq!(text("6379").parse().unwrap().port, 6379);
        for bad in [
            "0",
            "65536",
            "mcp:",
            ":80",
            "a b:80",
            "localhost",
            "127.0.0.1:80",
            "localhost:80",
            "1db:80",
        ] {
            assert!(
                matches!(text(bad).parse(), Err(BadEntry::NotAPort(_))),
                "{bad}"
            );
        }
        assert!(Entry::Port(-1).parse().is_err());
        assert!(Entry::Port(70000).parse().is_err());
        assert_eq!(Entry::Port(3128).parse(), Err(BadEntry::ProxyPort));
    }

    #[test]
    fn lock_files_name_their_port_and_their_process() {
        let lock = r#"{"pid":4242,"workspaceFolders":["/w"],"ideName":"VS Code","transport":"ws","authToken":"t"}"#;
        assert_eq!(
            claude_lock("40123.lock", lock).map(|i| (i.port, i.pid)),
            Some((40123, 4242))
        );
        assert!(claude_lock("40123.json", lock).is_none());
        assert!(claude_lock("x.lock", lock).is_none());
        assert!(
            claude_lock("40123.lock", "/w\n").is_none(),
            "no pid: not judged alive"
        );
        let g = r#"{"port":45001,"workspacePath":"/w","authToken":"t"}"#;
        assert_eq!(
            gemini_file("gemini-ide-server-77-45001.json", g).map(|i| (i.port, i.pid)),
            Some((45001, 77))
        );
        assert!(gemini_file("gemini-ide-server-77.json", g).is_none());
    }

    #[test]
    fn listed_ports_come_first_once_and_ides_after() {
        let listed = vec![
            text("db:5432").parse().unwrap(),
            Entry::Port(5432).parse().unwrap(),
            Entry::Port(8931).parse().unwrap(),
        ];
        let ides = vec![
            Ide {
                port: 8931,
                pid: 1,
                what: "x",
                lock: None,
            },
            Ide {
                port: 40000,
                pid: 2,
                what: "Claude Code IDE lock file",
                lock: None,
            },
            Ide {
                port: super::super::PORT,
                pid: 3,
                what: "x",
                lock: None,
            },
        ];
        let b = bridged(&listed, &ides);
        let ports: Vec<u16> = b.iter().map(|b| b.port).collect();
        assert_eq!(ports, [5432, 8931, 40000]);
        assert_eq!(b[0].why, "[network] loopback (db)");
        assert!(b[2].why.contains("pid 2"), "{}", b[2].why);
        assert_eq!(parse_env_value(&env_value(&b)), ports);
    }

    #[test]
    fn the_jails_lock_names_the_jails_first_process_and_keeps_the_rest() {
        let lock = r#"{"pid":4242,"workspaceFolders":["/w"],"authToken":"t","transport":"ws"}"#;
        let v: serde_json::Value = serde_json::from_str(&for_the_jail(lock).unwrap()).unwrap();
        assert_eq!(v["pid"], 1);
        assert_eq!(
            (v["authToken"].as_str(), v["workspaceFolders"][0].as_str()),
            (Some("t"), Some("/w"))
        );
        assert!(for_the_jail("[]").is_none() && for_the_jail(r#"{"port":1}"#).is_none());
    }

    #[test]
    fn only_live_ides_of_ours_are_found_and_the_jail_gets_their_locks_alone() {
        let d = tempfile::tempdir().unwrap();
        let (claude, gemini) = (d.path().join("claude/ide"), d.path().join("gemini/ide"));
        std::fs::create_dir_all(&claude).unwrap();
        std::fs::create_dir_all(&gemini).unwrap();
        let me = std::process::id();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let gone_pid = gone.id();
        gone.wait().unwrap();
        std::fs::write(
            claude.join("40001.lock"),
            format!(r#"{{"pid":{me},"authToken":"a"}}"#),
        )
        .unwrap();
        std::fs::write(
            claude.join("40002.lock"),
            format!(r#"{{"pid":{gone_pid}}}"#),
        )
        .unwrap();
        std::fs::write(
            gemini.join(format!("gemini-ide-server-{me}-45001.json")),
            r#"{"port":45001,"workspacePath":"/w"}"#,
        )
        .unwrap();
        let ides = live_ides(&claude, &gemini);
        let ports: Vec<u16> = ides.iter().map(|i| i.port).collect();
        assert_eq!(ports, [40001, 45001]);
        let b = bridged(&[], &ides);
        let staged = d.path().join("net");
        std::fs::create_dir_all(&staged).unwrap();
        stage_locks(&staged, &b);
        // Gemini CLI's file goes to the jail's tmp as it is, under its own name.
        let jail_gemini = d.path().join("jail-tmp/gemini/ide");
        place_gemini(&staged, &jail_gemini);
        let g = format!("gemini-ide-server-{me}-45001.json");
        assert_eq!(
            std::fs::read_to_string(jail_gemini.join(&g)).unwrap(),
            r#"{"port":45001,"workspacePath":"/w"}"#
        );
        assert_eq!(std::fs::read_dir(&jail_gemini).unwrap().count(), 1);
        let jail_ide = d.path().join("jail/ide");
        std::fs::create_dir_all(&jail_ide).unwrap();
        // An earlier launch's copy (gone), and an IDE's own lock seen in the jail (kept).
        std::fs::write(jail_ide.join("39999.lock"), r#"{"pid":1}"#).unwrap();
        std::fs::write(jail_ide.join("39998.lock"), r#"{"pid":777}"#).unwrap();
        place_locks(&staged, &jail_ide, &ports);
        let mut names: Vec<String> = std::fs::read_dir(&jail_ide)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["39998.lock", "40001.lock"]);
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(jail_ide.join("40001.lock")).unwrap()).unwrap();
        assert_eq!(
            (v["pid"].as_i64(), v["authToken"].as_str()),
            (Some(1), Some("a"))
        );
        // Where the jail's directory is yours, your lock is not overwritten.
        std::fs::write(jail_ide.join("40001.lock"), r#"{"pid":4242}"#).unwrap();
        place_locks(&staged, &jail_ide, &ports);
        assert_eq!(
            std::fs::read_to_string(jail_ide.join("40001.lock")).unwrap(),
            r#"{"pid":4242}"#
        );
    }

    #[test]
    fn a_live_process_is_told_from_a_gone_one() {
        assert!(alive(i32::try_from(std::process::id()).unwrap()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        child.wait().unwrap();
        assert!(!alive(pid));
        assert!(!alive(0) && !alive(-1));
    }
}
