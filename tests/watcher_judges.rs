//! The watcher judges by what the human's next `git` and next shell will do (issue 16): configs git
//! reads that a naive reader would not, with a real jail, real inotify and real git.

mod common;
use common::*;

fn alerts(f: &Fixture) -> Vec<serde_json::Value> {
    let out = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        stderr(&out)
    );
    serde_json::from_slice::<Vec<serde_json::Value>>(&out.stdout).unwrap()
}

/// A new repository whose config starts with a byte-order mark, another whose config has a
/// non-UTF-8 byte before the key, and a third git itself refuses: git runs the first two's
/// `core.fsmonitor` (checked unguarded first), so the watcher must see them; the third is an alert.
#[test]
fn bom_and_non_utf8_configs_in_a_new_repository_are_seen() {
    for mode in ["inotify", "poll"] {
        let f = Fixture::new();
        let marker = f.root.join("pwned");
        let script = format!(
            "set -e\n\
             git init -q bom && printf '\\357\\273\\277[core]\\n\\tfsmonitor = touch {m}\\n' > bom/.git/config\n\
             git init -q latin && printf '[core]\\n\\tx = \\377\\n\\tfsmonitor = touch {m}\\n' >> latin/.git/config\n\
             git init -q broken && printf '[core\\n' >> broken/.git/config\n",
            m = marker.display()
        );
        let mut c = f.cmd(["run", "--", "bash", "-c", &script]);
        if mode == "poll" {
            c.env("CLAUDE_SANDBOX_WATCH", "poll");
        }
        ok(&c.output().unwrap());
        let all = alerts(&f);
        for repo in ["bom", "latin"] {
            let cfg = f.ws.join(repo).join(".git/config");
            let found: Vec<_> = all
                .iter()
                .filter(|a| a["path"].as_str() == cfg.to_str())
                .filter(|a| {
                    a["detail"]
                        .as_str()
                        .unwrap()
                        .contains("core.fsmonitor = touch")
                })
                .collect();
            assert_eq!(found.len(), 1, "[{mode}] {repo}: {all:#?}");
        }
        let broken = f.ws.join("broken/.git/config");
        assert!(
            all.iter().any(|a| a["path"].as_str() == broken.to_str()
                && a["detail"]
                    .as_str()
                    .unwrap()
                    .contains("git refuses to read")),
            "[{mode}] a config git refuses passed silently: {all:#?}"
        );
    }
}
