//! Secrets hidden at the filesystem level: defaults, configured paths and globs, the agents' own
//! credentials untouched, and a matching file created during the session reported.

use crate::common::*;

#[test]
fn credentials_are_hidden_and_the_agents_own_stay_readable() {
    let f = Fixture::new();
    let w = |rel: &str, text: &str| {
        let p = f.home.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w(".aws/credentials", "AKIA-SECRET\n");
    w(".ssh/id_ed25519", "PRIVATE-KEY\n");
    w(".ssh/id_ed25519.pub", "ssh-ed25519 PUBLIC\n");
    w(".ssh/known_hosts", "host key\n");
    w(".ssh/config", "Host x\n  IdentityFile ~/.ssh/github\n");
    w(
        ".ssh/github",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nODD-NAME-KEY\n-----END OPENSSH PRIVATE KEY-----\n",
    );
    w(
        ".ssh/keys/work",
        "-----BEGIN EC PRIVATE KEY-----\nNESTED-KEY\n-----END EC PRIVATE KEY-----\n",
    );
    w(".git-credentials", "https://user:TOKEN@example.invalid\n");
    w(".config/gh/hosts.yml", "oauth_token: GH-TOKEN\n");
    w(
        ".claude/.credentials.json",
        "{\"claudeAiOauth\":\"AGENT-TOKEN\"}\n",
    );
    let out = ok(&f.jail(
        "cat ~/.aws/credentials ~/.ssh/id_ed25519 ~/.ssh/github ~/.ssh/keys/work ~/.git-credentials ~/.config/gh/hosts.yml 2>/dev/null; ls ~/.aws | wc -l; \
         cat ~/.ssh/id_ed25519.pub ~/.ssh/known_hosts ~/.ssh/config ~/.claude/.credentials.json",
    ));
    for secret in [
        "AKIA-SECRET",
        "PRIVATE-KEY",
        "ODD-NAME-KEY",
        "NESTED-KEY",
        "TOKEN@",
        "GH-TOKEN",
    ] {
        assert!(
            !out.contains(secret),
            "{secret} readable in the jail:\n{out}"
        );
    }
    for visible in [
        "ssh-ed25519 PUBLIC",
        "host key",
        "IdentityFile",
        "AGENT-TOKEN",
    ] {
        assert!(
            out.contains(visible),
            "{visible} should stay readable:\n{out}"
        );
    }
    assert!(
        out.lines().any(|l| l.trim() == "0"),
        "~/.aws is an empty directory inside:\n{out}"
    );
    let explain = ok(&f.cmd(["explain", "--full"]).output().unwrap());
    assert!(
        explain.contains(".aws") && explain.contains("hidden:"),
        "{explain}"
    );
}

#[test]
fn configured_hidden_paths_and_globs_and_reveal() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("svc/conf")).unwrap();
    std::fs::write(f.ws.join(".env"), "ROOT-SECRET\n").unwrap();
    std::fs::write(f.ws.join("svc/.env.local"), "NESTED-SECRET\n").unwrap();
    std::fs::write(f.ws.join("svc/conf/tls.pem"), "PEM-SECRET\n").unwrap();
    std::fs::write(f.ws.join("svc/app.env.example"), "EXAMPLE\n").unwrap();
    std::fs::create_dir_all(f.home.join(".aws")).unwrap();
    std::fs::write(f.home.join(".aws/config"), "REVEALED\n").unwrap();
    std::fs::write(
        f.ws.join(".claude-sandbox.toml"),
        "hidden = [\"**/.env*\", \"**/*.pem\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(f.home.join(".config/claude-sandbox")).unwrap();
    std::fs::write(
        f.home.join(".config/claude-sandbox/config.toml"),
        "reveal = [\"~/.aws\"]\n",
    )
    .unwrap();
    let script = "cat .env svc/.env.local svc/conf/tls.pem 2>/dev/null; cat svc/app.env.example ~/.aws/config; \
                  echo LATE-SECRET > svc/.env.production";
    let out = ok(&f.jail(script));
    for secret in ["ROOT-SECRET", "NESTED-SECRET", "PEM-SECRET"] {
        assert!(!out.contains(secret), "{secret} readable:\n{out}");
    }
    assert!(out.contains("EXAMPLE") && out.contains("REVEALED"), "{out}");
    // A file matching a hidden glob made during the session was readable in it: reported.
    let alerts = stdout(&f.cmd(["alerts", "--json"]).output().unwrap());
    assert!(
        alerts.contains("secret-visible") && alerts.contains(".env.production"),
        "{alerts}"
    );
    // `reveal` loosens, so a workspace file may not use it.
    std::fs::write(f.ws.join(".claude-sandbox.toml"), "reveal = [\"~/.ssh\"]\n").unwrap();
    let out = f.jail("true");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("`reveal` loosens"),
        "{}",
        stderr(&out)
    );
}
