//! `claude-sandbox allow HOST`: HOST added to `allow` in `[network]` of the user's configuration
//! (`net::allow` edits the text), for the sessions started from then on; with `--session`, to the
//! running session's own list instead (`net::proxy::session_allow`), for it alone: the step a
//! denial names.

use crate::error::Error;
use crate::net::allow::{add, Edit};
use std::path::{Path, PathBuf};

pub(super) fn exec(
    host_name: &str,
    config: Option<PathBuf>,
    env: &crate::host::HostEnv,
) -> crate::Result<i32> {
    outside_only(env)?;
    let home = env.home_dir()?;
    let path = config
        .clone()
        .unwrap_or_else(|| crate::config::ConfigPaths::new(&home, &home, env).user);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let entry = crate::net::pattern::normalize(host_name);
    match add(&text, host_name).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))? {
        Edit::Already => println!("{entry} is already allowed in {}", path.display()),
        Edit::Added(new) => {
            write(&path, &new)?;
            println!(
                "allowed {entry} in {}: sessions started from now on reach it (a running one \
                 keeps its list)",
                path.display()
            );
        }
    }
    let opts = crate::jail::launch::RunOptions {
        command: vec!["true".into()],
        config,
        ..Default::default()
    };
    if let Ok((_, c)) = crate::jail::launch::plan_input(&opts, "allow", env) {
        let mode = c.network.mode();
        if mode != crate::net::Mode::Allowlist {
            println!(
                "note: the network mode here is `{}`: the allow list applies in allowlist mode \
                 (run --network allowlist, or mode = \"allowlist\" in [network])",
                format!("{mode:?}").to_ascii_lowercase()
            );
        }
    }
    Ok(0)
}

/// The agent cannot allow itself: refused in the jail, whatever the form; and no one can where the
/// system file locks the policy.
fn outside_only(env: &crate::host::HostEnv) -> crate::Result<()> {
    if env.get(crate::host::IN_JAIL).is_some() {
        return Err(Error::Usage(
            "claude-sandbox allow is for the human, outside the sandbox: in the jail the \
             configuration is read-only (ask the user to run it)"
                .into(),
        ));
    }
    if crate::config::system_only(env)?.system.locked {
        return Err(Error::Usage(crate::config::locked_refusal(
            "claude-sandbox allow",
        )));
    }
    Ok(())
}

/// `allow HOST --session[=ID]`: HOST added to the list of the running allowlist session `id` (or
/// of the only one when `id` is empty); its proxy reads it at its next decision.
pub(super) fn session(host_name: &str, id: &str, env: &crate::host::HostEnv) -> crate::Result<i32> {
    outside_only(env)?;
    crate::net::pattern::Pattern::parse(host_name)
        .map_err(|e| Error::Usage(format!("{host_name:?}: {e}")))?;
    let runtime = crate::runtime_dir::RuntimeDir::new(&crate::runtime_dir::locate(env));
    let running = running_allowlist_sessions(&runtime);
    let chosen =
        if id.is_empty() {
            match running.as_slice() {
                [one] => one.clone(),
                [] => return Err(Error::Usage(
                    "no session in allowlist mode is running for this user: --session applies to \
                     a running one (without it, `claude-sandbox allow HOST` allows it for the \
                     sessions started from now on)"
                        .into(),
                )),
                many => {
                    return Err(Error::Usage(format!(
                    "{} sessions in allowlist mode are running ({}): name one with --session=ID",
                    many.len(),
                    many.join(", ")
                )))
                }
            }
        } else if running.iter().any(|r| r == id) {
            id.to_string()
        } else {
            return Err(Error::Usage(format!(
                "no running session in allowlist mode has the id {id:?} (running: {})",
                if running.is_empty() {
                    "none".to_string()
                } else {
                    running.join(", ")
                }
            )));
        };
    let file = runtime.session(&chosen).network_allow();
    let entry = crate::net::pattern::normalize(host_name);
    let added = crate::net::proxy::session_allow::add(&file, host_name)
        .map_err(|e| Error::io(format!("writing {}", file.display()), e))?;
    if added {
        println!(
            "allowed {entry} for session {chosen} until it ends (the configuration is unchanged: \
             `claude-sandbox allow {entry}` keeps it for later sessions)"
        );
    } else {
        println!("{entry} is already allowed for session {chosen}");
    }
    Ok(0)
}

/// The ids of this user's sessions whose launcher still runs and whose jail has the proxy.
fn running_allowlist_sessions(runtime: &crate::runtime_dir::RuntimeDir) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(runtime.sessions()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = dir
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|id| {
            let net = runtime.session(id).path().join("net");
            net.join(crate::jail::layout::NET_SOCKET).exists()
                && crate::jail::liveness::held_by_id(runtime.root(), id)
        })
        .collect();
    ids.sort();
    ids
}

/// Replace `path` with `text` in one step (a temporary file beside it, renamed), keeping its mode.
fn write(path: &Path, text: &str) -> crate::Result<()> {
    let err = |e| Error::io(format!("writing {}", path.display()), e);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let tmp = path.with_extension("toml.allow-tmp");
    std::fs::write(&tmp, text).map_err(err)?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e)
    })
}
