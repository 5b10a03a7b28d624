//! The jail's own copy of each repository's `.git/config`, merged back without its exec-capable keys.
//!
//! Guards against two failures of a plain read-only seal. Everyday git breaks: `git remote add`,
//! `git config user.email` and `git push -u` save the config by writing `config.lock` and renaming it
//! over `config`, and a rename onto a mount point fails (EBUSY). And anything the agent could write
//! into the human's config is live at once for the human's git outside (VS Code runs `git status` on
//! its own, which runs `core.fsmonitor`): a watcher that neutralises after the fact leaves a window.
//!
//! So inside the jail `.git/config` is a *symlink*, mounted over the file (a mounted symlink cannot be
//! removed or renamed over: EBUSY), pointing at the jail's copy under `JAIL_DIR`. git resolves a
//! symlinked config before it locks (`lockfile.c`), so it writes `<copy>.lock` beside the copy and
//! renames it there: every write succeeds, and none reaches the human's file while the agent runs.
//! When the session ends the copy is merged back key by key (`merge`): ordinary keys the jail changed
//! are carried out with git itself (`git config --file`), keys whose new value makes git run something
//! (`baseline::is_exec_key`, includes) keep the human's values and raise an alert. The window in
//! which an exec-capable key of the agent's is live outside is therefore zero.
//!
//! A mount on a file is detached when something *outside* renames over its path (the kernel allows
//! that from another mount namespace), and the human's own `git config`, `git remote add` or VS Code's
//! "publish branch" save `.git/config` exactly so, during the session. So while a session runs the
//! human's `.git/config` is *diverted* too: it becomes a symlink to `claude-sandbox/config` in the
//! same git directory (a hard link of the same file, swapped in by one rename: no moment without a
//! config), the human's git follows it and renames inside `claude-sandbox/`, a directory sealed
//! read-only in the jail (renames inside a bound directory detach nothing). The jail's pin on
//! `.git/config` therefore holds for the whole session. The last session using the repository
//! renames the file back (`release`); a registry of sessions in `claude-sandbox/sessions/` says
//! which one is last. An editor that saves `.git/config` itself by rename would still replace the
//! symlink: that is the remaining, documented gap.

use crate::gitconfig::{self, Key};
use serde::Serialize;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory beside the config that holds the human's config while sessions run.
const DIVERTED: &str = "claude-sandbox";

/// What a diverted `.git/config` points at (relative: the same from inside and outside).
fn diverted_link() -> PathBuf {
    Path::new(DIVERTED).join("config")
}

/// `<git dir>/claude-sandbox`: sealed read-only (as a directory) in the jail.
pub(crate) fn diverted_dir(config: &Path) -> PathBuf {
    config.with_file_name(DIVERTED)
}

fn is_diverted(config: &Path) -> bool {
    std::fs::read_link(config).is_ok_and(|t| t == diverted_link())
        && std::fs::symlink_metadata(diverted_dir(config).join("config"))
            .is_ok_and(|m| m.file_type().is_file())
}

/// The human's config file itself (the diverted one while sessions run).
fn human_file(config: &Path) -> PathBuf {
    if is_diverted(config) {
        diverted_dir(config).join("config")
    } else {
        config.to_path_buf()
    }
}

/// Where the session's copies are bound in the jail (its private `/tmp`).
pub(crate) const JAIL_DIR: &str = "/tmp/.claude-sandbox-git";

/// One git config the jail gets its own copy of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitCopy {
    /// The human's config (`<common dir>/config`, or `~/.gitconfig`).
    pub real: PathBuf,
    /// Its number in the session (the copy's directory).
    pub index: usize,
    /// A repository's config, diverted while sessions run (`~/.gitconfig` is not: in the jail it is
    /// a symlink in the session's private `$HOME`, which nothing outside renames).
    pub divert: bool,
}

impl GitCopy {
    /// The copy as the jail sees it: what the mounted symlink points at.
    pub(crate) fn in_jail(&self) -> PathBuf {
        Path::new(JAIL_DIR)
            .join(self.index.to_string())
            .join("config")
    }
}

