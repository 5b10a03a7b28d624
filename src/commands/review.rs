//! `claude-sandbox review [accept IDS | reject IDS | show ID] [--json]`: what the sessions left,
//! decided in one place (`crate::review`).

use crate::cli::ReviewAction;
use std::io::Write;

pub(super) fn exec(
    action: Option<ReviewAction>,
    json: bool,
    host: &crate::host::HostEnv,
) -> crate::Result<i32> {
    let runtime = crate::runtime_dir::ensure(&crate::runtime_dir::locate(host))?;
    let home = host
        .home()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let decide = |ids: &[String], f: fn(&std::path::Path, &str) -> crate::Result<String>| {
        // Each id on its own: one that fails does not stop the others, and the status says so.
        let mut failed = None;
        for id in ids {
            match f(&runtime, id) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("claude-sandbox: {}", crate::escape::visible(&e.to_string()));
                    failed.get_or_insert(e.exit_code());
                }
            }
        }
        Ok(failed.unwrap_or(0))
    };
    match action {
        Some(ReviewAction::Accept { ids }) => decide(&ids, crate::review::accept),
        Some(ReviewAction::Reject { ids }) => decide(&ids, crate::review::reject),
        Some(ReviewAction::Show { id }) => {
            let mut out = std::io::stdout().lock();
            crate::review::show(&runtime, &id, &home, &mut out)?;
            let _ = out.flush();
            Ok(0)
        }
        None => crate::review::interactive_or_list(
            &runtime,
            json,
            &crate::review::Looks {
                home: &home,
                term: host.get_str("TERM"),
                color: crate::cli::color_on(std::io::stdout()),
            },
        ),
    }
}
