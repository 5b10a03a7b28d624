//! `claude-sandbox allow HOST`: HOST added to `allow` in `[network]` of the user's configuration
//! (`net::allow` edits the text), for the sessions started from then on; the step a denial names.

use crate::error::Error;
use crate::net::allow::{add, Edit};
use std::path::{Path, PathBuf};

pub(super) fn exec(
    host_name: &str,
    config: Option<PathBuf>,
    env: &crate::host::HostEnv,
) -> crate::Result<i32> {
    if env.get(crate::host::IN_JAIL).is_some() {
        return Err(Error::Usage(
            "claude-sandbox allow is for the human, outside the sandbox: in the jail the \
             configuration is read-only (ask the user to run it)"
                .into(),
        ));
    }
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
