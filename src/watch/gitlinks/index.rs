//! The reader of git's index file: each entry's mode and path (versions 2 to 4, SHA-1 or SHA-256),
//! as git itself reads them (`read-cache.c`), streamed through one buffer.
//!
//! Guards against two things. A parse that parts from git's on an index the agent crafted could
//! miss a gitlink git sees: so a name is as long as its entry's flags say (12 bits), and only from
//! 4095 on does it end at its NUL, as in git. And the cost of an index read whole: at every
//! watcher's start and every change of an index (1M files: a 90 MB index, whose read into fresh
//! memory took 40–50 ms of page faults, against ~5 ms through a reused 1 MiB buffer). Nothing is
//! remembered of an index between reads (see `submodule_paths`).

use std::io::Read;

/// The buffer an index is read through (it grows only for an entry larger than it).
pub(crate) const CHUNK: usize = 1 << 20;

/// Hand every entry of the index read from `src`, its mode and path, to `f`; `None` if it is not
/// one git writes, or could not be read. Nothing is allocated per entry: versions 2 and 3 hand a
/// slice of the buffer, version 4 one reused name.
pub(crate) fn for_each_entry(
    src: impl Read,
    hash_len: usize,
    chunk: usize,
    mut f: impl FnMut(u32, &[u8]),
) -> Option<()> {
    let mut s = Stream {
        src,
        buf: vec![0; chunk.max(1)],
        lo: 0,
        hi: 0,
        eof: false,
        skip: 0,
    };
    while s.window().len() < 12 {
        if !s.more()? {
            return None;
        }
    }
    let head = s.window();
    let u32_at =
        |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    if &head[..4] != b"DIRC" {
        return None;
    }
    let version = u32_at(4);
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = u32_at(8);
    s.consume(12);
    let mut prev: Vec<u8> = Vec::new();
    for n in 0..count {
        loop {
            match entry(s.window(), (version, n == 0), hash_len, &mut prev) {
                Step::Done { mode, size, name } => {
                    // What git's commands use is the name as a C string: up to a NUL inside it.
                    let name = match name {
                        Some(r) => &s.window()[r],
                        None => prev.as_slice(),
                    };
                    f(mode, as_c_string(name));
                    s.consume(size);
                    break;
                }
                Step::Short => {
                    if !s.more()? {
                        return None;
                    }
                }
                Step::Bad => return None,
            }
        }
    }
    Some(())
}

/// One entry at the start of a window.
enum Step {
    /// Its mode, its size in the file, and its name: a range of the window (versions 2 and 3) or
    /// the reused name (`None`, version 4).
    Done {
        mode: u32,
        size: usize,
        name: Option<std::ops::Range<usize>>,
    },
    /// Not all of it is in the window.
    Short,
    /// Not an entry git writes.
    Bad,
}

/// A name up to its first NUL: an entry's length can take a NUL in, which git keeps (for the next
/// entry's prefix, and its size) but its commands, reading the name as a C string, stop at.
fn as_c_string(name: &[u8]) -> &[u8] {
    name.iter()
        .position(|&c| c == 0)
        .map_or(name, |i| &name[..i])
}

/// A name's length as an entry's flags give it, `None` from 4095 on (then it ends at its NUL).
fn name_len(flags: u16) -> Option<usize> {
    let len = usize::from(flags & 0x0fff);
    (len < 0x0fff).then_some(len)
}