/// The session's copies, bound writable at `JAIL_DIR`.
pub(crate) fn copies_dir(session_home: &Path) -> PathBuf {
    session_home.with_file_name("git")
}

/// The configs as they were at launch and which copy is whose: never in the jail.
fn base_dir(session_dir: &Path) -> PathBuf {
    session_dir.join("git-base")
}

const MAP: &str = "map.json";

/// The configs that get a copy: each repository's (common directory's) sealed `config`, and the
/// global `~/.gitconfig` when it is bound read-only into the session's `$HOME` — each only when it
/// is a regular file (a symlinked or odd one keeps the read-only seal).
pub(crate) fn choose(
    policy: &crate::jail::policy::Policy,
    repos: &[crate::entrypoints::Repo],
) -> Vec<GitCopy> {
    let sealed = &policy.sealed;
    let mut out = Vec::new();
    let global = policy.home.join(".gitconfig");
    let bound = policy
        .home_entries
        .iter()
        .any(|e| e.name == ".gitconfig" && e.bind == crate::jail::policy::HomeBind::ReadOnly);
    if bound && std::fs::symlink_metadata(&global).is_ok_and(|m| m.file_type().is_file()) {
        out.push(GitCopy {
            real: global,
            index: 0,
            divert: false,
        });
    }
    for r in repos.iter().filter(|r| r.git_dir == r.common_dir) {
        let real = r.common_dir.join("config");
        // Diverted by another session, the seal found is the symlink's target.
        let file = human_file(&real);
        let is_sealed = sealed.iter().any(|s| s.path == file && !s.placeholder);
        let regular = std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file());
        if is_sealed && regular && !out.iter().any(|c: &GitCopy| c.real == real) {
            out.push(GitCopy {
                real,
                index: out.len(),
                divert: true,
            });
        }
    }
    out
}

/// Make the copies (and keep the launch-time bytes for the merge). A config that cannot be read
/// as a regular file is dropped from `copies`: it keeps its read-only seal.
pub(crate) fn prepare(
    session_dir: &Path,
    session_home: &Path,
    session: &super::placeholders::SessionId,
    copies: &mut Vec<GitCopy>,
) {
    let dirs = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(base_dir(session_dir));
    if let Err(e) = dirs {
        tracing::warn!("git configs keep their read-only seal: {e}");
        copies.clear();
        return;
    }
    copies.retain(|c| {
        match copy_one(session_dir, session_home, c).and_then(|()| match c.divert {
            true => divert(&c.real, session),
            false => Ok(()),
        }) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("{}: keeps its read-only seal: {e}", c.real.display());
                false
            }
        }
    });
    let map: Vec<(&Path, bool)> = copies
        .iter()
        .map(|c| (c.real.as_path(), c.divert))
        .collect();
    let written = serde_json::to_vec(&map)
        .map_err(std::io::Error::other)
        .and_then(|b| std::fs::write(base_dir(session_dir).join(MAP), b));
    if let Err(e) = written {
        tracing::warn!("git configs keep their read-only seal: {e}");
        copies.clear();
    }
}

fn copy_one(session_dir: &Path, session_home: &Path, c: &GitCopy) -> std::io::Result<()> {
    let (bytes, mode) =
        super::home::read_regular(&human_file(&c.real)).map_err(std::io::Error::other)?;
    std::fs::write(base_dir(session_dir).join(c.index.to_string()), &bytes)?;
    let dir = copies_dir(session_home).join(c.index.to_string());
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o777)
        .open(dir.join("config"))?;
    std::io::Write::write_all(&mut f, &bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode & 0o777))
}

