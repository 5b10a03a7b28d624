//! `claude-sandbox man [COMMAND...]`: the man pages (roff), generated from the argument definitions:
//! claude-sandbox(1), and claude-sandbox-COMMAND(1) (claude-sandbox-cache-ls(1), ...) for each
//! subcommand a page lists. The installer writes every one of them.

use clap::CommandFactory;

pub(super) fn exec(path: &[String]) -> crate::Result<i32> {
    // The pages list no `help` subcommand: `claude-sandbox help X` is `--help`, which has no page.
    let mut page = without_help(crate::cli::Cli::command());
    page.build();
    for (depth, name) in path.iter().enumerate() {
        let Some(sub) = page
            .get_subcommands()
            .find(|s| s.get_name() == name && !s.is_hide_set())
        else {
            let known: Vec<&str> = page
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(clap::Command::get_name)
                .collect();
            return Err(crate::Error::Usage(format!(
                "man: `{}` has no subcommand {name:?} (it has: {})",
                display(&path[..depth]),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        // The page's title and synopsis name the whole command, as the page above lists it (clap
        // takes a static name; this process prints one page and exits).
        let title: &'static str =
            Box::leak(display(&path[..=depth]).replace(' ', "-").into_boxed_str());
        page = sub.clone().name(title).bin_name(display(&path[..=depth]));
    }
    match clap_mangen::Man::new(page).render(&mut std::io::stdout().lock()) {
        // `claude-sandbox man | head`: the reader has what it wanted.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(crate::Error::io("writing the man page", e)),
        Ok(()) => Ok(0),
    }
}

fn display(path: &[String]) -> String {
    std::iter::once("claude-sandbox")
        .chain(path.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

fn without_help(cmd: clap::Command) -> clap::Command {
    cmd.disable_help_subcommand(true)
        .mut_subcommands(without_help)
}
