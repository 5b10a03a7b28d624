//! Command-line interface: the argument definitions (the crate's only clap), logging setup, the
//! internal entry points (`__exec`, `__connect`, `__seal`), and the mapping of errors to exit codes.
//! Each verb's body is in `commands/`.

use crate::error::EXIT_USAGE;
use clap::{Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
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
        network: Option<NetworkMode>,
        /// Allow this host name or `*.` pattern in allowlist mode (repeatable).
        #[arg(long = "allow-domain", value_name = "DOMAIN")]
        allow_domain: Vec<String>,
        /// Make this path writable in the jail too (repeatable; as `writable` in your config): the
        /// entry points in it are sealed as in the workspace (a repository's hooks and config).
        #[arg(long = "writable", value_name = "PATH")]
        writable: Vec<PathBuf>,
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
    /// Decide what the sessions left: changes held back for review (git config keys, `~/.claude.json`
    /// keys, credentials of another account), files the watcher quarantined, alerts. On a terminal
    /// an interactive view; otherwise a listing. Exit status: 0 nothing waits, 1 something waits, 2
    /// error.
    Review {
        #[command(subcommand)]
        action: Option<ReviewAction>,
        /// One JSON array of the waiting items.
        #[arg(long)]
        json: bool,
    },
    /// Put a quarantined file back where it was, byte for byte (or apply a held item: `review accept`).
    Restore {
        /// The item's id (see `claude-sandbox review` or `claude-sandbox alerts`).
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
    /// Bring one program the agent installed in the jail's ~/.local/bin, ~/bin, ~/.cargo/bin or
    /// ~/go/bin over to your own, with its package where adopt can tell which it is (a pip console
    /// script's distribution, the npm package a link points into). Refuses, saying why, a name that
    /// would shadow a command on your PATH or replace a file of yours (--force), and what it cannot
    /// bring whole. Exit 0 adopted, 2 refused.
    Adopt {
        /// The program's file name.
        #[arg(value_name = "NAME")]
        name: String,
        /// Adopt it even if it shadows a command on your PATH or replaces a file of yours.
        #[arg(long)]
        force: bool,
        /// One JSON object: {name, from, to, kind, steps, requires}.
        #[arg(long)]
        json: bool,
    },
    /// Allow HOST (a name, a `*.` suffix or an IP address) in allowlist mode for the sessions started
    /// from now on: adds it to `allow` in [network] of ~/.config/claude-sandbox/config.toml, comments
    /// and order kept; with --session, for a running session only, at once, the file untouched. A
    /// denial's alert names both. Exit 0 allowed (or already), 2 not a host pattern, a file it cannot
    /// edit, no such running session, or run inside the jail.
    Allow {
        /// The host name, `*.` suffix or IP address.
        #[arg(value_name = "HOST")]
        host: String,
        /// The configuration file to edit instead of ~/.config/claude-sandbox/config.toml.
        #[arg(long, value_name = "FILE", conflicts_with = "session")]
        config: Option<PathBuf>,
        /// For a running allowlist session only (the only one, or --session=ID), until it ends;
        /// the configuration is not changed.
        #[arg(
            long,
            value_name = "ID",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = ""
        )]
        session: Option<String>,
    },
    /// The audit trail (~/.local/state/claude-sandbox/audit): every launch, alert, quarantine,
    /// decision and session end, hash-chained. `verify` exits 0 when the chain is whole, 1 when a
    /// line was removed, edited, inserted or moved (it names the file and line).
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Check what works here and how to fix what does not. Exit 0 when nothing fails, 1 otherwise.
    Doctor {
        /// JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Explain the policy for this workspace and user: writable, read-only, masked, hidden, watched.
    /// Short by default; with --full every sealed entry point, who runs it, and every mask.
    Explain {
        /// Every sealed entry point, who runs it, and every mask (`-v` only adds log lines).
        #[arg(long)]
        full: bool,
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
    /// Print the man page (roff; `claude-sandbox man | man -l -`), or with COMMAND that command's
    /// page, claude-sandbox-COMMAND(1), as the main page lists it (`man cache ls`:
    /// claude-sandbox-cache-ls(1)); the installer writes them all.
    Man {
        /// A subcommand (run, doctor, cache ls, ...).
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
    },
}

/// `--network MODE`: `net::Mode` as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkMode {
    /// The container's network, as outside the jail (abstract unix sockets reachable too).
    Host,
    /// Own network namespace; egress only through the proxy, to allowed names.
    Allowlist,
    /// Own network namespace with only a loopback.
    None,
}

