//! Secrets in the environment, by name and by the shape of the value: which of the launcher's
//! variables the jail goes without.
//!
//! Guards against a token read with `env`, `/proc/self/environ` or a child's environment: a name
//! list misses the next `FOO_TOKEN` and a token exported under an innocent name (`DEPLOY=ghp_…`).
//! A variable is withheld when its name says secret (`*_TOKEN`, `*_SECRET`, `*_PASSWORD`,
//! `*API_KEY*`, …) or when its value holds a token of a known shape anywhere in it (a GitHub, npm,
//! GitLab, Slack, AWS, OpenAI-style key, a PEM private key, a URL with a password). The agents'
//! own API credentials (`runtimes::api_keys`) are kept: the agent cannot work without them.

/// Name parts that say the value is a secret (compared upper-case): a suffix ...
const SECRET_SUFFIXES: &[&str] = &[
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_PASSPHRASE",
    "_CREDENTIALS",
    "_AUTH",
];

/// ... or anywhere in the name.
const SECRET_PARTS: &[&str] = &[
    "API_KEY",
    "APIKEY",
    "SECRET_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "AUTH_TOKEN",
    "SESSION_TOKEN",
];

/// Whole names that are secrets although no part above says so.
const SECRET_NAMES: &[&str] = &["TOKEN", "SECRET", "PASSWORD", "PGPASSWORD", "MYSQL_PWD"];

/// Token prefixes as their issuers print them, with the shortest tail a real one has (so that a
/// word such as `sk-SK` or `npm_config` is not taken for one).
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("ghp_", 30),
    ("gho_", 30),
    ("ghu_", 30),
    ("ghs_", 30),
    ("ghr_", 30),
    ("github_pat_", 30),
    ("glpat-", 20),
    ("npm_", 30),
    ("xoxa-", 10),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("xoxr-", 10),
    ("xoxs-", 10),
    ("sk-", 20),
    ("AIza", 30),
    ("hf_", 30),
    ("pypi-", 50),
];

/// Whether `c` may be part of a token (what the prefixes above are followed by).
fn token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// Whether the name says the value is a secret.
pub(crate) fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || SECRET_PARTS.iter().any(|p| upper.contains(p))
}

/// Whether the value holds a token of a known shape, at the start of a word anywhere in it.
pub(crate) fn secret_value(value: &[u8]) -> bool {
    let has = |needle: &[u8]| value.windows(needle.len()).any(|w| w == needle);
    if has(b"-----BEGIN") && has(b"PRIVATE KEY") {
        return true;
    }
    let word_starts = (0..value.len()).filter(|&i| i == 0 || !token_char(value[i - 1]));
    for i in word_starts {
        let rest = &value[i..];
        for (prefix, tail) in TOKEN_PREFIXES {
            if let Some(after) = rest.strip_prefix(prefix.as_bytes()) {
                if after.iter().take_while(|c| token_char(**c)).count() >= *tail {
                    return true;
                }
            }
        }
        // AWS access key ids: AKIA (long-term) or ASIA (temporary) and 16 upper-case letters or
        // digits.
        if (rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA"))
            && rest.len() >= 20
            && rest[4..20]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            return true;
        }
    }
    url_with_password(value)
}

/// `scheme://user:password@host`: a password in a URL (a database, a registry, a proxy).
fn url_with_password(value: &[u8]) -> bool {
    let text = String::from_utf8_lossy(value);
    text.match_indices("://").any(|(i, _)| {
        let rest = &text[i + 3..];
        let authority = rest.split(['/', ' ', '?', '#']).next().unwrap_or("");
        authority.rsplit_once('@').is_some_and(|(userinfo, _)| {
            userinfo
                .split_once(':')
                .is_some_and(|(_, p)| !p.is_empty() && p != super::views::MASK)
        })
    })
}

/// The names of the variables the jail goes without, in the order found: secret by name or by
/// value, but for those in `keep` (the agents' own credentials). A name that is not UTF-8 cannot be
/// passed to bwrap's `--unsetenv`, so it is withheld by a name bwrap never sees: left out here, and
/// reported by the caller as not covered.
pub(crate) fn withheld<'a>(
    vars: impl Iterator<Item = (&'a std::ffi::OsStr, &'a std::ffi::OsStr)>,
    keep: &[&str],
) -> Vec<String> {
    use std::os::unix::ffi::OsStrExt;
    vars.filter_map(|(k, v)| {
        let name = k.to_str()?;
        // A proxy setting (`https_proxy=http://user:pass@…`) is the jail's only way out in host
        // mode; allowlist mode keeps every one of them outside already (`net::upstream`).
        if name.to_ascii_lowercase().ends_with("_proxy") {
            return None;
        }
        let secret = secret_name(name) || secret_value(v.as_bytes());
        (secret && !keep.contains(&name)).then(|| name.to_string())
    })
    .collect()
}

