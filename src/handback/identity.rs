//! Whose account a credentials file names: the field each runtime's own code compares when it
//! decides that a login changed (docs/handback.md has the table per runtime).
//!
//! Guards against the human's unjailed agent logged into the attacker's account: a credentials file
//! written in the jail comes back by itself only when it names the same account as the human's; a
//! refreshed token of the same account (the everyday case) does, a new or different account is held
//! for review. Nothing here verifies a token (no key, no network): it reads the claims a token
//! carries, which is enough to tell "the same account" from "another one" for a file the jail wrote
//! — a forged claim can only claim to be the human's account, and then it carries the human's
//! refresh token or it does not work for the attacker.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

/// How a runtime's credentials file is read (`runtimes::StateDir::identity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// Claude Code's `~/.claude/.credentials.json`: `claudeAiOauth.accountUuid` and
    /// `organizationUuid`; each `mcpOAuth` server a login of its own.
    ClaudeCredentials,
    /// Codex's `~/.codex/auth.json`: `tokens.account_id` and the id token's user, or the API key.
    CodexAuth,
    /// Gemini CLI's `~/.gemini/oauth_creds.json`: the id token's `sub`.
    GoogleOauth,
    /// Gemini CLI's `~/.gemini/google_accounts.json`: `active`.
    GoogleAccounts,
    /// `OpenCode`'s `auth.json`: per provider, `accountId`, the key, or a `wellknown` entry (remote
    /// configuration: always held).
    OpenCodeAuth,
    /// A file of tokens per server or per provider with no account field (`mcp-oauth-tokens.json`):
    /// the set of servers and refresh tokens.
    TokensByName,
}

/// What a file says about who it logs in as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Logins {
    /// The accounts, each prefixed with what names it (`account:`, `key:` for a hashed API key).
    pub accounts: BTreeSet<String>,
    /// Hashes of the refresh tokens it holds: a refresh keeps them, so one shared with the human's
    /// file names the same login even where the account field is missing.
    pub refresh: BTreeSet<String>,
    /// It makes the runtime fetch configuration from a place it names (`OpenCode`'s `wellknown`).
    pub remote_config: bool,
}

/// The verdict on a credentials file the jail wrote, against the human's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Same {
    /// The same accounts: it may come back by itself.
    Yes,
    /// Another account, a new one, or one that cannot be told: held, with the reason.
    No(String),
}

