//! Which of the jail's config changes are carried out to the human's file: an **allowlist** of the
//! keys everyday git writes (identity, remotes and upstreams, a few behaviour switches), with remote
//! URLs only over the network. Everything else the jail changed keeps the human's value.
//!
//! Guards against a catalogue of "exec-capable keys" that can never be complete: an attacker's pass
//! carried out `alias.st = grep -O"cmd" …`, `man.<tool>.path`, `tar.<format>.command`,
//! `trailer.<t>.command`, `init.templateDir`, `core.worktree` (which moves a relative
//! `core.hooksPath`) and `remote.origin.url` pointing at a local repository whose hooks
//! `receive-pack` runs — each then ran as the human. An allowlist fails closed: a key not on it is
//! simply not carried out (an alert names it when it would run something, a note otherwise).

use crate::gitconfig::{self, Key};

/// The values of each key, in file order, keys in first-seen order.
type Values = Vec<(String, Vec<Option<Vec<u8>>>)>;

fn values(keys: &[Key]) -> Values {
    let mut out: Values = Vec::new();
    for k in keys {
        match out.iter_mut().find(|(n, _)| *n == k.name) {
            Some((_, v)) => v.push(k.value.clone()),
            None => out.push((k.name.clone(), vec![k.value.clone()])),
        }
    }
    out
}

fn get<'a>(v: &'a Values, name: &str) -> &'a [Option<Vec<u8>>] {
    v.iter()
        .find(|(n, _)| n == name)
        .map_or(&[], |(_, v)| v.as_slice())
}

/// At most this many keys are carried out of one session's copy: an agent that changes more
/// (3000 junk sections took 36 s of `git config` at exit) has none of them carried out.
pub(crate) const MAX_CARRIED: usize = 64;

/// What the merge does to the human's config.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Merge {
    /// Keys given exactly these values (an empty list: removed).
    pub set: Vec<(String, Vec<Option<Vec<u8>>>)>,
    /// Keys the jail set to something that makes git run a program: the human's values kept.
    pub kept: Vec<String>,
    /// Other keys off the allowlist: the human's values kept.
    pub not_carried: Vec<String>,
    /// Keys both sides changed since the launch: the human's values kept.
    pub conflicts: Vec<String>,
    /// More than `MAX_CARRIED` keys to carry: none of them is.
    pub too_many: bool,
}

/// A URL git reaches over the network, in a form that names no local path and no helper program:
/// `https://`, `http://`, `ssh://`, `git://`, or scp-like `[user@]host:path`.
fn network_url(v: &[u8]) -> bool {
    let Ok(v) = std::str::from_utf8(v) else {
        return false;
    };
    if v.is_empty() || v.starts_with('-') || v.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return false;
    }
    if let Some((scheme, rest)) = v.split_once("://") {
        let host = rest.split(['/', '@']).next().unwrap_or("");
        return matches!(scheme, "https" | "http" | "ssh" | "git")
            && !host.is_empty()
            && !rest.starts_with('-')
            && !rest.contains("@-");
    }
    // scp-like: a colon before any slash, a host that is not empty, no `::` (a remote helper).
    match v.split_once(':') {
        Some((host, _)) => {
            !host.is_empty()
                && !host.contains('/')
                && !v.contains("::")
                && !host.rsplit('@').next().unwrap_or("").starts_with('-')
        }
        None => false,
    }
}