/// Make `config` a symlink to `claude-sandbox/config` (the same file, hard-linked, swapped in by one
/// rename) unless it is already, and register the session.
fn divert(config: &Path, session: &super::placeholders::SessionId) -> std::io::Result<()> {
    let dir = diverted_dir(config);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )))
        }
        Err(_) => std::fs::DirBuilder::new().mode(0o700).create(&dir)?,
    }
    let _lock = crate::runtime::lock(&dir, LOCK).map_err(std::io::Error::other)?;
    let sessions = dir.join("sessions");
    match std::fs::symlink_metadata(&sessions) {
        Ok(m) if m.is_dir() => {}
        // Never written through a symlink someone left here.
        Ok(_) => {
            return Err(std::io::Error::other(format!(
                "{} is not a directory",
                sessions.display()
            )))
        }
        Err(_) => std::fs::DirBuilder::new().mode(0o700).create(&sessions)?,
    }
    if !is_diverted(config) {
        if !live_sessions(&sessions).is_empty() {
            // Diverted for a live session, and replaced since by something that saved the file
            // itself: that session's pin is gone; this one keeps the read-only seal.
            return Err(std::io::Error::other(
                "another session's diversion was replaced; not diverting again",
            ));
        }
        let target = dir.join("config");
        let _ = std::fs::remove_file(&target); // a leftover of a session that died
        std::fs::hard_link(config, &target)?;
        let tmp = config.with_file_name(format!("config.claude-sandbox.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(diverted_link(), &tmp)?;
        if let Err(e) = std::fs::rename(&tmp, config) {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&target);
            return Err(e);
        }
    }
    let record = serde_json::to_vec(session).map_err(std::io::Error::other)?;
    std::fs::write(sessions.join(&session.id), record)
}

const LOCK: &str = "lock";

/// The sessions registered in `sessions` that still run.
fn live_sessions(sessions: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(sessions) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| {
            std::fs::read(e.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<super::placeholders::SessionId>(&b).ok())
                .is_some_and(|s| s.alive())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Unregister `session`; the last session puts the human's file back at `config` (one rename over
/// the symlink) and removes the directory.
fn release(config: &Path, session: &str) -> std::io::Result<()> {
    let dir = diverted_dir(config);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let lock = crate::runtime::lock(&dir, LOCK).map_err(std::io::Error::other)?;
    let sessions = dir.join("sessions");
    let _ = std::fs::remove_file(sessions.join(session));
    if !live_sessions(&sessions).is_empty() {
        return Ok(());
    }
    if is_diverted(config) {
        std::fs::rename(dir.join("config"), config)?;
    }
    drop(lock);
    std::fs::remove_dir_all(&dir)
}

/// The sealer failed and bwrap will make the mounts: it cannot pin a symlink, so the diversions of
/// this session are released (the configs get the read-only seal). Fails when a config stays
/// diverted for another live session: its symlink could not be pinned in this jail.
pub(crate) fn withdraw(session_dir: &Path, copies: &mut Vec<GitCopy>) -> Result<(), String> {
    let name = session_name(session_dir);
    let _ = std::fs::remove_file(base_dir(session_dir).join(MAP));
    let mut still = Vec::new();
    for c in copies.drain(..).filter(|c| c.divert) {
        let _ = release(&c.real, &name);
        if is_diverted(&c.real) {
            still.push(c.real.display().to_string());
        }
    }
    if still.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} is in use by another session and bwrap alone cannot seal it; end that session or \
             run again once it has ended",
            still.join(", ")
        ))
    }
}

fn session_name(session_dir: &Path) -> String {
    session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The values of each key, in file order, keys in first-seen order.
type Values = Vec<(String, Vec<Option<Vec<u8>>>)>;

fn values(keys: &[Key]) -> Values {
    let mut out: Values = Vec::new();
    for k in keys {
        match out.iter_mut().find(|(n, _)| *n == k.name) {
            Some((_, v)) => v.push(k.value.clone()),
            None => out.push((k.name.clone(), vec![k.value.clone()])),
        }
    }
    out
}

fn get<'a>(v: &'a Values, name: &str) -> &'a [Option<Vec<u8>>] {
    v.iter()
        .find(|(n, _)| n == name)
        .map_or(&[], |(_, v)| v.as_slice())
}

