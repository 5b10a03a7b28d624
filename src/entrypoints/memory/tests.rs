use super::super::{discover_recalling, Discovery};
use super::*;
use crate::walk::memo::{now, time};

/// A launch a minute from now: every directory the test made is settled (not racy).
fn later() -> u64 {
    now() + time(60, 0)
}

/// Walk `ws` as a launch at `started` with the memory `known`: what it found and its memory.
fn walk(ws: &Path, known: Memory, started: u64) -> (Discovery, Recall) {
    let mut recall = Recall {
        memory: known,
        started,
        ..Recall::default()
    };
    let d = discover_recalling(ws, None, crate::walk::Trust::Any, &mut recall, None);
    (d, recall)
}

fn sealed(d: &Discovery, path: &Path) -> bool {
    d.findings.iter().any(|f| f.path == path)
}

#[test]
fn a_changed_stamp_or_none_is_listed_again_and_a_racy_one_is_not_kept() {
    let s = |m: u64| Stamp::from_raw([1, 2, m, m]);
    assert!(!listed_again(Some(s(5)), Some(s(5))));
    assert!(listed_again(Some(s(5)), Some(s(6))));
    assert!(listed_again(Some(s(5)), None), "gone, or not a directory");
    assert!(listed_again(None, Some(s(5))), "never remembered");
    let t = now();
    let settled = s(t - time(10, 0));
    assert!(kept(settled, true, t));
    assert!(!kept(settled, false, t), "a listing cut short");
    assert!(
        !kept(s(t - time(1, 0)), true, t),
        "changed within the racy window"
    );
    assert!(!kept(s(t + time(60, 0)), true, t), "ahead of this clock");
}

#[test]
fn the_memory_reads_back_only_whole_and_for_its_own_root() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let mut m = Memory::new();
    m.insert(
        ws.join("a b").into_os_string(),
        Remembered {
            seen: false,
            stamp: Stamp::from_raw([1, 2, 3, u64::MAX]),
            listing: Listing {
                entries: vec![
                    (".envrc".into(), Seen::File),
                    (OsString::from_vec(vec![0xff, b'x']), Seen::Other),
                ],
                subdirs: vec![".git".into(), "src".into()],
                declarations: Declarations {
                    cache_tag: true,
                    venv: false,
                },
            },
        },
    );
    m.insert(
        ws.clone().into_os_string(),
        Remembered {
            stamp: Stamp::from_raw([0; 4]),
            listing: Listing::default(),
            seen: false,
        },
    );
    let bytes = encode(&ws, &m).unwrap();
    assert_eq!(decode(&ws, &bytes), Some(m.clone()));
    // Cut anywhere, one byte changed, another root's, or not one at all: not used.
    for cut in [1, 9, bytes.len() / 2, bytes.len() - 1] {
        assert_eq!(decode(&ws, &bytes[..cut]), None, "cut at {cut}");
    }
    let mut flipped = bytes.clone();
    flipped[MAGIC.len() + 20] ^= 1;
    assert_eq!(decode(&ws, &flipped), None);
    let other = ws.with_file_name("other");
    std::fs::create_dir(&other).unwrap();
    assert_eq!(decode(&other, &bytes), None);
    assert_eq!(decode(&ws, b"garbage"), None);
    assert_eq!(decode(&ws, b""), None);
    // The same path made again is another directory.
    std::fs::rename(&ws, ws.with_file_name("moved")).unwrap();
    std::fs::create_dir(&ws).unwrap();
    assert_eq!(decode(&ws, &bytes), None);
}

