//! The escape hatches to mask (sockets listening at launch and known socket paths, privileged
//! binaries, bwrap and claude-sandbox themselves) and the directories to hide (the runtime
//! directory, the layer store) or to make private (`/tmp`, `$XDG_RUNTIME_DIR`).

use super::*;

/// Sockets and binaries to mask.
// One list of escape hatches, read top to bottom.
#[allow(clippy::too_many_lines)]
pub(super) fn masks(
    input: &PlanInput,
    home: &Path,
    (private, hidden): (&[PathBuf], &[PathBuf]),
    secrets: Secrets,
    gaps: &mut Vec<String>,
) -> Vec<Mask> {
    let mut out: Vec<Mask> = Vec::new();
    let add = |path: PathBuf, why: String, out: &mut Vec<Mask>| {
        // Most candidates do not exist (sudo in every PATH directory): one lstat says so, where
        // `canonicalize` would first read every component of the path as a link.
        if std::fs::symlink_metadata(&path).is_err() {
            return;
        }
        let Ok(real) = std::fs::canonicalize(&path) else {
            return;
        };
        // Behind a directory the jail cannot search (another user's 0700 directory, seen by root)
        // nothing in it is reachable: no mask needed, and bwrap could not make its mount point.
        if !searchable_without_privilege(&real) {
            return;
        }
        if private.iter().chain(hidden).any(|d| real.starts_with(d))
            || out.iter().any(|m| m.path == real)
        {
            return;
        }
        let kind = if real.is_dir() {
            MaskKind::Dir
        } else {
            MaskKind::File
        };
        out.push(Mask {
            path: real,
            kind,
            why,
        });
    };
    for (p, why) in KNOWN_SOCKETS {
        add(PathBuf::from(p), why.to_string(), &mut out);
    }
    let env_sockets = [
        (
            "VSCODE_IPC_HOOK_CLI",
            "VS Code IPC: opens and runs files on the host",
        ),
        ("REMOTE_CONTAINERS_IPC", "Dev Containers IPC"),
        (
            "VSCODE_GIT_IPC_HANDLE",
            "VS Code git askpass: the human's git credentials",
        ),
        // Always: `[ssh]` reaches it only through the filter (`ssh_agent`), from outside.
        (
            crate::host::SSH_AUTH_SOCK,
            "ssh-agent: authenticate as the human",
        ),
    ];
    for (var, why) in env_sockets {
        if let Some(v) = input.host.get_str(var).filter(|v| v.starts_with('/')) {
            add(PathBuf::from(v), format!("{why} (${var})"), &mut out);
        }
    }
    if let Some(v) = input
        .host
        .get_str("DOCKER_HOST")
        .and_then(|v| v.strip_prefix("unix://"))
    {
        add(
            PathBuf::from(v),
            "Docker API ($DOCKER_HOST)".into(),
            &mut out,
        );
    }
    for rel in [
        ".docker/run/docker.sock",
        ".gnupg/S.gpg-agent",
        ".gnupg/S.gpg-agent.ssh",
        ".gnupg/S.gpg-agent.extra",
    ] {
        add(home.join(rel), "agent socket in $HOME".into(), &mut out);
    }
    for path in listening_unix_sockets() {
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
            add(path, "unix socket served outside the jail".into(), &mut out);
        }
    }
    let mut bin_dirs: Vec<PathBuf> = [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for dir in std::env::split_paths(&input.path_env).filter(|p| p.is_absolute()) {
        if !bin_dirs.contains(&dir) {
            bin_dirs.push(dir);
        }
    }
    for dir in &bin_dirs {
        for name in PRIVILEGED {
            add(
                dir.join(name),
                format!("{name}: privilege escalation"),
                &mut out,
            );
        }
    }
    if let Some(exe) = &input.self_exe {
        add(
            exe.clone(),
            "claude-sandbox itself: the guard of the next session".into(),
            &mut out,
        );
        // An installed tree (PREFIX/bin/claude-sandbox + PREFIX/share/claude-sandbox).
        if let Some(prefix) = exe.parent().and_then(Path::parent) {
            add(
                prefix.join("share/claude-sandbox"),
                "claude-sandbox's installed files".into(),
                &mut out,
            );
        }
    }
    add(
        input.bwrap.clone(),
        "bwrap: the jail of the next session".into(),
        &mut out,
    );
    for p in &input.config.masked {
        add(p.clone(), "configured mask".into(), &mut out);
    }
    let Secrets {
        hidden: by_kind,
        found,
    } = secrets;
    for p in by_kind {
        add(
            p,
            "hidden: a secret no tool in the jail needs".into(),
            &mut out,
        );
    }
    for p in found.keys {
        let why = "hidden: a private key (by its content)".into();
        add(p, why, &mut out);
    }
    for p in found.others {
        let why = "hidden: another name (a hard link) of a hidden secret".into();
        add(p, why, &mut out);
    }
    if found.cut_short {
        gaps.push(format!(
            "the scan of $HOME for private keys stopped at {} entries: a key beyond is readable in \
             the jail (name it in `hidden`)",
            crate::secrets::keys::BUDGET
        ));
    }
    out
}