/// Whether the merge may carry out `name = value` (`name` as our parser gives it: section and key
/// lowercased, the subsection as written).
pub(crate) fn carried(name: &str, value: Option<&[u8]>) -> bool {
    let Some((section, rest)) = name.split_once('.') else {
        return false;
    };
    let (sub, key) = match rest.rsplit_once('.') {
        Some((sub, key)) => (Some(sub), key),
        None => (None, rest),
    };
    let url = || value.is_some_and(network_url);
    let word = || value.is_some_and(|v| v.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-'));
    match (section, sub, key) {
        ("user", None, "name" | "email") => true,
        ("remote", Some(_), "url" | "pushurl") | ("submodule", Some(_), "url") => url(),
        ("remote", Some(_), "fetch" | "push") => {
            value.is_some_and(|v| v.iter().all(u8::is_ascii_graphic) && !v.starts_with(b"-"))
        }
        ("remote", Some(_), "tagopt" | "prune")
        | ("submodule", Some(_), "branch")
        | ("pull", None, "rebase" | "ff")
        | ("push", None, "default" | "autosetupremote")
        | ("fetch", None, "prune")
        | ("init", None, "defaultbranch")
        | ("core", None, "autocrlf" | "eol" | "filemode" | "ignorecase") => word(),
        ("branch", Some(_), "remote" | "pushremote" | "merge" | "rebase") => {
            value.is_some_and(|v| v.iter().all(u8::is_ascii_graphic) && !v.starts_with(b"-"))
        }
        _ => false,
    }
}

/// Whether one value of a key makes git run something (or reads another file as config): such a
/// key is alerted, not just left out.
fn exec_capable(name: &str, value: Option<&[u8]>) -> bool {
    let text = value.map_or("true".into(), String::from_utf8_lossy);
    gitconfig::is_include(name)
        || crate::catalogue::git::is_exec_key(&name.to_ascii_lowercase(), &text)
}

/// Decide the merge from the config at launch, the jail's copy and the human's config now. Pure.
pub(crate) fn merge(base: &[Key], jail: &[Key], human: &[Key]) -> Merge {
    let (base, jail, human) = (values(base), values(jail), values(human));
    let mut names: Vec<&str> = base.iter().chain(&jail).map(|(n, _)| n.as_str()).collect();
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(*n));
    let mut m = Merge::default();
    for name in names {
        let (b, j, h) = (get(&base, name), get(&jail, name), get(&human, name));
        if b == j {
            continue;
        }
        if j.iter().any(|v| exec_capable(name, v.as_deref())) {
            m.kept.push(name.to_string());
        } else if !(if j.is_empty() { b } else { j })
            .iter()
            .all(|v| carried(name, v.as_deref()))
        {
            // A removal too is carried out only for a key on the list.
            m.not_carried.push(name.to_string());
        } else if h != b {
            m.conflicts.push(name.to_string());
        } else {
            m.set.push((name.to_string(), j.to_vec()));
        }
    }
    if m.set.len() > MAX_CARRIED {
        m.too_many = true;
        m.not_carried.extend(m.set.drain(..).map(|(n, _)| n));
    }
    m
}

