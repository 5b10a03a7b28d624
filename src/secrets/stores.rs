//! git's credential stores, found as git finds them: both default paths of `git credential-store`
//! and every `--file` a `credential.helper` names in the human's system and global configs
//! (includes followed, through the one reader, `gitconfig`).
//!
//! Guards against a store outside the default list (`~/.config/git/credentials`, a
//! `store --file ~/.secrets/git`): git writes plain-text passwords there and the jail could read
//! them. A helper given as a shell snippet (`!f() { … }`) is not parsed: what it runs is not a
//! file we can name (docs/config.md, "not covered").

use std::path::{Path, PathBuf};

/// The store files: `~/.git-credentials`, `$XDG_CONFIG_HOME/git/credentials` (default
/// `~/.config/git/credentials`) and the `--file` of each `store` helper configured.
pub(crate) fn credential_stores(home: &Path, env: &crate::host::HostEnv) -> Vec<PathBuf> {
    let xdg = env
        .get(crate::host::XDG_CONFIG_HOME)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".config"));
    let mut out = vec![home.join(".git-credentials"), xdg.join("git/credentials")];
    let path_of = |var: &str, default: PathBuf| {
        env.get(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or(default)
    };
    let files = [
        path_of("GIT_CONFIG_SYSTEM", PathBuf::from("/etc/gitconfig")),
        xdg.join("git/config"),
        path_of("GIT_CONFIG_GLOBAL", home.join(".gitconfig")),
    ];
    let git_home = env.home();
    let config = crate::gitconfig::read(&files, git_home.as_deref());
    for k in &config.keys {
        let name = k.key.name.as_str();
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("credential.") && crate::gitconfig::variable(&lower) == "helper" {
            out.extend(store_file(&k.key.text(), home));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The file a `credential.helper` value makes `git credential-store` use, if it is the store
/// helper with `--file`: `store --file X`, `store --file=X`, or the helper by its path
/// (`/usr/lib/git-core/git-credential-store --file X`). git runs a helper through the shell, so
/// `~/` and `$HOME/` are the human's home.
pub(crate) fn store_file(helper: &str, home: &Path) -> Option<PathBuf> {
    let mut words = helper.split_whitespace();
    let first = words.next()?;
    let program = first.rsplit('/').next().unwrap_or(first);
    if !matches!(program, "store" | "git-credential-store") {
        return None;
    }
    let mut file = None;
    while let Some(w) = words.next() {
        if let Some(v) = w.strip_prefix("--file=") {
            file = Some(v.to_string());
        } else if w == "--file" {
            file = words.next().map(str::to_string);
        }
    }
    let file = file?;
    let file = file.trim_matches(['"', '\'']);
    let expanded = ["~/", "$HOME/", "${HOME}/"]
        .iter()
        .find_map(|p| file.strip_prefix(p))
        .map_or_else(|| PathBuf::from(file), |rest| home.join(rest));
    // A relative path is relative to wherever git runs: not a file we can name.
    expanded.is_absolute().then_some(expanded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_helpers_file_is_found_in_every_spelling() {
        let home = Path::new("/h");
        let want = Some(PathBuf::from("/h/.secrets/git"));
        for v in [
            "store --file ~/.secrets/git",
            "store --file=~/.secrets/git",
            "store --file $HOME/.secrets/git",
            "store --file \"${HOME}/.secrets/git\"",
            "/usr/lib/git-core/git-credential-store --file /h/.secrets/git",
        ] {
            assert_eq!(store_file(v, home), want, "{v}");
        }
        for v in [
            "store",
            "cache --timeout 3600",
            "!f() { cat /h/x; }; f",
            "store --file relative/path",
            "",
        ] {
            assert_eq!(store_file(v, home), None, "{v}");
        }
    }

    #[test]
    fn stores_named_by_the_global_config_and_its_includes_are_found() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path();
        std::fs::write(
            home.join(".gitconfig"),
            "[include]\n\tpath = ~/.gitconfig.local\n[credential]\n\thelper = cache\n",
        )
        .unwrap();
        std::fs::write(
            home.join(".gitconfig.local"),
            "[credential \"https://git.example.com\"]\n\thelper = store --file ~/vault/git-creds\n",
        )
        .unwrap();
        let h = home.to_str().unwrap();
        let env = crate::host::HostEnv::of(&[("HOME", h), ("GIT_CONFIG_SYSTEM", "/nonexistent")]);
        let got = credential_stores(home, &env);
        assert!(got.contains(&home.join("vault/git-creds")), "{got:?}");
        assert!(got.contains(&home.join(".git-credentials")));
        assert!(got.contains(&home.join(".config/git/credentials")));
        // $XDG_CONFIG_HOME moves git's own default.
        let x = home.join("xdg");
        let env = crate::host::HostEnv::of(&[
            ("HOME", h),
            ("XDG_CONFIG_HOME", x.to_str().unwrap()),
            ("GIT_CONFIG_SYSTEM", "/nonexistent"),
        ]);
        assert!(credential_stores(home, &env).contains(&x.join("git/credentials")));
    }
}
