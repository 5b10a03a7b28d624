//! `claude-sandbox audit verify|path`: the audit trail's chain checked, and where it is.

use crate::cli::AuditAction;
use crate::host::HostEnv;
use std::path::PathBuf;

pub(super) fn exec(action: &AuditAction, host: &HostEnv) -> i32 {
    let home = host
        .get(crate::host::HOME)
        .map(PathBuf::from)
        .unwrap_or_default();
    let dir = crate::audit::dir(&home, host);
    match action {
        AuditAction::Path => {
            println!("{}", dir.display());
            0
        }
        AuditAction::Verify { json } => {
            let result = crate::audit::verify(&dir);
            if *json {
                let v = match &result {
                    Ok(v) => serde_json::json!({"ok": true, "records": v.records,
                        "first_seq": v.first_seq, "last_seq": v.last_seq, "files": v.files,
                        "starts_after_rotation": v.starts_after_rotation}),
                    Err(e) => serde_json::json!({"ok": false, "error": e}),
                };
                println!("{v}");
            } else {
                match &result {
                    Ok(v) if v.records == 0 => println!("no records in {}", dir.display()),
                    Ok(v) => println!(
                        "whole: {} records, {} to {}, in {} file(s){}",
                        v.records,
                        v.first_seq,
                        v.last_seq,
                        v.files.len(),
                        if v.starts_after_rotation {
                            " (older files were rotated away: the chain starts after them)"
                        } else {
                            ""
                        }
                    ),
                    Err(e) => println!("BROKEN: {e}"),
                }
            }
            i32::from(result.is_err())
        }
    }
}
