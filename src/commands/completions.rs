//! `claude-sandbox completions SHELL`: the completion script, generated from the same argument
//! definitions `claude-sandbox` parses, so it cannot drift from the real options. The installer
//! writes them into PREFIX/share.

use clap::CommandFactory;

pub(super) fn exec(shell: clap_complete::Shell) -> i32 {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "claude-sandbox", &mut std::io::stdout());
    0
}
