//! The chain: appending a record after the last one (under the directory's lock, rotating a full
//! file), and verifying every file that is left, oldest first.
//!
//! A record's `hash` is the SHA-256 of its line as written without the `hash` key; its `prev` is the
//! record before it's `hash`, across a rotation too. A removed, edited, inserted or reordered line
//! breaks a `prev`, a `hash` or the `seq` that counts up by one.

use super::{Event, Record, FILE, KEEP, LOCK, ROTATE_AT, SCHEMA};
use sha2::Digest;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// `prev` of the very first record.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

fn digest(text: &str) -> String {
    crate::baseline::hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// `record` with its `hash` computed; the line to write.
pub(super) fn seal(mut record: Record) -> (Record, String) {
    record.hash.clear();
    let unsealed = serde_json::to_string(&record).expect("a record serialises");
    record.hash = digest(&unsealed);
    let line = serde_json::to_string(&record).expect("a record serialises");
    (record, line)
}

/// The last record of `file`: `Ok(None)` when it has none (missing or empty), an error when its
/// last line does not read as a record. Read from the end, further back until a whole last line is
/// in hand (records are bounded, so one 256 KiB read almost always is enough).
fn last_record(file: &Path) -> std::io::Result<Option<Record>> {
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let mut back: u64 = 256 << 10;
    loop {
        let from = len.saturating_sub(back);
        f.seek(SeekFrom::Start(from))?;
        let mut tail = Vec::new();
        f.read_to_end(&mut tail)?;
        let text = String::from_utf8_lossy(&tail);
        let trimmed = text.trim_end();
        if trimmed.is_empty() {
            return Ok(None);
        }
        // A whole last line: one that starts after a newline in what was read, or at the start.
        match trimmed.rfind('\n') {
            Some(i) => {
                return serde_json::from_str(&trimmed[i + 1..]).map(Some).map_err(|e| {
                    std::io::Error::other(format!(
                        "{}: its last line is not a record ({e}): run `claude-sandbox audit verify`",
                        file.display()
                    ))
                })
            }
            None if from == 0 => {
                return serde_json::from_str(trimmed).map(Some).map_err(|e| {
                    std::io::Error::other(format!(
                        "{}: its last line is not a record ({e}): run `claude-sandbox audit verify`",
                        file.display()
                    ))
                })
            }
            None => back = back.saturating_mul(4),
        }
    }
}

/// Rotated file `n` (1 = the newest rotated).
pub(crate) fn rotated(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("{FILE}.{n}"))
}

fn rotate(dir: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_file(rotated(dir, KEEP));
    for n in (1..KEEP).rev() {
        let from = rotated(dir, n);
        if from.exists() {
            std::fs::rename(from, rotated(dir, n + 1))?;
        }
    }
    std::fs::rename(dir.join(FILE), rotated(dir, 1))
}

/// Append `event` to the chain in `dir` (made 0700 if missing).
pub(super) fn append(dir: &Path, event: &Event<'_>) -> std::io::Result<(Record, String)> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let _lock = crate::runtime_dir::lock(dir, LOCK).map_err(std::io::Error::other)?;
    let current = dir.join(FILE);
    if std::fs::metadata(&current).is_ok_and(|m| m.len() >= ROTATE_AT) {
        rotate(dir)?;
    }
    // The chain goes on from the newest file that has a record: the current one, or the one just
    // rotated.
    // A last line that does not read stops the append (counted as lost): a new chain started there
    // would look like a cut.
    let last = match last_record(&current)? {
        Some(r) => Some(r),
        None => last_record(&rotated(dir, 1))?,
    };
    let (seq, prev) = last.map_or((1, GENESIS.to_string()), |r| (r.seq + 1, r.hash));
    let (record, line) = seal(Record {
        v: SCHEMA,
        seq,
        time: crate::alerts::now_rfc3339(),
        host: super::host_name(),
        uid: rustix::process::getuid().as_raw(),
        session: event.session.map(str::to_string),
        event: event.name.to_string(),
        fields: event.fields.clone(),
        prev,
        hash: String::new(),
    });
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&current)?;
    let len = f.metadata()?.len();
    f.write_all(format!("{line}\n").as_bytes())
        .inspect_err(|_| {
            // A line cut short (a full disk) is taken back: the next must not be glued to it.
            let _ = f.set_len(len);
        })?;
    Ok((record, line))
}

/// What `verify` found in an intact chain.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Verified {
    pub records: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// The files read, oldest first.
    pub files: Vec<PathBuf>,
    /// The first record's `prev` is not the genesis: older files were rotated away (or removed).
    pub starts_after_rotation: bool,
}

