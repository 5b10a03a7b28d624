//! `claude-sandbox cache ls|clear [NAME]`: the jail's own layers.

use crate::cli::CacheAction;

pub(super) fn exec(action: CacheAction, host: &crate::host::HostEnv) -> crate::Result<i32> {
    let home = host.home_dir()?;
    let store = crate::jail::layers::store_dir(&home, host);
    match action {
        CacheAction::Ls { json } => Ok(crate::jail::layers::list(&home, &store, json)),
        CacheAction::Clear { name } => {
            crate::jail::layers::clear(&store, name.as_deref())?;
            Ok(0)
        }
    }
}