/// Give `name` exactly `vals` in the config file `real`, with git itself (its locking, its quoting).
pub(crate) fn apply(
    real: &std::path::Path,
    name: &str,
    vals: &[Option<Vec<u8>>],
) -> Result<(), super::GitCopyError> {
    use super::GitCopyError;
    use std::os::unix::ffi::OsStrExt;
    let git = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new("git")
            .arg("config")
            .arg("--file")
            .arg(real)
            .args(args)
            .env_remove("GIT_CONFIG_PARAMETERS")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(GitCopyError::Git)
    };
    // `--`: a section named `-x` or a value starting with `-` is never read as an option.
    let unset = git(&["--unset-all".as_ref(), "--".as_ref(), name.as_ref()])?;
    // 5: the key was not there.
    if !unset.status.success() && unset.status.code() != Some(5) {
        return Err(GitCopyError::GitRefused(
            String::from_utf8_lossy(&unset.stderr).trim().to_string(),
        ));
    }
    for v in vals {
        let v = v.as_deref().unwrap_or(b"true");
        let out = git(&[
            "--add".as_ref(),
            "--".as_ref(),
            name.as_ref(),
            std::ffi::OsStr::from_bytes(v),
        ])?;
        if !out.status.success() {
            return Err(GitCopyError::GitRefused(
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<Key> {
        gitconfig::parse(text.as_bytes()).unwrap()
    }

    const BASE: &str = "[core]\n\tbare = false\n[user]\n\tname = h\n";

    #[test]
    fn everyday_changes_are_carried_out() {
        let jail = keys(
            "[core]\n\tbare = false\n[user]\n\tname = h\n\temail = a@b\n\
             [remote \"origin\"]\n\turl = https://x/y\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
             [remote \"gh\"]\n\turl = git@github.com:o/r.git\n\
             [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
             [push]\n\tautoSetupRemote = true\n",
        );
        let m = merge(&keys(BASE), &jail, &keys(BASE));
        let names: Vec<&str> = m.set.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "user.email",
                "remote.origin.url",
                "remote.origin.fetch",
                "remote.gh.url",
                "branch.main.remote",
                "branch.main.merge",
                "push.autosetupremote"
            ]
        );
        assert_eq!(
            m,
            Merge {
                set: m.set.clone(),
                ..Merge::default()
            }
        );
    }

    #[test]
    fn keys_that_run_programs_are_kept_and_alerted() {
        for planted in [
            "[core]\n\tfsmonitor = ./x\n",
            "[core]\n\tsshCommand = x\n",
            "[alias]\n\tst = !x\n",
            "[include]\n\tpath = ../x\n",
            "[includeIf \"gitdir:/\"]\n\tpath = x\n",
            "[filter \"a\"]\n\tclean = x\n",
            "[remote \"o\"]\n\turl = ext::sh -c x\n",
            "[credential]\n\thelper = !x\n",
        ] {
            let m = merge(&keys(BASE), &keys(&format!("{BASE}{planted}")), &keys(BASE));
            assert!(m.set.is_empty(), "{planted}: {m:?}");
            assert_eq!(m.kept.len(), 1, "{planted}: {m:?}");
        }
    }

    /// The attacker's pass: keys no catalogue named, each of which ran a program as the human.
    #[test]
    fn keys_off_the_allowlist_are_not_carried_out() {
        for planted in [
            "[alias]\n\tst = grep -O\"touch /tmp/p #\" -e hello\n",
            "[alias]\n\tst = status\n",
            "[man \"man\"]\n\tpath = /w/.tools/m\n",
            "[tar \"tar.gz\"]\n\tcommand = touch /tmp/p; cat\n",
            "[trailer \"sign\"]\n\tcommand = touch /tmp/p\n",
            "[init]\n\ttemplateDir = /w/.tools/tpl\n",
            "[core]\n\tworktree = /w/build/wt\n",
            "[remote \"origin\"]\n\turl = /w/.tools/evil.git\n",
            "[remote \"origin\"]\n\turl = file:///w/evil.git\n",
            "[remote \"origin\"]\n\turl = ./evil.git\n",
            "[remote \"origin\"]\n\turl = fd::3\n",
            "[remote \"origin\"]\n\turl = ssh://-oProxyCommand=x/y\n",
            "[remote \"origin\"]\n\turl = -oProxyCommand=x:y\n",
            "[url \"/w/evil.git\"]\n\tinsteadOf = https://github.com/\n",
            "[http]\n\tproxy = http://evil:8080\n",
            "[browser \"x\"]\n\tpath = /w/x\n",
        ] {
            let m = merge(&keys(BASE), &keys(&format!("{BASE}{planted}")), &keys(BASE));
            assert!(m.set.is_empty(), "{planted}: {m:?}");
            assert_eq!(m.kept.len() + m.not_carried.len(), 1, "{planted}: {m:?}");
        }
        // Removing or turning off a key off the list is not carried out either.
        let human = keys("[core]\n\thooksPath = .husky/_\n");
        let m = merge(&human, &keys(""), &human);
        assert!(m.set.is_empty() && m.not_carried == ["core.hookspath"]);
        let human = keys("[core]\n\tfsmonitor = ./hook\n");
        let m = merge(&human, &keys("[core]\n\tfsmonitor = false\n"), &human);
        assert!(m.set.is_empty() && m.not_carried == ["core.fsmonitor"]);
    }

    #[test]
    fn removals_conflicts_and_a_flood() {
        let with_remote = "[remote \"o\"]\n\turl = https://h/r\n";
        let m = merge(&keys(with_remote), &keys(""), &keys(with_remote));
        assert_eq!(m.set, vec![("remote.o.url".to_string(), vec![])]);
        let m = merge(
            &keys(BASE),
            &keys("[user]\n\tname = j\n[core]\n\tbare = false\n"),
            &keys("[user]\n\tname = k\n[core]\n\tbare = false\n"),
        );
        assert_eq!(m.conflicts, ["user.name"]);
        assert!(m.set.is_empty());
        let flood = (0..=MAX_CARRIED).fold(String::new(), |s, i| {
            s + &format!("[remote \"r{i}\"]\n\turl = https://h/{i}\n")
        });
        let m = merge(&keys(BASE), &keys(&format!("{BASE}{flood}")), &keys(BASE));
        assert!(m.too_many && m.set.is_empty());
        assert_eq!(m.not_carried.len(), MAX_CARRIED + 1);
    }
}
