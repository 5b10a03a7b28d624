//! What an `.envrc` reads besides itself, from its bytes: the direnv stdlib calls that pull in
//! other files and the PATH entries it adds.
//!
//! Guards against an allowed `.envrc` (direnv trusts it by its content hash) that runs what the
//! agent can write: `source_env lib/env.sh` or `source_up` pull in shell code, `dotenv` turns a
//! `.env` into the human's environment (`GIT_CONFIG_*`, `BASH_ENV`, `LD_PRELOAD` make that code),
//! `PATH_add bin` makes a workspace directory the first PATH directory of the human's shell. The
//! `.envrc` stays unchanged, so direnv's allow never asks again. Pure: a shell-like reading of one
//! line at a time (quotes, comments, `;`/`&&`/`||` lists, `$PWD` and `~`), no execution. What it
//! cannot tell (a path built from another variable) is `Target::Unknown`, for the caller to say.

use std::path::{Path, PathBuf};

/// A recognised direnv call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `source_env`, `source_env_if_exists`: shell code (a directory means its `.envrc`).
    Source,
    /// `source_up`, `source_up_if_exists`: the nearest file of this name in a parent directory.
    SourceUp,
    /// `dotenv`, `dotenv_if_exists`: exported as the environment (a directory means its `.env`).
    Dotenv,
    /// `PATH_add`, `path_add PATH`, `PATH=...`: a directory put on PATH.
    PathAdd,
    /// `watch_file`: only makes direnv reload; aside.
    Watch,
    /// `env_vars_required`: names variables, reads nothing; aside.
    EnvVarsRequired,
}

/// Where an include points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Resolved against the `.envrc`'s directory (for `SourceUp`: the file name looked for).
    Path(PathBuf),
    /// Built from something other than `$PWD`, `$HOME` or `~`: the word as written.
    Unknown(String),
}

/// One include of an `.envrc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Include {
    pub kind: Kind,
    pub target: Target,
}

/// The includes of an `.envrc` in directory `dir` (`home`: `$HOME`, for `~` and `$HOME`).
pub(crate) fn parse(bytes: &[u8], dir: &Path, home: Option<&Path>) -> Vec<Include> {
    let text = String::from_utf8_lossy(bytes);
    let mut out = Vec::new();
    for line in text.lines() {
        for cmd in commands(line) {
            calls(&cmd, dir, home, &mut out);
        }
    }
    out
}

/// The words of each simple command on a line: quotes removed (a quoted word's `$` kept as
/// written but marked by `Word::quoted`), `#` comments dropped, split at `;`, `&&`, `||`, `|`.
fn commands(line: &str) -> Vec<Vec<Word>> {
    let mut cmds = vec![Vec::new()];
    let mut word: Option<Word> = None;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            // A backslash keeps the next character (inside single quotes it is itself: below).
            (Some('"') | None, '\\') => {
                if let Some(n) = chars.next() {
                    word.get_or_insert_with(Word::default).text.push(n);
                }
            }
            (None, '\'' | '"') => {
                let w = word.get_or_insert_with(Word::default);
                w.single |= c == '\'';
                quote = Some(c);
            }
            (None, '#') if word.is_none() => break,
            (None, ' ' | '\t') => {
                if let Some(w) = word.take() {
                    cmds.last_mut().expect("one command at least").push(w);
                }
            }
            (None, ';' | '&' | '|') => {
                if let Some(w) = word.take() {
                    cmds.last_mut().expect("one command at least").push(w);
                }
                while chars.peek().is_some_and(|n| matches!(n, '&' | '|')) {
                    chars.next();
                }
                cmds.push(Vec::new());
            }
            (_, c) => word.get_or_insert_with(Word::default).text.push(c),
        }
    }
    if let Some(w) = word {
        cmds.last_mut().expect("one command at least").push(w);
    }
    cmds.retain(|c| !c.is_empty());
    cmds
}

#[derive(Debug, Default, Clone)]
struct Word {
    text: String,
    /// Some part was single-quoted: no expansion happens there (treated as the whole word).
    single: bool,
}

/// Keywords that may stand before a command on the same line.
const PREFIXES: &[&str] = &[
    "if", "then", "else", "elif", "do", "{", "!", "export", "local",
];

fn calls(cmd: &[Word], dir: &Path, home: Option<&Path>, out: &mut Vec<Include>) {
    let start = cmd
        .iter()
        .position(|w| !PREFIXES.contains(&w.text.as_str()))
        .unwrap_or(cmd.len());
    let Some((first, args)) = cmd[start..].split_first() else {
        return;
    };
    let resolve = |w: &Word| resolve(w, dir, home);
    let mut push = |kind, target| out.push(Include { kind, target });
    match first.text.as_str() {
        "source_env" | "source_env_if_exists" => {
            args.iter()
                .take(1)
                .for_each(|a| push(Kind::Source, resolve(a)));
        }
        "dotenv" | "dotenv_if_exists" => match args.first() {
            Some(a) => push(Kind::Dotenv, resolve(a)),
            None => push(Kind::Dotenv, Target::Path(dir.join(".env"))),
        },
        "source_up" | "source_up_if_exists" => {
            let name = args
                .first()
                .map_or_else(|| ".envrc".to_string(), |a| a.text.clone());
            push(Kind::SourceUp, Target::Path(PathBuf::from(name)));
        }
        "PATH_add" => args.iter().for_each(|a| push(Kind::PathAdd, resolve(a))),
        "path_add" if args.first().is_some_and(|v| v.text == "PATH") => {
            args[1..]
                .iter()
                .for_each(|a| push(Kind::PathAdd, resolve(a)));
        }
        "watch_file" => args.iter().for_each(|a| push(Kind::Watch, resolve(a))),
        "env_vars_required" => args
            .iter()
            .for_each(|a| push(Kind::EnvVarsRequired, Target::Unknown(a.text.clone()))),
        _ => {}
    }
    // `PATH=...` (also after `export`, and as `VAR=x cmd` prefixes): each part but `$PATH` itself.
    for w in &cmd[start.min(cmd.len())..] {
        let Some(value) = w.text.strip_prefix("PATH=") else {
            if !w.text.contains('=') {
                break;
            }
            continue;
        };
        for part in value.split(':').filter(|p| !p.is_empty()) {
            if matches!(part, "$PATH" | "${PATH}") {
                continue;
            }
            let part = Word {
                text: part.to_string(),
                single: w.single,
            };
            push(Kind::PathAdd, resolve(&part));
        }
    }
}

