//! The harness of the real agents' tests: one agent as installed for this run (its version and
//! channel, found on the pinned or the latest path), a failure named by agent, and what the tests
//! compare (top-level JSON keys, a directory's names with times and ids masked).

use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;

/// The agents' directories first (`CLAUDE_SANDBOX_AGENTS_BIN`: CI's pinned install), then the
/// usual places npm puts them.
pub(crate) fn agents_path(local_bin: &Path) -> String {
    let pinned = std::env::var("CLAUDE_SANDBOX_AGENTS_BIN")
        .map(|d| format!("{d}:"))
        .unwrap_or_default();
    format!(
        "{}:{pinned}/usr/local/bin:/usr/bin:/bin",
        local_bin.display()
    )
}

/// One real agent as installed for this run.
pub(crate) struct Agent {
    pub(crate) program: &'static str,
    /// The first line of `PROGRAM --version`, as the agent says it.
    pub(crate) version: String,
    /// Where CI installed it from (`CLAUDE_SANDBOX_AGENTS_CHANNEL`: `pinned` or `latest`).
    pub(crate) channel: String,
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.program, self.version, self.channel)
    }
}

impl Agent {
    pub(crate) fn find(program: &'static str) -> Agent {
        let path = agents_path(Path::new("/nonexistent"));
        // A home of its own: `--version` writes state too (caches, a config directory).
        let home = tempfile::Builder::new()
            .prefix("cs-agent-version-")
            .tempdir_in(test_tmp())
            .expect("tempdir");
        let out = std::process::Command::new(program)
            .arg("--version")
            .env("PATH", &path)
            .env("HOME", home.path())
            .stdin(std::process::Stdio::null())
            .output();
        let version = match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
            _ => panic!(
                "\n*** {program} is not installed (PATH={path}): npm install -g $(grep -v '^#' .ci/agents-pinned) ***\n"
            ),
        };
        let channel = std::env::var("CLAUDE_SANDBOX_AGENTS_CHANNEL")
            .unwrap_or_else(|_| "as installed".into());
        Agent {
            program,
            version,
            channel,
        }
    }

    /// The agent with `args`, outside any jail, in the fixture's home and workspace: what this
    /// release does on its own.
    pub(crate) fn bare(&self, f: &Fixture, args: &[&str]) -> std::process::Output {
        std::process::Command::new(self.program)
            .args(args)
            .current_dir(&f.ws)
            .env_clear()
            .envs(f.env())
            .env("PATH", agents_path(&f.home.join(".local/bin")))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }
}

/// Runs `test` with the agent `program`; a failure anywhere in it names the agent, its version
/// and its channel.
pub(crate) fn agent_test(
    program: &'static str,
    test: impl FnOnce(&Agent) + std::panic::UnwindSafe,
) {
    let agent = Agent::find(program);
    let label = agent.to_string();
    if let Err(e) = std::panic::catch_unwind(move || test(&agent)) {
        let msg = e
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| e.downcast_ref::<&str>().copied())
            .unwrap_or("(a panic without a message)");
        panic!("\n*** {label}: {msg}\n");
    }
}

/// PATH for the agents: the fixture's plus wherever npm put them.
pub(crate) fn with_agents(f: &Fixture, args: &[&str]) -> std::process::Output {
    f.cmd(args)
        .env("PATH", agents_path(&f.home.join(".local/bin")))
        .output()
        .unwrap()
}

pub(crate) fn text(o: &std::process::Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// The top-level keys of a JSON object file.
pub(crate) fn json_keys(path: &Path) -> BTreeSet<String> {
    let v: serde_json::Value = serde_json::from_slice(
        &std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    v.as_object()
        .unwrap_or_else(|| panic!("{}: not an object", path.display()))
        .keys()
        .cloned()
        .collect()
}

/// The names under `dir` down to `depth` levels, relative, with the fixture's root (which each
/// fixture has its own of, also inside names the agent derives from paths) written `ROOT`, and
/// the parts of a name that carry a time or an id (backups, telemetry files) written `#`.
pub(crate) fn tree(dir: &Path, depth: usize, root: &Path) -> BTreeSet<String> {
    let encoded: String = root
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    walkdir::WalkDir::new(dir)
        .min_depth(1)
        .max_depth(depth)
        .into_iter()
        .flatten()
        .map(|e| {
            let rel = e.path().strip_prefix(dir).unwrap().to_string_lossy();
            let rel = rel
                .replace(&*root.to_string_lossy(), "ROOT")
                .replace(&encoded, "ROOT");
            let (parent, name) = rel.rsplit_once('/').map_or(("", &*rel), |(p, n)| (p, n));
            let name = if name.contains("ROOT") {
                name.to_string()
            } else {
                name.split('.')
                    .map(|part| {
                        if part.contains(|c: char| c.is_ascii_digit()) {
                            "#"
                        } else {
                            part
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            };
            let slash = if e.file_type().is_dir() { "/" } else { "" };
            if parent.is_empty() {
                format!("{name}{slash}")
            } else {
                format!("{parent}/{name}{slash}")
            }
        })
        .collect()
}
