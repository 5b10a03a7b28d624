//! GPU devices by name (`[devices] gpu = true`): the device nodes of the GPU drivers found on this
//! machine are bound into the jail's `/dev`, and nothing else of the host's `/dev`.
//!
//! Guards against the two ways users get a GPU into a sandbox today, both wider than the need:
//! switching the sandbox off, or binding `/dev` whole (every disk, `/dev/kmsg`, the terminals, the
//! input devices). A device node is kernel attack surface: here the jail gets the driver's nodes
//! the human asked for by name, and the jail's `/dev` is otherwise bwrap's minimal one.
//!
//! What a driver needs besides its nodes is already there: its user-space libraries are in the
//! read-only root, `/proc/driver/nvidia` is in the jail's own procfs, `/sys` is read-only.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The `[devices]` table of a configuration file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicesTable {
    pub gpu: Option<bool>,
}

/// The merged `[devices]` settings.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Devices {
    /// The GPU drivers' nodes found here are bound into the jail.
    pub gpu: bool,
}

/// Whether `rel` (a path below `/dev`) names a GPU driver's node. Pure.
///
/// NVIDIA: `nvidia0`…, `nvidiactl`, `nvidia-uvm`, `nvidia-uvm-tools`, `nvidia-modeset`,
/// `nvidia-caps/nvidia-capN` (MIG). DRM (Intel, AMD, virtio, NVIDIA's open modules):
/// `dri/cardN`, `dri/renderDN`. AMD compute (ROCm): `kfd`.
pub(crate) fn is_gpu_node(rel: &str) -> bool {
    let numbered = |s: &str, prefix: &str| {
        s.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    match rel.split_once('/') {
        None => {
            numbered(rel, "nvidia")
                || matches!(
                    rel,
                    "nvidiactl" | "nvidia-uvm" | "nvidia-uvm-tools" | "nvidia-modeset" | "kfd"
                )
        }
        Some(("dri", name)) => numbered(name, "card") || numbered(name, "renderD"),
        Some(("nvidia-caps", name)) => numbered(name, "nvidia-cap"),
        Some(_) => false,
    }
}

/// The GPU nodes under `dev` (the host's `/dev`, or a test's), as (the node, where the jail sees
/// it below `/dev`): character devices only, in name order. Symbolic links (`/dev/dri/by-path`)
/// are not followed: the jail gets the nodes themselves.
pub(crate) fn gpu_nodes(dev: &Path) -> Vec<(PathBuf, PathBuf)> {
    use std::os::unix::fs::FileTypeExt;
    let mut out = Vec::new();
    for sub in ["", "dri", "nvidia-caps"] {
        let Ok(entries) = std::fs::read_dir(dev.join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let rel = if sub.is_empty() {
                name.to_string()
            } else {
                format!("{sub}/{name}")
            };
            if is_gpu_node(&rel) && e.file_type().is_ok_and(|t| t.is_char_device()) {
                out.push((dev.join(&rel), Path::new("/dev").join(&rel)));
            }
        }
    }
    out.sort();
    out
}

/// The host's `/dev`, or `CLAUDE_SANDBOX_TEST_DEV_ROOT` (tests: device nodes made where a GPU
/// is missing).
pub(crate) fn dev_root(env: &crate::host::HostEnv) -> PathBuf {
    env.get(crate::host::TEST_DEV_ROOT)
        .map_or_else(|| PathBuf::from("/dev"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::is_gpu_node;

    #[test]
    fn gpu_nodes_by_name_and_nothing_else_of_dev() {
        for yes in [
            "nvidia0",
            "nvidia12",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-uvm-tools",
            "nvidia-modeset",
            "nvidia-caps/nvidia-cap1",
            "dri/card0",
            "dri/renderD128",
            "kfd",
        ] {
            assert!(is_gpu_node(yes), "{yes}");
        }
        for no in [
            "nvidia",
            "nvidiax",
            "nvidia0a",
            "dri/by-path",
            "dri/card",
            "dri/controlD64x",
            "sda",
            "kmsg",
            "mem",
            "tty0",
            "input/event0",
            "nvidia-caps/other",
            "other/card0",
            "fuse",
            "kvm",
        ] {
            assert!(!is_gpu_node(no), "{no}");
        }
    }

    #[test]
    fn only_character_devices_are_taken() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("dri")).unwrap();
        // A regular file with a GPU node's name is not a device.
        std::fs::write(d.path().join("nvidia0"), b"").unwrap();
        std::fs::write(d.path().join("dri/renderD128"), b"").unwrap();
        assert!(super::gpu_nodes(d.path()).is_empty());
    }
}
