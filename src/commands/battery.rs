//! `claude-sandbox battery`: the attack battery through the real launcher and watcher.

pub(super) fn exec(
    opts: &crate::battery::Options,
    host: &crate::host::HostEnv,
) -> crate::Result<i32> {
    crate::battery::run(opts, host)
}
