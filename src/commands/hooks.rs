//! `claude-sandbox hooks install --runtime R [--print]`: an agent runtime's user-level hook
//! configuration, written (merged) or printed.

use crate::cli::HooksAction;

pub(super) fn exec(action: &HooksAction, host: &crate::host::HostEnv) -> crate::Result<i32> {
    let &HooksAction::Install { runtime, print } = action;
    let home = host.home_dir()?;
    let out = crate::agent_hooks::install(runtime, &home, print)?;
    print!("{out}");
    Ok(0)
}
