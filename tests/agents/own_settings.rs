//! The real agents save a choice in the settings file that is the jail's own copy of yours
//! (`jail::ownfiles`): the save works, the next jailed session has it, yours is byte for byte
//! what it was. Driven without a terminal: Gemini CLI saves its auth method when
//! `GEMINI_CLI_USE_COMPUTE_ADC=true` (in place, as its auth dialog does), Codex a feature flag with
//! `codex features enable` (through the same `.tmpXXXXXX` and rename as its folder-trust answer;
//! both measured with strace, docs/runtimes.md).

use crate::common::*;
use crate::harness::*;

/// One agent: yours is `yours`, `save` runs the agent in the workspace, and the jail's copy must
/// then contain `kept` in the next session.
fn saved_and_kept(rel: &str, yours: &str, save: &str, kept: &str) {
    let f = Fixture::new();
    let path = f.home.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, yours).unwrap();
    let script = format!("cd {} && {save}; true", f.ws.display());
    let out = with_agents(&f, &["run", "--", "bash", "-c", &script]);
    assert!(out.status.success(), "{}", text(&out));
    let show = format!("cat ~/{rel}");
    let out = with_agents(&f, &["run", "--", "bash", "-c", &show]);
    let inside = ok(&out);
    assert!(
        inside.contains(kept),
        "the next jailed session does not have the saved choice ({kept}):\n{inside}\n{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        yours.as_bytes(),
        "your {rel} was written"
    );
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert!(!alerts.contains(rel), "{alerts}");
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn gemini_saves_its_auth_choice_in_the_jails_own_settings() {
    agent_test("gemini", |_| {
        saved_and_kept(
            ".gemini/settings.json",
            "{\"general\":{\"vimMode\":true}}\n",
            // It saves the method, then fails to reach the metadata server (no network needed).
            "GEMINI_CLI_USE_COMPUTE_ADC=true GEMINI_CLI_TRUST_WORKSPACE=true \
             timeout 60 gemini -p hello </dev/null >/dev/null 2>&1",
            "compute-default-credentials",
        );
    });
}

#[test]
#[ignore = "needs the real agents (npm): run with --ignored"]
fn codex_saves_a_setting_in_the_jails_own_config() {
    agent_test("codex", |_| {
        saved_and_kept(
            ".codex/config.toml",
            "# mine\nmodel = \"o3\"\n",
            // Whichever feature this release lists first.
            "name=$(codex features list 2>/dev/null | awk 'NR==1{print $1}') && \
             codex features enable \"$name\" </dev/null >/dev/null 2>&1",
            "[features]",
        );
    });
}
