//! `claude-sandbox restore ID`: a quarantined file back where it was, byte for byte.

pub(super) fn exec(id: &str, force: bool, host: &crate::host::HostEnv) -> crate::Result<i32> {
    let runtime = crate::runtime_dir::ensure(&crate::runtime_dir::locate(host))?;
    let r = crate::quarantine::restore(&runtime, id, force)?;
    println!(
        "restored {} ({})",
        r.original.display(),
        r.sha256.as_deref().unwrap_or(&r.kind)
    );
    Ok(0)
}
