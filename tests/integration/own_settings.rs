//! The agents' own choices in `$HOME` (issue 33): Gemini CLI's `~/.gemini/settings.json` (the auth
//! method) and Codex's `~/.codex/config.toml` (folder trust) are the jail's own copies, made from
//! yours (`jail::ownfiles`). Each is saved in the jail as the real agent saves it (measured with
//! strace: Gemini CLI 0.61.0 in place with `O_TRUNC`, Codex 0.171.0 by `.tmpXXXXXX` and rename),
//! the next jailed session reads it, yours stays byte for byte what it was, and when you change
//! yours the jail's copy is made anew from it.

use crate::common::*;

fn session(f: &Fixture, seal: Option<&str>, script: &str) -> String {
    let mut c = f.cmd(["run", "--", "bash", "-c", script]);
    if let Some(s) = seal {
        c.env("CLAUDE_SANDBOX_SEAL", s);
    }
    ok(&c.output().unwrap())
}

/// `save` writes `$1` as the agent does; then the next session sees it, yours is unchanged, no
/// alert; then you change yours and the jail's copy is yours again.
fn saved_and_kept(rel: &str, yours: &str, saved: &str, save: &str) {
    // Sealed from outside (the default) and by bwrap alone: the same.
    for seal in [None, Some("bwrap")] {
        let f = Fixture::new();
        let path = f.home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, yours).unwrap();
        let show = format!("cat ~/{rel}");
        assert_eq!(
            session(&f, seal, &show),
            yours,
            "[{seal:?}] starts as yours"
        );
        let out = session(
            &f,
            seal,
            &format!("save() {{ {save}; }}; save '{saved}' && echo saved"),
        );
        assert_eq!(out, "saved\n", "[{seal:?}]");
        assert_eq!(session(&f, seal, &show), saved, "[{seal:?}] kept");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            yours.as_bytes(),
            "[{seal:?}] yours was written"
        );
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left.len(), 1, "[{seal:?}] left in yours: {left:?}");
        let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
        assert_eq!(alerts.trim(), "[]", "[{seal:?}] {alerts}");
        // You change yours: the jail sees yours now (what it saved is dropped).
        let changed = format!("{yours}# changed outside\n");
        std::fs::write(&path, &changed).unwrap();
        assert_eq!(session(&f, seal, &show), changed, "[{seal:?}] made anew");
    }
}

#[test]
fn gemini_saves_its_auth_choice_in_the_jails_own_settings() {
    saved_and_kept(
        ".gemini/settings.json",
        "{\"general\":{\"vimMode\":true}}\n",
        "{\"general\":{\"vimMode\":true},\"security\":{\"auth\":{\"selectedType\":\"gemini-api-key\"}}}\n",
        // In place: `O_WRONLY|O_CREAT|O_TRUNC`, as bash's `>`.
        "printf '%s' \"$1\" > ~/.gemini/settings.json",
    );
}

#[test]
fn codex_saves_trust_in_the_jails_own_config() {
    saved_and_kept(
        ".codex/config.toml",
        "model = \"o3\"\n",
        "model = \"o3\"\n\n[projects.\"/ws\"]\ntrust_level = \"trusted\"\n",
        // A temporary file beside it, renamed over it.
        "t=$(mktemp ~/.codex/.tmpXXXXXX) && printf '%s' \"$1\" > \"$t\" && mv \"$t\" ~/.codex/config.toml",
    );
}

/// Without a file of yours: the jail's copy starts as the placeholder did (`{}`, empty), the save
/// works and is kept, and you still have none afterwards.
#[test]
fn without_a_file_of_yours_the_jails_copy_starts_empty_and_you_get_none() {
    let f = Fixture::new();
    for d in [".gemini", ".codex"] {
        std::fs::create_dir_all(f.home.join(d)).unwrap();
    }
    let out = session(
        &f,
        None,
        "cat ~/.gemini/settings.json; wc -c < ~/.codex/config.toml; \
         echo '{\"a\":1}' > ~/.gemini/settings.json && echo 'x = 1' > ~/.codex/config.toml",
    );
    assert_eq!(out, "{}\n0\n");
    let out = session(&f, None, "cat ~/.gemini/settings.json ~/.codex/config.toml");
    assert_eq!(out, "{\"a\":1}\nx = 1\n");
    assert!(!f.home.join(".gemini/settings.json").exists());
    assert!(!f.home.join(".codex/config.toml").exists());
}
