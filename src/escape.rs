//! The one escaping function for text that reaches a terminal and may have come from the jail:
//! file names, git key names, alert details, versions an installed program reports.
//!
//! Guards against the guard's own output turned against the human: an `ESC ] 52` sequence in a file
//! name sets the clipboard, erase sequences hide the real alert and draw a harmless one, a newline
//! fakes a second line, a bidi override makes `evil` read as `live`. Every control (C0, DEL, C1),
//! every bidi control, the line and paragraph separators, the byte-order mark and every byte that is
//! not UTF-8 are shown as a visible escape (`\e`, `\n`, `\x7f`, `\u{202e}`, `\xff`); a backslash is
//! doubled so that the escaped form reads back unambiguously. Nothing else is touched.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as itself.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{1b}' => out.push_str("\\e"),
        c if u32::from(c) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

/// `s` as it may be printed.
pub(crate) fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| hidden(c) || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if hidden(c) || c == '\\' {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Bytes that may not be UTF-8 (a file name, a file's contents) as they may be printed.
pub(crate) fn visible_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(&visible(chunk.valid()));
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// A path as it may be printed.
pub(crate) fn visible_path(path: &std::path::Path) -> String {
    visible_bytes(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        assert!(matches!(visible("~/.local/bin/git"), Cow::Borrowed(_)));
        assert_eq!(visible("naïve 名前 ✓"), "naïve 名前 ✓");
    }

    #[test]
    fn controls_and_terminal_sequences_are_shown_not_sent() {
        // OSC 52 (set the clipboard), an erase line, a newline faking a second alert.
        assert_eq!(
            visible("a\u{1b}]52;c;ZXZpbA==\u{7}b"),
            "a\\e]52;c;ZXZpbA==\\x07b"
        );
        assert_eq!(visible("x\u{1b}[2K\rok"), "x\\e[2K\\rok");
        assert_eq!(visible("one\ntwo\tthree"), "one\\ntwo\\tthree");
        assert_eq!(visible("del\u{7f}"), "del\\x7f");
        assert_eq!(visible("c1\u{9b}31m"), "c1\\u{9b}31m");
        assert_eq!(visible("nul\0"), "nul\\x00");
    }

    #[test]
    fn bidi_controls_and_separators_are_shown() {
        assert_eq!(visible("ev\u{202e}li"), "ev\\u{202e}li");
        assert_eq!(visible("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
        assert_eq!(visible("a\u{2028}b\u{feff}"), "a\\u{2028}b\\u{feff}");
    }

    #[test]
    fn a_backslash_is_doubled_so_the_escape_is_unambiguous() {
        assert_eq!(visible("a\\e"), "a\\\\e");
        assert_ne!(visible("\\e"), visible("\u{1b}"));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_hex() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(visible_bytes(b"ok\xff\xfe!"), "ok\\xff\\xfe!");
        assert_eq!(visible_bytes(b"\xe2\x80\xae"), "\\u{202e}");
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"bin/\x1b[1mgit\xff"));
        assert_eq!(visible_path(p), "bin/\\e[1mgit\\xff");
    }

    #[test]
    fn every_hidden_char_escapes_to_printable_ascii() {
        for c in (0u32..0x3000)
            .filter_map(char::from_u32)
            .filter(|c| hidden(*c))
        {
            let shown = visible(c.encode_utf8(&mut [0; 4])).into_owned();
            assert!(
                shown.bytes().all(|b| (0x20..0x7f).contains(&b)),
                "{:x} shown as {shown:?}",
                u32::from(c)
            );
        }
    }
}
