//! Command-line interface: argument parsing, logging setup, and the mapping of errors to exit codes.

use crate::error::EXIT_USAGE;
use crate::jail::launch::{self, RunOptions};
use clap::{Parser, Subcommand};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "claude-sandbox",
    version,
    about = "Run an AI coding agent in a jail that seals every entry point"
)]
pub(crate) struct Cli {
    /// More log output (-v info, -vv debug); `RUST_LOG` overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// Network: host (the container's), allowlist (only allowed names, through a proxy), none.
        #[arg(long, value_name = "MODE", value_enum)]
        network: Option<crate::net::Mode>,
        /// Allow this host name or `*.` pattern in allowlist mode (repeatable).
        #[arg(long = "allow-domain", value_name = "DOMAIN")]
        allow_domain: Vec<String>,
        /// The command and its arguments.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<OsString>,
    },
    /// Watch writable PATH directories and the workspace's repositories in the foreground (outside any
    /// jail), quarantining planted executables and hooks, until SIGINT or SIGTERM.
    Watch {
        /// The workspace whose repositories are watched; default: the git top level of the current
        /// directory, else it.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Show alerts (unacknowledged by default). Exit status: 0 none, 1 unacknowledged alerts, 2 error.
    Alerts {
        #[command(subcommand)]
        action: Option<AlertsAction>,
        /// Include acknowledged alerts.
        #[arg(long)]
        all: bool,
        /// One JSON array of alert objects.
        #[arg(long)]
        json: bool,
        /// For the prompt hook: print alerts not shown yet, briefly, and mark them shown.
        #[arg(long, hide = true)]
        prompt: bool,
    },
    /// Put a quarantined file back where it was, byte for byte.
    Restore {
        /// The quarantine id (see `claude-sandbox alerts`).
        id: String,
        /// If something now occupies the path, swap them (the occupant is quarantined instead).
        #[arg(long)]
        force: bool,
    },
    /// Run the attack battery: real escape attempts through the real launcher and watcher.
    /// Exit status 1 if any case is alerted or MISSED (with --unguarded: if any is not MISSED).
    Battery {
        /// Only the cases whose name matches (`*` wildcards).
        #[arg(long, value_name = "GLOB")]
        case: Option<String>,
        /// One JSON array of {name, class, verdict, `latency_ms`, detail}.
        #[arg(long)]
        json: bool,
        /// Keep each case's workspace and home (printed paths under /var/tmp).
        #[arg(long)]
        keep: bool,
        /// No jail and no watcher: shows that every attack really works.
        #[arg(long)]
        unguarded: bool,
        /// The directory of case files (default: the installed or checked-out battery/).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Agent-runtime hooks (defense in depth): deny writes to sealed entry points and reads of hidden
    /// paths with a reason; otherwise print nothing (no opinion). Never allows.
    Hook {
        #[command(subcommand)]
        event: HookEvent,
    },
    /// Write (or --print) the user-level hook configuration of an agent runtime.
    Hooks {
        #[command(subcommand)]
        action: HooksAction,
    },
    /// The jail's own layers (what the agent wrote to ~/.cache, ~/.npm, ~/.local, ~/.cargo, ...
    /// lives there, never in yours): `ls` shows them, `clear [NAME]` removes them.
    Cache {
        #[command(subcommand)]
        action: CacheAction,
    },
    /// Check what works here and how to fix what does not. Exit 0 when nothing fails, 1 otherwise.
    Doctor {
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Explain the policy for this workspace and user: writable, read-only, masked, hidden, watched.
    /// Short by default; with --verbose every sealed entry point, who runs it, and every mask.
    Explain {
        /// The workspace to explain; default: the git top level of the current directory, else it.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// A configuration file used instead of ~/.config/claude-sandbox/config.toml.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script (the installer puts them where bash, zsh and fish look).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff; `claude-sandbox man | man -l -`).
    Man,
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookEvent {
    /// Read the host's `PreToolUse` (`BeforeTool`, preToolUse...) payload on stdin.
    PreToolUse {
        /// The agent runtime calling (its hook protocol).
        #[arg(long, value_enum)]
        host: crate::hook::Host,
    },
    /// Print the session-start context for the host.
    SessionStart {
        /// The agent runtime calling (its hook protocol).
        #[arg(long, value_enum)]
        host: crate::hook::Host,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HooksAction {
    /// Install the hooks for a runtime into its user-level configuration.
    Install {
        /// The agent runtime to configure.
        #[arg(long, value_enum)]
        runtime: crate::hook::Host,
        /// Print the resulting configuration instead of writing it.
        #[arg(long)]
        print: bool,
    },
}

/// `claude-sandbox cache`: the jail's own cache layers.
#[derive(Debug, Subcommand)]
pub(crate) enum CacheAction {
    /// Where each layer lives and its size.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Remove the jail's layers (all, or the one named: `local` and `cargo` hold what the agent
    /// installed); yours are not touched.
    Clear { name: Option<String> },
}

#[derive(Debug, Subcommand)]
pub(crate) enum AlertsAction {
    /// Acknowledge alerts by id, or all of them.
    Ack {
        /// The alert ids to acknowledge (the first column of `claude-sandbox alerts`).
        ids: Vec<String>,
        /// Acknowledge every alert.
        #[arg(long)]
        all: bool,
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
    // Without -v or RUST_LOG, a session's log lines go to a file, not into the agent's terminal.
    let live = verbose > 0 || std::env::var_os("RUST_LOG").is_some();
    crate::logfile::set_live(live);
    let color = live && color_on(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| crate::logfile::Writer)
        .with_ansi(color)
        .with_target(false);
    // `-vv` is for finding where time goes: each line carries the time since start (seconds).
    let _ = if verbose >= 2 {
        builder
            .with_timer(tracing_subscriber::fmt::time::uptime())
            .try_init()
    } else {
        builder.without_time().try_init()
    };
}

/// Parse arguments, run, and return the process exit status.
#[must_use]
// Until the verbs move to `commands/` (issue 18).
#[allow(clippy::too_many_lines)]
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::jail::exec::SUBCOMMAND)
    {
        return crate::jail::exec::main(&args[2..]);
    }
    if args
        .get(1)
        .is_some_and(|a| a == crate::net::bridge::CONNECT)
    {
        return crate::net::bridge::connect_main(&args[2..]);
    }
    if args.len() == 2 && args[1] == crate::jail::seal::SUBCOMMAND {
        return crate::jail::seal::main();
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
            dry_run, command, ..
        } if !dry_run && crate::jail::nested::inside_this_jail() => {
            crate::jail::nested::exec_directly(&command)
        }
        Command::Run {
            workspace,
            config,
            dry_run,
            network,
            allow_domain,
            command,
        } => launch::run(&RunOptions {
            workspace,
            config,
            dry_run,
            network,
            allow_domains: allow_domain,
            command,
        }),
        Command::Battery {
            case,
            json,
            keep,
            unguarded,
            dir,
        } => crate::battery::run(&crate::battery::Options {
            dir,
            case,
            json,
            keep,
            unguarded,
        }),
        Command::Hook { event } => Ok(hook_command(&event)),
        Command::Completions { shell } => Ok(crate::completions::completions(shell)),
        Command::Man => crate::completions::man(),
        Command::Hooks {
            action: HooksAction::Install { runtime, print },
        } => launch::home_dir().and_then(|home| {
            crate::hook::install(runtime, &home, print).map(|out| {
                print!("{out}");
                0
            })
        }),
        Command::Cache { action } => launch::home_dir().and_then(|home| {
            let store =
                crate::jail::layers::store_dir(&home, &std::env::vars().collect::<Vec<_>>());
            match action {
                CacheAction::Ls { json } => Ok(crate::jail::layers::list(&home, &store, json)),
                CacheAction::Clear { name } => {
                    crate::jail::layers::clear(&store, name.as_deref()).map(|()| 0)
                }
            }
        }),
        Command::Doctor { json } => Ok(crate::doctor::doctor(json)),
        Command::Watch { workspace } => crate::watch::foreground(workspace),
        Command::Alerts {
            action,
            all,
            json,
            prompt,
        } => alerts_command(action, all, json, prompt),
        Command::Restore { id, force } => {
            let runtime = crate::runtime::ensure(&crate::runtime::locate());
            runtime
                .and_then(|rt| crate::quarantine::restore(&rt, &id, force))
                .map(|r| {
                    println!(
                        "restored {} ({})",
                        r.original.display(),
                        r.sha256.as_deref().unwrap_or(&r.kind)
                    );
                    0
                })
        }
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
                ..Default::default()
            },
            json,
            cli.verbose > 0,
        )
        .map(|()| 0),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("claude-sandbox: {e}");
            e.exit_code()
        }
    }
}

/// Colour for this stream: a terminal, and `NO_COLOR` unset or empty (no-color.org).
pub(crate) fn color_on(fd: impl std::os::fd::AsFd) -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && rustix::termios::isatty(fd)
}

