//! `claude-sandbox alerts [ack IDS|--all] [--all] [--json]`: the alerts, a table or JSON; exit 1
//! while any is unacknowledged. `--prompt` (the shell hook): the ones not shown yet, briefly.

use crate::cli::AlertsAction;
use std::io::Write;

pub(super) fn exec(
    action: Option<AlertsAction>,
    all: bool,
    json: bool,
    prompt: bool,
    host: &crate::host::HostEnv,
) -> crate::Result<i32> {
    let runtime = crate::runtime_dir::ensure(&crate::runtime_dir::locate(host))?;
    let store = crate::alerts::Store::new(&runtime);
    if prompt {
        let fresh = store.take_unshown()?;
        let waiting = if fresh.is_empty() {
            0
        } else {
            crate::review::collect(&runtime).len()
        };
        crate::alerts::print_prompt(
            &fresh,
            waiting,
            host.home().as_deref(),
            &mut std::io::stdout().lock(),
            crate::cli::color_on(std::io::stdout()),
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
            crate::cli::color_on(std::io::stdout()),
        );
    }
    let unacked = contents.unacked().next().is_some();
    Ok(i32::from(unacked))
}
