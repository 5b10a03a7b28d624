//! Secrets hidden at the filesystem level: credentials an agent never needs, and whatever the
//! configuration names (`hidden = [...]`, globs such as `**/.env*` resolved at launch).
//!
//! Guards against a secret read through a path no hook sees: a file is masked with `/dev/null`, a
//! directory with an empty read-only directory, so `cat`, an editor tool, an MCP server or any
//! subprocess reads nothing. The agents' own credentials (`~/.claude/.credentials.json`,
//! `~/.codex/auth.json`) are not in the default list, so they keep working.
//!
//! Secrets are found by kind (docs/config.md, "Secrets"): the credential files of cloud, cluster,
//! registry and package-manager tools at the paths the tools read (`DEFAULT_HIDDEN`, and the paths
//! their variables name: `HIDDEN_BY_VAR`), git's credential stores as git's config names them
//! (`stores`), shell and REPL histories, private keys in `~/.ssh` by content; the configs the jail's
//! tools need as masked views (`views`); the environment by name and value (`env`).

pub(crate) mod env;
pub(crate) mod inject;
pub(crate) mod keys;
pub(crate) mod stores;
pub(crate) mod views;

use std::path::{Path, PathBuf};

/// Credentials hidden by default, relative to `$HOME`, whole: files no tool in the jail needs to
/// work (a cloud CLI, a registry's login, a vault token). `reveal = [...]` in the user or system
/// configuration shows one again.
pub const DEFAULT_HIDDEN: &[&str] = &[
    // Cloud and cluster configs.
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".oci",
    ".config/doctl",
    // Registries and package managers (`.npmrc`, `.yarnrc.yml`, pip and Maven are masked views).
    ".docker/config.json",
    ".config/containers/auth.json",
    ".pypirc",
    ".gem/credentials",
    ".local/share/gem/credentials",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".config/helm/repositories.yaml",
    ".vault-token",
    // Forges and generic stores (git's own stores: `stores`).
    ".config/gh/hosts.yml",
    ".config/hub",
    ".config/glab-cli/config.yml",
    ".netrc",
    ".gnupg/private-keys-v1.d",
    ".password-store",
    // Shell and REPL histories: tokens typed on a command line (`export X=…`, `curl -H`).
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".irb_history",
    ".lesshst",
];

/// Credential files the tools read where a variable says (each tool's own override of its default
/// above): hidden at that path too. `KUBECONFIG` is a `:`-separated list.
pub(crate) const HIDDEN_BY_VAR: &[&str] = &[
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "KUBECONFIG",
    "CLOUDSDK_CONFIG",
    "AZURE_CONFIG_DIR",
    "DOCKER_CONFIG",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "HISTFILE",
    "TF_CLI_CONFIG_FILE",
];

/// The paths `HIDDEN_BY_VAR` names in `env` (absolute ones only: a relative one depends on where
/// the tool runs; never `$HOME` or above it, which a stray value could name).
fn hidden_by_var(home: &Path, env: &crate::host::HostEnv) -> Vec<PathBuf> {
    HIDDEN_BY_VAR
        .iter()
        .filter_map(|v| env.get(v))
        .flat_map(std::env::split_paths)
        .filter(|p| p.is_absolute() && !home.starts_with(p))
        .collect()
}

/// Private keys under `~/.ssh`, by name (`id_*` without `.pub`, `*.pem`, `*.key`) and by content
/// (any regular file whose first 4 KiB hold a PEM/OpenSSH/PuTTY private key header, whatever its
/// name: `~/.ssh/github`, `~/.ssh/keys/work`). `known_hosts`, `config` and public keys stay readable.
pub(crate) fn ssh_private_keys(home: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(home.join(".ssh"))
        .max_depth(3)
        .follow_links(false)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(walkdir::DirEntry::into_path)
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // Suffixes as ssh-keygen and openssl write them (a suffix after the last dot).
            let suffix = n.rsplit_once('.').map(|(_, s)| s);
            (n.starts_with("id_") && suffix != Some("pub"))
                || matches!(suffix, Some("pem" | "key"))
                || holds_private_key(p)
        })
        .collect()
}

/// Whether the file starts like a private key (`keys::looks_like_private_key`). A file that cannot
/// be read is not one (it cannot leak through the jail either).
fn holds_private_key(path: &Path) -> bool {
    keys::read_head(path).is_some_and(|h| keys::looks_like_private_key(&h))
}