/// A path word: `$PWD`/`${PWD}` is the `.envrc`'s directory, `~`/`$HOME`/`${HOME}` the home;
/// relative paths are the directory's. Any other `$`, or a backquote, is unknown.
fn resolve(w: &Word, dir: &Path, home: Option<&Path>) -> Target {
    let mut text = w.text.clone();
    if !w.single {
        let d = dir.to_string_lossy();
        for var in ["${PWD}", "$PWD", "$(pwd)"] {
            text = text.replace(var, &d);
        }
        if let Some(h) = home {
            let h = h.to_string_lossy();
            for var in ["${HOME}", "$HOME"] {
                text = text.replace(var, &h);
            }
            if text == "~" || text.starts_with("~/") {
                text = format!("{h}{}", &text[1..]);
            }
        }
    }
    if !w.single && (text.contains('$') || text.contains('`') || text.starts_with('~')) {
        return Target::Unknown(w.text.clone());
    }
    let p = Path::new(&text);
    Target::Path(if p.is_absolute() {
        normalise(p)
    } else {
        normalise(&dir.join(p))
    })
}

/// `.` and `..` taken out lexically, as the shell's `cd` would see them (no symlinks followed).
fn normalise(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Target {
        Target::Path(PathBuf::from(s))
    }

    fn parsed(text: &str) -> Vec<(Kind, Target)> {
        parse(text.as_bytes(), Path::new("/w/sub"), Some(Path::new("/h")))
            .into_iter()
            .map(|i| (i.kind, i.target))
            .collect()
    }

    #[test]
    fn every_stdlib_include_kind_is_recognised_and_resolved_from_the_envrcs_directory() {
        let got = parsed(
            "source_env ../lib/env.sh\nsource_env_if_exists .envrc.local\nsource_up\n\
             source_up_if_exists .envrc.shared\ndotenv\ndotenv_if_exists config/dev.env\n\
             watch_file flake.nix\nenv_vars_required API_KEY\nPATH_add bin tools\n\
             path_add PATH scripts\npath_add PYTHONPATH lib\n",
        );
        assert_eq!(
            got,
            vec![
                (Kind::Source, p("/w/lib/env.sh")),
                (Kind::Source, p("/w/sub/.envrc.local")),
                (Kind::SourceUp, p(".envrc")),
                (Kind::SourceUp, p(".envrc.shared")),
                (Kind::Dotenv, p("/w/sub/.env")),
                (Kind::Dotenv, p("/w/sub/config/dev.env")),
                (Kind::Watch, p("/w/sub/flake.nix")),
                (Kind::EnvVarsRequired, Target::Unknown("API_KEY".into())),
                (Kind::PathAdd, p("/w/sub/bin")),
                (Kind::PathAdd, p("/w/sub/tools")),
                (Kind::PathAdd, p("/w/sub/scripts")),
            ]
        );
    }

    #[test]
    fn quotes_comments_lists_and_variables_are_read_as_the_shell_would() {
        let got = parsed(
            "# dotenv commented.env\n  dotenv \"$PWD/a b.env\" # trailing\n\
             [ -f x ] && source_env '${PWD}/lit' ; source_env ${PWD}/braced\n\
             if true; then dotenv_if_exists ~/.env.h; fi\nsource_env $OTHER/x\n\
             echo dotenv not-a-call\nsource_env_if_exists \"$HOME/shared.sh\"\n",
        );
        assert_eq!(
            got,
            vec![
                (Kind::Dotenv, p("/w/sub/a b.env")),
                (Kind::Source, p("/w/sub/${PWD}/lit")),
                (Kind::Source, p("/w/sub/braced")),
                (Kind::Dotenv, p("/h/.env.h")),
                (Kind::Source, Target::Unknown("$OTHER/x".into())),
                (Kind::Source, p("/h/shared.sh")),
            ]
        );
    }

    #[test]
    fn path_assignments_add_each_part_but_path_itself() {
        let got = parsed(
            "export PATH=$PWD/bin:$PATH\nPATH=\"${PATH}:$PWD/node_modules/.bin\"\n\
             PATH=/opt/x/bin:$PATH\nFOO=1 PATH=./local:$PATH cmd\nMYPATH=$PWD/no\n",
        );
        assert_eq!(
            got,
            vec![
                (Kind::PathAdd, p("/w/sub/bin")),
                (Kind::PathAdd, p("/w/sub/node_modules/.bin")),
                (Kind::PathAdd, p("/opt/x/bin")),
                (Kind::PathAdd, p("/w/sub/local")),
            ]
        );
    }

    #[test]
    fn an_envrc_with_no_includes_has_none() {
        assert!(parsed("export FOO=bar\nuse nix\nlayout python3\n").is_empty());
        assert!(parsed("").is_empty());
    }
}
