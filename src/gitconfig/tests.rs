//! The reader against git itself: a generated corpus of odd configs, each read by
//! `git config -z --list --file F` and by `parse`; they must agree on refusal and on every key.

use super::*;
use std::process::Command;

/// `(key, value)` pairs as git lists them (`None`: a bare key).
pub(crate) type Listed = Vec<(String, Option<Vec<u8>>)>;

/// What git lists: `Err(())` if it refuses the file, else `(key, value)` in order.
pub(crate) fn git_list(file: &Path, includes: bool, home: &Path) -> Result<Listed, ()> {
    let mut c = Command::new("git");
    c.args(["config", "-z", "--list"]);
    if includes {
        c.arg("--includes");
    }
    let out = c
        .arg("--file")
        .arg(file)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git is needed for these tests");
    if !out.status.success() {
        return Err(());
    }
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| match e.iter().position(|&b| b == b'\n') {
            Some(i) => (
                String::from_utf8_lossy(&e[..i]).into_owned(),
                Some(e[i + 1..].to_vec()),
            ),
            None => (String::from_utf8_lossy(e).into_owned(), None),
        })
        .collect())
}

/// git prints the subsection as written and the rest lowercased, as `parse` names keys.
pub(crate) fn ours(keys: &[Key]) -> Listed {
    keys.iter()
        .map(|k| (k.name.clone(), k.value.clone()))
        .collect()
}

pub(crate) const FRAGMENTS: &[&[u8]] = &[
    b"\xef\xbb\xbf",
    b"\xef\xbb",
    b"[core]\n",
    b"[Core \"Sub\"]\n",
    b"[core.Sub]\n",
    b"[sec \"a\\\"b\\\\c\"]",
    b"[sec \"x\xff\"]\n",
    b"\tfsmonitor = /evil\n",
    b"\tFsMonitor=\"/e v # il\"  ; c\n",
    b"\tfsmonitor = a\\\n b\n",
    b"\tfsmonitor = a\\q\n",
    b"\tfsmonitor = \"open\n",
    b"\tx = \xff\xfe\x80\n",
    b"\tx = a\x00b\n",
    b"\tpager\n",
    b"\tk-1 = v\t \n",
    b"\tk = \\t\\n\\b\\\"\\\\\n",
    b"\r\n",
    b"\tk = v\r\n",
    b"\tk = v\rw\n",
    b"# comment [x]\n",
    b"; comment\n",
    b"\n",
    b"   ",
    b"[]\n",
    b"[a b]\n",
    b"[se\xffc]\n",
    b"1key = v\n",
    b"\tk\xff = v\n",
    b"\tk v\n",
    b"[hook \"Lint\"] command = sh -c 'x'\n",
    b"\tk = \"\" trailing \"\"\n",
    b"\tk =    \n",
    b"[sec \"a\\\nb\"]\n",
    b"\tk = v",
    b"[core \"fsmonitor\x00\"]\n\tx = /evil\n",
];

/// A small deterministic generator (no dependency for a test corpus).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

#[test]
fn the_reader_agrees_with_git_on_a_corpus_of_odd_configs() {
    let t = tempfile::tempdir().unwrap();
    let mut rng = Lcg(16);
    let mut files: Vec<Vec<u8>> = FRAGMENTS
        .iter()
        .map(|f| [b"[core]\n".as_slice(), f].concat())
        .collect();
    files.extend(FRAGMENTS.iter().map(|f| f.to_vec()));
    for _ in 0..300 {
        let n = 1 + rng.next(6);
        let mut f = Vec::new();
        for _ in 0..n {
            f.extend_from_slice(FRAGMENTS[rng.next(FRAGMENTS.len())]);
        }
        files.push(f);
    }
    let (mut refused, mut read) = (0, 0);
    for (i, bytes) in files.iter().enumerate() {
        let path = t.path().join(format!("c{i}"));
        std::fs::write(&path, bytes).unwrap();
        let git = git_list(&path, false, t.path());
        let mine = parse(bytes);
        match (&git, &mine) {
            (Err(()), Err(_)) => refused += 1,
            (Ok(g), Ok(m)) if *g == ours(m) => read += 1,
            _ => panic!(
                "{:?}\ngit:  {:?}\nours: {:?}",
                bytes.escape_ascii().to_string(),
                git,
                mine.map(|m| ours(&m))
            ),
        }
    }
    // The corpus exercises both outcomes, or the comparison proves little.
    assert!(refused > 20 && read > 20, "refused {refused}, read {read}");
}

/// The two configs of the issue: a BOM, then a non-UTF-8 byte before the key.
#[test]
fn a_bom_or_a_non_utf8_value_does_not_hide_a_key() {
    for bytes in [
        b"\xef\xbb\xbf[core]\n\tfsmonitor = /evil\n".as_slice(),
        b"[core]\n\tx = \xff\n\tfsmonitor = /evil\n",
    ] {
        let keys = parse(bytes).unwrap();
        let k = keys.iter().find(|k| k.name == "core.fsmonitor").unwrap();
        assert_eq!(k.value.as_deref(), Some(b"/evil".as_slice()));
        assert!(bytes[k.span.clone()].starts_with(b"fsmonitor"));
    }
}

