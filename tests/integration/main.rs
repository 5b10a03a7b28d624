//! Every integration test but the real agents' (`tests/agents.rs`, run on its own by CI), as one
//! binary with a module per part: one build of the fixtures (`tests/common`) and one link instead
//! of one per file. `cargo test --test integration launcher::` runs one part.

mod agent_state;
mod audit;
mod audit_ship;
mod battery;
mod claude_local;
mod cli_texts;
#[path = "../common/mod.rs"]
mod common;
mod concurrent;
mod containers;
mod devices;
mod direnv;
mod disks;
mod entry_points;
mod faults;
mod gitconfig;
mod hardlinks;
mod hooks;
mod inject;
mod installer;
mod installs;
mod kernel;
mod launcher;
mod layers;
mod lifetime;
mod network;
mod network_allow;
mod network_limits;
mod network_loopback;
mod network_session;
mod network_upstream;
mod own_settings;
mod prompt;
mod read_only;
mod review;
mod scale;
mod sealer;
mod secrets;
mod secrets_kinds;
mod session_log;
mod soak;
mod sockets;
mod ssh_agent;
mod statedir;
mod watcher;
mod watcher_judges;
mod watcher_names;
mod worktrees;