/// Whether a pattern has glob characters.
pub fn is_glob(p: &str) -> bool {
    p.contains(['*', '?'])
}

/// Match a path against an absolute glob: `*` and `?` within one component, `**` any number of
/// components.
pub fn glob_match(pattern: &str, path: &str) -> bool {
    fn comps(s: &str) -> Vec<&str> {
        s.split('/').filter(|c| !c.is_empty()).collect()
    }
    fn one(p: &str, s: &str) -> bool {
        match (p.chars().next(), s.chars().next()) {
            (None, None) => true,
            (Some('*'), _) => {
                one(&p[1..], s)
                    || (!s.is_empty() && one(p, &s[s.chars().next().unwrap().len_utf8()..]))
            }
            (Some('?'), Some(c)) => one(&p[1..], &s[c.len_utf8()..]),
            (Some(a), Some(b)) if a == b => one(&p[a.len_utf8()..], &s[b.len_utf8()..]),
            _ => false,
        }
    }
    fn walk(p: &[&str], s: &[&str]) -> bool {
        match p.first() {
            None => s.is_empty(),
            Some(&"**") => walk(&p[1..], s) || (!s.is_empty() && walk(p, &s[1..])),
            Some(c) => !s.is_empty() && one(c, s[0]) && walk(&p[1..], &s[1..]),
        }
    }
    walk(&comps(pattern), &comps(path))
}

/// The directory a glob's matches live under (its longest prefix without glob characters).
fn glob_root(pattern: &str) -> PathBuf {
    let mut root = PathBuf::from("/");
    for c in pattern.split('/').filter(|c| !c.is_empty()) {
        if is_glob(c) {
            break;
        }
        root.push(c);
    }
    root
}

/// Every existing path to hide: the defaults and the kinds found (minus `reveal`), literal
/// configured paths, and the current matches of configured globs (a walk that skips `.git` and
/// `node_modules`). `env`: the host's, for git's configs and the tools' own variables.
pub fn resolve(
    home: &Path,
    env: &crate::host::HostEnv,
    configured: &[String],
    reveal: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = DEFAULT_HIDDEN.iter().map(|r| home.join(r)).collect();
    out.extend(hidden_by_var(home, env));
    out.extend(stores::credential_stores(home, env));
    out.extend(ssh_private_keys(home));
    out.retain(|p| !reveal.contains(p));
    out.extend(configured.iter().filter(|p| !is_glob(p)).map(PathBuf::from));
    out.extend(glob_matches(configured));
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out.sort();
    out.dedup();
    out
}

/// The paths that match the glob patterns among `patterns` now (a walk that skips `.git` and
/// `node_modules`).
pub fn glob_matches(patterns: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for pat in patterns.iter().filter(|p| is_glob(p)) {
        let root = glob_root(pat);
        let walker = walkdir::WalkDir::new(&root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| !(e.file_type().is_dir() && crate::walk::pruned(e.file_name())));
        for e in walker.flatten() {
            if glob_match(pat, &e.path().to_string_lossy()) {
                out.push(e.path().to_path_buf());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("/w/**/.env*", "/w/.env"));
        assert!(glob_match("/w/**/.env*", "/w/a/b/.env.local"));
        assert!(!glob_match("/w/**/.env*", "/w/a/env"));
        assert!(glob_match("/w/*.pem", "/w/key.pem"));
        assert!(!glob_match("/w/*.pem", "/w/sub/key.pem"));
        assert!(glob_match("/w/**/*.pem", "/w/sub/key.pem"));
        assert!(glob_match("/w/secret?.txt", "/w/secret1.txt"));
        assert_eq!(glob_root("/w/**/.env*"), PathBuf::from("/w"));
    }

    #[test]
    fn the_files_the_tools_variables_name_are_hidden_but_never_home_or_above() {
        let env = crate::host::HostEnv::of(&[
            (
                "KUBECONFIG",
                "/h/clusters/a.yaml:/h/clusters/b.yaml:relative.yaml",
            ),
            ("DOCKER_CONFIG", "/h"),
            ("HISTFILE", "/"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/srv/aws/creds"),
        ]);
        let got = hidden_by_var(Path::new("/h"), &env);
        assert_eq!(
            got,
            [
                PathBuf::from("/srv/aws/creds"),
                PathBuf::from("/h/clusters/a.yaml"),
                PathBuf::from("/h/clusters/b.yaml"),
            ]
        );
    }
}