fn alerts_command(
    action: Option<AlertsAction>,
    all: bool,
    json: bool,
    prompt: bool,
) -> crate::Result<i32> {
    let runtime = crate::runtime::ensure(&crate::runtime::locate())?;
    let store = crate::alerts::Store::new(&runtime);
    if prompt {
        let fresh = store.take_unshown()?;
        crate::alerts::print_prompt(
            &fresh,
            &mut std::io::stdout().lock(),
            color_on(std::io::stdout()),
        );
        return Ok(0);
    }
    if let Some(AlertsAction::Ack { ids, all: every }) = action {
        let n = match (every, ids.is_empty()) {
            (true, _) => store.ack(None)?,
            (false, false) => store.ack(Some(&ids))?,
            (false, true) => {
                return Err(crate::Error::Usage(
                    "alerts ack: give alert ids or --all".into(),
                ))
            }
        };
        println!("acknowledged {n} alert(s)");
        return Ok(0);
    }
    let contents = store.read();
    for (line, why) in &contents.bad_lines {
        eprintln!("claude-sandbox: alerts.jsonl line {line} is unreadable ({why}); skipped");
    }
    let shown: Vec<&crate::alerts::Alert> = contents
        .alerts
        .iter()
        .filter(|a| all || !contents.acked.contains(&a.id))
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&shown).expect("alerts serialise")
        );
    } else {
        let restored: std::collections::BTreeSet<String> = crate::quarantine::list(&runtime)
            .into_iter()
            .filter(|r| r.restored)
            .map(|r| r.id)
            .collect();
        crate::alerts::print_table(
            &shown,
            &contents.acked,
            &restored,
            &mut out,
            color_on(std::io::stdout()),
        );
    }
    let unacked = contents.unacked().next().is_some();
    Ok(i32::from(unacked))
}

fn hook_command(event: &HookEvent) -> i32 {
    match *event {
        HookEvent::SessionStart { host } => {
            println!("{}", crate::hook::session_start(host));
            0
        }
        HookEvent::PreToolUse { host } => {
            let mut input = String::new();
            if std::io::Read::read_to_string(&mut std::io::stdin(), &mut input).is_err() {
                eprintln!("claude-sandbox hook: cannot read stdin; blocking");
                return 2;
            }
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            match crate::hook::pre_tool_use(host, &input, &home) {
                Ok(Some(deny)) => {
                    println!("{deny}");
                    0
                }
                Ok(None) => 0,
                Err(msg) => {
                    eprintln!("{msg}");
                    2
                }
            }
        }
    }
}
