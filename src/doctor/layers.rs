//! The cache-layer check: how much disk the jail's own caches take, and where.
//!
//! Guards against a store that grows unseen: the jail's caches persist across sessions and are never
//! cleaned by the human's own tools (`npm cache clean` outside does not reach them).

use super::{pass, Check};

/// The jail's own cache layers: where, and how much disk they take.
pub(super) fn check_layers(env: &crate::host::HostEnv) -> Vec<Check> {
    let Ok(home) = env.home_dir() else {
        return Vec::new();
    };
    let store = crate::jail::layers::store_dir(&home, env);
    let total: u64 = crate::jail::layers::rows(&home, &store)
        .iter()
        .map(|r| r.bytes)
        .sum();
    vec![pass(
        "cache layers",
        format!(
            "{} in {} (the jail's own caches; `claude-sandbox cache clear` removes them)",
            crate::jail::layers::human(total),
            store.display()
        ),
    )]
}
