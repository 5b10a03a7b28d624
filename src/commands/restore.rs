//! `claude-sandbox restore ID`: a quarantined file back where it was, byte for byte — or, for a
//! held item's id, `review accept ID`.

pub(super) fn exec(id: &str, force: bool, host: &crate::host::HostEnv) -> crate::Result<i32> {
    let runtime = crate::runtime_dir::ensure(&crate::runtime_dir::locate(host))?;
    if id.starts_with('h') {
        println!("{}", crate::review::accept(&runtime, id)?);
        return Ok(0);
    }
    let r = crate::quarantine::restore(&runtime, id, force)?;
    println!(
        "restored {} ({})",
        r.original.display(),
        r.sha256.as_deref().unwrap_or(&r.kind)
    );
    Ok(0)
}
