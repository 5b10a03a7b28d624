//! The one git-config reader of the project: the seals (entrypoints), the baseline and the watcher
//! read every repository's config through it.
//!
//! Guards against a config git reads differently from us: a `core.fsmonitor` hidden behind a leading
//! byte-order mark, a non-UTF-8 byte in another value, a `\r\n` line end, a continuation line or a
//! quoted `#`. It reads bytes with git's own grammar (config.c: `git_parse_source`, `get_value`,
//! `parse_value`, `get_base_var`, `get_extended_base_var`): one UTF-8 BOM skipped at the start, any
//! byte allowed in values and quoted subsections, section and key names ASCII only. Where git refuses
//! a file (`fatal: bad config line N`), so do we, and the caller treats that as an alert, never as a
//! file with nothing in it (fail closed). Includes (`include.path`, and `includeIf.<cond>.path` for
//! every condition, since the condition may be true for the human) are followed inline, as git does,
//! with git's rules: `~/` is `$HOME`, a relative path is relative to the including file, at most
//! `MAX_INCLUDE_DEPTH` levels (git's limit; deeper is an error in git too).
//!
//! Asking git instead (`git config -z --list --includes --file F`) costs 1.08 ms per file here (a
//! fork and exec, median of 40); the launch reads every repository's config, so the reader is ours
//! and its unit tests compare it with git on a corpus of odd files.

use std::path::{Path, PathBuf};

/// git's `MAX_INCLUDE_DEPTH`.
pub(crate) const MAX_INCLUDE_DEPTH: usize = 10;

/// One `section[.subsection].key` with its value (`None`: a bare key, which git reads as `true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    /// Section and key lowercased, the subsection as written (`hook.Lint.command`).
    pub name: String,
    pub value: Option<Vec<u8>>,
    /// The bytes of the file this entry occupies, from its first byte to its line end included.
    pub span: std::ops::Range<usize>,
}

impl Key {
    /// The value as text (lossy for non-UTF-8 bytes; a bare key is `true`, as git reads it).
    pub(crate) fn text(&self) -> String {
        match &self.value {
            Some(v) => String::from_utf8_lossy(v).into_owned(),
            None => "true".into(),
        }
    }
}

/// A config git itself refuses to read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Bad {
    #[error("bad config line {0} (git refuses this file too)")]
    Line(usize),
    #[error("includes nested deeper than {MAX_INCLUDE_DEPTH} (git refuses this too)")]
    TooDeep,
    #[error("`{0}` without a value (git refuses this too)")]
    NoValue(String),
    /// There but not readable as a file: a directory (an empty or `~` include path names one), or
    /// no permission. git skips only a file that does not exist.
    #[error("cannot be read: {0} (git refuses this too)")]
    Unreadable(String),
}

/// Parse one config file's bytes as git does.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<Key>, Bad> {
    Parser {
        b: bytes,
        pos: 0,
        line: 1,
        eof: false,
    }
    .run()
}

struct Parser<'a> {
    b: &'a [u8],
    pos: usize,
    line: usize,
    eof: bool,
}

/// git's `isspace` (sane-ctype: space, tab, LF, CR only).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

