//! The CLI verbs' bodies, one module each (cargo's layout): `cli` parses the arguments (its clap
//! definitions are the only clap in the crate), `exec` hands each verb its values, and the verb
//! calls the domain modules, prints results on stdout, and returns the exit status.
//!
//! Guards against a verb's behaviour hiding in the argument parser, and domain types shaped by the
//! command line: the domain modules know nothing of clap (`cli` maps its value enums onto them).

mod adopt;
mod alerts;
mod allow;
mod audit;
mod battery;
mod cache;
mod completions;
mod doctor;
mod explain;
mod hook;
mod hooks;
mod man;
mod restore;
mod review;
mod run;
mod watch;

use crate::cli::Command;
use crate::host::HostEnv;

/// Run `command` on `host`; the exit status.
pub(crate) fn exec(command: Command, host: &HostEnv) -> crate::Result<i32> {
    match command {
        Command::Run {
            workspace,
            config,
            dry_run,
            network,
            allow_domain,
            writable,
            command,
        } => run::exec(
            &crate::jail::launch::RunOptions {
                workspace,
                config,
                dry_run,
                network: network.map(Into::into),
                allow_domains: allow_domain,
                writable,
                command,
            },
            host,
        ),
        Command::Watch { workspace } => watch::exec(workspace, host),
        Command::Alerts {
            action,
            all,
            json,
            prompt,
        } => alerts::exec(action, all, json, prompt, host),
        Command::Review { action, json } => review::exec(action, json, host),
        Command::Restore { id, force } => restore::exec(&id, force, host),
        Command::Battery {
            case,
            json,
            keep,
            unguarded,
            dir,
        } => battery::exec(
            &crate::battery::Options {
                dir,
                case,
                json,
                keep,
                unguarded,
            },
            host,
        ),
        Command::Hook { event } => Ok(hook::exec(&event, host)),
        Command::Hooks { action } => hooks::exec(&action, host),
        Command::Cache { action } => cache::exec(action, host),
        Command::Adopt { name, force, json } => adopt::exec(&name, force, json, host),
        Command::Allow {
            host: name,
            config,
            session,
        } => match session {
            Some(id) => allow::session(&name, &id, host),
            None => allow::exec(&name, config, host),
        },
        Command::Audit { action } => Ok(audit::exec(&action, host)),
        Command::Doctor { json } => Ok(doctor::exec(json, host)),
        Command::Explain {
            full,
            workspace,
            config,
            json,
        } => explain::exec(workspace, config, json, full, host),
        Command::Completions { shell } => Ok(completions::exec(shell)),
        Command::Man { command } => man::exec(&command),
    }
}
