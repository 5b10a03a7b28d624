//! Caches, and the data of tools the agent installs (`DATA`: `~/.local`, `~/.cargo`), as the
//! jail's own layers (docs/layers.md has the table per directory).
//!
//! Guards against a poisoned cache: tools outside the jail run what they find in their caches (npx's
//! `~/.npm/_npx`, pre-commit's clones under `~/.cache/pre-commit`, cargo's extracted
//! `~/.cargo/registry/src/*/build.rs`, zsh's compdump under `~/.cache`), and trust it because they
//! checked it when they downloaded it. So no cache is a writable hole any more: in the jail the
//! human's directory is the read-only lower layer of an overlay whose upper layer is the jail's own
//! (persistent, in the layer store); a write copies the file up and the human's inode never changes
//! (which also breaks a hard link into it). Where the kernel cannot make that overlay (kernel < 5.11;
//! a store on overlayfs, as `$HOME` is in most Docker containers; bwrap making every mount, as
//! bubblewrap 0.8 has no overlay options; every slot of upper directories held by other sessions,
//! `slots`), the jail gets a separate persistent directory of its own instead, which starts empty. Neither is ever
//! read by the human's tools, and neither is ever the human's directory: a cache is never again
//! writable through to the host.
//!
//! The store is `~/.local/state/claude-sandbox/layers` (`CLAUDE_SANDBOX_LAYERS_DIR` overrides it):
//! persistent across sessions and container restarts (a runtime directory under `/run` is often a
//! tmpfs), per user, 0700, no tool reads it, and it is hidden in the jail (nothing in the jail may
//! change an upper or work directory behind the overlay's back).

use crate::host::{self, HostEnv};
use crate::jail::policy::Layer;
use serde::Serialize;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The caches that are layers: path relative to `$HOME`, and the layer's name in the store.
pub const CACHES: &[(&str, &str)] = &[
    (".cache", "cache"),
    (".npm", "npm"),
    (".cargo/registry", "cargo-registry"),
    (".cargo/git", "cargo-git"),
    (".local/share/pnpm", "pnpm"),
];

/// Data and libraries of what the agent installs, also the jail's own layers: `pip install --user`
/// (`~/.local/lib/python3*/site-packages`, where a `.pth` file runs in every Python),
/// `npm i -g --prefix ~/.local` (`~/.local/lib/node_modules`), `cargo install` (its metadata
/// `.crates.toml` and `.crates2.json`), `go install` (`~/go`), and everything tools keep in
/// `~/.local/share` and `~/.local/state` (nvim's plugins, pipx's venvs, mise's tools: run later by
/// your tools, so never writable through). The home PATH directories (`PATH_DIRS`) lie in these
/// layers too, programs and libraries in one place: what the agent installs runs in the jail and in
/// its next session and never lands on your PATH, so nothing it installs can shadow your commands
/// and no install is cut short by a quarantine (`claude-sandbox adopt` brings one over on purpose).
/// The agents' own state directories there stay holes (`plan::home_holes`). Unlike a cache, your
/// data must stay visible: where no overlay can be made, the jail sees your directory read-only,
/// as before (a missing one is the jail's own directory); installs there then fail (read-only file
/// system), never write through.
pub const DATA: &[(&str, &str)] = &[
    (".local", "local"),
    (".cargo", "cargo"),
    ("go", "go"),
    ("bin", "bin"),
];

/// The home directories a shell of yours puts on PATH (Debian's `~/.profile`: `~/.local/bin` and
/// `~/bin` first once they exist; rustup's `~/.cargo/env`; Go's `~/go/bin`), relative to `$HOME`.
/// Each lies in a data layer (`DATA`), so the jail's installs there are the jail's.
pub const PATH_DIRS: &[&str] = &[".local/bin", "bin", ".cargo/bin", "go/bin"];

/// Every layer: data first (a cache may lie inside one), then caches.
pub fn all() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    DATA.iter().chain(CACHES)
}

/// `statfs` magic of overlayfs: an upper directory there is refused by the kernel.
const OVERLAYFS_SUPER_MAGIC: i64 = 0x794c_7630;

/// The shared parent of per-user layer stores, sticky and world-writable like `/tmp` (the installer
/// makes it; the devcontainer Feature mounts a Docker volume there, whose filesystem is the host's).
/// It is used only where `$HOME` is on overlayfs, as in most containers, where no upper directory of
/// an overlay can be: there `pip install --user` would otherwise fail in the jail.
pub const SHARED_BASE: &str = "/var/lib/claude-sandbox";