/// An unchanged tree is taken from memory but for one `statx` per directory; what was planted in a
/// remembered directory, or changed in a declaration's bytes, is seen at the next walk.
#[test]
fn a_remembered_tree_is_not_read_again_and_every_change_is_seen() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    let deep = ws.join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::create_dir_all(ws.join("target/debug/r/.git/objects")).unwrap();
    std::fs::write(ws.join("a/file"), "x").unwrap();
    let tag = b"Signature: 8a477f597d28d172789f06886806bc55\n";
    std::fs::write(ws.join("target/CACHEDIR.TAG"), tag).unwrap();

    let (first, mem) = walk(&ws, Memory::new(), later());
    assert_eq!(
        (mem.listed, mem.reused),
        (5, 0),
        "ws, a, a/b, a/b/c, target"
    );
    assert!(first.repos.is_empty(), "the tagged cache is not walked");
    let (_, again) = walk(&ws, mem.memory.clone(), later());
    assert_eq!((again.listed, again.reused), (0, 5));
    assert_eq!(again.changes, Changes::default());

    // Planted in a remembered directory: it changes, and only it is read again.
    std::fs::write(deep.join(".envrc"), "echo hi\n").unwrap();
    let (d, m2) = walk(&ws, again.memory, later());
    assert!(sealed(&d, &deep.join(".envrc")));
    assert_eq!((m2.listed, m2.reused), (1, 4));
    // The entry that counts is remembered and given to the walk again.
    let (d, m3) = walk(&ws, m2.memory, later());
    assert!(sealed(&d, &deep.join(".envrc")));
    assert_eq!((m3.listed, m3.reused), (0, 5));

    // The tag's bytes changed in place (the directory did not): no longer a cache, walked.
    std::fs::write(ws.join("target/CACHEDIR.TAG"), b"Signature: none\n").unwrap();
    let (d, m4) = walk(&ws, m3.memory, later());
    assert_eq!(d.repos.len(), 1, "{:?}", d.repos);
    // Tagged again: not walked, and its memory is used without reading it.
    std::fs::write(ws.join("target/CACHEDIR.TAG"), tag).unwrap();
    let (d, m5) = walk(&ws, m4.memory, later());
    assert!(d.repos.is_empty(), "{:?}", d.repos);
    assert!(m5.reused >= 5, "{m5:?}");

    // Racy: read now, not kept; read again next time.
    let (_, racy) = walk(&ws, Memory::new(), now());
    assert!(racy.memory.is_empty(), "{:?}", racy.memory.keys());
}

/// Counts the files the walk looks at for links, and keeps the linked ones.
#[derive(Default)]
struct Counted {
    looks: usize,
    linked: Vec<std::path::PathBuf>,
}

impl crate::entrypoints::Links for Counted {
    fn look(
        &mut self,
        fd: rustix::fd::BorrowedFd<'_>,
        dir: &Path,
        name: &std::ffi::OsStr,
    ) -> Result<Option<crate::jail::hardlinks::Seen>, ()> {
        self.looks += 1;
        let mut check = crate::jail::hardlinks::Check::default();
        crate::entrypoints::Links::look(&mut check, fd, dir, name)
    }
    fn found(&mut self, files: Vec<crate::jail::hardlinks::Seen>) {
        self.linked.extend(files.into_iter().map(|s| s.path));
    }
    fn subtree(&mut self, _: &Path) {}
}

/// The first launch after an update: another build's memory gives no listing (each directory is
/// read again, as this build's walk decides what counts), but its word that a directory held no
/// linked file stands while the directory's stamp does, so only a changed directory's files are
/// looked at — and a link made there since is found.
#[test]
fn another_builds_memory_spares_the_looks_not_the_listings() {
    let d = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(d.path()).unwrap().join("ws");
    for i in 0..4 {
        std::fs::create_dir_all(ws.join(format!("d{i}"))).unwrap();
        for j in 0..3 {
            std::fs::write(ws.join(format!("d{i}/f{j}")), "x").unwrap();
        }
    }
    let walk_with = |memory: Memory, other_build: bool| {
        let mut recall = Recall {
            memory,
            other_build,
            started: later(),
            ..Recall::default()
        };
        let mut links = Counted::default();
        discover_recalling(
            &ws,
            None,
            crate::walk::Trust::Any,
            &mut recall,
            Some(&mut links),
        );
        (recall, links)
    };
    let (first, looked) = walk_with(Memory::new(), false);
    assert_eq!((first.listed, looked.looks), (5, 12));
    // The same memory as another build wrote it.
    let mut bytes = encode(&ws, &first.memory).unwrap();
    let exe_dev = MAGIC.len() + 8 + ws.as_os_str().len() + 16;
    bytes[exe_dev] ^= 1;
    let body = bytes.len() - 8;
    let sum = checksum(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    assert_eq!(decode(&ws, &bytes), None, "not this build's listings");
    let (theirs, other) = decode_any(&ws, &bytes).unwrap();
    assert!(other);
    // A link made since in one directory (which moves its stamp).
    std::fs::write(d.path().join("outside"), "o").unwrap();
    std::fs::hard_link(d.path().join("outside"), ws.join("d2/linked")).unwrap();
    let (after, looked) = walk_with(theirs, true);
    assert_eq!(
        (after.listed, after.reused),
        (5, 0),
        "every listing read again"
    );
    assert_eq!(looked.looks, 4, "only d2's files (3 and the link)");
    assert_eq!(looked.linked, [ws.join("d2/linked")]);
    assert!(!after.memory.contains_key(ws.join("d2").as_os_str()));
}
