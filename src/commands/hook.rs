//! `claude-sandbox hook pre-tool-use|session-start --host H`: called by an agent runtime. Denies
//! with a reason, or prints nothing (no opinion); exit 2 blocks when the payload cannot be read.

use crate::cli::HookEvent;

pub(super) fn exec(event: &HookEvent, env: &crate::host::HostEnv) -> i32 {
    match *event {
        HookEvent::SessionStart { host } => {
            println!("{}", crate::agent_hooks::session_start(host));
            0
        }
        HookEvent::PreToolUse { host } => {
            let mut input = String::new();
            if std::io::Read::read_to_string(&mut std::io::stdin(), &mut input).is_err() {
                eprintln!("claude-sandbox hook: cannot read stdin; blocking");
                return 2;
            }
            let home = env.home().unwrap_or_default();
            match crate::agent_hooks::pre_tool_use(host, &input, &home) {
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