/// Verify every file left in `dir`, oldest first: `Err` names the file, the line and what broke.
pub(crate) fn verify(dir: &Path) -> Result<Verified, String> {
    let mut files: Vec<PathBuf> = (1..=KEEP)
        .rev()
        .map(|n| rotated(dir, n))
        .chain([dir.join(FILE)])
        .filter(|p| p.is_file())
        .collect();
    files.dedup();
    let mut prev: Option<Record> = None;
    let mut first: Option<Record> = None;
    let mut records = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        for (i, line) in text.lines().enumerate() {
            let at = || format!("{}:{}", file.display(), i + 1);
            if line.trim().is_empty() {
                return Err(format!("{}: an empty line", at()));
            }
            let r: Record =
                serde_json::from_str(line).map_err(|e| format!("{}: not a record ({e})", at()))?;
            let (again, _) = seal(r.clone());
            if again.hash != r.hash {
                return Err(format!(
                    "{}: edited (its hash does not match its content)",
                    at()
                ));
            }
            if let Some(p) = &prev {
                if r.prev != p.hash {
                    return Err(format!(
                        "{}: the chain is cut before record {} (its prev is not record {}'s hash): a line was removed, inserted or moved",
                        at(),
                        r.seq,
                        p.seq
                    ));
                }
                if r.seq != p.seq + 1 {
                    return Err(format!(
                        "{}: record {} follows record {}",
                        at(),
                        r.seq,
                        p.seq
                    ));
                }
            }
            first.get_or_insert_with(|| r.clone());
            records += 1;
            prev = Some(r);
        }
    }
    let (Some(first), Some(last)) = (first, prev) else {
        return Ok(Verified {
            records: 0,
            first_seq: 0,
            last_seq: 0,
            files,
            starts_after_rotation: false,
        });
    };
    Ok(Verified {
        records,
        first_seq: first.seq,
        last_seq: last.seq,
        files,
        starts_after_rotation: first.prev != GENESIS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, n: usize) {
        for i in 0..n {
            append(
                dir,
                &Event::new("test", Some("s1")).with("i", u64::try_from(i).unwrap()),
            )
            .unwrap();
        }
    }

    fn lines(dir: &Path) -> Vec<String> {
        std::fs::read_to_string(dir.join(FILE))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn put(dir: &Path, lines: &[String]) {
        std::fs::write(dir.join(FILE), lines.join("\n") + "\n").unwrap();
    }

    #[test]
    fn a_long_last_line_is_read_whole_and_an_unreadable_one_stops_the_chain_instead_of_restarting_it(
    ) {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), 1);
        // A record longer than the first read from the end (not one a record makes: a test of the
        // reader alone).
        append(
            d.path(),
            &Event::new("big", None).with("x", "a".repeat(600 << 10)),
        )
        .unwrap();
        let (r, _) = append(d.path(), &Event::new("after", None)).unwrap();
        assert_eq!(r.seq, 3);
        assert!(verify(d.path()).is_ok());
        let mut l = lines(d.path());
        l.push("{\"half a rec".into());
        put(d.path(), &l);
        let e = append(d.path(), &Event::new("next", None)).unwrap_err();
        assert!(e.to_string().contains("is not a record"), "{e}");
        assert_eq!(
            lines(d.path()).len(),
            4,
            "nothing appended after the unreadable line"
        );
    }

    #[test]
    fn text_is_bounded_on_a_character_boundary_and_says_how_much_was_left_out() {
        assert_eq!(super::super::bounded_text("abc", 3), "abc");
        assert_eq!(super::super::bounded_text("ééé", 3), "é…[+4 bytes]");
    }

    #[test]
    fn an_intact_chain_verifies() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), 5);
        let v = verify(d.path()).unwrap();
        assert_eq!((v.records, v.first_seq, v.last_seq), (5, 1, 5));
        assert!(!v.starts_after_rotation);
        let r: Record = serde_json::from_str(&lines(d.path())[0]).unwrap();
        assert_eq!(
            (r.v, r.prev.as_str(), r.event.as_str()),
            (1, GENESIS, "test")
        );
        assert_eq!(r.fields["i"], 0);
    }

    #[test]
    fn a_removed_an_edited_an_inserted_and_a_swapped_line_are_each_found() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), 5);
        let good = lines(d.path());
        let mut removed = good.clone();
        removed.remove(2);
        put(d.path(), &removed);
        assert!(verify(d.path())
            .unwrap_err()
            .contains(":3: the chain is cut"));
        let mut edited = good.clone();
        edited[1] = edited[1].replace("\"i\":1", "\"i\":7");
        put(d.path(), &edited);
        assert!(verify(d.path()).unwrap_err().contains(":2: edited"));
        let mut inserted = good.clone();
        inserted.insert(3, good[1].clone());
        put(d.path(), &inserted);
        assert!(verify(d.path()).unwrap_err().contains(":4:"));
        let mut swapped = good.clone();
        swapped.swap(1, 2);
        put(d.path(), &swapped);
        assert!(verify(d.path()).is_err());
        // An edit that recomputes the line's own hash still breaks the next line's prev.
        let mut r: Record = serde_json::from_str(&good[1]).unwrap();
        r.fields.insert("i".into(), 9.into());
        let (_, line) = seal(r);
        let mut forged = good.clone();
        forged[1] = line;
        put(d.path(), &forged);
        assert!(verify(d.path())
            .unwrap_err()
            .contains(":3: the chain is cut"));
        put(d.path(), &good);
        assert_eq!(verify(d.path()).unwrap().records, 5);
    }

    #[test]
    fn the_chain_goes_on_across_rotations_and_says_where_it_starts() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), 2);
        rotate(d.path()).unwrap();
        write(d.path(), 2);
        let v = verify(d.path()).unwrap();
        assert_eq!(
            (v.records, v.first_seq, v.last_seq, v.files.len()),
            (4, 1, 4, 2)
        );
        // The oldest file rotated away: what is left verifies and says it starts later.
        std::fs::remove_file(rotated(d.path(), 1)).unwrap();
        let v = verify(d.path()).unwrap();
        assert_eq!((v.records, v.first_seq), (2, 3));
        assert!(v.starts_after_rotation);
    }

    #[test]
    fn writers_at_once_keep_one_chain() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || write(&dir, 10))
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(verify(d.path()).unwrap().records, 40);
    }
}
