//! The plan's part of the secrets by kind (`crate::secrets`): the variables the jail goes without,
//! and the configs it reads through a masked view, decided before bwrap starts (bwrap takes the
//! environment, and binds the views when it makes every mount).

use super::*;
use crate::jail::policy::SecretView;

/// The variables withheld as secrets (added to `unsetenv`), and the masked views, each with its
/// copy's place in the session directory.
pub(super) fn withheld_and_views(
    input: &PlanInput,
    home: &Path,
    unsetenv: &mut Vec<String>,
) -> (Vec<String>, Vec<SecretView>) {
    // By name and by value, but the agents' own credentials and what your config reveals.
    let withheld = crate::secrets::env::withheld_from(&input.host, &input.config.reveal_env);
    for name in &withheld {
        if !unsetenv.contains(name) {
            unsetenv.push(name.clone());
        }
    }
    let session_dir = crate::runtime_dir::SessionDir::of_home(&input.session_home);
    let views = crate::secrets::views::viewed(home, &input.host)
        .into_iter()
        .enumerate()
        .map(|(n, (path, format))| SecretView {
            path,
            copy: session_dir.secret_view(n),
            format,
            text: None,
        })
        .collect();
    (withheld, views)
}
