//! What an allowed `.envrc` includes, followed at launch (issue 31 item 2): the shell code it
//! sources is sealed like the `.envrc`, a `.env` it exports is held when the session changed it
//! (yours put back), a directory it puts on PATH is watched: a planted `bin/git` is quarantined.
//! Real bwrap, real inotify, real files.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;

fn write(f: &Fixture, rel: &str, text: &str) {
    let p = f.ws.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn files_an_envrc_sources_are_sealed_existing_or_not() {
    let f = Fixture::new();
    write(
        &f,
        ".envrc",
        "source_env lib/env.sh\nsource_env_if_exists .envrc.local\n",
    );
    write(&f, "lib/env.sh", "export A=1\n");
    write(&f, "sub/.envrc", "source_up\nsource_env ${PWD}/../tools\n");
    std::fs::create_dir_all(f.ws.join("tools")).unwrap();
    let before = f.snapshot();
    // Each line that succeeds is an escape; the last ones are everyday work that must go on.
    let out = f.jail(
        "echo 'id' >> lib/env.sh && echo ESCAPED-sourced; \
         echo 'id' > .envrc.local && echo ESCAPED-missing; \
         echo 'id' > tools/.envrc && echo ESCAPED-dir; \
         echo x > lib/other.sh && echo WORKS-beside; rm lib/other.sh; \
         echo x > sub/notes.txt && echo WORKS-sub; rm sub/notes.txt",
    );
    let so = stdout(&out);
    assert!(!so.contains("ESCAPED"), "{so}\n{}", stderr(&out));
    assert!(
        so.contains("WORKS-beside") && so.contains("WORKS-sub"),
        "{so}\n{}",
        stderr(&out)
    );
    assert_same(&before, &f.snapshot(), "a sourced file changed or appeared");
}

#[test]
fn a_dotenv_file_changed_or_made_in_the_session_is_held_and_yours_is_back() {
    let f = Fixture::new();
    write(&f, ".envrc", "dotenv\ndotenv_if_exists config/dev.env\n");
    write(&f, ".env", "A=1\n");
    let planted =
        "GIT_CONFIG_COUNT=1\nGIT_CONFIG_KEY_0=core.fsmonitor\nGIT_CONFIG_VALUE_0=/tmp/x\n";
    let out = f.jail(&format!(
        "printf '{}' >> .env && mkdir -p config && echo B=2 > config/dev.env && cat .env && echo WORKED",
        planted.replace('\n', "\\n")
    ));
    let so = stdout(&out);
    assert!(
        so.contains("WORKED") && so.contains("GIT_CONFIG_COUNT"),
        "{so}\n{}",
        stderr(&out)
    );
    let env = f.ws.join(".env");
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        "A=1\n",
        "{}",
        stderr(&out)
    );
    assert!(
        !f.ws.join("config/dev.env").exists(),
        "a new one left in place"
    );
    let items: Vec<serde_json::Value> =
        serde_json::from_slice(&f.cmd(["review", "--json"]).output().unwrap().stdout).unwrap();
    assert_eq!(items.len(), 2, "{items:#?}");
    let id = items
        .iter()
        .find(|i| i["target"] == env.to_str().unwrap())
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("{items:#?}"));
    let accepted = f.cmd(["review", "accept", id]).output().unwrap();
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert_eq!(
        std::fs::read_to_string(&env).unwrap(),
        format!("A=1\n{planted}")
    );
    // A session that leaves it alone holds nothing.
    let out = f.jail("cat .env >/dev/null && echo READ");
    assert!(stdout(&out).contains("READ"), "{}", stderr(&out));
    assert_eq!(held_count(&f), 1, "only the one not decided yet");
}

#[test]
fn a_directory_an_envrc_puts_on_path_is_watched_and_a_planted_git_is_quarantined() {
    let f = Fixture::new();
    write(&f, ".envrc", "PATH_add bin\n");
    write(&f, "bin/.keep", "");
    write(&f, "sub/.envrc", "export PATH=$PWD/tools:$PATH\n");
    std::fs::write(f.root.join("evil"), "#!/bin/sh\necho evil\n").unwrap();
    std::fs::set_permissions(f.root.join("evil"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let evil = f.root.join("evil").display().to_string();
    // `bin/` exists at launch, `sub/tools/` is made by the session.
    let out = f.jail(&format!(
        "cp {evil} bin/git; mkdir -p sub/tools && cp {evil} sub/tools/ls; \
         printf '#!/bin/sh\\n' > bin/my-task-script && chmod +x bin/my-task-script; sleep 0.5; echo DONE"
    ));
    assert!(stdout(&out).contains("DONE"), "{}", stderr(&out));
    for planted in ["bin/git", "sub/tools/ls"] {
        assert!(
            std::fs::symlink_metadata(f.ws.join(planted)).is_err(),
            "{planted} left where the human's direnv shell finds it first:\n{}",
            stderr(&out)
        );
    }
    assert!(
        f.ws.join("bin/my-task-script").exists(),
        "a script that shadows nothing is the work"
    );
    let alerts = f.cmd(["alerts", "--json"]).output().unwrap();
    let text = String::from_utf8_lossy(&alerts.stdout);
    assert!(text.contains("path-shadow"), "{text}");
}

/// Putting yours back replaces the name, never writes through it: a `.env` the session made a hard
/// link to another file (`README`) leaves that file as it was.
#[test]
fn putting_a_dotenv_back_never_writes_through_a_hard_link() {
    let f = Fixture::new();
    write(&f, ".envrc", "dotenv\n");
    write(&f, ".env", "A=1\n");
    let out = f.jail("rm .env && ln README .env && echo LINKED");
    assert!(stdout(&out).contains("LINKED"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(f.ws.join("README")).unwrap(),
        "hello\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(f.ws.join(".env")).unwrap(), "A=1\n");
    assert_eq!(held_count(&f), 1);
}

/// A `mise.toml`'s `[env]` directives are followed the same way: `_.source` sealed, `_.file` held
/// when changed, `_.path` watched.
#[test]
fn what_a_mise_toml_loads_on_cd_is_followed_as_an_envrcs_is() {
    let f = Fixture::new();
    write(
        &f,
        "mise.toml",
        "[env]\n_.source = './env.sh'\n_.file = '.env.mise'\n_.path = ['{{config_root}}/tools']\n",
    );
    write(&f, "env.sh", "export A=1\n");
    write(&f, ".env.mise", "A=1\n");
    std::fs::write(f.root.join("evil"), "#!/bin/sh\necho evil\n").unwrap();
    std::fs::set_permissions(f.root.join("evil"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = f.jail(&format!(
        "echo id >> env.sh && echo ESCAPED; echo B=2 >> .env.mise && echo EDITED; \
         mkdir -p tools && cp {} tools/git; sleep 0.5",
        f.root.join("evil").display()
    ));
    let (so, se) = (stdout(&out), stderr(&out));
    assert!(
        !so.contains("ESCAPED") && so.contains("EDITED"),
        "{so}\n{se}"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("env.sh")).unwrap(),
        "export A=1\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join(".env.mise")).unwrap(),
        "A=1\n",
        "{se}"
    );
    assert!(
        std::fs::symlink_metadata(f.ws.join("tools/git")).is_err(),
        "{se}"
    );
    assert_eq!(held_count(&f), 1, "{se}");
}