/// The layer store for this `$HOME`: `host::LAYERS_DIR` when it names an absolute path; else
/// `SHARED_BASE/<uid>/layers` when the store in `$HOME` could hold no overlay (on overlayfs) and
/// the shared base can (`shared_base_usable`); else `~/.local/state/claude-sandbox/layers`. Beside
/// it, `state/` holds the agents' own state directories (`statedir::own_dir`).
pub fn store_dir(home: &Path, env: &HostEnv) -> PathBuf {
    if let Some(dir) = env
        .get(host::LAYERS_DIR)
        .filter(|v| v.as_encoded_bytes().first() == Some(&b'/'))
    {
        return PathBuf::from(dir);
    }
    let own = home.join(".local/state/claude-sandbox/layers");
    let shared = Path::new(SHARED_BASE);
    if fs_magic(&own) == Some(OVERLAYFS_SUPER_MAGIC) && shared_base_usable(shared) {
        let uid = rustix::process::geteuid().as_raw();
        return shared.join(uid.to_string()).join("layers");
    }
    own
}

/// Whether `base` can hold the per-user stores: a real directory (no symlink) owned by root,
/// sticky (nobody renames another user's directory), and not itself on overlayfs (a volume).
pub(crate) fn shared_base_usable(base: &Path) -> bool {
    std::fs::symlink_metadata(base)
        .is_ok_and(|m| m.file_type().is_dir() && m.uid() == 0 && m.mode() & 0o1000 != 0)
        && fs_magic(base).is_some_and(|t| t != OVERLAYFS_SUPER_MAGIC)
}

/// Whether the kernel can mount an overlay with an upper directory in the store: overlayfs in a
/// user namespace needs Linux 5.11; an upper directory on overlayfs is refused; overlayfs's option
/// string cannot carry `,` `:` `\` or a newline in a path (those get the separate directory).
pub(crate) fn overlay_possible(release: &str, store_on_overlayfs: bool, paths: &[&Path]) -> bool {
    let mut nums = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok());
    let version = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let plain = |p: &Path| {
        let s = p.as_os_str().as_encoded_bytes();
        p.to_str().is_some() && !s.iter().any(|b| b",:\\\n".contains(b))
    };
    version >= (5, 11) && !store_on_overlayfs && paths.iter().all(|p| plain(p))
}

/// The filesystem type of `p`, or of its nearest existing ancestor.
fn fs_magic(p: &Path) -> Option<i64> {
    p.ancestors()
        .find_map(|a| rustix::fs::statfs(a).ok())
        // `f_type`'s width differs between architectures.
        .map(|s| {
            #[allow(clippy::unnecessary_cast)]
            let t = s.f_type as i64;
            t
        })
}

/// The layers of one launch, parents before what lies inside them. A nested cache
/// (`~/.cargo/registry`) that you do not have gets no layer of its own: it lies in a data layer
/// (`~/.cargo`), which is the jail's own already. A top directory the launcher makes for this
/// session only (a missing `~/.local`, `~/bin` or `~/go`: its mount point is made in the session's
/// private `$HOME`) is not yours: the layer is the jail's own directory, and a hole is bound into it. Reads, never writes.
pub fn plan(home: &Path, store: &Path) -> Vec<Layer> {
    let release = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    let on_overlay = fs_magic(store) == Some(OVERLAYFS_SUPER_MAGIC);
    // Resolved, so that the sealer finds it in the host's tree as it is (no symlink on the way).
    let store = &std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
    let mut layers = Vec::new();
    for (rel, name) in all() {
        let path = home.join(rel);
        let top = home.join(Path::new(rel).components().next().expect("non-empty"));
        let meta = std::fs::symlink_metadata(&path);
        // A symlinked layer points elsewhere, read-only in the jail as everything else: left alone.
        if meta.as_ref().is_ok_and(|m| !m.is_dir())
            || std::fs::symlink_metadata(&top).is_ok_and(|m| !m.is_dir())
            || (meta.is_err() && path != top)
        {
            continue;
        }
        let lower = match std::fs::canonicalize(&path) {
            Ok(p) if meta.is_ok() => p,
            _ => store.join("empty"),
        };
        let dir = store.join(name);
        let (upper, work) = (dir.join("upper"), dir.join("work"));
        let overlay = overlay_possible(&release, on_overlay, &[&lower, &upper, &work]);
        layers.push(Layer {
            human: meta.is_ok(),
            name: name.to_string(),
            path,
            lower,
            upper,
            work,
            under: None,
            own: dir.join("own"),
            overlay,
            data: DATA.iter().any(|(r, _)| r == rel),
        });
    }
    // Parents first: a layer inside another is mounted on top of it.
    layers.sort_by_key(|l| l.path.components().count());
    layers
}