impl Parser<'_> {
    /// `get_next_char`: `\r\n` reads as `\n`, the end of the file as a final `\n`.
    fn next(&mut self) -> u8 {
        let Some(&c) = self.b.get(self.pos) else {
            self.eof = true;
            return b'\n';
        };
        self.pos += 1;
        if c == b'\r' && self.b.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            self.line += 1;
            return b'\n';
        }
        if c == b'\n' {
            self.line += 1;
        }
        c
    }

    fn bad(&self) -> Bad {
        Bad::Line(self.line)
    }

    fn run(mut self) -> Result<Vec<Key>, Bad> {
        const BOM: &[u8] = b"\xef\xbb\xbf";
        if self.b.starts_with(BOM) {
            self.pos = BOM.len();
        } else if self.b.first() == Some(&BOM[0]) {
            // A partial BOM: git stops at it.
            return Err(Bad::Line(1));
        }
        let mut out = Vec::new();
        let mut section: Option<String> = None;
        let mut comment = false;
        loop {
            let start = self.pos;
            let c = self.next();
            if c == b'\n' {
                if self.eof {
                    return Ok(out);
                }
                comment = false;
                continue;
            }
            if comment || is_space(c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                let name = self.base_var().ok_or_else(|| self.bad())?;
                if name.is_empty() {
                    return Err(self.bad());
                }
                section = Some(name);
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return Err(self.bad());
            }
            let mut key = String::from(c.to_ascii_lowercase() as char);
            let value = self.value(&mut key)?;
            let mut name = match &section {
                Some(s) => format!("{s}.{key}"),
                None => key,
            };
            // git hands the name on as a C string: a NUL (only a quoted subsection can hold one)
            // ends it there. `[core "fsmonitor\0"] x = /evil` is `core.fsmonitor` to git, and runs.
            if let Some(nul) = name.find('\0') {
                name.truncate(nul);
            }
            out.push(Key {
                name,
                value,
                span: start..self.pos,
            });
        }
    }

    /// `get_base_var` and `get_extended_base_var`: `[section]`, `[section.sub]` (all lowercased),
    /// `[section "Sub"]` (the subsection as written, `\` escaping the next byte).
    fn base_var(&mut self) -> Option<String> {
        let mut name = String::new();
        loop {
            let c = self.next();
            if self.eof {
                return None;
            }
            if c == b']' {
                return Some(name);
            }
            if is_space(c) {
                return self.extended_base_var(name, c);
            }
            if !is_key_char(c) && c != b'.' {
                return None;
            }
            name.push(c.to_ascii_lowercase() as char);
        }
    }

    fn extended_base_var(&mut self, mut name: String, mut c: u8) -> Option<String> {
        loop {
            if c == b'\n' {
                return None;
            }
            c = self.next();
            if !is_space(c) {
                break;
            }
        }
        if c != b'"' {
            return None;
        }
        let mut sub = Vec::new();
        loop {
            let mut c = self.next();
            if c == b'\n' {
                return None;
            }
            if c == b'"' {
                break;
            }
            if c == b'\\' {
                c = self.next();
                if c == b'\n' {
                    return None;
                }
            }
            sub.push(c);
        }
        if self.next() != b']' {
            return None;
        }
        name.push('.');
        name.push_str(&String::from_utf8_lossy(&sub));
        Some(name)
    }

    /// `get_value`: the rest of the key's name, then `= value` or nothing (a bare key, `None`).
    fn value(&mut self, key: &mut String) -> Result<Option<Vec<u8>>, Bad> {
        let mut c;
        loop {
            c = self.next();
            if self.eof || !is_key_char(c) {
                break;
            }
            key.push(c.to_ascii_lowercase() as char);
        }
        while c == b' ' || c == b'\t' {
            c = self.next();
        }
        if c == b'\n' {
            return Ok(None);
        }
        if c != b'=' {
            return Err(self.bad());
        }
        self.parse_value().map(Some).ok_or_else(|| self.bad())
    }

    /// `parse_value`: quotes, escapes (`\n \t \b \\ \"`, others refused), comments outside quotes,
    /// trailing blanks trimmed, line continuations. A NUL ends the value as git's C string does.
    fn parse_value(&mut self) -> Option<Vec<u8>> {
        let (mut quote, mut comment) = (false, false);
        let mut trim: Option<usize> = None;
        let mut v = Vec::new();
        loop {
            let mut c = self.next();
            if c == b'\n' {
                if quote {
                    return None;
                }
                if let Some(t) = trim {
                    v.truncate(t);
                }
                if let Some(nul) = v.iter().position(|&b| b == 0) {
                    v.truncate(nul);
                }
                return Some(v);
            }
            if comment {
                continue;
            }
            if is_space(c) && !quote {
                if trim.is_none() && !v.is_empty() {
                    trim = Some(v.len());
                }
                if !v.is_empty() {
                    v.push(c);
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            trim = None;
            if c == b'\\' {
                c = match self.next() {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 8,
                    b'n' => b'\n',
                    b'\\' => b'\\',
                    b'"' => b'"',
                    _ => return None,
                };
                v.push(c);
                continue;
            }
            if c == b'"' {
                quote = !quote;
                continue;
            }
            v.push(c);
        }
    }
}

/// One file read on the way (the starting files and every include).
#[derive(Debug, Clone)]
pub(crate) struct File {
    pub path: PathBuf,
    pub read: Read,
}

#[derive(Debug, Clone)]
pub(crate) enum Read {
    /// Not there: git skips a missing include silently.
    Missing,
    Keys(Vec<Key>),
    Bad(Bad),
}

/// One key with the file it is in, in the order git sees them (includes inline).
#[derive(Debug, Clone)]
pub(crate) struct Located {
    pub file: PathBuf,
    pub key: Key,
}

/// Everything read from some config files and their includes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub files: Vec<File>,
    pub keys: Vec<Located>,
}

impl Config {
    /// The files git refuses, with why.
    pub(crate) fn bad(&self) -> impl Iterator<Item = (&Path, &Bad)> {
        self.files.iter().filter_map(|f| match &f.read {
            Read::Bad(b) => Some((f.path.as_path(), b)),
            _ => None,
        })
    }
}

/// A key's variable name: what follows its last dot (`url` in `remote.origin.url`).
pub(crate) fn variable(key: &str) -> &str {
    key.rsplit_once('.').map_or(key, |(_, v)| v)
}