/// What the merge does to the human's config.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Merge {
    /// Keys given exactly these values (an empty list: removed).
    pub set: Vec<(String, Vec<Option<Vec<u8>>>)>,
    /// Keys the jail set to something that makes git run a program: the human's values kept.
    pub kept: Vec<String>,
    /// Keys both sides changed since the launch: the human's values kept.
    pub conflicts: Vec<String>,
}

/// Whether one value of a key makes git run something (or reads another file as config).
fn exec_capable(name: &str, value: &Option<Vec<u8>>) -> bool {
    let text = value
        .as_deref()
        .map_or("true".into(), String::from_utf8_lossy);
    gitconfig::is_include(name) || crate::baseline::is_exec_key(&name.to_ascii_lowercase(), &text)
}

/// Decide the merge from the config at launch, the jail's copy and the human's config now. Pure.
pub(crate) fn merge(base: &[Key], jail: &[Key], human: &[Key]) -> Merge {
    let (base, jail, human) = (values(base), values(jail), values(human));
    let mut names: Vec<&str> = base.iter().chain(&jail).map(|(n, _)| n.as_str()).collect();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));
    let mut m = Merge::default();
    for name in names {
        let (b, j, h) = (get(&base, name), get(&jail, name), get(&human, name));
        if b == j {
            continue;
        }
        if j.iter().any(|v| exec_capable(name, v)) {
            m.kept.push(name.to_string());
        } else if h != b {
            m.conflicts.push(name.to_string());
        } else {
            m.set.push((name.to_string(), j.to_vec()));
        }
    }
    m
}

/// Merge every copy back into the human's config; returns notes for the end of the session.
pub(crate) fn finish(session_dir: &Path) -> Vec<String> {
    let base = base_dir(session_dir);
    let Ok(map) = std::fs::read(base.join(MAP)) else {
        return Vec::new();
    };
    let reals: Vec<(PathBuf, bool)> = serde_json::from_slice(&map).unwrap_or_default();
    let copies = session_dir.join("git");
    let mut notes = Vec::new();
    for (index, (real, diverted)) in reals.iter().enumerate() {
        let copy = copies.join(index.to_string()).join("config");
        let file = human_file(real);
        if let Err(note) = finish_one(session_dir, &base.join(index.to_string()), &copy, &file) {
            notes.push(note);
        }
        if !diverted {
            continue;
        }
        if let Err(e) = release(real, &session_name(session_dir)) {
            notes.push(format!(
                "{}: cannot put your config back from {}: {e}",
                real.display(),
                diverted_dir(real).display()
            ));
        }
    }
    notes
}