/// Read the entry at the start of `b`; for version 4 its name is made in `prev` (the name before
/// it, prefix-compressed: strip N bytes of it, then the entry's suffix), changed only once the
/// whole entry is there.
fn entry(b: &[u8], (version, first): (u32, bool), hash_len: usize, prev: &mut Vec<u8>) -> Step {
    let flags_at = 40 + hash_len;
    let Some(head) = b.get(..flags_at + 2) else {
        return Step::Short;
    };
    let mode = u32::from_be_bytes([head[24], head[25], head[26], head[27]]);
    let flags = u16::from_be_bytes([head[flags_at], head[flags_at + 1]]);
    let mut p = flags_at + 2;
    // git reads the extended flags whenever the bit is set, whatever the version (`CE_EXTENDED`).
    if flags & 0x4000 != 0 {
        p += 2;
    }
    let nul_from = |p: usize| b.get(p..)?.iter().position(|&c| c == 0).map(|i| p + i);
    if version == 4 {
        let mut strip = 0usize;
        loop {
            let Some(&c) = b.get(p) else {
                return Step::Short;
            };
            p += 1;
            strip |= usize::from(c & 0x7f);
            if c & 0x80 == 0 {
                break;
            }
            // Checked: a length past any path is not an index git writes (and must not overflow
            // into a small one).
            let Some(s) = strip.checked_add(1).and_then(|s| s.checked_mul(1 << 7)) else {
                return Step::Bad;
            };
            strip = s;
        }
        // With no name before it (the first entry), git ignores the count.
        let kept = if first {
            0
        } else {
            match prev.len().checked_sub(strip) {
                Some(kept) => kept,
                None => return Step::Bad,
            }
        };
        let end = match name_len(flags) {
            Some(len) => match len.checked_sub(kept).and_then(|n| p.checked_add(n)) {
                Some(end) => end,
                None => return Step::Bad,
            },
            None => match nul_from(p) {
                Some(end) => end,
                None => return Step::Short,
            },
        };
        let Some(suffix) = b.get(p..end) else {
            return Step::Short;
        };
        prev.truncate(kept);
        prev.extend_from_slice(suffix);
        return Step::Done {
            mode,
            size: end + 1,
            name: None,
        };
    }
    let end = match name_len(flags) {
        Some(len) => p + len,
        None => match nul_from(p) {
            Some(end) => end,
            None => return Step::Short,
        },
    };
    if end > b.len() {
        return Step::Short;
    }
    // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
    Step::Done {
        mode,
        size: (end + 8) & !7,
        name: Some(p..end),
    }
}

/// A file read through one buffer: `buf[lo..hi]` not yet consumed, `skip` bytes still to pass over
/// (an entry's padding past what was read).
struct Stream<R> {
    src: R,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    eof: bool,
    skip: usize,
}

impl<R: Read> Stream<R> {
    fn window(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }

    fn consume(&mut self, n: usize) {
        let here = self.hi - self.lo;
        if n <= here {
            self.lo += n;
        } else {
            self.skip += n - here;
            self.lo = self.hi;
        }
    }

