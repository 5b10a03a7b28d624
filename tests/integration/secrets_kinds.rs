//! Secrets by kind (issue 35): git's credential stores as its config names them, histories and
//! package-manager credentials hidden, `~/.npmrc` seen through a masked view that npm still reads,
//! and secret variables withheld from the jail while the agents' own API keys stay.

use crate::common::*;

/// Write `text` at `rel` under the fixture's home, its directories made.
fn put(f: &Fixture, rel: &str, text: &str) {
    let p = f.home.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn credential_stores_histories_and_registry_logins_are_hidden_from_every_tool() {
    let f = Fixture::new();
    // A store only git's config names (through an include), and git's XDG default.
    let gitconfig = std::fs::read_to_string(f.home.join(".gitconfig")).unwrap();
    std::fs::write(
        f.home.join(".gitconfig"),
        format!("{gitconfig}[include]\n\tpath = ~/.gitconfig.d/creds\n"),
    )
    .unwrap();
    put(
        &f,
        ".gitconfig.d/creds",
        "[credential]\n\thelper = store --file ~/vault/git-store\n",
    );
    put(
        &f,
        "vault/git-store",
        "https://u:STORE-SECRET@git.example\n",
    );
    put(
        &f,
        ".config/git/credentials",
        "https://u:XDG-SECRET@git.example\n",
    );
    put(&f, ".bash_history", "export X=HISTORY-SECRET\n");
    put(&f, ".gem/credentials", ":rubygems_api_key: GEM-SECRET\n");
    put(&f, ".vault-token", "VAULT-SECRET\n");
    put(
        &f,
        ".config/composer/auth.json",
        "{\"github-oauth\":{\"github.com\":\"COMPOSER-SECRET\"}}\n",
    );
    let files = "~/vault/git-store ~/.config/git/credentials ~/.bash_history ~/.gem/credentials \
                 ~/.vault-token ~/.config/composer/auth.json";
    let script = format!(
        "cat {files} 2>&1; \
         for p in {files}; do python3 -c 'import sys; print(open(sys.argv[1]).read())' $p 2>&1; done; \
         ln ~/vault/git-store ./linked 2>&1 && cat ./linked; \
         printf 'protocol=https\\nhost=git.example\\n\\n' | GIT_TERMINAL_PROMPT=0 git credential fill 2>&1; true"
    );
    let out = f.jail(&script);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    for secret in [
        "STORE-SECRET",
        "XDG-SECRET",
        "HISTORY-SECRET",
        "GEM-SECRET",
        "VAULT-SECRET",
        "COMPOSER-SECRET",
    ] {
        assert!(
            !text.contains(secret),
            "{secret} readable in the jail:\n{text}"
        );
    }
    // Outside, the human's files are as they were.
    let store = std::fs::read_to_string(f.home.join("vault/git-store")).unwrap();
    assert!(store.contains("STORE-SECRET"));
}

#[test]
fn npm_reads_its_registry_from_the_masked_npmrc_and_never_the_token() {
    let f = Fixture::new();
    if !tool_or_say(
        "npm_reads_its_registry_from_the_masked_npmrc_and_never_the_token",
        "npm",
        false,
    ) {
        return;
    }
    put(
        &f,
        ".npmrc",
        "registry=http://127.0.0.1:9/npm/\n//127.0.0.1:9/npm/:_authToken=NPM-SECRET-TOKEN\n\
         @corp:registry=http://127.0.0.1:9/corp/\n",
    );
    let out = f.jail(
        "npm config get registry; npm config get @corp:registry; \
         npm config get //127.0.0.1:9/npm/:_authToken 2>&1; npm config list 2>&1; cat ~/.npmrc; \
         node -e 'process.stdout.write(require(\"fs\").readFileSync(process.env.HOME+\"/.npmrc\"))'; \
         echo probe > ~/.npmrc 2>&1; true",
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !text.contains("NPM-SECRET-TOKEN"),
        "the token is readable:\n{text}"
    );
    let mut lines = stdout(&out).lines().map(str::to_string).collect::<Vec<_>>();
    lines.truncate(2);
    assert_eq!(
        lines,
        ["http://127.0.0.1:9/npm/", "http://127.0.0.1:9/corp/"],
        "npm does not see the configured registries:\n{text}"
    );
    assert!(
        text.contains("_authToken=claude-sandbox-masked"),
        "the token's line is there, masked:\n{text}"
    );
    // The human's file is untouched, and the view is gone with the session.
    let npmrc = std::fs::read_to_string(f.home.join(".npmrc")).unwrap();
    assert!(npmrc.contains("NPM-SECRET-TOKEN") && !npmrc.contains("probe"));
    let sessions = f.rt.join("sessions");
    let left: Vec<_> = walkdir::WalkDir::new(&sessions)
        .into_iter()
        .flatten()
        .filter(|e| e.path().components().any(|c| c.as_os_str() == "views"))
        .collect();
    assert!(left.is_empty(), "views left behind: {left:?}");
}

#[test]
fn secret_variables_are_withheld_by_name_and_value_and_the_agents_keys_kept() {
    let f = Fixture::new();
    let gh = format!("ghp_{}", "A1b2".repeat(9));
    let pat = format!("github_pat_{}", "Z".repeat(40));
    let key = format!("sk-ant-api03-{}", "k".repeat(40));
    let out = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "env; tr '\\0' '\\n' </proc/self/environ; \
             for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' <$e; done; \
             python3 -c 'import os; print(sorted(os.environ))'; echo ---; printenv ANTHROPIC_API_KEY",
        ])
        .env("GITHUB_TOKEN", &gh)
        .env("GH_TOKEN", &gh)
        .env("DEPLOY_CONFIG", &pat)
        .env("MY_SERVICE_PASSWORD", "hunter2")
        .env("ANTHROPIC_API_KEY", &key)
        .output()
        .unwrap();
    let (o, e) = (ok(&out), stderr(&out));
    for (name, secret) in [
        ("GITHUB_TOKEN", gh.as_str()),
        ("DEPLOY_CONFIG", pat.as_str()),
        ("MY_SERVICE_PASSWORD", "hunter2"),
    ] {
        assert!(!o.contains(secret), "{name}'s value is in the jail:\n{o}");
        assert!(!o.contains(name), "{name} is in the jail:\n{o}");
        assert!(
            e.contains(name),
            "the session does not say {name} was withheld:\n{e}"
        );
    }
    assert!(
        !e.contains(&gh) && !e.contains(&pat),
        "a value was printed:\n{e}"
    );
    assert!(
        o.trim_end().ends_with(&key),
        "the agent's own key must stay:\n{o}"
    );
    let explain = ok(&f
        .cmd(["explain", "--full"])
        .env("GH_TOKEN", &gh)
        .output()
        .unwrap());
    assert!(
        explain.contains("Withheld as secrets") && explain.contains("GH_TOKEN"),
        "{explain}"
    );
    assert!(!explain.contains(&gh), "{explain}");
}