fn hash(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    d.iter().take(8).fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// The claims of a JSON web token, unverified (the middle part, base64url).
fn jwt_claims(token: &str) -> Option<Value> {
    let payload = token.split('.').nth(1)?;
    serde_json::from_slice(&base64url(payload)?).ok()
}

/// Decode unpadded or padded base64url (the alphabet of JSON web tokens), or standard base64
/// (`known_hosts` keys and salts: `ssh_agent`).
pub(crate) fn base64url(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    Some(out)
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Read who `bytes` logs in as. `None`: not a JSON object (held: nothing can be told).
// One arm per format, each a few field reads: split, the formats would be read in two places.
#[allow(clippy::too_many_lines)]
pub(crate) fn logins(format: Format, bytes: &[u8]) -> Option<Logins> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    let obj = v.as_object()?;
    let mut l = Logins {
        accounts: BTreeSet::new(),
        refresh: BTreeSet::new(),
        remote_config: false,
    };
    let mut refresh = |t: Option<&str>| {
        if let Some(t) = t {
            l.refresh.insert(hash(t));
        }
    };
    match format {
        Format::ClaudeCredentials => {
            if let Some(o) = v.get("claudeAiOauth") {
                refresh(text(o, &["refreshToken"]));
                if let Some(a) = text(o, &["accountUuid"]) {
                    let org = text(o, &["organizationUuid"]).unwrap_or("");
                    l.accounts.insert(format!("account:{a}/{org}"));
                }
            }
            if let Some(servers) = v.get("mcpOAuth").and_then(Value::as_object) {
                for (name, s) in servers {
                    refresh(text(s, &["refreshToken"]));
                    let url = text(s, &["serverUrl"]).unwrap_or(name);
                    l.accounts.insert(format!("mcp:{url}"));
                }
            }
        }
        Format::CodexAuth => {
            if let Some(key) = text(&v, &["OPENAI_API_KEY"]) {
                l.accounts.insert(format!("key:{}", hash(key)));
            }
            if let Some(t) = v.get("tokens") {
                refresh(text(t, &["refresh_token"]));
                if let Some(a) = text(t, &["account_id"]) {
                    l.accounts.insert(format!("account:{a}"));
                }
                if let Some(claims) = text(t, &["id_token"]).and_then(jwt_claims) {
                    let auth = claims.get("https://api.openai.com/auth");
                    let user = auth
                        .and_then(|a| {
                            text(a, &["chatgpt_user_id"]).or_else(|| text(a, &["user_id"]))
                        })
                        .or_else(|| text(&claims, &["sub"]));
                    if let Some(u) = user {
                        l.accounts.insert(format!("user:{u}"));
                    }
                }
            }
            for k in ["agent_identity", "personal_access_token"] {
                if let Some(t) = text(&v, &[k]) {
                    let id = jwt_claims(t)
                        .and_then(|c| text(&c, &["account_id"]).map(String::from))
                        .unwrap_or_else(|| hash(t));
                    l.accounts.insert(format!("{k}:{id}"));
                }
            }
        }
        Format::GoogleOauth => {
            refresh(text(&v, &["refresh_token"]));
            if let Some(sub) = text(&v, &["id_token"])
                .and_then(jwt_claims)
                .and_then(|c| text(&c, &["sub"]).map(String::from))
            {
                l.accounts.insert(format!("account:{sub}"));
            }
        }
        Format::GoogleAccounts => {
            if let Some(a) = text(&v, &["active"]) {
                l.accounts.insert(format!("account:{a}"));
            }
        }
        Format::OpenCodeAuth => {
            for (provider, e) in obj {
                match text(e, &["type"]) {
                    Some("oauth") => {
                        refresh(text(e, &["refresh"]));
                        if let Some(a) = text(e, &["accountId"]) {
                            l.accounts.insert(format!("{provider}:account:{a}"));
                        } else {
                            l.accounts.insert(format!("{provider}:oauth"));
                        }
                    }
                    Some("api") => {
                        let key = text(e, &["key"]).unwrap_or("");
                        l.accounts.insert(format!("{provider}:key:{}", hash(key)));
                    }
                    Some("wellknown") => {
                        l.remote_config = true;
                        l.accounts.insert(format!("{provider}:wellknown"));
                    }
                    other => {
                        l.accounts
                            .insert(format!("{provider}:{}", other.unwrap_or("unknown")));
                    }
                }
            }
        }
        Format::TokensByName => {
            for (name, e) in obj {
                refresh(text(e, &["refresh_token"]).or_else(|| text(e, &["refreshToken"])));
                l.accounts.insert(format!("server:{name}"));
            }
        }
    }
    Some(l)
}

/// Whether the jail's `jail` names the same logins as the human's `human` (`None`: the human has
/// none: a new login, held).
pub(crate) fn same(format: Format, human: Option<&[u8]>, jail: &[u8]) -> Same {
    let Some(j) = logins(format, jail) else {
        return Same::No("the jail's file is not a JSON object".into());
    };
    if j.remote_config {
        // Where configuration is fetched from is a place, whatever account fetches it.
        let unchanged = human
            .and_then(|h| logins(format, h))
            .is_some_and(|h| h == j);
        if !unchanged {
            return Same::No("it makes the agent fetch its configuration from a URL".into());
        }
    }
    let Some(human) = human else {
        return Same::No("a new login: you had none".into());
    };
    let Some(h) = logins(format, human) else {
        return Same::No("your file is not a JSON object".into());
    };
    if j.accounts == h.accounts && !j.accounts.is_empty() {
        return Same::Yes;
    }
    // The account field can be missing (older files, a refresh that dropped the id token): a refresh
    // token of yours that it still carries names your login.
    if j.accounts.is_empty() && !j.refresh.is_empty() && j.refresh.is_subset(&h.refresh) {
        return Same::Yes;
    }
    let fmt = |s: &BTreeSet<String>| {
        if s.is_empty() {
            "none that can be told".to_string()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    Same::No(format!(
        "another account: yours {}, the jail's {}",
        fmt(&h.accounts),
        fmt(&j.accounts)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut out = String::new();
        for c in s.as_bytes().chunks(3) {
            let n = c.iter().fold(0u32, |a, b| (a << 8) | u32::from(*b)) << (8 * (3 - c.len()));
            for i in 0..=c.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            }
        }
        out
    }

    fn jwt(claims: &str) -> String {
        format!("{}.{}.sig", b64("{\"alg\":\"RS256\"}"), b64(claims))
    }

    fn claude(account: &str, access: &str, refresh: &str) -> Vec<u8> {
        format!(
            r#"{{"claudeAiOauth":{{"accessToken":"{access}","refreshToken":"{refresh}","expiresAt":1,"accountUuid":"{account}","organizationUuid":"org1"}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn base64url_decodes_what_tokens_carry() {
        assert_eq!(
            base64url(&b64("{\"sub\":\"1\"}")).unwrap(),
            b"{\"sub\":\"1\"}"
        );
        assert_eq!(base64url("YQ").unwrap(), b"a");
        assert!(base64url("a b").is_none());
    }

    #[test]
    fn a_refresh_of_the_same_claude_account_comes_back() {
        let human = claude("acc-1", "old", "r1");
        let jail = claude("acc-1", "new", "r2");
        assert_eq!(
            same(Format::ClaudeCredentials, Some(&human), &jail),
            Same::Yes
        );
    }

    #[test]
    fn another_claude_account_or_a_new_login_is_held() {
        let human = claude("acc-1", "a", "r1");
        let jail = claude("evil", "a", "r9");
        assert!(matches!(
            same(Format::ClaudeCredentials, Some(&human), &jail),
            Same::No(why) if why.contains("evil")
        ));
        assert!(matches!(
            same(Format::ClaudeCredentials, None, &jail),
            Same::No(_)
        ));
        // An MCP server login added in the jail is a login of its own.
        let more = br#"{"claudeAiOauth":{"accountUuid":"acc-1","organizationUuid":"org1","refreshToken":"r1"},"mcpOAuth":{"x":{"serverUrl":"https://evil/mcp"}}}"#;
        assert!(matches!(
            same(Format::ClaudeCredentials, Some(&human), more),
            Same::No(_)
        ));
        assert!(matches!(
            same(Format::ClaudeCredentials, Some(&human), b"[1]"),
            Same::No(_)
        ));
    }

    #[test]
    fn without_an_account_field_a_kept_refresh_token_decides() {
        let human = br#"{"claudeAiOauth":{"accessToken":"a","refreshToken":"r1"}}"#;
        let refreshed = br#"{"claudeAiOauth":{"accessToken":"b","refreshToken":"r1"}}"#;
        let other = br#"{"claudeAiOauth":{"accessToken":"b","refreshToken":"r2"}}"#;
        assert_eq!(
            same(Format::ClaudeCredentials, Some(human), refreshed),
            Same::Yes
        );
        assert!(matches!(
            same(Format::ClaudeCredentials, Some(human), other),
            Same::No(_)
        ));
    }

    #[test]
    fn codex_chatgpt_logins_are_told_apart_by_account_and_user() {
        let file = |acct: &str, user: &str, access: &str| {
            let id = jwt(&format!(
                r#"{{"email":"x@y","https://api.openai.com/auth":{{"chatgpt_account_id":"{acct}","chatgpt_user_id":"{user}"}}}}"#
            ));
            format!(
                r#"{{"auth_mode":"chatgpt","OPENAI_API_KEY":null,"tokens":{{"id_token":"{id}","access_token":"{access}","refresh_token":"rt-{access}","account_id":"{acct}"}},"last_refresh":"2026-12-01T00:00:00Z"}}"#
            )
            .into_bytes()
        };
        let human = file("ws-1", "u-1", "a");
        assert_eq!(
            same(Format::CodexAuth, Some(&human), &file("ws-1", "u-1", "b")),
            Same::Yes
        );
        assert!(matches!(
            same(Format::CodexAuth, Some(&human), &file("ws-1", "u-2", "b")),
            Same::No(_)
        ));
        assert!(matches!(
            same(Format::CodexAuth, Some(&human), &file("ws-9", "u-1", "b")),
            Same::No(_)
        ));
        // An API key is its own identity.
        let key =
            |k: &str| format!(r#"{{"auth_mode":"apikey","OPENAI_API_KEY":"{k}"}}"#).into_bytes();
        assert_eq!(
            same(Format::CodexAuth, Some(&key("sk-1")), &key("sk-1")),
            Same::Yes
        );
        assert!(matches!(
            same(Format::CodexAuth, Some(&key("sk-1")), &key("sk-2")),
            Same::No(_)
        ));
    }

    #[test]
    fn gemini_by_the_id_tokens_subject_or_the_kept_refresh_token() {
        let f = |sub: &str, refresh: &str, with_id: bool| {
            let id = if with_id {
                format!(r#","id_token":"{}""#, jwt(&format!(r#"{{"sub":"{sub}"}}"#)))
            } else {
                String::new()
            };
            format!(r#"{{"access_token":"a","refresh_token":"{refresh}","expiry_date":1{id}}}"#)
                .into_bytes()
        };
        let human = f("1001", "r1", true);
        assert_eq!(
            same(Format::GoogleOauth, Some(&human), &f("1001", "r1", true)),
            Same::Yes
        );
        // A refresh answer without an id token, the refresh token kept.
        assert_eq!(
            same(Format::GoogleOauth, Some(&human), &f("", "r1", false)),
            Same::Yes
        );
        assert!(matches!(
            same(Format::GoogleOauth, Some(&human), &f("666", "r2", true)),
            Same::No(_)
        ));
        let accounts = |a: &str| format!(r#"{{"active":"{a}","old":[]}}"#).into_bytes();
        assert_eq!(
            same(
                Format::GoogleAccounts,
                Some(&accounts("me@x")),
                &accounts("me@x")
            ),
            Same::Yes
        );
        assert!(matches!(
            same(
                Format::GoogleAccounts,
                Some(&accounts("me@x")),
                &accounts("evil@x")
            ),
            Same::No(_)
        ));
    }

    #[test]
    fn opencode_per_provider_and_a_wellknown_entry_is_always_held() {
        let human = br#"{"openai":{"type":"oauth","refresh":"r","access":"a","expires":1,"accountId":"acc"}}"#;
        let refreshed = br#"{"openai":{"type":"oauth","refresh":"r2","access":"b","expires":2,"accountId":"acc"}}"#;
        assert_eq!(
            same(Format::OpenCodeAuth, Some(human), refreshed),
            Same::Yes
        );
        let added = br#"{"openai":{"type":"oauth","refresh":"r","access":"a","expires":1,"accountId":"acc"},"x":{"type":"wellknown","key":"k","token":"t"}}"#;
        assert!(matches!(
            same(Format::OpenCodeAuth, Some(human), added),
            Same::No(why) if why.contains("configuration")
        ));
        let other_key = br#"{"anthropic":{"type":"api","key":"sk-evil"}}"#;
        assert!(matches!(
            same(Format::OpenCodeAuth, Some(human), other_key),
            Same::No(_)
        ));
    }
}