/// The secrets to hide: those found by kind (`secrets::resolve`), and what the home's scan found
/// (`secrets::keys`).
pub(super) struct Secrets {
    hidden: Vec<PathBuf>,
    found: crate::secrets::keys::Found,
}

/// Find the secrets to hide. The scan skips what the jail does not see of the home or sees as its
/// own (`private`, `hidden`), the writable roots (the work), what is hidden already and `~/.ssh`
/// (by name and content: `secrets::ssh_private_keys`), and looks for other names of the secrets and
/// of the masked `views`' files.
pub(super) fn secrets(
    input: &PlanInput,
    home: &Path,
    (private, hidden): (&[PathBuf], &[PathBuf]),
    (writable, views): (&[PathBuf], &[PathBuf]),
) -> Secrets {
    let by_kind = crate::secrets::resolve(
        home,
        &input.host,
        &input.config.hidden,
        &input.config.reveal,
    );
    let skip: Vec<PathBuf> = [writable, private, hidden, &by_kind]
        .concat()
        .into_iter()
        .chain([home.join(".ssh")])
        .collect();
    let linked: Vec<PathBuf> = by_kind.iter().chain(views).cloned().collect();
    let cache = crate::runtime_dir::RuntimeDir::new(&input.runtime_dir).key_scan();
    let found = crate::secrets::keys::elsewhere(home, &skip, &linked, &cache);
    Secrets {
        hidden: by_kind,
        found,
    }
}

/// Whether a process of our uid and groups *without capabilities* (the jail's processes: bwrap drops
/// them all) may search every directory above `path`, by the mode bits alone.
fn searchable_without_privilege(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let groups: Vec<u32> = rustix::process::getgroups()
        .map(|g| g.into_iter().map(rustix::fs::Gid::as_raw).collect())
        .unwrap_or_default();
    path.ancestors()
        .skip(1)
        .all(|dir| match std::fs::metadata(dir) {
            Ok(m) if m.uid() == uid => m.mode() & 0o100 != 0,
            Ok(m) if m.gid() == gid || groups.contains(&m.gid()) => m.mode() & 0o010 != 0,
            Ok(m) => m.mode() & 0o001 != 0,
            Err(_) => false,
        })
}

/// Paths of bound unix sockets in this network namespace (`/proc/net/unix`).
pub(super) fn listening_unix_sockets() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = crate::jail::sockets::later::parse_net_unix(&text)
        .into_iter()
        .filter(|b| b.path.starts_with('/'))
        .map(|b| PathBuf::from(b.path))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The directories hidden in the jail: the runtime directory (or the shared base holding it) and
/// the layer store (nothing in the jail may change an upper or work directory behind the overlay).
pub(super) fn hidden_dirs(input: &PlanInput, home: &Path, private: &[PathBuf]) -> Vec<PathBuf> {
    let mut hidden = Vec::new();
    let runtime_dir =
        std::fs::canonicalize(&input.runtime_dir).unwrap_or_else(|_| input.runtime_dir.clone());
    if !private.iter().any(|p| runtime_dir.starts_with(p)) {
        hidden.push(runtime_dir.clone());
    }
    if let Some(base) = crate::runtime_dir::shared_base(&input.host) {
        if base.is_dir() && !hidden.iter().any(|h| h == &base) && !runtime_dir.starts_with(&base) {
            hidden.push(base);
        } else if base.is_dir() && runtime_dir.starts_with(&base) {
            hidden.retain(|h| h != &runtime_dir);
            hidden.push(base);
        }
    }
    // The layer store: nothing in the jail may change an upper or work directory behind the overlay.
    let store = crate::jail::layers::store_dir(home, &input.host);
    if store.is_dir() && !hidden.iter().any(|h| store.starts_with(h)) {
        hidden.push(store);
    }
    // The audit trail: nothing in the jail reads or writes it (`audit`).
    let audit = crate::audit::dir(home, &input.host);
    if audit.is_dir() && !hidden.iter().any(|h| audit.starts_with(h)) {
        hidden.push(audit);
    }
    hidden
}

/// The private writable tmpfs mounts: `/tmp`, and `$XDG_RUNTIME_DIR` when it exists.
pub(super) fn private_dirs(input: &PlanInput) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from(crate::jail::layout::TMP)];
    let run_user = input.host.get(host::XDG_RUNTIME_DIR).map_or_else(
        || PathBuf::from(format!("/run/user/{}", input.uid)),
        PathBuf::from,
    );
    if let Ok(p) = std::fs::canonicalize(&run_user) {
        if p.is_dir() && p != Path::new("/") && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_directory_closed_by_its_mode_is_not_searchable_whatever_our_capabilities() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let open = t.path().join("open/sock");
        let closed = t.path().join("closed/sock");
        std::fs::create_dir_all(open.parent().unwrap()).unwrap();
        std::fs::create_dir_all(closed.parent().unwrap()).unwrap();
        let mode = |p: &std::path::Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        };
        mode(closed.parent().unwrap(), 0o600);
        assert!(super::searchable_without_privilege(&open));
        // Root could search it, the jail's root (no capabilities) could not.
        assert!(!super::searchable_without_privilege(&closed));
        mode(closed.parent().unwrap(), 0o700);
    }
}
