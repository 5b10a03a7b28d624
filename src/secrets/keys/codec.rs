//! The file's format: a magic line, the hash of the linked inodes, then per directory its path,
//! stamp and three lists of names, each length-prefixed (names are any bytes).

use super::{Listing, Stamp, Verdict};
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

const MAGIC: &[u8] = b"claude-sandbox key scan 2\n";

pub(super) fn encode(linked: u64, dirs: &HashMap<PathBuf, (Stamp, Listing)>) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend(linked.to_le_bytes());
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend((b.len() as u64).to_le_bytes());
        out.extend(b);
    };
    let stamp = |out: &mut Vec<u8>, st: &Stamp| {
        for n in [st.dev, st.ino, st.size] {
            out.extend(n.to_le_bytes());
        }
        for n in [st.mtime.0, st.mtime.1, st.ctime.0, st.ctime.1] {
            out.extend(n.to_le_bytes());
        }
    };
    for (path, (st, l)) in dirs {
        bytes(&mut out, path.as_os_str().as_bytes());
        stamp(&mut out, st);
        out.extend((l.dirs.len() as u64).to_le_bytes());
        for n in &l.dirs {
            bytes(&mut out, n.as_bytes());
        }
        out.extend((l.files.len() as u64).to_le_bytes());
        for (n, st, v) in &l.files {
            bytes(&mut out, n.as_bytes());
            stamp(&mut out, st);
            out.push(match v {
                Verdict::Plain => b'p',
                Verdict::Key => b'k',
                Verdict::Other => b'o',
                Verdict::Unsure => b'u',
            });
        }
    }
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_first_chunk::<8>()?;
        self.0 = rest;
        Some(u64::from_le_bytes(*head))
    }
    fn i64(&mut self) -> Option<i64> {
        self.u64().map(|n| i64::from_le_bytes(n.to_le_bytes()))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (b, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(b.to_vec())
    }
    fn name(&mut self) -> Option<OsString> {
        self.bytes().map(OsString::from_vec)
    }
    fn stamp(&mut self) -> Option<Stamp> {
        Some(Stamp {
            dev: self.u64()?,
            ino: self.u64()?,
            size: self.u64()?,
            mtime: (self.i64()?, self.i64()?),
            ctime: (self.i64()?, self.i64()?),
        })
    }
    fn verdict(&mut self) -> Option<Verdict> {
        let (v, rest) = self.0.split_first()?;
        self.0 = rest;
        match v {
            b'p' => Some(Verdict::Plain),
            b'k' => Some(Verdict::Key),
            b'o' => Some(Verdict::Other),
            b'u' => Some(Verdict::Unsure),
            _ => None,
        }
    }
}

pub(super) fn decode(b: &[u8], linked: u64) -> Option<HashMap<PathBuf, (Stamp, Listing)>> {
    let mut r = Reader(b.strip_prefix(MAGIC)?);
    if r.u64()? != linked {
        return None;
    }
    let mut out = HashMap::new();
    while !r.0.is_empty() {
        let path = PathBuf::from(r.name()?);
        let st = r.stamp()?;
        let dirs = (0..r.u64()?).map(|_| r.name()).collect::<Option<_>>()?;
        let files = (0..r.u64()?)
            .map(|_| Some((r.name()?, r.stamp()?, r.verdict()?)))
            .collect::<Option<_>>()?;
        out.insert(path, (st, Listing { dirs, files }));
    }
    Some(out)
}
