//! What a `mise.toml` includes through its `[env]` directives, from its text: `_.file` (a dotenv
//! file, exported as direnv's `dotenv` is), `_.source` (a shell script, sourced), `_.path`
//! (directories put first on PATH).
//!
//! Guards against a sealed `mise.toml` whose own bytes never change while what it loads on every
//! `cd` (with `mise activate`) is the agent's. Pure: the TOML is read, nothing is run. Paths are
//! the config's directory's (`{{config_root}}` is that directory); another template is
//! `Target::Unknown`.

use super::envrc::{Include, Kind, Target};
use std::path::Path;

/// The includes of a `mise.toml` in directory `dir`; none if it is not TOML.
pub(crate) fn parse(text: &str, dir: &Path) -> Vec<Include> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(directives) = doc
        .get("env")
        .and_then(toml::Value::as_table)
        .and_then(|env| env.get("_"))
        .and_then(toml::Value::as_table)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, kind) in [
        ("file", Kind::Dotenv),
        ("source", Kind::Source),
        ("path", Kind::PathAdd),
    ] {
        let Some(v) = directives.get(key) else {
            continue;
        };
        let items: Vec<&toml::Value> = match v {
            toml::Value::Array(a) => a.iter().collect(),
            v => vec![v],
        };
        for item in items {
            let path = match item {
                toml::Value::String(s) => Some(s.as_str()),
                toml::Value::Table(t) => t.get("path").and_then(toml::Value::as_str),
                _ => None,
            };
            if let Some(p) = path {
                out.push(Include {
                    kind,
                    target: resolve(p, dir),
                });
            }
        }
    }
    out
}

fn resolve(p: &str, dir: &Path) -> Target {
    let d = dir.to_string_lossy();
    let text = p
        .replace("{{config_root}}", &d)
        .replace("{{ config_root }}", &d);
    if text.contains("{{") || text.contains('$') || text.starts_with('~') {
        return Target::Unknown(p.to_string());
    }
    Target::Path(dir.join(text).components().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn env_directives_are_read_in_each_form() {
        let got: Vec<(Kind, Target)> = parse(
            "[tools]\nnode = '22'\n[env]\nA = '1'\n_.file = ['.env', { path = 'cfg/dev.env' }]\n\
             _.source = './env.sh'\n_.path = ['{{config_root}}/bin', 'tools/bin', '{{env.X}}/y']\n",
            Path::new("/w"),
        )
        .into_iter()
        .map(|i| (i.kind, i.target))
        .collect();
        let p = |s: &str| Target::Path(PathBuf::from(s));
        assert_eq!(
            got,
            vec![
                (Kind::Dotenv, p("/w/.env")),
                (Kind::Dotenv, p("/w/cfg/dev.env")),
                (Kind::Source, p("/w/env.sh")),
                (Kind::PathAdd, p("/w/bin")),
                (Kind::PathAdd, p("/w/tools/bin")),
                (Kind::PathAdd, Target::Unknown("{{env.X}}/y".into())),
            ]
        );
    }

    #[test]
    fn no_env_directives_or_no_toml_is_nothing() {
        assert!(parse("[env]\nA = '1'\n", Path::new("/w")).is_empty());
        assert!(parse("not = [toml", Path::new("/w")).is_empty());
    }
}