/// `withheld` with the agents' own credentials kept, and those the configuration reveals
/// (`reveal_env`).
pub(crate) fn withheld_from(env: &crate::host::HostEnv, reveal: &[String]) -> Vec<String> {
    let mut keep: Vec<&str> = crate::runtimes::api_keys().collect();
    keep.extend(reveal.iter().map(String::as_str));
    withheld(env.vars(), &keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn decide(vars: &[(&str, &str)], keep: &[&str]) -> Vec<String> {
        withheld(
            vars.iter().map(|(k, v)| (OsStr::new(k), OsStr::new(v))),
            keep,
        )
    }

    #[test]
    fn names_that_say_secret_are_withheld() {
        for n in [
            "GITHUB_TOKEN",
            "GH_TOKEN",
            "NPM_TOKEN",
            "NODE_AUTH_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "VAULT_TOKEN",
            "DB_PASSWORD",
            "stripe_api_key",
            "SENTRY_AUTH_TOKEN",
            "MY_SERVICE_APIKEY",
            "PGPASSWORD",
            "CI_JOB_SECRET",
            "TWINE_PASSWORD",
        ] {
            assert!(secret_name(n), "{n}");
        }
        for n in [
            "PATH",
            "HOME",
            "TERM",
            "SSH_TTY",
            "PASSWORD_STORE_DIR",
            "KEYBOARD",
            "TOKENIZERS_PARALLELISM",
            "LANG",
            "EDITOR",
        ] {
            assert!(!secret_name(n), "{n}");
        }
    }

    #[test]
    fn values_shaped_like_tokens_are_withheld_whatever_the_name() {
        let gh = format!("ghp_{}", "a1B2".repeat(9));
        let pat = format!("github_pat_{}", "x".repeat(40));
        let npm = format!("npm_{}", "Z9".repeat(18));
        let sk = format!("sk-ant-api03-{}", "q".repeat(40));
        for v in [
            gh.as_str(),
            pat.as_str(),
            npm.as_str(),
            sk.as_str(),
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAIOSFODNN7EXAMPLE",
            "xoxb-1234567890-abcdef",
            "glpat-abcdefghij0123456789",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY-----",
            "postgres://app:hunter2@db:5432/app",
            "https://user:pw@registry.example.com/simple",
        ] {
            assert!(secret_value(v.as_bytes()), "{v}");
        }
        // Inside a longer value, at the start of a word.
        let header = format!("Authorization: Bearer {gh}");
        assert!(secret_value(header.as_bytes()));
    }

    #[test]
    fn ordinary_values_are_kept() {
        for v in [
            "/usr/local/bin:/usr/bin",
            "sk_SK.UTF-8",
            "sk-SK",
            "npm_config_cache",
            "AKIA",
            "xterm-256color",
            "https://registry.npmjs.org/",
            "https://user@example.com/repo.git",
            "-----BEGIN CERTIFICATE-----",
            "task-ghp_short",
            // A prefix inside a word is not a token's start.
            "mask-ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(!secret_value(v.as_bytes()), "{v}");
        }
    }

    #[test]
    fn the_agents_own_credentials_are_kept_and_only_those() {
        let key = format!("sk-ant-api03-{}", "q".repeat(40));
        let gh = format!("ghp_{}", "a".repeat(36));
        let got = decide(
            &[
                ("ANTHROPIC_API_KEY", &key),
                ("OPENAI_API_KEY", &key),
                ("GITHUB_TOKEN", &gh),
                ("DEPLOY", &gh),
                ("PATH", "/usr/bin"),
                ("OTHER_API_KEY", "x"),
                ("HTTPS_PROXY", "http://u:pw@proxy:3128"),
            ],
            &["ANTHROPIC_API_KEY", "OPENAI_API_KEY"],
        );
        assert_eq!(got, ["GITHUB_TOKEN", "DEPLOY", "OTHER_API_KEY"]);
    }

    #[test]
    fn every_agents_keys_come_from_the_runtimes_table() {
        let keep: Vec<&str> = crate::runtimes::api_keys().collect();
        for k in ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"] {
            assert!(keep.contains(&k), "{k}");
            assert!(
                secret_name(k),
                "{k}: kept by the table, not by a weak pattern"
            );
        }
    }
}
