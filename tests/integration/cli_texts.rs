//! What a person reads: `explain` fits a screen by default (everything with --full), its JSON
//! has paths and names as strings, and no option's help is blank.

use crate::common::*;

#[test]
fn explain_is_short_by_default_and_complete_with_full() {
    let f = Fixture::new();
    let short = ok(&f.cmd(["explain"]).output().unwrap());
    let full = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(short.lines().count() <= 40, "{short}");
    assert!(short.lines().all(|l| l.chars().count() <= 150), "{short}");
    assert!(short.contains("explain --full"), "{short}");
    assert!(
        short.contains("entry points inside writable places"),
        "{short}"
    );
    assert!(short.contains("Not covered"), "{short}");
    assert!(full.lines().count() > short.lines().count(), "{full}");
    assert!(full.contains("runs: git"), "{full}");
}

#[test]
fn explain_json_has_strings_not_byte_arrays() {
    let f = Fixture::new();
    let out = ok(&f.cmd(["explain", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(!out.contains("\"Unix\""), "{out}");
    let entries = v["policy"]["home_entries"].as_array().unwrap();
    assert!(!entries.is_empty());
    assert!(entries.iter().all(|e| e["name"].is_string()), "{entries:?}");
    assert!(
        entries.iter().any(|e| e["name"] == ".bashrc"),
        "{entries:?}"
    );
    let command = v["policy"]["command"].as_array().unwrap();
    assert!(
        command.iter().all(serde_json::Value::is_string),
        "{command:?}"
    );
}

#[test]
fn no_option_has_a_blank_help() {
    for sub in [
        &["run"][..],
        &["watch"],
        &["alerts"],
        &["alerts", "ack"],
        &["restore"],
        &["battery"],
        &["hook", "pre-tool-use"],
        &["hook", "session-start"],
        &["hooks", "install"],
        &["doctor"],
        &["adopt"],
        &["explain"],
        &["completions"],
        &["man"],
    ] {
        let out = std::process::Command::new(bin())
            .args(sub)
            .arg("-h")
            .output()
            .unwrap();
        let text = ok(&out);
        let mut in_lists = false;
        for line in text.lines() {
            if line == "Options:" || line == "Arguments:" {
                in_lists = true;
                continue;
            }
            if line.is_empty() || !line.starts_with("  ") {
                in_lists = line.is_empty() && in_lists;
                continue;
            }
            // An entry is "  -x, --name <V>   help": the flag part, then at least two spaces, then
            // help text (clap's own [possible values: ...] alone is not help).
            let entry = line.trim_start();
            if in_lists
                && (entry.starts_with('-') || entry.starts_with('<') || entry.starts_with('['))
            {
                let help = entry.split_once("  ").map_or("", |(_, h)| h.trim());
                assert!(
                    !help.is_empty() && !help.starts_with("[possible values"),
                    "blank help in `claude-sandbox {} --help`: {line:?}",
                    sub.join(" ")
                );
            }
        }
    }
}

/// The pages a man page lists, as `claude-sandbox man` writes the names (`claude\-sandbox\-run(1)`).
fn listed_pages(roff: &str) -> Vec<String> {
    roff.lines()
        .filter_map(|l| l.strip_suffix("(1)"))
        .filter_map(|l| l.strip_prefix("claude\\-sandbox\\-"))
        .map(|name| name.replace("\\-", "-"))
        .collect()
}

#[test]
fn every_man_page_a_page_lists_exists() {
    // From claude-sandbox(1) down: each listed claude-sandbox-X(1) is printed by `man X...`, with
    // that title; no page lists a help subcommand.
    let mut todo = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let out = std::process::Command::new(bin())
            .arg("man")
            .args(&path)
            .output()
            .unwrap();
        let roff = ok(&out);
        let title = std::iter::once("claude-sandbox")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("-");
        assert!(roff.contains(&format!(".TH {title} 1")), "{path:?}: {roff}");
        seen += 1;
        for name in listed_pages(&roff) {
            assert!(!name.ends_with("help"), "{title} lists {name}(1)");
            let prefix = path.join("-");
            let rest = if prefix.is_empty() {
                name.as_str()
            } else {
                name.strip_prefix(&format!("{prefix}-"))
                    .unwrap_or_else(|| panic!("{title} lists {name}"))
            };
            let mut next = path.clone();
            next.push(rest.to_string());
            todo.push(next);
        }
    }
    assert!(seen > 12, "only {seen} pages");
    let out = std::process::Command::new(bin())
        .args(["man", "no-such-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
