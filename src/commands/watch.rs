//! `claude-sandbox watch`: the watcher in the foreground, outside any jail.

use std::path::PathBuf;

pub(super) fn exec(workspace: Option<PathBuf>, host: &crate::host::HostEnv) -> crate::Result<i32> {
    crate::watch::foreground(workspace, host)
}
