//! Shell completions and the man page, generated from the same argument definitions `claude-sandbox`
//! parses, so they cannot drift from the real options. The installer writes them into PREFIX/share.

use clap::CommandFactory;

/// `claude-sandbox completions SHELL`: the completion script on stdout.
pub(crate) fn completions(shell: clap_complete::Shell) -> i32 {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "claude-sandbox", &mut std::io::stdout());
    0
}

/// `claude-sandbox man`: the man page (roff) on stdout.
pub(crate) fn man() -> crate::Result<i32> {
    let page = clap_mangen::Man::new(crate::cli::Cli::command());
    match page.render(&mut std::io::stdout().lock()) {
        // `claude-sandbox man | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(crate::Error::io("writing the man page", e)),
        Ok(()) => Ok(0),
    }
}