/// What the launcher holds for the session: the store in use, and (in overlay mode) the upper
/// directories (the kernel only warns when two overlays share one; files would then change under
/// each other).
#[derive(Debug)]
pub struct Held {
    _in_use: std::fs::File,
    /// The slot of upper directories this session holds (`slots`), and its lock.
    slot: Option<(usize, std::fs::File)>,
    /// The overlays' work directories, opened up again when the session ends.
    work: Vec<PathBuf>,
    store: PathBuf,
    /// The layers' directories in the store, for the fold at the end.
    dirs: Vec<PathBuf>,
}

impl Drop for Held {
    /// The kernel leaves `work/work` with mode 000 after an overlay: an ordinary user's
    /// `rm -rf` of the store (or of a test's or battery scene's home holding it) would fail there.
    /// Opened up while the overlay lock is still held, so no other session's overlay uses it.
    fn drop(&mut self) {
        for w in &self.work {
            let inner = w.join("work");
            if std::fs::symlink_metadata(&inner).is_ok_and(|m| m.is_dir()) {
                let _ = std::fs::set_permissions(&inner, std::fs::Permissions::from_mode(0o700));
            }
        }
        // A session beside another: what it wrote joins the shared upper directories now, if no
        // session's overlay uses them (else the next session to take them folds it in).
        if let Some((n, _)) = self.slot.as_ref().filter(|(n, _)| *n > 0) {
            if let Ok(Some(_shared)) = slots::try_lock(&self.store, 0) {
                for d in &self.dirs {
                    slots::fold_slot(d, *n);
                }
            }
        }
    }
}

/// Create the store (0700, yours, not a symlink).
pub fn ensure_store(store: &Path) -> std::io::Result<()> {
    // The parents with the usual mode (`~/.local/state` may not exist yet), the store itself 0700;
    // under the shared base, the user's directory too is 0700 and must be yours (another user could
    // otherwise make it first and swap the store under you).
    if let Some(parent) = store.parent() {
        if parent.parent() == Some(Path::new(SHARED_BASE)) {
            own_dir(parent)?;
        } else {
            std::fs::create_dir_all(parent)?;
        }
    }
    own_dir(store)
}

/// `dir` made 0700 if missing, then checked: a directory (no symlink) owned by you, closed to others.
fn own_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let m = std::fs::symlink_metadata(dir)?;
    if !m.file_type().is_dir() || m.uid() != rustix::process::geteuid().as_raw() {
        return Err(std::io::Error::other(
            "is not a directory owned by you (a symlink or another user's is refused); remove it",
        ));
    }
    if m.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Before bwrap starts: the store and each layer's directories exist, the store is marked in use,
