//! The temporary name a file of yours is written under before the rename over it.
//!
//! Guards against a killed launcher littering your home and workspace: a carry-back (`~/.claude.json`,
//! an agent's state file) or a put-back (a workspace entry point the session changed) writes a whole
//! new file beside yours and renames it over, so that no reader ever sees half of it. Killed between
//! the two, the temporary file stays. It is named by the *session*, not the process: finishing the
//! session — by its own launcher, or by the next launcher that finds it dead — writes under the same
//! name, which replaces what the killed attempt left, and then renames it away.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `.NAME.claude-sandbox.SESSION` beside `path` (`SESSION`: the session directory's name).
pub(crate) fn beside(path: &Path, session_dir: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".claude-sandbox.");
    name.push(session_dir.file_name().unwrap_or_default());
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_sessions_beside_the_file() {
        let t = beside(
            Path::new("/h/.claude.json"),
            Path::new("/rt/sessions/12-ab"),
        );
        assert_eq!(t, Path::new("/h/..claude.json.claude-sandbox.12-ab"));
    }
}