fn finish_one(session_dir: &Path, base: &Path, copy: &Path, real: &Path) -> Result<(), String> {
    let refuse = |detail: String| {
        let detail = format!("{}: {detail}; your config is unchanged", real.display());
        super::home::alert(session_dir, real, "git-config-refused", &detail);
        detail
    };
    let parse = |p: &Path| -> Result<Vec<Key>, String> {
        let (bytes, _) = super::home::read_regular(p).map_err(|e| e.to_string())?;
        gitconfig::parse(&bytes).map_err(|e| e.to_string())
    };
    let base = parse(base).map_err(|e| format!("{}: no launch-time copy: {e}", real.display()))?;
    let jail = match parse(copy) {
        Ok(k) => k,
        Err(e) => return Err(refuse(format!("the jail's copy was not merged back: {e}"))),
    };
    let human = parse(real).map_err(|e| {
        format!(
            "{}: the jail's changes were not merged: your config: {e}",
            real.display()
        )
    })?;
    let m = merge(&base, &jail, &human);
    if !m.kept.is_empty() {
        let detail = format!(
            "{}: the jail set {}, which make git run programs; your values were kept",
            real.display(),
            m.kept.join(", ")
        );
        super::home::alert(session_dir, real, "git-config-kept", &detail);
    }
    let mut problems: Vec<String> = m
        .conflicts
        .iter()
        .map(|k| format!("{k} (changed on both sides: yours kept)"))
        .collect();
    for (name, vals) in &m.set {
        if let Err(e) = apply(real, name, vals) {
            problems.push(format!("{name}: {e}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: not carried out from the jail: {}",
            real.display(),
            problems.join("; ")
        ))
    }
}

/// Give `name` exactly `vals` in the config file `real`, with git itself (its locking, its quoting).
fn apply(real: &Path, name: &str, vals: &[Option<Vec<u8>>]) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let git = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new("git")
            .arg("config")
            .arg("--file")
            .arg(real)
            .args(args)
            .env_remove("GIT_CONFIG_PARAMETERS")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("running git: {e}"))
    };
    // `--`: a section named `-x` or a value starting with `-` is never read as an option.
    let unset = git(&["--unset-all".as_ref(), "--".as_ref(), name.as_ref()])?;
    // 5: the key was not there.
    if !unset.status.success() && unset.status.code() != Some(5) {
        return Err(String::from_utf8_lossy(&unset.stderr).trim().to_string());
    }
    for v in vals {
        let v = v.as_deref().unwrap_or(b"true");
        let out = git(&[
            "--add".as_ref(),
            "--".as_ref(),
            name.as_ref(),
            std::ffi::OsStr::from_bytes(v),
        ])?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<Key> {
        gitconfig::parse(text.as_bytes()).unwrap()
    }

    const BASE: &str = "[core]\n\tbare = false\n[user]\n\tname = h\n";

    #[test]
    fn ordinary_changes_are_carried_out() {
        let jail = keys(
            "[core]\n\tbare = false\n[user]\n\tname = h\n\temail = a@b\n\
             [remote \"origin\"]\n\turl = https://x/y\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
             [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
        );
        let m = merge(&keys(BASE), &jail, &keys(BASE));
        let names: Vec<&str> = m.set.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "user.email",
                "remote.origin.url",
                "remote.origin.fetch",
                "branch.main.remote",
                "branch.main.merge"
            ]
        );
        assert!(m.kept.is_empty() && m.conflicts.is_empty());
    }

    #[test]
    fn exec_capable_keys_keep_the_humans_values() {
        for planted in [
            "[core]\n\tfsmonitor = ./x\n",
            "[core]\n\tsshCommand = x\n",
            "[alias]\n\tst = !x\n",
            "[include]\n\tpath = ../x\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[filter \"a\"]\n\tclean = x\n",
            "[remote \"o\"]\n\turl = ext::sh -c x\n",
            "[credential]\n\thelper = !x\n",
        ] {
            let jail = keys(&format!("{BASE}{planted}"));
            let m = merge(&keys(BASE), &jail, &keys(BASE));
            assert!(m.set.is_empty(), "{planted}: {m:?}");
            assert_eq!(m.kept.len(), 1, "{planted}: {m:?}");
        }
        // Turning one off is not running anything.
        let human = keys("[core]\n\tfsmonitor = ./hook\n");
        let m = merge(&human, &keys("[core]\n\tfsmonitor = false\n"), &human);
        assert_eq!(m.set.len(), 1);
        // An alias that runs a git command is ordinary.
        let m = merge(
            &keys(BASE),
            &keys(&format!("{BASE}[alias]\n\tst = status\n")),
            &keys(BASE),
        );
        assert_eq!(m.set.len(), 1);
    }

    #[test]
    fn removals_and_conflicts() {
        let with_remote = "[remote \"o\"]\n\turl = u\n";
        let m = merge(&keys(with_remote), &keys(""), &keys(with_remote));
        assert_eq!(m.set, vec![("remote.o.url".to_string(), vec![])]);
        let m = merge(
            &keys(BASE),
            &keys("[user]\n\tname = j\n[core]\n\tbare = false\n"),
            &keys("[user]\n\tname = k\n[core]\n\tbare = false\n"),
        );
        assert_eq!(m.conflicts, ["user.name"]);
        assert!(m.set.is_empty());
    }
}
