//! Credentials the jail *uses* without reading them (`[secrets] inject = ["host[:port]"]`,
//! allowlist mode only): for each listed host, the token part 1 finds for it (a line of git's
//! credential store, `//host/:_authToken=` in `.npmrc`) is replaced in the jail's view by a
//! per-session random placeholder; the egress proxy puts the real value back into requests to that
//! host alone (`net::proxy::inject`).
//!
//! Guards against the agent reading a token it needs to use: the jail holds only the placeholder,
//! which is worthless anywhere but in a request the proxy sends to the token's own host (sent
//! anywhere else through the proxy, it is refused). The real values stay in the launcher and the
//! proxy's process.

use std::io::Read;
use std::path::{Path, PathBuf};

/// `[secrets]` in a config file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretsTable {
    pub inject: Option<Vec<String>>,
}

/// What every placeholder starts with (then 32 hex digits from `/dev/urandom`).
pub(crate) const PREFIX: &str = "csb-ph-";
/// The port a listed host without one means (HTTPS).
const HTTPS: u16 = 443;

/// One credential the proxy injects: its placeholder, and the real value for `host:port` only.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Credential {
    pub host: String,
    pub port: u16,
    pub placeholder: String,
    pub secret: String,
    /// Where it was found (for the log: never the value).
    pub source: String,
}

impl std::fmt::Debug for Credential {
    // Never the value: a plan is logged at debug level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credential({}:{} from {})",
            self.host, self.port, self.source
        )
    }
}

/// What a launch with `inject` gets: the credentials, and the text the jail reads instead of each
/// file that held one.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    pub credentials: Vec<Credential>,
    /// `(path, text)`: the view bound over `path`.
    pub views: Vec<(PathBuf, String)>,
}

/// A listed `host[:port]`, normalized (`None`: not a host name with an optional port).
pub(crate) fn target(entry: &str) -> Option<(String, u16)> {
    let (host, port) = crate::net::proxy::split_host_port(entry.trim(), Some(HTTPS))?;
    let host = crate::net::pattern::normalize(&host);
    (!host.is_empty() && !host.contains(['/', '@', '*'])).then_some((host, port))
}

/// A fresh placeholder.
pub(crate) fn placeholder() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(PREFIX.to_string(), |mut s, b| {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
        s
    }))
}

/// The credentials for `targets` in git's stores and in npm's config, with the jail's views of
/// those files. `npmrc`: npm's user config and its masked text (`views::mask`), if it has a view.
pub(crate) fn plan(
    stores: &[PathBuf],
    npmrc: Option<(&Path, &str, &str)>,
    targets: &[(String, u16)],
    fresh: &mut dyn FnMut() -> std::io::Result<String>,
) -> std::io::Result<Planned> {
    use std::fmt::Write;
    let mut out = Planned::default();
    for store in stores {
        let Ok(text) = std::fs::read_to_string(store) else {
            continue;
        };
        let mut view = String::new();
        for line in text.lines() {
            let Some(entry) =
                store_line(line).filter(|e| targets.contains(&(e.host.clone(), e.port)))
            else {
                continue;
            };
            let ph = fresh()?;
            let _ = writeln!(view, "{}{ph}{}", &line[..entry.at.0], &line[entry.at.1..]);
            out.credentials.push(Credential {
                host: entry.host,
                port: entry.port,
                placeholder: ph,
                secret: entry.secret,
                source: store.display().to_string(),
            });
        }
        if !view.is_empty() {
            out.views.push((store.clone(), view));
        }
    }
    if let Some((path, original, masked)) = npmrc {
        let mut changed = false;
        let mut view = String::new();
        for (orig, line) in original
            .split_inclusive('\n')
            .zip(masked.split_inclusive('\n'))
        {
            match npm_line(orig).filter(|e| targets.contains(&(e.host.clone(), e.port))) {
                Some(e) => {
                    let ph = fresh()?;
                    let end = if orig.ends_with('\n') { "\n" } else { "" };
                    let _ = write!(view, "{}{ph}{end}", &orig[..e.at.0]);
                    out.credentials.push(Credential {
                        host: e.host,
                        port: e.port,
                        placeholder: ph,
                        secret: e.secret,
                        source: path.display().to_string(),
                    });
                    changed = true;
                }
                None => view.push_str(line),
            }
        }
        if changed {
            out.views.push((path.to_path_buf(), view));
        }
    }
    Ok(out)
}

/// Write a view's `text` at `copy` (a new file, mode 0400, its directory made 0700), as
/// `views::write_copy` does for a masked one.
pub(crate) fn write_view(text: &str, copy: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = copy.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o400)
        .open(copy)?
        .write_all(text.as_bytes())
}

/// A secret found in a line: for which host, its value, and the byte range it occupies.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    host: String,
    port: u16,
    secret: String,
    at: (usize, usize),
}

/// `https://user:password@host[:port][/path]`: git's store format (the password percent-encoded).
fn store_line(line: &str) -> Option<Found> {
    let rest = line.strip_prefix("https://")?;
    let end = rest.find('/').unwrap_or(rest.len());
    let authority = &rest[..end];
    let (userinfo, hostport) = authority.rsplit_once('@')?;
    let (_, password) = userinfo.split_once(':')?;
    let (host, port) = target(hostport)?;
    let start = "https://".len() + userinfo.len() - password.len();
    (!password.is_empty()).then(|| Found {
        host,
        port,
        secret: percent_decode(password),
        at: (start, start + password.len()),
    })
}