#[test]
fn your_config_keeps_a_variable_the_rules_withhold_and_the_workspace_cannot() {
    let f = Fixture::new();
    put(
        &f,
        ".config/claude-sandbox/config.toml",
        "reveal_env = [\"BUILD_TOKEN\"]\n",
    );
    let out = f
        .cmd([
            "run",
            "--",
            "bash",
            "-c",
            "printenv BUILD_TOKEN OTHER_TOKEN; true",
        ])
        .env("BUILD_TOKEN", "kept-value")
        .env("OTHER_TOKEN", "withheld-value")
        .output()
        .unwrap();
    let o = ok(&out);
    assert!(
        o.contains("kept-value") && !o.contains("withheld-value"),
        "{o}"
    );
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "reveal_env = [\"OTHER_TOKEN\"]\n",
    )
    .unwrap();
    let out = f.jail("true");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`reveal_env` loosens"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pip_reads_its_index_from_the_masked_pip_conf_without_the_password() {
    if !pip_or_say("pip_reads_its_index_from_the_masked_pip_conf_without_the_password") {
        return;
    }
    let f = Fixture::new();
    put(
        &f,
        ".config/pip/pip.conf",
        "[global]\nindex-url = https://me:PIP-SECRET-PW@pypi.corp.invalid/simple\n",
    );
    let out = f.jail(
        "/usr/bin/python3 -m pip config get global.index-url 2>&1; cat ~/.config/pip/pip.conf",
    );
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        !text.contains("PIP-SECRET-PW"),
        "the password is readable:\n{text}"
    );
    assert_eq!(
        stdout(&out).lines().next(),
        Some("https://me:claude-sandbox-masked@pypi.corp.invalid/simple"),
        "pip does not see its index:\n{text}"
    );
}