impl From<NetworkMode> for crate::net::Mode {
    fn from(m: NetworkMode) -> Self {
        match m {
            NetworkMode::Host => Self::Host,
            NetworkMode::Allowlist => Self::Allowlist,
            NetworkMode::None => Self::None,
        }
    }
}

/// `--host H`, `--runtime R`: an agent runtime with hooks, by its name (`runtimes::Hooks`): the
/// values are the runtimes' own, so a runtime with hooks is a value by being one.
#[derive(Debug, Clone, Copy)]
struct HookRuntime;

impl clap::builder::TypedValueParser for HookRuntime {
    type Value = crate::runtimes::Hooks;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Self::Value, clap::Error> {
        let name = value.to_string_lossy();
        crate::runtimes::hooks_named(&name).ok_or_else(|| {
            let mut e = clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd);
            if let Some(arg) = arg {
                e.insert(
                    clap::error::ContextKind::InvalidArg,
                    clap::error::ContextValue::String(arg.to_string()),
                );
            }
            e.insert(
                clap::error::ContextKind::InvalidValue,
                clap::error::ContextValue::String(name.into_owned()),
            );
            let valid = self.possible_values().into_iter().flatten();
            e.insert(
                clap::error::ContextKind::ValidValue,
                clap::error::ContextValue::Strings(valid.map(|v| v.get_name().into()).collect()),
            );
            e
        })
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let mut names: Vec<&'static str> = crate::runtimes::hooks().map(|h| h.name).collect();
        names.sort_unstable();
        Some(Box::new(
            names.into_iter().map(clap::builder::PossibleValue::new),
        ))
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum HookEvent {
    /// Read the host's `PreToolUse` (`BeforeTool`, preToolUse...) payload on stdin.
    PreToolUse {
        /// The agent runtime calling (its hook protocol).
        #[arg(long, value_parser = HookRuntime)]
        host: crate::runtimes::Hooks,
    },
    /// Print the session-start context for the host.
    SessionStart {
        /// The agent runtime calling (its hook protocol).
        #[arg(long, value_parser = HookRuntime)]
        host: crate::runtimes::Hooks,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HooksAction {
    /// Install the hooks for a runtime into its user-level configuration.
    Install {
        /// The agent runtime to configure.
        #[arg(long, value_parser = HookRuntime)]
        runtime: crate::runtimes::Hooks,
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
pub(crate) enum AuditAction {
    /// Check the chain of every file left, oldest first.
    Verify {
        /// One JSON object: {ok, records, `first_seq`, `last_seq`, files, `starts_after_rotation`, error}.
        #[arg(long)]
        json: bool,
    },
    /// Print the audit directory.
    Path,
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

#[derive(Subcommand, Debug)]
pub(crate) enum ReviewAction {
    /// Apply held items to your files as they were shown, restore quarantined files, acknowledge
    /// alerts.
    Accept {
        /// The items' ids (the first column of `claude-sandbox review`).
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Leave held items out for good (they stay in the store), keep quarantined files where they are.
    Reject {
        #[arg(required = true)]
        ids: Vec<String>,
    },
    /// Everything about one item: its diff, or its content.
    Show { id: String },
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
    // No colours: every line goes through the escaping writer (`logfile`), which would show them.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| crate::logfile::Writer)
        .with_ansi(false)
        .with_target(false);
    // `-vv` is for finding where time goes: each line carries the time since start and the CPU
    // time used so far (`Clocks`).
    let _ = if verbose >= 2 {
        builder
            .with_timer(Clocks(std::time::Instant::now()))
            .try_init()
    } else {
        builder.without_time().try_init()
    };
}

/// Logging in a process the launcher executed for itself (`__proxy`): the launcher's level, and
/// its choice of the terminal or the log file.
pub(crate) fn init_process_logging(level: &str, live: bool) {
    crate::logfile::set_live(live);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(level))
        .with_writer(|| crate::logfile::Writer)
        .with_ansi(false)
        .with_target(false)
        .without_time()
        .try_init();
}

/// `-vv`'s timestamp, in milliseconds: the wall time since logging started, then the CPU time the
/// whole process and the logging thread have used since the process started. Where the wall time
/// grows and the CPU time does not, the launch is waiting (on bwrap, a lock, a disk); the process's
/// CPU beside the wall time says whether its threads ran side by side.
struct Clocks(std::time::Instant);

impl tracing_subscriber::fmt::time::FormatTime for Clocks {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        use rustix::time::{clock_gettime, ClockId};
        let ms = |id| {
            let t = clock_gettime(id);
            #[allow(clippy::cast_precision_loss)] // exact far beyond a launch's milliseconds
            let ms = t.tv_sec as f64 * 1e3 + t.tv_nsec as f64 / 1e6;
            ms
        };
        write!(
            w,
            "{:8.2}ms cpu {:.2}/{:.2}ms",
            self.0.elapsed().as_secs_f64() * 1e3,
            ms(ClockId::ProcessCPUTime),
            ms(ClockId::ThreadCPUTime)
        )
    }
}

/// Parse arguments, run, and return the process exit status.
#[must_use]
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::jail::layout::HELPER)
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
    if args.len() == 2 && args[1] == crate::net::proxy::SUBCOMMAND {
        return crate::net::proxy::exec_main();
    }
    if args.len() == 2 && args[1] == "__check-system-config" {
        // installer/install.sh: the policy it wrote reads as a launch would read it.
        return match crate::config::check_system(&crate::host::HostEnv::capture()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                EXIT_USAGE
            }
        };
    }
    if args.len() == 2 && args[1] == crate::ssh_agent::serve::SUBCOMMAND {
        return crate::ssh_agent::serve::exec_main();
    }
    if args.len() == 2 && args[1] == crate::docker::serve::SUBCOMMAND {
        return crate::docker::serve::exec_main();
    }
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { 0 };
        }
    };
    init_logging(cli.verbose);
    let host = crate::host::HostEnv::capture();
    let code = match crate::commands::exec(cli.command, &host) {
        Ok(code) => code,
        Err(e) => {
            crate::logfile::note(&e.to_string());
            e.exit_code()
        }
    };
    // Audit records still queued for the team's pipeline get their bounded wait.
    crate::audit::finish();
    code
}

