//! `~/.claude.json`'s keys by consequence: the jail's private copy merged into the human's file key
//! by key (three ways: what the jail changed since the launch comes back, what it did not change
//! stays as the human's file has it now, so another session's or the human's own changes are kept).
//!
//! Which keys are not data was read from Claude Code's own code (2.1.332): the keys `claude config
//! set -g` accepts (its list of settable global keys) and the per-project ones it guards itself.
//! `env` is exported into the human's sessions (`NODE_OPTIONS`, `BASH_ENV`: code), `apiKeyHelper`
//! is a command, `mcpServers` start programs, `allowedTools` and the trust dialog grant them, the
//! installer keys choose what the updater runs, the remote-control keys hand the session to a
//! server, `oauthAccount`/`primaryApiKey` are the login. Everything else in the file is state the
//! agent keeps for itself (counters, tips, caches) and comes back.

use super::{Consequence, Verdict};
use serde_json::{Map, Value};

/// Global keys that run something or grant running it.
const PROGRAM: &[&str] = &[
    "env",
    "apiKeyHelper",
    "mcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "allowedTools",
    "hasTrustDialogAccepted",
    "installMethod",
    "autoUpdates",
    "autoUpdatesProtectedForNative",
    "autoInstallIdeExtension",
];

/// Global keys that hand the session to a place.
const PLACE: &[&str] = &[
    "remoteControlAtStartup",
    "autoUploadSessions",
    "autoAddRemoteControlDaemonWorker",
];

/// Global keys that are the login.
const IDENTITY: &[&str] = &["oauthAccount", "primaryApiKey", "customApiKeyResponses"];

/// Keys of a project's entry (`projects["<path>"]`) that run something or grant running it.
const PROJECT_PROGRAM: &[&str] = &[
    "env",
    "mcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "allowedTools",
    "hasTrustDialogAccepted",
    "mcpContextUris",
];

/// Where a key lies: the top level, or a project's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Key {
    Global(String),
    Project { project: String, key: String },
}

impl Key {
    /// As the review shows it.
    pub(crate) fn display(&self) -> String {
        match self {
            Key::Global(k) => k.clone(),
            Key::Project { project, key } => format!("projects[{project}].{key}"),
        }
    }
}

/// One change of the jail's copy since the launch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Change {
    pub key: Key,
    /// The jail's value (`None`: removed).
    pub value: Option<Value>,
    pub verdict: Verdict,
}

/// A new empty default (`{}`, `[]`, `false`, `null`) grants nothing.
fn empty_default(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null | Value::Bool(false)) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        _ => false,
    }
}

fn account(v: Option<&Value>) -> Option<&str> {
    v?.get("accountUuid")?.as_str()
}

/// The judge for one key. `workspace`: the session's own project (accepting the trust dialog for
/// it in the jail's own TUI is the human's act). Pure.
pub(crate) fn judge(
    key: &Key,
    base: Option<&Value>,
    jail: Option<&Value>,
    workspace: &str,
) -> Verdict {
    let (name, program, place, identity): (&str, &[&str], &[&str], &[&str]) = match key {
        Key::Global(k) => (k, PROGRAM, PLACE, IDENTITY),
        Key::Project { project, key } => {
            if key == "hasTrustDialogAccepted" && project == workspace {
                return Verdict::data();
            }
            (key, PROJECT_PROGRAM, &[], &[])
        }
    };
    // A program or a place: held, unless a key that was not there comes with its empty default.
    for (names, consequence) in [(program, Consequence::Program), (place, Consequence::Place)] {
        if names.contains(&name) {
            if base.is_none() && empty_default(jail) {
                return Verdict::data();
            }
            let why = if consequence == Consequence::Program {
                format!("Claude Code runs what `{name}` names, or lets it run")
            } else {
                format!("`{name}` hands your sessions to a remote service")
            };
            return Verdict::held(consequence, why);
        }
    }
    if identity.contains(&name) {
        if name == "oauthAccount" && account(base).is_some() && account(base) == account(jail) {
            return Verdict::data();
        }
        if base.is_none() && jail.is_none() {
            return Verdict::data();
        }
        return Verdict::held(
            Consequence::Identity,
            format!("`{name}` is the account your Claude Code logs in as"),
        );
    }
    Verdict::data()
}

