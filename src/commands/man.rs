//! `claude-sandbox man`: the man page (roff), generated from the argument definitions.

use clap::CommandFactory;

pub(super) fn exec() -> crate::Result<i32> {
    let page = clap_mangen::Man::new(crate::cli::Cli::command());
    match page.render(&mut std::io::stdout().lock()) {
        // `claude-sandbox man | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(crate::Error::io("writing the man page", e)),
        Ok(()) => Ok(0),
    }
}