/// A value as git reads a boolean (config.c: `git_parse_maybe_bool`): `true`, `yes`, `on` and
/// `false`, `no`, `off` in any case; the empty value is false; an integer is true unless it is 0
/// (`strtoimax` with base 0, so `0x10` and `010` too, with one optional unit `k`, `m` or `g`, and
/// within an `int`). `None` for anything else: `core.fsmonitor` then names a hook that git runs.
/// A bare key is `true` to git (`Key::text` says so).
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    if value.is_empty() {
        return Some(false);
    }
    for (names, b) in [
        (["true", "yes", "on"], true),
        (["false", "no", "off"], false),
    ] {
        if names.iter().any(|n| value.eq_ignore_ascii_case(n)) {
            return Some(b);
        }
    }
    parse_int(value).map(|v| v != 0)
}

/// git's `git_parse_int`: C's `strtoimax(value, &end, 0)` (leading white space, a sign, `0x` hex,
/// `0` octal), then a unit factor for what follows, and the product within an `int`.
fn parse_int(value: &str) -> Option<i64> {
    let s = value.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let hex = s.len() > 2
        && (s.starts_with("0x") || s.starts_with("0X"))
        && s.as_bytes()[2].is_ascii_hexdigit();
    let (radix, digits) = if hex {
        (16, &s[2..])
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let end = digits
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(digits.len());
    if end == 0 {
        // No digits at all: `strtoimax` consumed nothing.
        return None;
    }
    // Past `i64` is out of an `int`'s range anyway (git: ERANGE).
    let magnitude = i64::from_str_radix(&digits[..end], radix).ok()?;
    let factor: i64 = match digits[end..].to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return None,
    };
    let v = if negative { -magnitude } else { magnitude };
    // git's own bound, checked before the product: within `±INT_MAX`.
    let max = i64::from(i32::MAX);
    if (v < 0 && -max / factor > v) || (v > 0 && max / factor < v) {
        return None;
    }
    Some(v * factor)
}

/// Whether a key includes another file (`include.path`, `includeif.<condition>.path`).
pub(crate) fn is_include(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "include.path" || (lower.starts_with("includeif.") && variable(&lower) == "path")
}

/// Where an include (or `core.hooksPath`) value points: `~/` is `$HOME`, relative is from `base`.
pub(crate) fn resolve(value: &[u8], base: &Path, home: Option<&Path>) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let p = Path::new(std::ffi::OsStr::from_bytes(value));
    if let (Ok(rest), Some(home)) = (p.strip_prefix("~"), home) {
        return home.join(rest);
    }
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

/// Where a `core.hooksPath` value points: relative to the working tree (where hooks run), or to
/// the git directory of a bare repository; `~/` is `$HOME`.
pub(crate) fn hooks_path(
    value: &[u8],
    worktree: Option<&Path>,
    git_dir: &Path,
    home: Option<&Path>,
) -> PathBuf {
    resolve(value, worktree.unwrap_or(git_dir), home)
}

/// Read `files` in order, following includes inline with git's rules. `home` expands `~/`.
pub(crate) fn read(files: &[PathBuf], home: Option<&Path>) -> Config {
    let mut c = Config::default();
    for f in files {
        read_one(f, 0, home, &mut c);
    }
    c
}

fn read_one(path: &Path, depth: usize, home: Option<&Path>, c: &mut Config) {
    // Never waiting on a FIFO planted as a config or an include (the launch would hang).
    let keys = match crate::jail::readback::read_as_tools_do(path) {
        Err(e) => {
            let missing = matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            );
            c.files.push(File {
                path: path.to_path_buf(),
                read: if missing {
                    Read::Missing
                } else {
                    Read::Bad(Bad::Unreadable(e.to_string()))
                },
            });
            return;
        }
        Ok(bytes) => match parse(&bytes) {
            Ok(keys) => keys,
            Err(b) => {
                c.files.push(File {
                    path: path.to_path_buf(),
                    read: Read::Bad(b),
                });
                return;
            }
        },
    };
    c.files.push(File {
        path: path.to_path_buf(),
        read: Read::Keys(keys.clone()),
    });
    let base = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    for key in keys {
        let include = is_include(&key.name);
        c.keys.push(Located {
            file: path.to_path_buf(),
            key: key.clone(),
        });
        if !include {
            continue;
        }
        let Some(value) = key.value.as_deref() else {
            c.files.push(File {
                path: path.to_path_buf(),
                read: Read::Bad(Bad::NoValue(key.name.clone())),
            });
            continue;
        };
        if depth + 1 > MAX_INCLUDE_DEPTH {
            c.files.push(File {
                path: path.to_path_buf(),
                read: Read::Bad(Bad::TooDeep),
            });
            continue;
        }
        read_one(&resolve(value, &base, home), depth + 1, home, c);
    }
}

#[cfg(test)]
pub(crate) mod tests;