fn object(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a String> {
    let mut out: Vec<&String> = a.keys().chain(b.keys()).collect();
    out.sort();
    out.dedup();
    out
}

/// What the jail changed in its copy since the launch (`base`), each judged. Pure.
pub(crate) fn changes(base: &Value, jail: &Value, workspace: &str) -> Vec<Change> {
    let (b, j) = (object(base), object(jail));
    let mut out = Vec::new();
    for k in keys(b, j) {
        let (bv, jv) = (b.get(k), j.get(k));
        if bv == jv {
            continue;
        }
        if k == "projects" && jv.is_some_and(Value::is_object) {
            let empty = Value::Object(Map::new());
            let (bp, jp) = (object(bv.unwrap_or(&empty)), object(jv.unwrap_or(&empty)));
            for p in keys(bp, jp) {
                let (bpv, jpv) = (bp.get(p).unwrap_or(&empty), jp.get(p).unwrap_or(&empty));
                if bpv == jpv {
                    continue;
                }
                let (bo, jo) = (object(bpv), object(jpv));
                for pk in keys(bo, jo) {
                    if bo.get(pk) == jo.get(pk) {
                        continue;
                    }
                    let key = Key::Project {
                        project: p.clone(),
                        key: pk.clone(),
                    };
                    let verdict = judge(&key, bo.get(pk), jo.get(pk), workspace);
                    out.push(Change {
                        key,
                        value: jo.get(pk).cloned(),
                        verdict,
                    });
                }
            }
            continue;
        }
        let key = Key::Global(k.clone());
        let verdict = judge(&key, bv, jv, workspace);
        out.push(Change {
            key,
            value: jv.cloned(),
            verdict,
        });
    }
    out
}

/// Give `key` the value `value` in `file` (an object; anything else becomes one).
pub(crate) fn apply(file: &mut Value, key: &Key, value: Option<&Value>) {
    if !file.is_object() {
        *file = Value::Object(Map::new());
    }
    let target = match key {
        Key::Global(k) => (file.as_object_mut().expect("an object"), k),
        Key::Project { project, key } => {
            let root = file.as_object_mut().expect("an object");
            let projects = root
                .entry("projects")
                .or_insert_with(|| Value::Object(Map::new()));
            if !projects.is_object() {
                *projects = Value::Object(Map::new());
            }
            let entry = projects
                .as_object_mut()
                .expect("an object")
                .entry(project.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            (entry.as_object_mut().expect("an object"), key)
        }
    };
    match value {
        Some(v) => {
            target.0.insert(target.1.clone(), v.clone());
        }
        None => {
            target.0.remove(target.1);
        }
    }
}

/// The value `key` has in `file`.
pub(crate) fn get<'a>(file: &'a Value, key: &Key) -> Option<&'a Value> {
    match key {
        Key::Global(k) => file.get(k),
        Key::Project { project, key } => file.get("projects")?.get(project)?.get(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const WS: &str = "/w";

    fn held(c: &[Change]) -> Vec<String> {
        c.iter()
            .filter(|c| !c.verdict.flows())
            .map(|c| c.key.display())
            .collect()
    }

    #[test]
    fn state_comes_back_and_what_runs_is_held() {
        let base = json!({"numStartups": 1, "tips": {}});
        let jail = json!({
            "numStartups": 2, "tips": {"a": 1}, "newCounter": 3,
            "env": {"NODE_OPTIONS": "--require /w/x.js"},
            "apiKeyHelper": "/w/key.sh",
            "mcpServers": {"x": {"command": "sh"}},
            "remoteControlAtStartup": true,
        });
        let c = changes(&base, &jail, WS);
        assert_eq!(
            held(&c),
            [
                "apiKeyHelper",
                "env",
                "mcpServers",
                "remoteControlAtStartup"
            ]
        );
        let flowing: Vec<_> = c
            .iter()
            .filter(|c| c.verdict.flows())
            .map(|c| c.key.display())
            .collect();
        assert_eq!(flowing, ["newCounter", "numStartups", "tips"]);
    }

    #[test]
    fn an_empty_default_of_a_guarded_key_grants_nothing() {
        let c = changes(
            &json!({}),
            &json!({"mcpServers": {}, "allowedTools": [], "env": {}}),
            WS,
        );
        assert!(held(&c).is_empty(), "{c:?}");
    }

    #[test]
    fn the_same_account_comes_back_another_is_held() {
        let base = json!({"oauthAccount": {"accountUuid": "a1", "emailAddress": "me@x"}});
        let same = json!({"oauthAccount": {"accountUuid": "a1", "emailAddress": "me@x", "displayName": "Me"}});
        assert!(held(&changes(&base, &same, WS)).is_empty());
        let other = json!({"oauthAccount": {"accountUuid": "evil"}});
        assert_eq!(held(&changes(&base, &other, WS)), ["oauthAccount"]);
        let key = json!({"oauthAccount": {"accountUuid": "a1", "emailAddress": "me@x"}, "primaryApiKey": "sk-ant-evil"});
        assert_eq!(held(&changes(&base, &key, WS)), ["primaryApiKey"]);
    }

    #[test]
    fn per_project_trust_is_yours_only_for_this_workspace() {
        let base = json!({"projects": {"/w": {"history": []}}});
        let jail = json!({"projects": {
            "/w": {"history": ["x"], "hasTrustDialogAccepted": true, "mcpServers": {"m": {"command": "x"}}},
            "/other": {"hasTrustDialogAccepted": true, "allowedTools": ["Bash"]},
        }});
        let c = changes(&base, &jail, WS);
        assert_eq!(
            held(&c),
            [
                "projects[/other].allowedTools",
                "projects[/other].hasTrustDialogAccepted",
                "projects[/w].mcpServers"
            ]
        );
    }

    #[test]
    fn apply_sets_and_removes_at_any_level() {
        let mut f = json!({"a": 1, "projects": {"/w": {"k": 1}}});
        apply(&mut f, &Key::Global("b".into()), Some(&json!(2)));
        apply(&mut f, &Key::Global("a".into()), None);
        let pk = Key::Project {
            project: "/n".into(),
            key: "k".into(),
        };
        apply(&mut f, &pk, Some(&json!(true)));
        assert_eq!(
            f,
            json!({"b": 2, "projects": {"/w": {"k": 1}, "/n": {"k": true}}})
        );
        assert_eq!(get(&f, &pk), Some(&json!(true)));
        let mut odd = json!([1]);
        apply(&mut odd, &pk, Some(&json!(1)));
        assert_eq!(odd, json!({"projects": {"/n": {"k": 1}}}));
    }
}
