//! Masked views of the configs the jail's tools need but that also hold a secret: `~/.npmrc`,
//! `~/.yarnrc.yml`, pip's `pip.conf`, Maven's `settings.xml`. The jail reads a copy made at launch
//! (in the session directory, which the jail cannot see or write) bound read-only over the file:
//! the registry, the mirrors and the scopes stay readable, the secret values read as `MASK`.
//!
//! Guards against a token read through a config whose other lines the tools need: hiding the whole
//! `.npmrc` would send npm to the public registry, leaving it readable would hand the agent the
//! token. A line is masked when its key is a credential of that format *or* its value holds a
//! token-shaped string (`env::secret_value`), so an unknown key holding a token is masked too.

use std::path::{Path, PathBuf};

/// What a masked value reads as (the same text in every format).
pub(crate) const MASK: &str = "claude-sandbox-masked";

/// How a config is masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Format {
    /// `key = value` lines (npm's ini, pip's `pip.conf`): the value after the first `=`.
    Ini,
    /// `key: value` lines (Yarn's `.yarnrc.yml`): the value after the first `: `.
    Yaml,
    /// Maven's XML: the text inside credential elements.
    MavenXml,
}

/// The configs seen through a masked view (relative to `$HOME`), and their format.
pub(crate) const VIEWED: &[(&str, Format)] = &[
    (".npmrc", Format::Ini),
    (".yarnrc.yml", Format::Yaml),
    (".config/pip/pip.conf", Format::Ini),
    (".pip/pip.conf", Format::Ini),
    (".m2/settings.xml", Format::MavenXml),
];

/// Keys whose value is a credential, by format (compared case-insensitively, on the key's last
/// `:`-separated part: npm's `//host/:_authToken`).
const INI_KEYS: &[&str] = &[
    "_authtoken",
    "_auth",
    "_password",
    "password",
    "token",
    "client-cert",
];
const YAML_KEYS: &[&str] = &["npmauthtoken", "npmauthident", "npmpassword"];
const XML_ELEMENTS: &[&str] = &["password", "passphrase"];

/// The configs to view for this launch: each that exists as a regular file (through a symlink too:
/// the view goes over its target, the path the jail reaches). `NPM_CONFIG_USERCONFIG` moves npm's.
pub(crate) fn viewed(home: &Path, env: &crate::host::HostEnv) -> Vec<(PathBuf, Format)> {
    let mut out: Vec<(PathBuf, Format)> = Vec::new();
    let npm_user = env
        .get("NPM_CONFIG_USERCONFIG")
        .or_else(|| env.get("npm_config_userconfig"))
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let candidates = VIEWED
        .iter()
        .map(|(rel, f)| (home.join(rel), *f))
        .chain(npm_user.map(|p| (p, Format::Ini)));
    for (p, f) in candidates {
        let Ok(real) = std::fs::canonicalize(&p) else {
            continue;
        };
        if real.is_file() && !out.iter().any(|(q, _)| *q == real) && needs_view(&real, f) {
            out.push((real, f));
        }
    }
    out
}

/// Whether the config holds anything to mask now (one that cannot be read needs none: the jail
/// cannot read it either).
fn needs_view(path: &Path, format: Format) -> bool {
    std::fs::read(path).is_ok_and(|b| mask(&String::from_utf8_lossy(&b), format).is_some())
}

/// Write the masked copy of `path` at `copy` (a new file, mode 0400, its directory made 0700):
/// what the jail reads instead of it.
pub(crate) fn write_copy(path: &Path, format: Format, copy: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let text = String::from_utf8_lossy(&std::fs::read(path)?).into_owned();
    let masked = mask(&text, format).unwrap_or(text);
    if let Some(dir) = copy.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(copy)?;
    f.write_all(masked.as_bytes())
}

/// The masked text of a config in `format`; `None` when nothing in it is secret (no view needed).
pub(crate) fn mask(text: &str, format: Format) -> Option<String> {
    let masked = match format {
        Format::Ini => lines(text, '=', INI_KEYS),
        Format::Yaml => lines(text, ':', YAML_KEYS),
        Format::MavenXml => maven(text),
    };
    (masked != text).then_some(masked)
}

/// Line by line: the value of a credential key, or of any line holding a token, replaced.
fn lines(text: &str, sep: char, keys: &[&str]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let trimmed = body.trim_start();
        let comment = trimmed.starts_with('#') || trimmed.starts_with(';');
        let secret_here = super::env::secret_value(body.as_bytes());
        match body.split_once(sep) {
            Some((key, value)) if !comment => {
                let k = key.trim().trim_matches(['"', '\'']).to_ascii_lowercase();
                let last = k.rsplit(':').next().unwrap_or(&k);
                let credential = keys.contains(&last) && !value.trim().is_empty();
                let userinfo = url_password(value);
                // A URL keeps its host with only the password masked, unless what is left still
                // holds a token.
                let partial = userinfo.map(|(start, end)| {
                    let at = key.len() + sep.len_utf8();
                    format!("{}{MASK}{}", &body[..at + start], &body[at + end..])
                });
                match partial {
                    Some(p) if !credential && !super::env::secret_value(p.as_bytes()) => {
                        out.push_str(&p);
                    }
                    _ if credential || secret_here => {
                        let quote = if sep == ':' { "\"" } else { "" };
                        let space = if value.starts_with(' ') { " " } else { "" };
                        let _ = write!(out, "{key}{sep}{space}{quote}{MASK}{quote}");
                    }
                    _ => out.push_str(body),
                }
            }
            // A comment or a line without a key: kept, unless it holds a token (then only the
            // comment marker is left).
            _ if secret_here => {
                let _ = write!(out, "# {MASK}");
            }
            _ => out.push_str(body),
        }
        out.push_str(end);
    }
    out
}

