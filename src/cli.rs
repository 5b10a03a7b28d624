//! Command-line interface: argument parsing, logging setup, and the mapping of errors to exit codes.

use crate::error::EXIT_USAGE;
use crate::jail::launch::{self, RunOptions};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "claude-sandbox",
    version,
    about = "Run an AI coding agent in a jail that seals every entry point"
)]
pub struct Cli {
    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run COMMAND in the jail and exit with its status.
    ///
    /// Exit status: the command's; 128+N if it died of signal N; 125 if the jail could not be set up;
    /// 126 if COMMAND cannot be executed; 127 if it is not found; 2 for usage or configuration errors.
    Run {
        /// The workspace (writable); default: the git top level of the current directory, else it.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// A configuration file used instead of ~/.config/claude-sandbox/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print the exact bwrap argv (one shell-quoted argument per line) and exit.
        #[arg(long)]
        dry_run: bool,
        /// The command and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<OsString>,
    },
    /// Explain the policy for this workspace and user: writable, read-only, masked, hidden, watched.
    Explain {
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && rustix::termios::isatty(std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .without_time()
        .with_target(false)
        .try_init();
}

/// Parse arguments, run, and return the process exit status.
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::jail::exec::SUBCOMMAND)
    {
        return crate::jail::exec::main(&args[2..]);
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    init_logging(cli.verbose);
    let result = match cli.command {
        Command::Run {
            workspace,
            config,
            dry_run,
            command,
        } => launch::run(&RunOptions {
            workspace,
            config,
            dry_run,
            command,
        }),
        Command::Explain {
            workspace,
            config,
            json,
        } => crate::explain::explain(
            &RunOptions {
                workspace,
                config,
                dry_run: true,
                command: Vec::new(),
            },
            json,
        )
        .map(|_| 0),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("claude-sandbox: {e}");
            e.exit_code()
        }
    }
}
