//! What a person reads: `explain` fits a screen by default (everything with --verbose), its JSON
//! has paths and names as strings, and no option's help is blank.

use crate::common::*;

#[test]
fn explain_is_short_by_default_and_complete_with_verbose() {
    let f = Fixture::new();
    let short = ok(&f.cmd(["explain"]).output().unwrap());
    let full = ok(&f.cmd(["explain", "--verbose"]).output().unwrap());
    assert!(short.lines().count() <= 40, "{short}");
    assert!(short.lines().all(|l| l.chars().count() <= 150), "{short}");
    assert!(short.contains("explain --verbose"), "{short}");
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