/// `//host[:port]/path/:_authToken=TOKEN` (npm's per-registry token; a `${VAR}` is npm's own
/// reference to the environment, not a value).
fn npm_line(line: &str) -> Option<Found> {
    let body = line.trim_end_matches(['\n', '\r']);
    let (key, value) = body.split_once('=')?;
    let key_t = key.trim();
    let authority = key_t.strip_prefix("//")?.split('/').next()?;
    if !key_t.to_ascii_lowercase().ends_with(":_authtoken") {
        return None;
    }
    let token = value.trim();
    if token.is_empty() || token.contains("${") {
        return None;
    }
    let (host, port) = target(authority)?;
    Some(Found {
        host,
        port,
        secret: token.to_string(),
        at: (key.len() + 1, body.len()),
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter() -> impl FnMut() -> std::io::Result<String> {
        let mut n = 0;
        move || {
            n += 1;
            Ok(format!("{PREFIX}{n}"))
        }
    }

    fn merge(c: &mut crate::config::Config, text: &str, scope: crate::config::Scope) -> String {
        let (f, h, w) = (Path::new("/w/f.toml"), Path::new("/h"), Path::new("/w"));
        c.merge_text(text, f, scope, h, w)
            .map_or_else(|e| e.to_string(), |()| String::new())
    }

    #[test]
    fn inject_loosens_so_only_an_unlocked_user_or_the_system_file_may_list_hosts() {
        use crate::config::{Config, Scope};
        let text = "[secrets]\ninject = [\"github.com\", \"git.test:8443\"]\n";
        let mut c = Config::default();
        assert_eq!(merge(&mut c, text, Scope::User), "");
        assert_eq!(c.inject, ["github.com", "git.test:8443"]);
        let err = merge(&mut Config::default(), text, Scope::Workspace);
        assert!(err.contains("`secrets.inject` loosens"), "{err}");
        let mut locked = Config::default();
        assert_eq!(merge(&mut locked, "locked = true\n", Scope::System), "");
        let err = merge(&mut locked, text, Scope::User);
        assert!(err.contains("`secrets.inject` loosens"), "{err}");
        let err = merge(
            &mut Config::default(),
            "[secrets]\ninject = [\"*.x\"]\n",
            Scope::User,
        );
        assert!(err.contains("is not a host[:port]"), "{err}");
        let err = merge(
            &mut Config::default(),
            "[secrets]\ninjet = []\n",
            Scope::User,
        );
        assert!(!err.is_empty(), "an unknown key is an error");
    }

    #[test]
    fn targets_default_to_https_and_refuse_what_is_not_a_host() {
        assert_eq!(target("GitHub.com"), Some(("github.com".into(), 443)));
        assert_eq!(target("git.test:8443"), Some(("git.test".into(), 8443)));
        assert_eq!(target("*.example.com"), None);
        assert_eq!(target(""), None);
    }

    #[test]
    fn a_placeholder_is_random_and_shaped() {
        let (a, b) = (placeholder().unwrap(), placeholder().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), PREFIX.len() + 32);
        assert!(a[PREFIX.len()..].bytes().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_git_store_view_holds_only_the_listed_hosts_with_placeholders() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join(".git-credentials");
        std::fs::write(
            &store,
            "https://me:s%40cret@git.test:8443\nhttps://me:other@elsewhere.example\n\
             https://bot:tok2@GitHub.com/org\n",
        )
        .unwrap();
        let targets = [("git.test".into(), 8443), ("github.com".into(), 443)];
        let got = plan(std::slice::from_ref(&store), None, &targets, &mut counter()).unwrap();
        let c = &got.credentials;
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].host.as_str(), c[0].port, c[0].secret.as_str()),
            ("git.test", 8443, "s@cret")
        );
        assert_eq!(
            (c[1].host.as_str(), c[1].secret.as_str()),
            ("github.com", "tok2")
        );
        assert_eq!(
            got.views,
            [(
                store,
                format!(
                    "https://me:{PREFIX}1@git.test:8443\nhttps://bot:{PREFIX}2@GitHub.com/org\n"
                )
            )]
        );
        assert!(
            !format!("{c:?}").contains("cret"),
            "Debug never shows a value"
        );
    }

    #[test]
    fn the_npmrc_view_keeps_its_mask_and_places_the_placeholder_for_listed_hosts() {
        let original = "registry=https://npm.test/\n//npm.test/:_authToken=REAL1\n\
                        //other.example/:_authToken=REAL2\n//env.test/:_authToken=${NPM_TOKEN}\n";
        let masked =
            crate::secrets::views::mask(original, crate::secrets::views::Format::Ini).unwrap();
        let targets = [("npm.test".into(), 443), ("env.test".into(), 443)];
        let p = Path::new("/h/.npmrc");
        let got = plan(&[], Some((p, original, &masked)), &targets, &mut counter()).unwrap();
        assert_eq!(got.credentials.len(), 1);
        assert_eq!(got.credentials[0].secret, "REAL1");
        let view = &got.views[0].1;
        assert!(
            view.contains(&format!("//npm.test/:_authToken={PREFIX}1\n")),
            "{view}"
        );
        assert!(!view.contains("REAL"), "{view}");
        assert!(view.starts_with("registry=https://npm.test/\n"));
    }
}
