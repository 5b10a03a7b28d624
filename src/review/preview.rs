//! What the review shows of one entry: a diff of a held file against yours, a key's values before
//! and after, a quarantined file's content — every line escaped, binary content as hex.

use super::{Entry, Subject};
use crate::escape::{visible, visible_bytes, visible_path};
use crate::held::Change;
use std::path::Path;

/// Bytes read of a file to show it.
const READ_CAP: u64 = 1 << 20;
/// Bytes of a binary file shown as hex.
const HEX_CAP: usize = 512;
/// Lines above which no line diff is computed (the two sides are listed instead).
const DIFF_CAP: usize = 2000;

fn read_capped(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut out = Vec::new();
    f.take(READ_CAP).read_to_end(&mut out).ok()?;
    Some(out)
}

/// Text a human can read line by line: UTF-8 without NUL.
fn is_text(b: &[u8]) -> bool {
    !b.contains(&0) && std::str::from_utf8(b).is_ok()
}

fn hex_dump(b: &[u8]) -> Vec<String> {
    let mut out = vec![format!(
        "binary, {} bytes; the first {}:",
        b.len(),
        b.len().min(HEX_CAP)
    )];
    for (i, chunk) in b[..b.len().min(HEX_CAP)].chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|c| format!("{c:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|c| {
                if c.is_ascii_graphic() || *c == b' ' {
                    char::from(*c)
                } else {
                    '.'
                }
            })
            .collect();
        out.push(format!("{:06x}  {:<47}  {ascii}", i * 16, hex.join(" ")));
    }
    out
}

fn lines(b: &[u8]) -> Vec<String> {
    b.split(|c| *c == b'\n').map(visible_bytes).collect()
}

/// A line diff (`- ` yours, `+ ` held, `  ` both), by the longest common subsequence.
pub(crate) fn diff(old: &[String], new: &[String]) -> Vec<String> {
    if old.len() > DIFF_CAP || new.len() > DIFF_CAP {
        let mut out = vec![format!(
            "(too long to compare: yours {} lines, held {} lines; the held file:)",
            old.len(),
            new.len()
        )];
        out.extend(new.iter().map(|l| format!("+ {l}")));
        return out;
    }
    let (n, m) = (old.len(), new.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if old[i] == new[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n || j < m {
        if i < n && j < m && old[i] == new[j] {
            out.push(format!("  {}", old[i]));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(format!("+ {}", new[j]));
            j += 1;
        } else {
            out.push(format!("- {}", old[i]));
            i += 1;
        }
    }
    out
}

fn values(v: &[Option<crate::held::Bytes>]) -> String {
    if v.is_empty() {
        return "(not set)".into();
    }
    v.iter()
        .map(|x| {
            x.as_ref().map_or("(true, no value)".into(), |b| {
                format!("\"{}\"", visible_bytes(&b.0))
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn json_lines(v: Option<&serde_json::Value>) -> Vec<String> {
    match v {
        None => vec!["(not set)".into()],
        Some(v) => serde_json::to_string_pretty(v)
            .unwrap_or_default()
            .lines()
            .map(|l| visible(l).into_owned())
            .collect(),
    }
}

fn content(bytes: Option<&[u8]>) -> Vec<String> {
    match bytes {
        None => vec!["(not readable)".into()],
        Some(b) if is_text(b) => lines(b),
        Some(b) => hex_dump(b),
    }
}

/// The preview lines of `e`, at most `max` (then one line saying how many more).
pub(crate) fn preview(runtime: &Path, e: &Entry, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    match &e.subject {
        Subject::Held(item) => {
            out.push(format!(
                "held: {} — {}",
                item.consequence.as_str(),
                visible(&item.why)
            ));
            out.push(format!("would change: {}", visible_path(&item.target)));
            match &item.change {
                Change::GitKey {
                    name,
                    values: after,
                    before,
                } => {
                    out.push(format!("key:    {}", visible(name)));
                    out.push(format!("yours:  {}", values(before)));
                    out.push(format!("held:   {}", values(after)));
                }
                Change::JsonKey {
                    path,
                    value,
                    before,
                } => {
                    out.push(format!("key: {}", visible(&path.join(" → "))));
                    out.push("yours:".into());
                    out.extend(
                        json_lines(before.as_ref())
                            .into_iter()
                            .map(|l| format!("  {l}")),
                    );
                    out.push("held:".into());
                    out.extend(
                        json_lines(value.as_ref())
                            .into_iter()
                            .map(|l| format!("  {l}")),
                    );
                }
                Change::File { .. } => {
                    let held = crate::held::Store::new(runtime).payload(&item.id).ok();
                    let yours = read_capped(&item.target);
                    match (&yours, &held) {
                        (Some(y), Some(h)) if is_text(y) && is_text(h) => {
                            out.push("- yours, + held:".into());
                            out.extend(diff(&lines(y), &lines(h)));
                        }
                        _ => {
                            out.push(
                                if yours.is_some() {
                                    "yours:"
                                } else {
                                    "yours: (none)"
                                }
                                .into(),
                            );
                            if yours.is_some() {
                                out.extend(content(yours.as_deref()));
                            }
                            out.push("held:".into());
                            out.extend(content(held.as_deref()));
                        }
                    }
                }
            }
        }
        Subject::Quarantined(r, _) => {
            out.push(format!("quarantined: {}", visible(&r.reason)));
            out.push(format!(
                "was: {} ({}, {} bytes, mode {:o})",
                visible_path(&r.original),
                r.kind,
                r.size,
                r.mode & 0o7777
            ));
            if let Some(t) = &r.link_target {
                out.push(format!("a link to: {}", visible_path(t)));
            }
            if let Some(h) = &r.sha256 {
                out.push(format!("sha256: {h}"));
            }
            out.push("content:".into());
            out.extend(content(read_capped(&r.stored_at).as_deref()));
        }
        Subject::Alert(a) => {
            out.push(format!(
                "{} {}: {}",
                a.severity.as_str(),
                a.kind,
                visible(&a.detail)
            ));
            out.push(format!("path: {}", visible_path(&a.path)));
            out.push(format!("action: {}", visible(&a.action)));
        }
    }
    if out.len() > max {
        let more = out.len() - max + 1;
        out.truncate(max - 1);
        out.push(format!("… {more} more lines"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_string()).collect()
    }

    #[test]
    fn a_line_diff_marks_what_changed() {
        assert_eq!(
            diff(&s(&["a", "b", "c"]), &s(&["a", "x", "c", "d"])),
            s(&["  a", "+ x", "- b", "  c", "+ d"])
        );
        assert_eq!(diff(&s(&[]), &s(&["n"])), s(&["+ n"]));
    }

    #[test]
    fn binary_is_hex_and_text_is_escaped() {
        let d = content(Some(b"\x7fELF\x00\x01"));
        assert!(d[0].starts_with("binary, 6 bytes"), "{d:?}");
        assert!(
            d[1].contains("7f 45 4c 46 00 01") && d[1].ends_with(".ELF.."),
            "{d:?}"
        );
        let t = content(Some("ok\n\u{1b}]52;c;x\u{7}\n".as_bytes()));
        assert_eq!(t, s(&["ok", "\\e]52;c;x\\x07", ""]));
    }
}
