//! git's facts: the files it reads from a git directory (`FILES`, and the ones its config names),
//! and the keys of its config that make it run something (`is_exec_key`). Discovery seals the
//! files (`entrypoints`), the agents' hook adapter refuses writes to them (`agent_hooks`), the baseline,
//! the watcher and the merge of the jail's config copies judge the keys; all read them here.
//! git's own reading of a config file and of a boolean is `gitconfig`'s.

use super::Stub;
use crate::gitconfig::{parse_bool, variable};
use std::path::{Component, Path};

/// Which git directories of a repository a file is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum In {
    /// Every git directory: a repository's own, and each linked worktree's.
    GitDir,
    /// The common directory only (the one a worktree's `commondir` names).
    CommonDir,
    /// Each `worktrees/<name>/` of a common directory, wherever the worktree's files are.
    Worktree,
}

/// One file git reads from a git directory: missing ones get content git reads as "unset".
#[derive(Debug, Clone, Copy)]
pub(crate) struct File {
    /// Relative to the git directory.
    pub rel: &'static str,
    pub stub: Stub,
    pub runs: &'static str,
    pub read_in: In,
}

const fn file(rel: &'static str, stub: Stub, runs: &'static str, read_in: In) -> File {
    File {
        rel,
        stub,
        runs,
        read_in,
    }
}

/// Every file git reads from a git directory that makes it run something, or says where to find
/// what does. A new one is one row here.
pub(crate) const FILES: &[File] = &[
    file(
        "config.worktree",
        Stub::File(""),
        "git: per-worktree config (core.fsmonitor, hooks)",
        In::GitDir,
    ),
    file(
        "commondir",
        Stub::File(".\n"),
        "git: `commondir` redirects hooks and config",
        In::GitDir,
    ),
    file(
        "hooks",
        Stub::Dir,
        "git: hooks run by commit, checkout, merge, push, status",
        In::CommonDir,
    ),
    file(
        "config",
        Stub::File(""),
        "git: core.fsmonitor, core.hooksPath, hook.*, filters, aliases",
        In::CommonDir,
    ),
    // Not a program, but what decides which files the human reviews: `info/exclude` hides a planted
    // file from `git status`; `info/attributes` picks filter and diff drivers for any path.
    file(
        "info",
        Stub::Dir,
        "git: info/exclude hides files from `git status` (and so from your review), info/attributes \
         selects filter and diff drivers, info/grafts rewrites history",
        In::CommonDir,
    ),
    file(
        "commondir",
        Stub::File("../..\n"),
        "git: a worktree's `commondir`",
        In::Worktree,
    ),
    file(
        "config.worktree",
        Stub::File(""),
        "git: per-worktree config",
        In::Worktree,
    ),
    file(
        "gitdir",
        Stub::File(""),
        "git: a worktree's back-pointer",
        In::Worktree,
    ),
];

/// The rows read in `read_in`.
pub(crate) fn files(read_in: In) -> impl Iterator<Item = &'static File> {
    FILES.iter().filter(move |f| f.read_in == read_in)
}

/// A `.git` file in a working tree (a linked worktree's, a submodule's): names the git directory.
pub(crate) const POINTER: (Stub, &str) = (
    Stub::Dir,
    "git: `.git` pointer file names the git directory",
);
/// A file a repository's config includes.
pub(crate) const INCLUDED: (Stub, &str) = (
    Stub::File(""),
    "git: file included by a repository's config",
);
/// The directory a repository's `core.hooksPath` names.
pub(crate) const HOOKS_PATH: (Stub, &str) = (Stub::Dir, "git: core.hooksPath target: every hook");
/// A file the human's global config includes.
pub(crate) const GLOBAL_INCLUDED: &str = "included by your global git config: every git reads it";
/// The directory the human's global `core.hooksPath` names.
pub(crate) const GLOBAL_HOOKS_PATH: &str = "your global core.hooksPath: every repository's hooks";

