//! Git config keys by consequence: which of the jail's changes to a `.git/config` (or to
//! `~/.gitconfig`) come back by themselves, and which are held for the human's review.
//!
//! Data is the everyday set git itself writes: identity, upstreams, fetch and push refspecs, a few
//! behaviour switches, plain aliases (a git command and its everyday options), `submodule.*.active`,
//! remotes over the network — a new remote, or an existing one moved on the same host. Held, with
//! what git would do: a key that runs a program (`core.fsmonitor`, a `!` alias, a filter driver,
//! any key this guard does not know, because git reads many keys as programs); a remote whose host
//! changed (the next push sends the work there); a local path as a remote or as
//! `branch.*.remote`/`pushRemote` when the jail could write the hooks or config of the repository it
//! names (the next push runs that repository's `pre-receive`); `url.*.insteadOf` and proxies (they
//! move every fetch and push).

use super::{Consequence, Verdict};

/// What the judge needs from the world around the key (read by the caller).
pub(crate) struct Ctx<'a> {
    /// Whether a local path as written in a URL names a repository whose hooks or config lie in
    /// the jail's writable roots (or cannot be told: then `true`).
    pub local_writable: &'a dyn Fn(&[u8]) -> bool,
}

/// The host name of a URL git reaches over the network, in a form that names no local path and no
/// helper program (`https://`, `http://`, `ssh://`, `git://`, or scp-like `[user@]host:path`): (lowercased, without a user or a port) of a network URL.
pub(crate) fn host(v: &[u8]) -> Option<String> {
    let v = std::str::from_utf8(v).ok()?;
    if v.is_empty() || v.starts_with('-') || v.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return None;
    }
    if let Some((scheme, rest)) = v.split_once("://") {
        let authority = rest.split('/').next().unwrap_or("");
        let hostname = authority.rsplit('@').next().unwrap_or("");
        let ok = matches!(scheme, "https" | "http" | "ssh" | "git")
            && !hostname.is_empty()
            && !rest.starts_with('-')
            && !rest.contains("@-")
            && !hostname.starts_with('-');
        return ok.then(|| strip_port(hostname).to_ascii_lowercase());
    }
    // scp-like: a colon before any slash, a host that is not empty, no `::` (a remote helper).
    let (host, _) = v.split_once(':')?;
    let ok = !host.is_empty()
        && !host.contains('/')
        && !v.contains("::")
        && !host.rsplit('@').next().unwrap_or("").starts_with('-');
    ok.then(|| host.rsplit('@').next().unwrap_or("").to_ascii_lowercase())
}

/// `host:port` → `host` (an IPv6 literal in brackets keeps its colons).
fn strip_port(h: &str) -> &str {
    if let Some(end) = h.strip_prefix('[').and_then(|r| r.find(']')) {
        return &h[..end + 2];
    }
    h.split(':').next().unwrap_or(h)
}

/// A URL that names a local repository: a path, or `file://`.
fn local_path(v: &[u8]) -> Option<&[u8]> {
    if let Some(rest) = v.strip_prefix(b"file://") {
        return Some(rest);
    }
    let s = std::str::from_utf8(v).ok()?;
    if s.is_empty() || s.starts_with('-') || s.contains("::") {
        return None;
    }
    // git takes `host:path` as scp-like unless a slash comes before the colon.
    let colon = s.find(':');
    let slash = s.find('/');
    match (colon, slash) {
        (Some(c), Some(sl)) if sl < c => Some(v),
        (Some(_), _) => None,
        (None, _) => Some(v),
    }
}

/// A word: letters, digits and `-` (a boolean, a mode, a branch name without slashes).
fn word(v: &[u8]) -> bool {
    !v.is_empty() && v.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
}

/// A refspec or a ref: printable, no option.
fn refish(v: &[u8]) -> bool {
    !v.is_empty() && v.iter().all(u8::is_ascii_graphic) && !v.starts_with(b"-")
}

/// Git commands an alias may name and still be plain data.
const ALIAS_COMMANDS: &[&str] = &[
    "add",
    "am",
    "bisect",
    "blame",
    "branch",
    "checkout",
    "cherry-pick",
    "clean",
    "clone",
    "commit",
    "describe",
    "diff",
    "fetch",
    "init",
    "log",
    "ls-files",
    "merge",
    "mv",
    "pull",
    "push",
    "rebase",
    "reflog",
    "remote",
    "reset",
    "restore",
    "revert",
    "rm",
    "shortlog",
    "show",
    "stash",
    "status",
    "submodule",
    "switch",
    "tag",
    "worktree",
];

