//! What the watcher remembers of each repository's gitlinks, by its index file's stamp: an index
//! of 200k entries is ~18 MB, read at every watcher start and again on every change of any index
//! (each `git status` or `git add` rewrites one), for a list that is almost always empty.
//!
//! Guards against a gitlink taken from memory after the index changed. git writes an index anew
//! (a `index.lock` renamed over it: a new inode) or in place (new times), so while the stamp
//! (device, inode, size, modification and change times) is the same, so are its bytes; one whose
//! times are not settled (`Stamp::racy`: a second write in the clock's tick keeps them) is not kept,
//! nor anything on a filesystem whose times may lag a change (`walk::memo::exact_times`). The
//! object id's length (read from the config each time) is part of the key. The memory is kept
//! across launches in the runtime directory, hidden from the jail; a file not whole is not used.

use crate::walk::memo::{self, Stamp};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An index file's stamp and size, and the object id length it was read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    stamp: Stamp,
    size: u64,
    hash_len: u64,
}

/// Each repository's index key and gitlinks, by its git directory.
type ByDir = HashMap<PathBuf, (Key, Vec<Vec<u8>>)>;

/// The gitlinks of each repository whose index was read, by its git directory.
#[derive(Debug, Default)]
pub(in crate::watch) struct Known {
    by_dir: ByDir,
    /// Changed since it was loaded: worth writing again.
    changed: bool,
}

/// The file's first bytes: what it is and the codec's version.
const MAGIC: &[u8] = b"claude-sandbox gitlinks memory 1\n";

/// The index's key now; `None` without a regular index file.
fn key_of(index: &Path, hash_len: usize) -> Option<Key> {
    use rustix::fs::{AtFlags, FileType, StatxFlags, CWD};
    let st = rustix::fs::statx(
        CWD,
        index,
        AtFlags::SYMLINK_NOFOLLOW,
        memo::MASK | StatxFlags::SIZE,
    )
    .ok()?;
    (FileType::from_raw_mode(st.stx_mode.into()) == FileType::RegularFile).then(|| Key {
        stamp: Stamp::of(&st),
        size: st.stx_size,
        hash_len: hash_len as u64,
    })
}

impl Known {
    /// The gitlinks of the index at `git_dir/index`, from memory while its key is the same, else
    /// read (and remembered once settled). `None`: no index git wrote.
    pub(in crate::watch) fn gitlinks(
        &mut self,
        git_dir: &Path,
        hash_len: usize,
    ) -> Option<Vec<Vec<u8>>> {
        self.gitlinks_at(git_dir, hash_len, memo::now())
    }

    /// `gitlinks`, `now` being the time the racy check compares with (`walk::memo::now`).
    fn gitlinks_at(&mut self, git_dir: &Path, hash_len: usize, now: u64) -> Option<Vec<Vec<u8>>> {
        let index = git_dir.join("index");
        let before = key_of(&index, hash_len);
        if let (Some(k), Some((was, links))) = (before, self.by_dir.get(git_dir)) {
            if k == *was {
                return Some(links.clone());
            }
        }
        let bytes = std::fs::read(&index).ok()?;
        let links = super::index_gitlinks(&bytes, hash_len);
        // Kept only if the file read is the one stamped before, settled, where times are exact.
        let kept = before.filter(|k| {
            key_of(&index, hash_len) == Some(*k) && !k.stamp.racy(now) && memo::exact_times(git_dir)
        });
        match (kept, &links) {
            (Some(k), Some(l)) => {
                self.by_dir.insert(git_dir.to_path_buf(), (k, l.clone()));
                self.changed = true;
            }
            _ => self.changed |= self.by_dir.remove(git_dir).is_some(),
        }
        links
    }

    /// The memory in `file`; empty if there is none or it is not whole.
    pub(in crate::watch) fn load(file: &Path) -> Known {
        let bytes = std::fs::read(file).unwrap_or_default();
        Known {
            by_dir: decode(&bytes).unwrap_or_default(),
            changed: false,
        }
    }

    /// Write the memory to `file` if it changed (a new file renamed over the old one).
    pub(in crate::watch) fn save(&mut self, file: &Path) {
        if !std::mem::take(&mut self.changed) {
            return;
        }
        if let Err(e) = memo::write_whole(file, &encode(&self.by_dir)) {
            tracing::info!("{}: {e}", file.display());
        }
    }
}