    /// Read more after what is there: `Some(false)` at the end of the file, `None` if it cannot
    /// be read. What is there moves to the buffer's front; a full buffer doubles.
    fn more(&mut self) -> Option<bool> {
        if self.eof {
            return Some(false);
        }
        self.buf.copy_within(self.lo..self.hi, 0);
        self.hi -= self.lo;
        self.lo = 0;
        if self.hi == self.buf.len() {
            let grown = self.buf.len() * 2;
            self.buf.resize(grown, 0);
        }
        loop {
            let n = match self.src.read(&mut self.buf[self.hi..]) {
                Ok(0) => {
                    self.eof = true;
                    return Some(false);
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            };
            let passed = n.min(self.skip);
            self.skip -= passed;
            self.buf.copy_within(self.hi + passed..self.hi + n, self.hi);
            self.hi += n - passed;
            if n > passed {
                return Some(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(index: &[u8], hash_len: usize, chunk: usize) -> Option<Vec<(u32, Vec<u8>)>> {
        let mut out = Vec::new();
        for_each_entry(index, hash_len, chunk, |m, p| out.push((m, p.to_vec())))?;
        Some(out)
    }

    /// Read through any buffer, even one smaller than an entry, an index gives the same entries:
    /// real ones of every version (one with a name past 4095 bytes), and every cut of them.
    #[test]
    fn any_buffer_reads_the_same_entries() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(r)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("HOME", r)
                .status()
                .expect("git is needed for this test")
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        let sha = "0123456789012345678901234567890123456789";
        let long = format!("{}/x", "l".repeat(5000));
        let names = ["a", "ab/c", "ab/cd", "node_modules/.x", long.as_str(), "z"];
        for (i, p) in names.iter().enumerate() {
            let mode = if i % 2 == 0 { "160000" } else { "100644" };
            git(&[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("{mode},{sha},{p}"),
            ]);
        }
        for version in ["2", "3", "4"] {
            git(&["update-index", "--index-version", version]);
            let index = std::fs::read(r.join(".git/index")).unwrap();
            let whole = all(&index, 20, CHUNK).expect("an index git wrote");
            assert_eq!(whole.len(), names.len(), "v{version}");
            assert!(whole.iter().any(|(_, p)| p == long.as_bytes()));
            for chunk in [1, 7, 64, 100, 4096] {
                assert_eq!(
                    all(&index, 20, chunk).as_ref(),
                    Some(&whole),
                    "v{version} {chunk}"
                );
            }
            for cut in (0..index.len()).step_by(37) {
                assert_eq!(
                    all(&index[..cut], 20, 64),
                    all(&index[..cut], 20, CHUNK),
                    "{cut}"
                );
            }
        }
    }

    /// One made-up entry: stat data with `mode`, a SHA-1, `flags`, `extra` (extended flags, or a
    /// version 4 prefix count), the name's bytes, and NUL padding.
    fn made_up(version: u32, entries: &[(u32, u16, &[u8], &[u8])]) -> Vec<u8> {
        let mut v = b"DIRC".to_vec();
        v.extend_from_slice(&version.to_be_bytes());
        v.extend_from_slice(&u32::try_from(entries.len()).unwrap().to_be_bytes());
        for (mode, flags, extra, name) in entries {
            let at = v.len();
            let mut stat = [0u8; 40];
            stat[24..28].copy_from_slice(&mode.to_be_bytes());
            v.extend_from_slice(&stat);
            v.extend_from_slice(&[0x11; 20]);
            v.extend_from_slice(&flags.to_be_bytes());
            v.extend_from_slice(extra);
            v.extend_from_slice(name);
            v.push(0);
            if version < 4 {
                while (v.len() - at) % 8 != 0 {
                    v.push(0);
                }
            }
        }
        v.extend_from_slice(&[0; 20]);
        v
    }

    /// Found by the attacker review of the streamed reader: shapes git reads that the parse read
    /// otherwise. A name whose length takes in a NUL and more is what git's commands see up to the
    /// NUL (`node_modules/.x`, the gitlink `git status` recurses into); the extended flags of a
    /// version 2 entry are read (git honours the bit in any version); the first entry of a version 4
    /// index ignores its prefix count (there is no name before it).
    #[test]
    fn names_are_what_git_reads() {
        let gitlink = 0o160_000;
        let hidden = made_up(
            2,
            &[
                (gitlink, 17, b"", b"node_modules/.x\0A"),
                (0o100_644, 1, b"z", b""),
            ],
        );
        let got = all(&hidden, 20, CHUNK).unwrap();
        assert_eq!(got[0], (gitlink, b"node_modules/.x".to_vec()));
        let extended = made_up(
            2,
            &[
                (gitlink, 0x4000 | 3, &[0, 0], b"sub"),
                (gitlink, 1, b"", b"z"),
            ],
        );
        let got = all(&extended, 20, CHUNK).unwrap();
        assert_eq!(got, [(gitlink, b"sub".to_vec()), (gitlink, b"z".to_vec())]);
        let first = made_up(4, &[(gitlink, 3, &[5], b"sub"), (gitlink, 3, &[1], b"x")]);
        let got = all(&first, 20, CHUNK).unwrap();
        assert_eq!(
            got,
            [(gitlink, b"sub".to_vec()), (gitlink, b"sux".to_vec())]
        );
    }
}
