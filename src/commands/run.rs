//! `claude-sandbox run [--] COMMAND`: the jail (`jail::launch`), or, already inside this jail, the
//! command itself (`jail::nested`: a jail in a jail would be refused by the kernel anyway).

use crate::jail::launch::RunOptions;

pub(super) fn exec(opts: &RunOptions, host: &crate::host::HostEnv) -> crate::Result<i32> {
    if !opts.dry_run && crate::jail::nested::inside_this_jail(host) {
        return crate::jail::nested::exec_directly(&opts.command, host);
    }
    crate::jail::launch::run(opts, host)
}