fn put(b: &[u8], out: &mut Vec<u8>) {
    out.extend((b.len() as u64).to_le_bytes());
    out.extend(b);
}

fn encode(by_dir: &ByDir) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend((by_dir.len() as u64).to_le_bytes());
    for (dir, (k, links)) in by_dir {
        put(dir.as_os_str().as_bytes(), &mut out);
        for n in k.stamp.raw().into_iter().chain([k.size, k.hash_len]) {
            out.extend(n.to_le_bytes());
        }
        out.extend((links.len() as u64).to_le_bytes());
        for l in links {
            put(l, &mut out);
        }
    }
    out.extend(MAGIC);
    out
}

/// `None` unless the bytes are one whole memory (the magic at both ends, nothing left over).
fn decode(bytes: &[u8]) -> Option<ByDir> {
    use std::os::unix::ffi::OsStringExt;
    let body = bytes.strip_prefix(MAGIC)?.strip_suffix(MAGIC)?;
    let mut r = memo::Reader(body);
    let mut out = HashMap::new();
    for _ in 0..r.u64()? {
        let dir = PathBuf::from(std::ffi::OsString::from_vec(r.bytes()?.to_vec()));
        let mut n = [0u64; 6];
        for x in &mut n {
            *x = r.u64()?;
        }
        let key = Key {
            stamp: Stamp::from_raw([n[0], n[1], n[2], n[3]]),
            size: n[4],
            hash_len: n[5],
        };
        let mut links = Vec::new();
        for _ in 0..r.u64()? {
            links.push(r.bytes()?.to_vec());
        }
        out.insert(dir, (key, links));
    }
    r.0.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .expect("git is needed for this test")
            .success();
        assert!(ok, "git {args:?}");
    }

    /// A minute from now: every index the test wrote is settled.
    fn later() -> u64 {
        memo::now() + memo::time(60, 0)
    }

    #[test]
    fn gitlinks_come_from_memory_while_the_index_is_the_same_and_a_new_one_is_seen() {
        let t = tempfile::tempdir().unwrap();
        let r = std::fs::canonicalize(t.path()).unwrap();
        git(&r, &["init", "-q"]);
        std::fs::write(r.join("a"), "a").unwrap();
        git(&r, &["add", "a"]);
        let git_dir = r.join(".git");
        let file = r.join("memory");
        let mut known = Known::load(&file);
        assert_eq!(known.gitlinks(&git_dir, 20), Some(vec![]));
        assert!(
            known.by_dir.is_empty(),
            "just written (racy): read, not remembered"
        );
        assert_eq!(known.gitlinks_at(&git_dir, 20, later()), Some(vec![]));
        assert!(
            known.by_dir.contains_key(&git_dir) || !memo::exact_times(&git_dir),
            "a settled index is remembered"
        );
        if !memo::exact_times(&git_dir) {
            eprintln!(
                "NOT TESTED: the memory, on a filesystem without exact times ({})",
                r.display()
            );
            return;
        }
        known.save(&file);
        let mut again = Known::load(&file);
        assert_eq!(again.by_dir.len(), 1, "kept across launches");
        // What is remembered is used: garbage in the memory shows it was not read again.
        again.by_dir.get_mut(&git_dir).unwrap().1 = vec![b"from-memory".to_vec()];
        assert_eq!(
            again.gitlinks_at(&git_dir, 20, later()),
            Some(vec![b"from-memory".to_vec()])
        );
        // Another object id length is another key: read again.
        assert_eq!(
            again.gitlinks_at(&git_dir, 32, later()),
            None,
            "not a SHA-256 index"
        );
        // A gitlink added: the index is rewritten (a new inode), and the new gitlink is seen.
        let sha = "0123456789012345678901234567890123456789";
        git(
            &r,
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("160000,{sha},sub"),
            ],
        );
        assert_eq!(
            again.gitlinks_at(&git_dir, 20, later()),
            Some(vec![b"sub".to_vec()])
        );
        // Cut anywhere, the file is not used.
        again.save(&file);
        let bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        assert!(Known::load(&file).by_dir.is_empty());
    }
}
