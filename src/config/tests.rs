use super::*;

fn merge(text: &str, scope: Scope) -> Result<Config> {
    let mut c = Config::default();
    c.merge_text(
        text,
        Path::new("/w/f.toml"),
        scope,
        Path::new("/h"),
        Path::new("/w"),
    )?;
    Ok(c)
}

#[test]
fn the_system_file_alone_ships_locks_and_fails_closed() {
    let sys = "locked = true\nfail_closed = true\n[audit]\nsyslog = \"udp:10.0.0.1:514\"\n";
    let c = merge(sys, Scope::System).unwrap();
    assert!(c.system.locked && c.system.fail_closed && !c.audit.is_empty());
    for scope in [Scope::User, Scope::Workspace] {
        for (text, key) in [(sys, "`locked`"), ("[audit]\n", "`[audit]`")] {
            let e = merge(text, scope).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{key} is read only from the system")),
                "{e}"
            );
        }
    }
    let e = merge("[audit]\notlp = \"https://c:4318\"\n", Scope::System).unwrap_err();
    assert!(
        e.to_string().starts_with("/w/f.toml:1: [audit] otlp"),
        "{e}"
    );
}

#[test]
fn a_locked_policy_makes_the_user_file_tighten_only() {
    let mut c = Config::default();
    let (h, w) = (Path::new("/h"), Path::new("/w"));
    c.merge_text(
        "locked = true\n",
        Path::new("/etc/c.toml"),
        Scope::System,
        h,
        w,
    )
    .unwrap();
    for loose in [
        "writable = [\"~/x\"]\n",
        "allow_ssh_agent = true\n",
        "reveal_env = [\"X\"]\n",
        "[network]\nmode = \"host\"\n",
        "[devices]\ngpu = true\n",
    ] {
        let e = c
            .clone()
            .merge_text(loose, Path::new("/u.toml"), Scope::User, h, w);
        let e = e.unwrap_err().to_string();
        assert!(
            e.contains("which the system configuration locks"),
            "{loose}: {e}"
        );
    }
    assert!(c
        .clone()
        .merge_text(
            "read_only = [\"~/x\"]\n[network]\nmode = \"none\"\n",
            Path::new("/u.toml"),
            Scope::User,
            h,
            w
        )
        .is_ok());
}

#[test]
fn workspace_may_tighten() {
    let c = merge(
        "read_only = [\"docs\"]\nmasked = [\"~/x\"]\n",
        Scope::Workspace,
    )
    .unwrap();
    assert_eq!(c.read_only, vec![PathBuf::from("/w/docs")]);
    assert_eq!(c.masked, vec![PathBuf::from("/h/x")]);
}

#[test]
fn workspace_may_not_loosen_and_the_error_names_the_line() {
    let err = merge(
        "read_only = []\n\nwritable = [\"/etc\"]\n",
        Scope::Workspace,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("/w/f.toml:3: `writable` loosens"), "{msg}");
    assert_eq!(err.exit_code(), 2);
    let err = merge("allow_ssh_agent = true\n", Scope::Workspace).unwrap_err();
    assert!(err.to_string().contains(":1: `allow_ssh_agent`"), "{err}");
    assert!(merge("allow_ssh_agent = false\n", Scope::Workspace).is_ok());
    let err = merge("allow_user_namespaces = true\n", Scope::Workspace).unwrap_err();
    assert!(
        err.to_string().contains(":1: `allow_user_namespaces`"),
        "{err}"
    );
    assert!(merge("allow_user_namespaces = true\n", Scope::User).is_ok());
}

#[test]
fn unknown_keys_are_errors_with_a_line() {
    let err = merge("read_only = []\nwriteable = []\n", Scope::User).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("/w/f.toml:2:"), "{msg}");
    assert!(msg.contains("writeable"), "{msg}");
}

#[test]
fn network_workspace_may_only_tighten() {
    let c = merge(
        "[network]\nmode = \"allowlist\"\ndeny = [\"*.example.org\"]\n",
        Scope::Workspace,
    )
    .unwrap();
    assert_eq!(c.network.mode, Some(crate::net::Mode::Allowlist));
    let err = merge(
        "read_only = []\n[network]\nallow = [\"x.com\"]\n",
        Scope::Workspace,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(":2: `network.allow` loosens"),
        "{err}"
    );
    let mut c = Config::default();
    let (ws, home) = (Path::new("/w"), Path::new("/h"));
    c.merge_text(
        "[network]\nmode = \"none\"\n",
        Path::new("/u"),
        Scope::User,
        home,
        ws,
    )
    .unwrap();
    let err = c
        .merge_text(
            "[network]\nmode = \"host\"\n",
            Path::new("/w/f"),
            Scope::Workspace,
            home,
            ws,
        )
        .unwrap_err();
    assert!(err.to_string().contains("`network.mode` loosens"), "{err}");
    let err = merge("[network]\nmode = \"open\"\n", Scope::User).unwrap_err();
    assert!(err.to_string().contains("must be"), "{err}");
    let err = merge("[network]\nallow = [\"http://x\"]\n", Scope::User).unwrap_err();
    assert!(err.to_string().contains("not a host pattern"), "{err}");
    assert!(merge("[network]\nports = []\n", Scope::User).is_err());
}

#[test]
fn ssh_hosts_come_from_the_humans_files_only() {
    let c = merge("[ssh]\nallow = [\"github.com\"]\n", Scope::User).unwrap();
    assert_eq!(c.ssh.allow, ["github.com"]);
    let err = merge(
        "read_only = []\n[ssh]\nallow = [\"x.org\"]\n",
        Scope::Workspace,
    )
    .unwrap_err();
    assert!(err.to_string().contains(":2: `ssh.allow` loosens"), "{err}");
    let err = merge("[ssh]\nallow = [\"*.x.org\"]\n", Scope::User).unwrap_err();
    assert!(err.to_string().contains(":1: [ssh] allow:"), "{err}");
    assert!(merge("[ssh]\nport = 22\n", Scope::User).is_err());
}

#[test]
fn user_may_loosen() {
    let c = merge(
        "writable = [\"~/.m2\"]\nallow_ssh_agent = true\n",
        Scope::User,
    )
    .unwrap();
    assert_eq!(c.writable, vec![PathBuf::from("/h/.m2")]);
    assert!(c.allow_ssh_agent);
}

#[test]
fn only_you_may_keep_a_secret_variable_in_the_jail() {
    let c = merge(
        "reveal_env = [\"GOOGLE_APPLICATION_CREDENTIALS\"]\n",
        Scope::User,
    )
    .unwrap();
    assert_eq!(c.reveal_env, ["GOOGLE_APPLICATION_CREDENTIALS"]);
    let err = merge("reveal_env = [\"GITHUB_TOKEN\"]\n", Scope::Workspace).unwrap_err();
    assert!(
        err.to_string().contains(":1: `reveal_env` loosens"),
        "{err}"
    );
}