/// Options that make a git command run a program, read config from the command line or name a
/// program to run on the far side.
const ALIAS_OPTIONS_THAT_RUN: &[&str] = &[
    "-c",
    "-O",
    "-x",
    "-u",
    "-t",
    "--exec",
    "--extcmd",
    "--tool",
    "--upload-pack",
    "--receive-pack",
    "--open-files-in-pager",
    "--config-env",
    "--exec-path",
    "--ext-diff",
    "--textconv",
    "--template",
];

/// `alias.X = status -sb`: a git command and everyday options, nothing that runs a program.
fn plain_alias(v: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(v) else {
        return false;
    };
    let mut words = s.split(' ').filter(|w| !w.is_empty());
    let Some(command) = words.next() else {
        return false;
    };
    ALIAS_COMMANDS.contains(&command)
        && words.all(|w| {
            w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.=/:%@^~".contains(&b))
                && !ALIAS_OPTIONS_THAT_RUN
                    .iter()
                    .any(|o| w == *o || (w.starts_with(o) && (o.starts_with("--") || w.len() > 2)))
        })
}

fn split(name: &str) -> Option<(&str, Option<&str>, &str)> {
    let (section, rest) = name.split_once('.')?;
    Some(match rest.rsplit_once('.') {
        Some((sub, key)) => (section, Some(sub), key),
        None => (section, None, rest),
    })
}

/// Whether one value of `name` is everyday data on its own (no context needed).
fn everyday(name: &str, value: Option<&[u8]>) -> bool {
    let Some((section, sub, key)) = split(name) else {
        return false;
    };
    let v = value.unwrap_or(b"true");
    match (section, sub, key) {
        ("user", None, "name" | "email") => true,
        ("remote", Some(_), "fetch" | "push") => refish(v),
        ("remote", Some(_), "tagopt" | "prune")
        | ("submodule", Some(_), "branch" | "active")
        | ("pull", None, "rebase" | "ff")
        | ("push", None, "default" | "autosetupremote")
        | ("fetch", None, "prune")
        | ("init", None, "defaultbranch")
        | ("core", None, "autocrlf" | "eol" | "filemode" | "ignorecase") => word(v),
        ("branch", Some(_), "merge" | "rebase" | "description") => {
            refish(v) || key == "description"
        }
        ("alias", Some(_) | None, _) => plain_alias(v),
        _ => false,
    }
}

/// Judge one value of `name` (section and key lowercased, the subsection as written). `before`:
/// the key's values at launch.
fn judge_value(name: &str, value: Option<&[u8]>, before: &[Option<Vec<u8>>], ctx: &Ctx) -> Verdict {
    let text = value.map_or("true".into(), String::from_utf8_lossy);
    if crate::gitconfig::is_include(name)
        || crate::catalogue::git::is_exec_key(&name.to_ascii_lowercase(), &text)
    {
        return Verdict::held(
            Consequence::Program,
            format!("git runs what `{name}` names"),
        );
    }
    if everyday(name, value) {
        return Verdict::data();
    }
    let Some((section, sub, key)) = split(name) else {
        return Verdict::held(
            Consequence::Program,
            "a key git reads that this guard does not know",
        );
    };
    let v = value.unwrap_or(b"");
    let remote_url = matches!(
        (section, sub, key),
        ("remote", Some(_), "url" | "pushurl") | ("submodule", Some(_), "url")
    );
    let branch_remote = matches!(
        (section, sub, key),
        ("branch", Some(_), "remote" | "pushremote")
    );
    if remote_url || branch_remote {
        if branch_remote && word_or_dot(v) {
            return Verdict::data(); // the name of a remote (`.`: this repository)
        }
        if let Some(new) = host(v) {
            if branch_remote {
                return Verdict::held(
                    Consequence::Place,
                    format!("`{name}` pushes or fetches straight to {new}"),
                );
            }
            let old: Vec<String> = before.iter().filter_map(|b| host(b.as_deref()?)).collect();
            if old.is_empty() || old.contains(&new) {
                return Verdict::data();
            }
            return Verdict::held(
                Consequence::Place,
                format!("the host of `{name}` changed from {} to {new}: your next push sends your work there", old.join(", ")),
            );
        }
        if let Some(path) = local_path(v) {
            if (ctx.local_writable)(path) {
                return Verdict::held(
                    Consequence::Place,
                    format!("`{name}` names a local repository whose hooks or config the jail could write: your next push or fetch runs them"),
                );
            }
            return Verdict::data();
        }
        return Verdict::held(
            Consequence::Program,
            format!("`{name}` is not a plain URL: git may run a helper it names"),
        );
    }
    if matches!((section, key), ("url", "insteadof" | "pushinsteadof"))
        || key == "proxy"
        || matches!(
            (section, key),
            (
                "http" | "https",
                "proxy" | "sslcainfo" | "sslcapath" | "cookiefile"
            )
        )
    {
        return Verdict::held(
            Consequence::Place,
            format!("`{name}` moves where git connects"),
        );
    }
    Verdict::held(
        Consequence::Program,
        format!(
            "`{name}` is not one of the everyday keys: git reads many keys as programs or places"
        ),
    )
}

