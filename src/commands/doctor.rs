//! `claude-sandbox doctor`: each check with a mark, why, and the fix.

pub(super) fn exec(json: bool, host: &crate::host::HostEnv) -> i32 {
    crate::doctor::doctor(json, host)
}
