//! Hosts allowed for one running session only (`claude-sandbox allow HOST --session`): lines of a
//! file in the session's directory, which the proxy reads again whenever it changed, before a
//! decision. The session's end removes the directory, and the hosts with it.
//!
//! Guards against the jail allowing itself: the file lies in `sessions/<id>/`, which the jail never
//! sees (only `net/` below it is bound into the jail, and the runtime directory is hidden), and the
//! command refuses inside the jail. And against a line that would widen more than it says: a line
//! is taken only if it is a host pattern, and `deny` still wins (the rules are rebuilt with it).

use crate::net::pattern::{normalize, Pattern, Rules};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What identifies one version of the file (inode, change time, size).
type Stamp = (u64, i64, i64, u64);

/// The rules of a session: the launch's, plus the file's lines as last read.
pub(super) struct SessionRules {
    allow: Vec<String>,
    deny: Vec<String>,
    file: Option<PathBuf>,
    now: Mutex<(Option<Stamp>, Arc<Rules>)>,
}

impl SessionRules {
    pub(super) fn new(
        allow: &[String],
        deny: &[String],
        file: Option<PathBuf>,
    ) -> Result<SessionRules, crate::net::error::BadPattern> {
        let rules = Arc::new(Rules::new(allow, deny)?);
        Ok(SessionRules {
            allow: allow.to_vec(),
            deny: deny.to_vec(),
            file,
            now: Mutex::new((None, rules)),
        })
    }

    /// The rules in force: read again when the file changed (one `stat` per decision).
    pub(super) fn current(&self) -> Arc<Rules> {
        let Ok(mut now) = self.now.lock() else {
            return Arc::new(Rules {
                allow: Vec::new(),
                deny: Vec::new(),
            });
        };
        let Some(file) = &self.file else {
            return now.1.clone();
        };
        let stamp = std::fs::metadata(file)
            .ok()
            .map(|m| (m.ino(), m.ctime(), m.ctime_nsec(), m.len()));
        if stamp == now.0 {
            return now.1.clone();
        }
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut allow = self.allow.clone();
        allow.extend(hosts(&text));
        if let Ok(rules) = Rules::new(&allow, &self.deny) {
            tracing::info!(file = %file.display(), "network: this session's own allow list read");
            *now = (stamp, Arc::new(rules));
        }
        now.1.clone()
    }
}

/// The file's valid lines, normalised (anything else is ignored).
fn hosts(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| Pattern::parse(l).is_ok())
        .map(normalize)
        .collect()
}

/// Add `host` to the file `path` (made if missing), replaced in one step; `false` when listed.
/// Under a lock beside it: two `allow --session` at once would otherwise both read the old list,
/// and the second rename would drop the first's host.
pub(crate) fn add(path: &Path, host: &str) -> std::io::Result<bool> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::ErrorKind::InvalidInput.into());
    };
    let _lock = crate::runtime_dir::lock(dir, &format!("{}.lock", name.to_string_lossy()))
        .map_err(std::io::Error::other)?;
    let entry = normalize(host);
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    if hosts(&text).contains(&entry) {
        return Ok(false);
    }
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(&entry);
    new.push('\n');
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, new)?;
    std::fs::rename(&tmp, path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    #[test]
    fn hosts_added_at_once_are_all_kept() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("network-allow");
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let file = file.clone();
                std::thread::spawn(move || super::add(&file, &format!("h{i}.example")).unwrap())
            })
            .collect();
        assert!(threads.into_iter().all(|t| t.join().unwrap()));
        let text = std::fs::read_to_string(&file).unwrap();
        let mut got = super::hosts(&text);
        got.sort();
        let want: Vec<String> = (0..8).map(|i| format!("h{i}.example")).collect();
        assert_eq!(got, want);
    }

    use super::*;

    #[test]
    fn a_host_added_to_the_file_is_allowed_at_the_next_decision_and_deny_still_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("network-allow");
        let r = SessionRules::new(
            &["a.example".into()],
            &["*.bad.example".into()],
            Some(file.clone()),
        )
        .unwrap();
        assert!(r.current().check_name("b.example").is_err());
        assert!(add(&file, "B.example.").unwrap());
        assert!(!add(&file, "b.example").unwrap());
        assert!(r.current().check_name("b.example").is_ok());
        assert!(r.current().check_name("a.example").is_ok());
        assert!(add(&file, "x.bad.example").unwrap());
        std::fs::write(&file, "b.example\nnot a host;\nx.bad.example\n").unwrap();
        let now = r.current();
        assert!(now.check_name("x.bad.example").is_err());
        assert!(now.check_name("b.example").is_ok());
        std::fs::remove_file(&file).unwrap();
        assert!(r.current().check_name("b.example").is_err());
    }
}