/// Includes: `~/`, relative to the including file, includeIf whatever its condition, and git's
/// depth limit (a cycle is refused by both).
#[test]
fn includes_are_followed_as_git_follows_them() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let repo = t.path().join("repo");
    std::fs::create_dir_all(home.join("cfg")).unwrap();
    std::fs::create_dir_all(repo.join("sub")).unwrap();
    std::fs::write(
        repo.join("config"),
        "[core]\n\tbare = false\n[include]\n\tpath = sub/a.inc\n\tpath = ~/cfg/b.inc\n\tpath = missing.inc\n",
    )
    .unwrap();
    std::fs::write(
        repo.join("sub/a.inc"),
        "[core]\n\tfsmonitor = /a\n[include]\n\tpath = ../c.inc\n",
    )
    .unwrap();
    std::fs::write(repo.join("c.inc"), "[core]\n\tpager = /c\n").unwrap();
    std::fs::write(home.join("cfg/b.inc"), "[core]\n\teditor = /b\n").unwrap();
    let c = read(&[repo.join("config")], Some(&home));
    let mine: Listed = c
        .keys
        .iter()
        .map(|l| (l.key.name.clone(), l.key.value.clone()))
        .collect();
    assert_eq!(Ok(mine), git_list(&repo.join("config"), true, &home));
    assert_eq!(c.bad().count(), 0);
    assert!(c
        .keys
        .iter()
        .any(|l| l.key.name == "core.pager" && l.file == repo.join("sub/../c.inc")));

    std::fs::write(repo.join("loop"), "[include]\n\tpath = loop\n").unwrap();
    assert!(git_list(&repo.join("loop"), true, &home).is_err());
    let c = read(&[repo.join("loop")], Some(&home));
    assert!(matches!(c.bad().next(), Some((_, Bad::TooDeep))));
}

/// Values as git reads a boolean, on both sides of every rule of `parse_bool`: words in any case,
/// the empty value, integers in every base git accepts, units, the bounds of an `int`, and what git
/// takes for a command instead (`core.fsmonitor` then runs it).
pub(crate) const BOOLEANS: &[&str] = &[
    // Words, in any case.
    "",
    "true",
    "TRUE",
    "tRuE",
    "Yes",
    "on",
    "false",
    "FALSE",
    "Off",
    "no",
    // Integers: signs, white space, bases.
    "0",
    "00",
    "-0",
    "+1",
    " 1",
    "1 ",
    "1",
    "2",
    "-3",
    "010",
    "08",
    "0x0",
    "0x10",
    "0X1F",
    "0x",
    "0xg",
    // Units, and the bounds of an `int`.
    "1k",
    "1K",
    "0k",
    "1kb",
    "1m",
    "1g",
    "2g",
    "-2g",
    "3g",
    "2147483647",
    "2147483648",
    "-2147483647",
    "-2147483648",
    "99999999999",
    // Commands to git.
    "- 1",
    "+-1",
    "./hook",
    "true;x",
    "yes please",
    "k",
];

/// `parse_bool` against git itself (`git config --type=bool` refuses what is not a boolean).
#[test]
fn booleans_are_read_as_git_reads_them() {
    for v in BOOLEANS {
        let out = Command::new("git")
            .args(["-c", &format!("core.fsmonitor={v}")])
            .args(["config", "--type=bool", "core.fsmonitor"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", "/nonexistent")
            .output()
            .expect("git is needed for these tests");
        let git = out.status.success().then(|| out.stdout == b"true\n");
        assert_eq!(parse_bool(v), git, "{v:?}");
    }
}

/// Found by the fuzzer (`fuzz::gitconfig`): an include git cannot read as a file (an empty path,
/// which is the including file's directory; `~`, the home directory) makes git refuse the whole
/// config. The reader skipped both as if missing, and so read a file git refuses.
#[test]
fn an_include_that_is_a_directory_is_refused_as_git_refuses_it() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    for value in ["", "~", "~/", "."] {
        let path = t.path().join("config");
        std::fs::write(
            &path,
            format!("[core]\n\tk = v\n[include]\n\tpath = {value}\n"),
        )
        .unwrap();
        assert!(
            git_list(&path, true, &home).is_err(),
            "{value:?}: git read it"
        );
        let c = read(&[path], Some(&home));
        assert!(
            matches!(c.bad().next(), Some((_, Bad::Unreadable(_)))),
            "{value:?}: {:?}",
            c.files
        );
    }
    // A missing include, or one below a file, is skipped by both.
    let path = t.path().join("config");
    std::fs::write(&path, "[include]\n\tpath = nope\n\tpath = config/x\n").unwrap();
    assert!(git_list(&path, true, &home).is_ok());
    assert_eq!(read(&[path], Some(&home)).bad().count(), 0);
}

/// Found by the fuzzer (`fuzz::gitconfig`, a long run): git ends a key's name at a NUL, which only a
/// quoted subsection can hold, so `[core "fsmonitor\0"] x = CMD` is `core.fsmonitor = CMD` to git,
/// and `git status` runs CMD. The reader named it `core.fsmonitor\0.x`, which no judge matches.
#[test]
fn a_nul_in_a_subsection_ends_the_name_as_git_ends_it() {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path().join("repo");
    let out = Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .output()
        .unwrap();
    assert!(out.status.success());
    let ran = t.path().join("ran");
    let hook = t.path().join("hook.sh");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch '{}'\n", ran.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = repo.join(".git/config");
    let mut bytes = std::fs::read(&config).unwrap();
    bytes.extend_from_slice(
        format!("[core \"fsmonitor\0\"]\n\tx = {}\n", hook.display()).as_bytes(),
    );
    std::fs::write(&config, &bytes).unwrap();
    // git runs it...
    let status = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .arg("status")
        .env("HOME", t.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(status.status.success());
    assert!(
        ran.exists(),
        "git did not run the fsmonitor: the premise changed"
    );
    // ...so the reader names it as git does, and lists what git lists.
    let keys = parse(&bytes).unwrap();
    let k = keys.last().unwrap();
    assert_eq!(k.name, "core.fsmonitor");
    assert_eq!(
        k.value.as_deref(),
        Some(hook.as_os_str().as_encoded_bytes())
    );
    assert_eq!(git_list(&config, false, t.path()), Ok(ours(&keys)));
}