/// The byte range of the password in the first `scheme://user:password@` of `value`.
fn url_password(value: &str) -> Option<(usize, usize)> {
    let at = value.find("://")? + 3;
    let authority_end = value[at..]
        .find(['/', ' ', '?', '#'])
        .map_or(value.len(), |e| at + e);
    let authority = &value[at..authority_end];
    let userinfo_end = at + authority.rfind('@')?;
    let colon = at + value[at..userinfo_end].find(':')? + 1;
    (colon < userinfo_end).then_some((colon, userinfo_end))
}

/// Maven: the text of every `<password>` and `<passphrase>` element, and of any element holding a
/// token.
fn maven(text: &str) -> String {
    let mut out = text.to_string();
    for el in XML_ELEMENTS {
        let (open, close) = (format!("<{el}>"), format!("</{el}>"));
        let mut from = 0;
        while let Some(s) = out[from..].find(&open).map(|i| from + i + open.len()) {
            let Some(e) = out[s..].find(&close).map(|i| s + i) else {
                break;
            };
            out.replace_range(s..e, MASK);
            from = s + MASK.len() + close.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_npmrcs_token_is_masked_and_its_registry_kept() {
        let text = "registry=https://npm.example.com/\n\
                    //npm.example.com/:_authToken=SECRET-TOKEN-1\n\
                    @corp:registry=https://npm.corp.example/\n\
                    //npm.corp.example/:_auth = dXNlcjpwYXNz\n\
                    //npm.corp.example/:username=me\n\
                    ; a comment\n\
                    always-auth=true";
        let got = mask(text, Format::Ini).unwrap();
        assert!(
            !got.contains("SECRET-TOKEN-1") && !got.contains("dXNlcjpwYXNz"),
            "{got}"
        );
        assert!(got.contains("registry=https://npm.example.com/\n"));
        assert!(got.contains("@corp:registry=https://npm.corp.example/\n"));
        assert!(got.contains(&format!("//npm.example.com/:_authToken={MASK}\n")));
        assert!(got.contains(&format!("//npm.corp.example/:_auth = {MASK}\n")));
        assert!(got.contains("username=me\n; a comment\nalways-auth=true"));
        assert_eq!(got.lines().count(), text.lines().count());
    }

    #[test]
    fn a_token_under_an_unknown_key_or_in_a_comment_is_masked() {
        let tok = format!("npm_{}", "a".repeat(36));
        let text = format!("registry=https://r.example/\nfuture-key={tok}\n# old: {tok}\n");
        let got = mask(&text, Format::Ini).unwrap();
        assert!(!got.contains(&tok), "{got}");
        assert!(got.starts_with("registry=https://r.example/\n"));
    }

    #[test]
    fn a_password_in_a_pip_index_url_is_masked_and_the_url_kept() {
        let text = "[global]\nindex-url = https://me:hunter2@pypi.corp.example/simple\n\
                    extra-index-url = https://pypi.org/simple\n";
        let got = mask(text, Format::Ini).unwrap();
        assert!(!got.contains("hunter2"), "{got}");
        assert!(got.contains(&format!(
            "index-url = https://me:{MASK}@pypi.corp.example/simple\n"
        )));
        assert!(got.contains("extra-index-url = https://pypi.org/simple\n"));
    }

    #[test]
    fn yarn_and_maven_credentials_are_masked() {
        let yarn = "npmRegistryServer: \"https://npm.corp.example\"\n\
                    npmRegistries:\n  \"//npm.corp.example\":\n    npmAuthToken: abc-SECRET\n";
        let got = mask(yarn, Format::Yaml).unwrap();
        assert!(!got.contains("abc-SECRET"), "{got}");
        assert!(got.contains("npmRegistryServer: \"https://npm.corp.example\"\n"));
        assert!(got.contains(&format!("    npmAuthToken: \"{MASK}\"\n")));
        let m2 = "<settings><servers><server><id>corp</id><username>me</username>\
                  <password>S3CRET</password></server><server><password>{enc}</password>\
                  </server></servers><mirrors><mirror><url>https://m.example</url></mirror>\
                  </mirrors></settings>";
        let got = mask(m2, Format::MavenXml).unwrap();
        assert!(!got.contains("S3CRET") && !got.contains("{enc}"), "{got}");
        assert!(got.contains("<username>me</username>") && got.contains("https://m.example"));
    }

    #[test]
    fn a_config_without_secrets_needs_no_view() {
        assert_eq!(
            mask("registry=https://registry.npmjs.org/\n", Format::Ini),
            None
        );
        assert_eq!(mask("nodeLinker: node-modules\n", Format::Yaml), None);
        assert_eq!(mask("<settings/>", Format::MavenXml), None);
    }
}