/// What the agents' hook adapter says of a write to any file of `FILES` (`written_file`).
pub(crate) const RUNS: &str = "git runs hooks and config on commit, checkout and status";

/// Whether writing `path` writes a file of `FILES` (or into a directory of it) in a `.git`
/// directory, a worktree's under `.git/worktrees/`, or a submodule's under `.git/modules/`. From the
/// path alone: what a tool call names, before anything exists.
pub(crate) fn written_file(path: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let Some(g) = parts.iter().position(|p| *p == ".git") else {
        return false;
    };
    let rel = &parts[g + 1..];
    let is = |rel: &[&std::ffi::OsStr], read_in: &[In]| {
        FILES
            .iter()
            .filter(|f| read_in.contains(&f.read_in))
            .any(|f| {
                let n = Path::new(f.rel).components().count();
                rel.len() >= n
                    && rel[..n].iter().copied().eq(Path::new(f.rel).iter())
                    && (rel.len() == n || f.stub == Stub::Dir)
            })
    };
    let repository = [In::GitDir, In::CommonDir];
    if is(rel, &repository) {
        return true;
    }
    match rel.first().and_then(|p| p.to_str()) {
        // `.git/worktrees/<name>/…`: a worktree's git directory.
        Some("worktrees") if rel.len() > 2 => is(&rel[2..], &[In::Worktree, In::GitDir]),
        // `.git/modules/<name>/…`, where a submodule's name may have slashes.
        Some("modules") => (2..rel.len()).any(|k| is(&rel[k..], &repository)),
        _ => false,
    }
}

/// Whether a (lowercased) git config key makes git run something.
pub(crate) fn is_exec_key(key: &str, value: &str) -> bool {
    const EXACT: &[&str] = &[
        "core.fsmonitor",
        "core.hookspath",
        "include.path",
        "core.sshcommand",
        "ssh.variant",
        "credential.helper",
        "core.pager",
        "core.editor",
        "sequence.editor",
        "diff.external",
        "gpg.program",
        "gpg.ssh.defaultkeycommand",
        "core.askpass",
        "core.gitproxy",
        "core.alternaterefscommand",
        "gc.recentobjectshook",
        "protocol.ext.allow",
        "interactive.difffilter",
        "sendemail.sendmailcmd",
        "web.browser",
        "uploadpack.packobjectshook",
        "core.attributesfile",
    ];
    const SUFFIXES: &[(&str, &str)] = &[
        ("hook.", ".command"),
        ("includeif.", ".path"),
        ("filter.", ".clean"),
        ("filter.", ".smudge"),
        ("filter.", ".process"),
        ("credential.", ".helper"),
        ("diff.", ".command"),
        ("diff.", ".textconv"),
        ("merge.", ".driver"),
        ("gpg.", ".program"),
        ("remote.", ".uploadpack"),
        ("remote.", ".receivepack"),
        ("remote.", ".vcs"),
        ("trailer.", ".cmd"),
        ("difftool.", ".cmd"),
        ("mergetool.", ".cmd"),
        ("difftool.", ".path"),
        ("mergetool.", ".path"),
        ("browser.", ".cmd"),
        ("man.", ".cmd"),
        ("guitool.", ".cmd"),
        ("pager.", ""),
    ];
    if EXACT.contains(&key) {
        // `core.fsmonitor` as a boolean false runs nothing; true is git's own daemon, a value that
        // is no boolean a hook (`runs_nothing_of_the_repository` tells the two apart).
        return key != "core.fsmonitor" || parse_bool(value) != Some(false);
    }
    if SUFFIXES
        .iter()
        .any(|(p, s)| key.starts_with(p) && key.ends_with(s) && key.len() > p.len() + s.len())
    {
        return true;
    }
    (key.starts_with("alias.") && value.trim_start().starts_with('!'))
        || (key.starts_with("submodule.")
            && key.ends_with(".update")
            && value.trim_start().starts_with('!'))
        || (key.starts_with("url.") && key.ends_with(".insteadof") && value.starts_with("ext::"))
        // `[url "ext::sh -c …"] insteadOf = https://host/`: the command is in the subsection.
        || (key.starts_with("url.ext::")
            && matches!(variable(key), "insteadof" | "pushinsteadof"))
        // A remote or submodule whose URL runs a command (`ext::`), and what lets git use it.
        || ((key.starts_with("remote.") || key.starts_with("submodule."))
            && matches!(variable(key), "url" | "pushurl")
            && value.trim_start().starts_with("ext::"))
        || ((key == "protocol.allow" || (key.starts_with("protocol.") && variable(key) == "allow"))
            && !value.trim().eq_ignore_ascii_case("never"))
}

