//! The gate for everything that crosses from the jail's world back into the human's: git config
//! keys of both git copies, `~/.claude.json`'s keys, the agents' credentials files. One pure judge
//! per kind of item, each answering with what the human's tools will *do* with it.
//!
//! Guards against trust decided by name and place: a list of carried keys, a list of state files
//! and a list of guarded JSON keys let through `branch.main.pushRemote = ../x.git` (the next push
//! runs that repository's hook), `auth.json` of another account (the human's agent then works in
//! the attacker's account), and `env` in `~/.claude.json` (the human's Claude Code exports it:
//! `NODE_OPTIONS`). Only *data* comes back by itself; anything that names a program, a place or an
//! account, or is instructions, is **held** (`crate::held`): kept aside, alerted, applied only when
//! the human accepts it in `claude-sandbox review`. Nothing here does I/O: the callers read both
//! sides and carry out the verdict.

pub(crate) mod claude_json;
pub(crate) mod git;
pub(crate) mod identity;

use serde::{Deserialize, Serialize};

/// What the human's tools would do with an item that crosses back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Consequence {
    /// Nothing but read it as data: it comes back by itself.
    Data,
    /// Run it, or run something it names (an fsmonitor, an MCP server, an environment variable
    /// such as `NODE_OPTIONS`, a key git does not say it only reads).
    Program,
    /// Go to a place it names: a host to push to, a local repository whose hooks run, a URL to
    /// fetch configuration from.
    Place,
    /// Log in as the account it names.
    Identity,
    /// Take it as instructions: a transcript resumed, a memory loaded.
    Instructions,
}

impl Consequence {
    /// How the review and the alerts name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Consequence::Data => "data",
            Consequence::Program => "names a program",
            Consequence::Place => "names a path or host",
            Consequence::Identity => "identity",
            Consequence::Instructions => "instructions",
        }
    }
}

/// The judge's answer for one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub consequence: Consequence,
    /// Why, in a sentence for the human (what their tool would do).
    pub why: String,
}

impl Verdict {
    pub(crate) fn data() -> Verdict {
        Verdict {
            consequence: Consequence::Data,
            why: String::new(),
        }
    }

    pub(crate) fn held(consequence: Consequence, why: impl Into<String>) -> Verdict {
        Verdict {
            consequence,
            why: why.into(),
        }
    }

    /// Whether it comes back by itself.
    pub(crate) fn flows(&self) -> bool {
        self.consequence == Consequence::Data
    }
}