/// and the session takes a slot of upper directories (`slots`): the shared ones when free, else
/// its own above them. Only when every slot is held are the separate directories used instead.
pub fn prepare(store: &Path, layers: &mut [Layer]) -> crate::error::Result<Held> {
    use rustix::fs::FlockOperation as Op;
    let err = |what: String, e: std::io::Error| {
        crate::error::Error::io(
            format!(
                "{what} (the cache layer store {}; set {} to another directory you own, or remove it)",
                store.display(),
                host::LAYERS_DIR
            ),
            e,
        )
    };
    ensure_store(store).map_err(|e| err(format!("creating {}", store.display()), e))?;
    for l in layers.iter() {
        for d in [&l.upper, &l.work, &l.own, &store.join("empty")] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .map_err(|e| err(format!("creating {}", d.display()), e))?;
        }
    }
    let in_use = open_lock(&store.join(".in-use"))
        .and_then(|f| {
            rustix::fs::flock(&f, Op::LockShared)
                .map(|()| f)
                .map_err(Into::into)
        })
        .map_err(|e| err("locking".into(), e))?;
    let dirs: Vec<PathBuf> = layers
        .iter()
        .filter_map(|l| l.upper.parent().map(Path::to_path_buf))
        .collect();
    let slot = if layers.iter().any(|l| l.overlay) {
        slots::take(store).map_err(|e| err("locking".into(), e))?
    } else {
        None
    };
    match &slot {
        None => {
            for l in layers.iter_mut() {
                if l.overlay {
                    tracing::info!(
                        "{}: {} sessions hold every overlay slot; this one uses {}",
                        l.path.display(),
                        slots::SLOTS,
                        l.own.display()
                    );
                }
                l.overlay = false;
            }
        }
        // The shared upper directories: what sessions beside others left is folded in first.
        Some((0, _)) => slots::fold_free(store, &dirs),
        Some((n, _)) => {
            for l in layers.iter_mut().filter(|l| l.overlay) {
                let Some(dir) = l.upper.parent().map(Path::to_path_buf) else {
                    continue;
                };
                let (upper, work) = slots::dirs(&dir, *n);
                for d in [&upper, &work] {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(d)
                        .map_err(|e| err(format!("creating {}", d.display()), e))?;
                }
                l.under = Some(std::mem::replace(&mut l.upper, upper));
                l.work = work;
            }
        }
    }
    Ok(Held {
        _in_use: in_use,
        work: layers
            .iter()
            .filter(|l| l.mount() == crate::jail::policy::LayerMount::Overlay)
            .map(|l| l.work.clone())
            .collect(),
        slot,
        store: store.to_path_buf(),
        dirs,
    })
}

fn open_lock(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Disk use of a tree in bytes (blocks, as `du`), never following a symlink.
pub fn disk_use(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.blocks() * 512)
        .sum()
}

/// Remove a layer's directories. An overlay's work directory holds a mode-000 directory: each
/// directory is opened up first (no symlink is followed: walkdir does not, and chmod is only given
/// real directories).
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        return Ok(());
    }
    for e in walkdir::WalkDir::new(dir) {
        let Ok(e) = e else { continue };
        if e.file_type().is_dir() {
            std::fs::set_permissions(e.path(), std::fs::Permissions::from_mode(0o700))?;
        }
    }
    std::fs::remove_dir_all(dir)
}

/// One line per layer for `cache ls` and `doctor`.
#[derive(Debug, Serialize)]
pub struct Row {
    pub name: String,
    pub path: PathBuf,
    pub layer: PathBuf,
    pub bytes: u64,
}

/// The store's layers, with their size.
pub fn rows(home: &Path, store: &Path) -> Vec<Row> {
    all()
        .map(|(rel, name)| Row {
            name: name.to_string(),
            path: home.join(rel),
            layer: store.join(name),
            bytes: disk_use(&store.join(name)),
        })
        .collect()
}

/// Human-readable size.
// For reading only: one decimal of a GiB needs far fewer than f64's 52 bits.
#[allow(clippy::cast_precision_loss)]
pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

/// `claude-sandbox cache ls`.
pub fn list(home: &Path, store: &Path, json: bool) -> i32 {
    let rows = rows(home, store);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("serialisable")
        );
        return 0;
    }
    println!("The jail's layers (in {}):", store.display());
    for r in &rows {
        println!(
            "  {:<16} {:>10}  over {}",
            r.name,
            human(r.bytes),
            r.path.display()
        );
    }
    0
}

/// `claude-sandbox cache clear [NAME]`: refused while a session runs.
pub fn clear(store: &Path, name: Option<&str>) -> crate::error::Result<()> {
    let names: Vec<&str> = match name {
        Some(n) if all().any(|(_, c)| *c == n) => vec![n],
        Some(n) => {
            return Err(crate::error::Error::Usage(format!(
                "cache clear: no layer named {n}; see `claude-sandbox cache ls`"
            )))
        }
        None => all().map(|(_, n)| *n).collect(),
    };
    if !store.is_dir() {
        return Ok(());
    }
    let f = open_lock(&store.join(".in-use"))
        .map_err(|e| crate::error::Error::io(format!("opening {}", store.display()), e))?;
    if rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        return Err(crate::error::Error::Usage(
            "cache clear: a session is using the layers; run it again when no session runs".into(),
        ));
    }
    for n in names {
        let d = store.join(n);
        remove_tree(&d)
            .map_err(|e| crate::error::Error::io(format!("removing {}", d.display()), e))?;
    }
    Ok(())
}

pub(crate) mod installed;
mod slots;

#[cfg(test)]
mod tests;