/// Whether git treats this exec-capable value as running nothing of the repository's: the
/// built-in fsmonitor daemon (`core.fsmonitor` as a boolean true).
pub(crate) fn runs_nothing_of_the_repository(key: &str, value: &str) -> bool {
    key == "core.fsmonitor" && parse_bool(value) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_keys_are_recognised() {
        for (k, v) in [
            ("core.fsmonitor", "/x"),
            ("hook.lint.command", "x"),
            ("filter.lfs.smudge", "x"),
            ("alias.st", "!sh"),
            ("remote.origin.uploadpack", "x"),
            ("url.x.insteadof", "ext::sh"),
            ("pager.log", "x"),
            ("includeif.gitdir:/x/.path", "y"),
            ("url.ext::sh -c touch% x.insteadof", "https://h/"),
            ("url.ext::sh -c touch% x.pushinsteadof", "https://h/"),
            ("remote.origin.url", "ext::sh -c touch% x"),
            ("remote.origin.pushurl", " ext::sh"),
            ("submodule.s.url", "ext::sh"),
            ("protocol.allow", "always"),
            ("protocol.ext.allow", "user"),
            ("mergetool.vimdiff.path", "/x"),
            ("difftool.vimdiff.path", "/x"),
        ] {
            assert!(is_exec_key(k, v), "{k}");
        }
        for (k, v) in [
            ("alias.st", "status"),
            ("remote.origin.url", "x"),
            ("core.fsmonitor", "false"),
            ("user.name", "x"),
            ("hook.x.event", "pre-commit"),
            ("remote.origin.url", "https://h/r.git"),
            ("protocol.allow", "never"),
            ("url.https://h/.insteadof", "git@h:"),
        ] {
            assert!(!is_exec_key(k, v), "{k}");
        }
    }

    /// The files of `FILES` in a repository, a worktree's and a submodule's git directory are
    /// written entry points; what else lies in a git directory is not.
    #[test]
    fn written_files_are_the_rows_wherever_git_reads_them() {
        for p in [
            "/w/.git/hooks",
            "/w/.git/hooks/pre-commit",
            "/w/.git/config",
            "/w/.git/config.worktree",
            "/w/.git/commondir",
            "/w/sub/.git/hooks/x",
            "/w/.git/modules/a/config",
            "/w/.git/modules/a/b/hooks/post-checkout",
            "/w/.git/worktrees/t/commondir",
            "/w/.git/worktrees/t/gitdir",
            "/w/.git/worktrees/t/config.worktree",
            "/w/.git/info/exclude",
            "/w/.git/info/attributes",
            "/w/.git/modules/a/info/exclude",
        ] {
            assert!(written_file(Path::new(p)), "{p}");
        }
        for p in [
            "/w/.git",
            "/w/.git/HEAD",
            "/w/.git/objects/ab/cd",
            "/w/.git/objects/info/alternates",
            "/w/.git/infox",
            "/w/.git/config/x",
            "/w/.git/hooksx",
            "/w/.git/modules/a/HEAD",
            "/w/.git/worktrees/t/HEAD",
            "/w/src/config",
            "/w/git/hooks/x",
        ] {
            assert!(!written_file(Path::new(p)), "{p}");
        }
    }
}