/// Colour for this stream: a terminal, and `NO_COLOR` unset or empty (no-color.org).
pub(crate) fn color_on(fd: impl std::os::fd::AsFd) -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && rustix::termios::isatty(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::Mode;

    /// Every domain value has its spelling on the command line (the matches are exhaustive both
    /// ways), and `--network` spells a mode as the configuration file does; every runtime with
    /// hooks is a value of `--host` and `--runtime`, by its own name.
    #[test]
    fn every_mode_and_runtime_has_its_command_line_value() {
        let arg_of_mode = |m: Mode| match m {
            Mode::Host => NetworkMode::Host,
            Mode::Allowlist => NetworkMode::Allowlist,
            Mode::None => NetworkMode::None,
        };
        for m in [Mode::Host, Mode::Allowlist, Mode::None] {
            let arg = arg_of_mode(m);
            assert_eq!(Mode::from(arg), m);
            let name = arg.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(Mode::parse(&name), Some(m), "--network {name}");
        }
        for h in crate::runtimes::hooks() {
            let cli =
                Cli::try_parse_from(["claude-sandbox", "hooks", "install", "--runtime", h.name])
                    .unwrap();
            let Command::Hooks {
                action: HooksAction::Install { runtime, .. },
            } = cli.command
            else {
                panic!("hooks install");
            };
            assert_eq!(runtime, h);
        }
        assert!(
            Cli::try_parse_from(["claude-sandbox", "hook", "session-start", "--host", "pi"])
                .is_err()
        );
    }
}