/// A private key of the shape `openssl genpkey -algorithm ed25519` writes, marked with `mark`.
fn key(mark: &str) -> String {
    format!("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI{mark}AAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n")
}

#[test]
fn private_keys_anywhere_in_home_and_other_names_of_secrets_are_hidden_at_every_launch() {
    let f = Fixture::new();
    put(&f, "work/infra/deploy.pem", &key("KEYONE"));
    put(&f, "Downloads/notes", &key("KEYTWO"));
    put(&f, "work/infra/README", "PLAIN-README\n");
    put(&f, "work/infra/todo", "nothing yet\n");
    put(
        &f,
        ".aws/credentials",
        "[default]\nsecret = AWS-LINKED-SECRET\n",
    );
    put(&f, ".npmrc", "//r.example/:_authToken=NPM-LINKED-SECRET\n");
    std::fs::create_dir_all(f.home.join("dotfiles")).unwrap();
    std::fs::hard_link(f.home.join(".aws/credentials"), f.home.join("dotfiles/aws")).unwrap();
    let read = "cat ~/work/infra/deploy.pem ~/Downloads/notes ~/work/infra/README ~/dotfiles/* \
                ~/work/infra/second ~/work/infra/todo 2>&1; \
                python3 -c 'import sys; print(open(sys.argv[1]).read())' ~/Downloads/notes 2>&1; \
                grep -r 'PRIVATE KEY' ~ 2>&1; true";
    let leaks = |text: &str| {
        [
            "KEYONE",
            "KEYTWO",
            "KEYTHREE",
            "KEYFOUR",
            "AWS-LINKED",
            "NPM-LINKED",
        ]
        .into_iter()
        .filter(|s| text.contains(s))
        .collect::<Vec<_>>()
    };
    // Older than the racy second: the first launch remembers these directories' listings.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = f.jail(read);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        leaks(&text),
        Vec::<&str>::new(),
        "readable in the jail:\n{text}"
    );
    assert!(
        text.contains("PLAIN-README"),
        "a plain file beside a key stays readable:\n{text}"
    );
    let remembered = f.rt.join("key-scan");
    assert!(
        remembered.is_file(),
        "the listings are remembered in {}",
        remembered.display()
    );
    // Between two launches, in directories whose listings were remembered: a new key, a key
    // written in place into a plain file and a new name of a masked config. The second launch
    // hides them all.
    put(&f, "work/infra/second", &key("KEYTHREE"));
    put(&f, "work/infra/todo", &key("KEYFOUR"));
    std::fs::hard_link(f.home.join(".npmrc"), f.home.join("dotfiles/npmrc")).unwrap();
    let out = f.jail(read);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        leaks(&text),
        Vec::<&str>::new(),
        "readable in the jail:\n{text}"
    );
    // Outside, the human's files are as they were.
    let kept = std::fs::read_to_string(f.home.join("work/infra/second")).unwrap();
    assert!(kept.contains("KEYTHREE"));
}
