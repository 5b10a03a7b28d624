//! `claude-sandbox explain`: the policy a launch here would have, without launching.

use crate::jail::launch::RunOptions;
use std::path::PathBuf;

pub(super) fn exec(
    workspace: Option<PathBuf>,
    config: Option<PathBuf>,
    json: bool,
    full: bool,
    host: &crate::host::HostEnv,
) -> crate::Result<i32> {
    let opts = RunOptions {
        workspace,
        config,
        dry_run: true,
        command: Vec::new(),
        ..Default::default()
    };
    crate::explain::explain(&opts, json, full, host)?;
    Ok(0)
}
