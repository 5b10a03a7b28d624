//! The cache-layer check: how much disk the jail's own caches take, and where.
//!
//! Guards against a store that grows unseen: the jail's caches persist across sessions and are never
//! cleaned by the human's own tools (`npm cache clean` outside does not reach them).

use super::{pass, warn, Check};

/// The jail's own cache layers: where, and how much disk they take.
pub(super) fn check_layers(env: &crate::host::HostEnv) -> Vec<Check> {
    let Ok(home) = env.home_dir() else {
        return Vec::new();
    };
    let store = crate::jail::layers::store_dir(&home, env);
    let total: u64 = crate::jail::layers::rows(&home, &store)
        .iter()
        .map(|r| r.bytes)
        .sum();
    let mut out = vec![pass(
        "cache layers",
        format!(
            "{} in {} (the jail's own caches; `claude-sandbox cache clear` removes them)",
            crate::jail::layers::human(total),
            store.display()
        ),
    )];
    out.push(path_dirs(&home, &store));
    out
}

/// Where the jail's installs go: the home PATH directories lie in the data layers, which without
/// an overlay are your directories read-only (an install there fails; it never writes through).
fn path_dirs(home: &std::path::Path, store: &std::path::Path) -> Check {
    let read_only = read_only(home, &crate::jail::layers::plan(home, store));
    if read_only.is_empty() {
        pass(
            "home PATH directories",
            "the jail's own layers: what the agent installs there stays in the jail \
             (`claude-sandbox adopt NAME` brings one over)",
        )
    } else {
        warn(
            "home PATH directories",
            format!(
                "no overlay can be made for the layer store {} (kernel < 5.11, or the store is on \
                 overlayfs): {} read-only in the jail, so installs there (`pip install --user`, \
                 `npm i -g --prefix ~/.local`, `cargo install`) fail",
                store.display(),
                read_only.join(", ")
            ),
            format!(
                "mount a volume at {} (the devcontainer Feature does; the installer makes it, \
                 sticky like /tmp), or set {} to a directory you own on another filesystem, or \
                 install outside the jail",
                crate::jail::layers::SHARED_BASE,
                crate::host::LAYERS_DIR
            ),
        )
    }
}

/// The home PATH directories the jail would see read-only (yours, no overlay), as `~/...`.
fn read_only(home: &std::path::Path, layers: &[crate::jail::policy::Layer]) -> Vec<String> {
    use crate::jail::policy::LayerMount;
    crate::jail::layers::PATH_DIRS
        .iter()
        .filter(|rel| {
            let p = home.join(rel);
            layers
                .iter()
                .filter(|l| p.starts_with(&l.path))
                .max_by_key(|l| l.path.components().count())
                .is_some_and(|l| l.mount() == LayerMount::Yours)
        })
        .map(|rel| format!("~/{rel}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn without_an_overlay_your_path_dirs_are_read_only_and_said_so() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        let mut layers = crate::jail::layers::plan(home, &home.join("store"));
        for l in &mut layers {
            l.overlay = true;
        }
        assert!(super::read_only(home, &layers).is_empty());
        for l in &mut layers {
            l.overlay = false;
        }
        // Yours read-only: `~/.local`; the ones you lack are the jail's own directories.
        assert_eq!(super::read_only(home, &layers), vec!["~/.local/bin"]);
    }
}