fn word_or_dot(v: &[u8]) -> bool {
    v == b"." || (refish(v) && !v.contains(&b'/') && !v.contains(&b':') && !v.contains(&b'\\'))
}

/// Judge a key's new values (`after`; empty: removed) against its values at launch. The strictest
/// value decides. A removal is data only for a key whose removal is everyday (a remote or an
/// upstream the human can add again); turning off a key that runs something is held like setting it.
pub(crate) fn judge(
    name: &str,
    after: &[Option<Vec<u8>>],
    before: &[Option<Vec<u8>>],
    ctx: &Ctx,
) -> Verdict {
    if after.is_empty() {
        let Some((section, sub, key)) = split(name) else {
            return Verdict::held(
                Consequence::Program,
                "a key this guard does not know was removed",
            );
        };
        let removable = everyday(name, before.first().and_then(Option::as_deref))
            || matches!(
                (section, sub, key),
                ("remote" | "branch" | "submodule", Some(_), _)
            );
        let runs = before.iter().any(|b| {
            let t = b.as_deref().map_or("true".into(), String::from_utf8_lossy);
            crate::catalogue::git::is_exec_key(&name.to_ascii_lowercase(), &t)
        });
        return if removable && !runs {
            Verdict::data()
        } else {
            Verdict::held(
                Consequence::Program,
                format!("`{name}` was removed: what it turned off or on is yours to decide"),
            )
        };
    }
    let mut worst = Verdict::data();
    for v in after {
        let verdict = judge_value(name, v.as_deref(), before, ctx);
        if !verdict.flows() && (worst.flows() || verdict.consequence == Consequence::Program) {
            worst = verdict;
        }
    }
    worst
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_local(_: &[u8]) -> bool {
        false
    }
    fn any_local(_: &[u8]) -> bool {
        true
    }

    fn v(s: &str) -> Vec<Option<Vec<u8>>> {
        vec![Some(s.as_bytes().to_vec())]
    }

    fn flows(name: &str, after: &str, before: &[&str], local: bool) -> bool {
        let f: &dyn Fn(&[u8]) -> bool = if local { &any_local } else { &no_local };
        let before: Vec<_> = before.iter().map(|b| Some(b.as_bytes().to_vec())).collect();
        judge(name, &v(after), &before, &Ctx { local_writable: f }).flows()
    }

    #[test]
    fn everyday_keys_come_back() {
        for (k, val) in [
            ("user.email", "a@b"),
            ("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            ("branch.main.remote", "origin"),
            ("branch.main.pushremote", "origin"),
            ("branch.main.merge", "refs/heads/main"),
            ("push.autosetupremote", "true"),
            ("alias.co", "checkout"),
            ("alias.lg", "log --oneline --graph --decorate"),
            ("alias.st", "status -sb"),
            ("submodule.lib.active", "true"),
            ("remote.gh.url", "git@github.com:o/r.git"),
            ("remote.origin.url", "https://github.com/o/r"),
        ] {
            assert!(flows(k, val, &[], true), "{k} = {val}");
        }
        // The same host, another path or protocol.
        assert!(flows(
            "remote.origin.url",
            "https://github.com/o/fork",
            &["https://github.com/o/r"],
            true
        ));
        assert!(flows(
            "remote.origin.url",
            "git@github.com:o/r",
            &["https://github.com/o/r"],
            true
        ));
    }

    #[test]
    fn what_runs_a_program_is_held_as_such() {
        for (k, val) in [
            ("core.fsmonitor", "./x"),
            ("alias.st", "!sh -c x"),
            ("alias.st", "grep -O\"touch /tmp/p #\" -e hello"),
            ("alias.g", "grep -Ofoo x"),
            ("alias.x", "-c core.fsmonitor=x status"),
            ("alias.r", "rebase -x ./evil"),
            ("alias.f", "fetch --upload-pack=./evil"),
            ("alias.d", "difftool --extcmd=./evil"),
            ("man.man.path", "/w/m"),
            ("tar.tar.gz.command", "touch /tmp/p; cat"),
            ("core.worktree", "/w/build/wt"),
            ("init.templatedir", "/w/tpl"),
            ("remote.origin.url", "ext::sh -c x"),
            ("remote.origin.url", "fd::3"),
            ("remote.origin.url", "ssh://-oProxyCommand=x/y"),
            ("color.ui", "always"),
        ] {
            let f: &dyn Fn(&[u8]) -> bool = &no_local;
            let verdict = judge(k, &v(val), &[], &Ctx { local_writable: f });
            assert_eq!(
                verdict.consequence,
                Consequence::Program,
                "{k} = {val}: {verdict:?}"
            );
        }
    }

    #[test]
    fn places_are_held_when_they_move_your_work_or_run_a_hook() {
        // A host changed on an existing remote.
        assert!(!flows(
            "remote.origin.url",
            "https://evil.example/o/r",
            &["https://github.com/o/r"],
            false
        ));
        assert!(!flows(
            "remote.origin.pushurl",
            "git@evil.example:o/r",
            &["git@github.com:o/r"],
            false
        ));
        // A local repository the jail could write, as a URL or as a branch's remote.
        for val in [
            "../node_modules/x.git",
            "/w/x.git",
            "file:///w/x.git",
            "./x",
        ] {
            assert!(!flows("remote.origin.url", val, &[], true), "{val}");
            assert!(!flows("branch.main.pushremote", val, &[], true), "{val}");
            assert!(!flows("branch.main.remote", val, &[], true), "{val}");
            // Outside the writable roots: a push runs nothing the agent wrote.
            assert!(flows("remote.origin.url", val, &[], false), "{val}");
        }
        assert!(!flows(
            "branch.main.pushremote",
            "https://evil.example/x",
            &[],
            false
        ));
        assert!(!flows(
            "url./w/evil.git.insteadof",
            "https://github.com/",
            &[],
            false
        ));
        assert!(!flows("http.proxy", "http://evil:8080", &[], false));
        let f: &dyn Fn(&[u8]) -> bool = &no_local;
        assert_eq!(
            judge(
                "http.proxy",
                &v("http://evil:8080"),
                &[],
                &Ctx { local_writable: f }
            )
            .consequence,
            Consequence::Place
        );
    }

    #[test]
    fn removals() {
        let f: &dyn Fn(&[u8]) -> bool = &no_local;
        let ctx = Ctx { local_writable: f };
        assert!(judge("remote.o.url", &[], &v("https://h/r"), &ctx).flows());
        assert!(judge("branch.main.merge", &[], &v("refs/heads/main"), &ctx).flows());
        assert!(!judge("core.hookspath", &[], &v(".husky/_"), &ctx).flows());
        assert!(!judge("core.fsmonitor", &[], &v("./hook"), &ctx).flows());
        assert!(!judge("color.ui", &[], &v("auto"), &ctx).flows());
    }

    #[test]
    fn hosts_are_read_as_git_reads_them() {
        assert_eq!(
            host(b"https://u@GitHub.com:443/o/r").as_deref(),
            Some("github.com")
        );
        assert_eq!(host(b"git@github.com:o/r").as_deref(), Some("github.com"));
        assert_eq!(host(b"ssh://[::1]:22/r").as_deref(), Some("[::1]"));
        assert_eq!(host(b"/srv/x.git"), None);
        assert_eq!(host(b"./x:y"), None);
        assert_eq!(local_path(b"./x:y"), Some(&b"./x:y"[..]));
        assert_eq!(local_path(b"host:path"), None);
        assert_eq!(local_path(b"ext::sh"), None);
    }
}
