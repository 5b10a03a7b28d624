//! The jail: bubblewrap around the agent, with every entry point sealed and every escape hatch masked.
//!
//! - `policy`: the resolved policy (plain data);
//! - `layout`: every path and file descriptor number inside the jail, named once;
//! - `plan`: reads the workspace, `$HOME`, config and sockets into a policy (reads, never writes);
//! - `mounts`: the jail's mounts, in order, from the policy alone (one list for bwrap and the sealer);
//! - `args`: the pure policy → bwrap argv function;
//! - `seccomp`: the TIOCSTI/TIOCLINUX filter;
//! - `liveness`: whether a session's launcher still runs (a lock only it holds);
//! - `placeholders`: stubs for missing entry points, created and removed safely across sessions;
//! - `home`: the session-private `$HOME` and `~/.claude.json`;
//! - `readback`: reading back what the jail may have written, never following it;
//! - `exec`: the first process in the jail, which restores signal defaults and runs the command;
//! - `seal`: the seals, anchors and masks mounted from outside while the jail's first process waits;
//! - `links`: entry points reached through `$HOME`'s symlinks into writable roots;
//! - `sockets`: `~/.ssh`, `~/.gnupg` and `/run` as fixed views (sockets made later stay unseen);
//! - `layers`: caches as the jail's own persistent layers over the human's, read-only ones;
//! - `launch`: `run` itself;
//! - `nested`: `run` inside the jail runs the command directly, and says so;
//! - `detached`: entry points sealed one by one that were replaced outside during the session;
//! - `reseal`: those entry points bound read-only again while the session runs;
//! - `statedir`: the jail's own top level of `~/.claude`, `~/.codex`, `~/.gemini` (allowlisted
//!   directories yours, the rest read-only, allowlisted files copies carried back at the end);
//! - `statesweep`: new names off a nested state directory's allowlist, quarantined at the end;
//! - `worktrees`: worktrees made during the session where only the jail could see them.

pub mod args;
pub(crate) mod detached;
pub(crate) mod devices;
pub mod exec;
pub(crate) mod gitcopy;
pub(crate) mod hardlinks;
pub mod home;
pub mod launch;
pub mod layers;
pub(crate) mod layout;
pub(crate) mod links;
pub mod liveness;
pub(crate) mod local_remotes;
pub(crate) mod mounts;
pub(crate) mod nested;
pub(crate) mod orphans;
pub(crate) mod ownfiles;
pub mod placeholders;
pub mod plan;
pub mod policy;
pub(crate) mod readback;
pub(crate) mod reseal;
pub mod seal;
pub mod seccomp;
pub(crate) mod sockets;
pub(crate) mod statedir;
pub(crate) mod statesweep;
pub(crate) mod worktrees;
