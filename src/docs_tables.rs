//! The tables the docs write by hand, held against the code they describe: a row added to the
//! catalogue (`catalogue`, `catalogue::git`, `runtimes`), to the secrets by kind (`secrets`) or to
//! the network's default list (`net`) without its row in the docs fails here, and so does a row
//! of the docs that the code no longer has.

use std::collections::BTreeSet;

/// The rows of the first table after the heading that starts with `heading` in `doc`, each a list
/// of its cells (the header and the separator left out).
fn table(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let start = doc
        .lines()
        .position(|l| l.starts_with('#') && l.trim_start_matches('#').trim().starts_with(heading))
        .unwrap_or_else(|| panic!("no heading {heading:?}"));
    doc.lines()
        .skip(start + 1)
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The `code` spans of a cell, in order.
fn spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

fn doc(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// docs/network.md's default list is `net::default_allow()`, host for host, in its order.
#[test]
fn the_default_hosts_in_the_docs_are_the_default_list() {
    let rows = table(&doc("network.md"), "The default list (allowlist mode)");
    let documented: Vec<&str> = rows.iter().flat_map(|r| spans(&r[1])).collect();
    let code: Vec<&str> = crate::net::default_allow().collect();
    assert_eq!(documented, code, "docs/network.md, \"The default list\"");
}

/// docs/entry-points.md's per-directory names are the catalogue's (`TOOLS` and the runtimes'
/// project names), each with what runs it.
#[test]
fn the_per_directory_names_in_the_docs_are_the_catalogues() {
    let rows = table(
        &doc("entry-points.md"),
        "Per directory: at the workspace root",
    );
    let documented: BTreeSet<(String, String)> = rows
        .iter()
        .map(|r| (spans(&r[0]).concat(), r[1].clone()))
        .collect();
    let code: BTreeSet<(String, String)> = crate::entrypoints::per_directory()
        .map(|c| (c.name.to_string(), c.runs.to_string()))
        .collect();
    assert_eq!(documented, code, "docs/entry-points.md, \"Per directory\"");
}

/// docs/entry-points.md's git table names every file of `catalogue::git::FILES` where git reads it.
#[test]
fn the_git_files_in_the_docs_are_the_catalogues() {
    use crate::catalogue::git::{In, FILES};
    let rows = table(&doc("entry-points.md"), "Git");
    let documented: Vec<Vec<&str>> = rows.iter().map(|r| spans(&r[0])).collect();
    for f in FILES {
        let found = documented.iter().any(|names| match f.read_in {
            In::GitDir => names.contains(&format!("$GIT_DIR/{}", f.rel).as_str()),
            In::CommonDir => {
                names.contains(&format!("$GIT_COMMON_DIR/{}", f.rel).as_str())
                    || names.contains(&format!("$GIT_COMMON_DIR/{}/", f.rel).as_str())
            }
            In::Worktree => {
                names
                    .first()
                    .is_some_and(|n| n.starts_with("worktrees/<id>/"))
                    && names
                        .iter()
                        .any(|n| n.trim_start_matches("worktrees/<id>/") == f.rel)
            }
        });
        assert!(found, "docs/entry-points.md, \"Git\": no row for {f:?}");
    }
}

/// docs/entry-points.md's table of the agents' state directories names every entry point of
/// every runtime's state directories, with its placeholder, and nothing else but the views and
/// `~/.claude.json` (which it explains).
#[test]
fn the_agent_state_entry_points_in_the_docs_are_the_runtimes() {
    use crate::catalogue::Stub;
    let rows = table(
        &doc("entry-points.md"),
        "Inside writable agent-state directories of `$HOME`",
    );
    let mut documented: Vec<(String, String)> = Vec::new();
    for r in &rows {
        let names = spans(&r[0]);
        let Some(first) = names.first().and_then(|n| n.strip_prefix("~/")) else {
            continue;
        };
        let dir = std::path::Path::new(first)
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        documented.push((first.to_string(), r[1].clone()));
        for other in &names[1..] {
            documented.push((format!("{dir}/{other}"), r[1].clone()));
        }
    }
    let placeholder = |s: Stub| match s {
        Stub::Dir => "empty directory".to_string(),
        Stub::File("") => "empty file".to_string(),
        Stub::File(c) => format!("`{}`", c.trim_end()),
    };
    let code: Vec<(String, String)> = crate::runtimes::state_dirs()
        .flat_map(|sd| sd.entry_points)
        .map(|e| {
            let how = if e.jails_own {
                "(the jail's own copy)".to_string()
            } else {
                placeholder(e.stub)
            };
            (e.rel.to_string(), how)
        })
        .collect();
    for e in &code {
        assert!(
            documented.contains(e),
            "docs/entry-points.md, agent state: no row for ~/{} ({})",
            e.0,
            e.1
        );
    }
    for d in &documented {
        let explained =
            d.0 == crate::runtimes::CLAUDE_JSON || d.1 == "(a private view)" || code.contains(d);
        assert!(
            explained,
            "docs/entry-points.md, agent state: ~/{} is no entry point of a runtime",
            d.0
        );
    }
}

/// docs/config.md's table of secrets by kind names every path hidden by default, every config seen
/// through a masked view, every variable that moves a credential file and every agent's own key
/// kept; and every `~/` path it names is one of them.
#[test]
fn the_secrets_table_is_the_code() {
    let rows = table(&doc("config.md"), "Secrets, by kind");
    let named: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| r.iter().flat_map(|c| spans(c)))
        .map(str::to_string)
        .collect();
    let home = |rel: &str| format!("~/{rel}");
    let mut code: Vec<String> = crate::secrets::DEFAULT_HIDDEN
        .iter()
        .map(|r| home(r))
        .collect();
    code.extend(crate::secrets::views::VIEWED.iter().map(|(r, _)| home(r)));
    code.extend([
        "~/.git-credentials".into(),
        "~/.config/git/credentials".into(),
    ]);
    for name in &code {
        assert!(named.contains(name), "docs/config.md, secrets: no {name}");
    }
    for var in crate::secrets::HIDDEN_BY_VAR {
        assert!(
            named.contains(*var) || named.contains(&format!("${var}")),
            "docs/config.md, secrets: no {var}"
        );
    }
    for key in crate::runtimes::api_keys() {
        assert!(named.contains(key), "docs/config.md, secrets: no {key}");
    }
    for n in named.iter().filter(|n| n.starts_with("~/")) {
        // git's own config files are read for the stores they name, not hidden; `~/` is expanded.
        let read_not_hidden = ["~/", "~/.gitconfig"].contains(&n.as_str());
        let documented_elsewhere = read_not_hidden
            || n.starts_with("~/.ssh")
            || n.starts_with("~/.claude")
            || n.starts_with("~/.codex");
        assert!(
            code.contains(n) || documented_elsewhere,
            "docs/config.md, secrets: {n} is not a path the code hides or views"
        );
    }
}

/// docs/entry-points.md's table of the last catalogue pass is `catalogue::pass::PASS`, row for
/// row, in its order.
#[test]
fn the_catalogue_pass_in_the_docs_is_the_code() {
    use crate::catalogue::pass::{Seen, PASS};
    let rows = table(&doc("entry-points.md"), "The catalogue pass, as found");
    let documented: Vec<Vec<String>> = rows.into_iter().collect();
    let code: Vec<Vec<String>> = PASS
        .iter()
        .map(|r| {
            let seen = match r.seen {
                Seen::Strace => "strace",
                Seen::Docs => "docs",
            };
            vec![
                r.tool.to_string(),
                r.version.to_string(),
                format!("`{}`", r.path),
                seen.to_string(),
                r.verdict.text(),
            ]
        })
        .collect();
    let expected: Vec<String> = code
        .iter()
        .map(|c| format!("| {} |", c.join(" | ")))
        .collect();
    let expected = expected.join("\n");
    assert_eq!(
        documented, code,
        "docs/entry-points.md, \"The catalogue pass, as found\": expected rows\n{expected}"
    );
}
