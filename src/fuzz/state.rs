//! The workspace TOML and the `~/.claude.json` merge: the two files the agent writes that decide
//! what the human's side does next. No oracle here but the rules themselves: the workspace file never
//! loosens the policy whatever its bytes (a refusal names a line of the file), and the three-way merge
//! carries back exactly the jail's changes, nothing that runs, names a place or logs in unless it is
//! held.

use super::{check, mutated, seeds};
use crate::config::{Config, Scope};
use crate::handback::claude_json::{apply, changes, get, Key};
use crate::handback::Consequence;
use proptest::prelude::*;
use serde_json::{Map, Value};
use std::path::Path;

const KEYS: &[&str] = &[
    "writable",
    "read_only",
    "masked",
    "allow_ssh_agent",
    "allow_user_namespaces",
    "quarantine_new_executables",
    "hidden",
    "reveal",
    "network",
    "network.mode",
    "network.allow",
    "network.deny",
    "devices",
    "devices.gpu",
    "ssh",
    "ssh.allow",
    "ssh.keys",
    "ssh.sign_commits",
    "unknown",
];

const VALUES: &[&str] = &[
    "true",
    "false",
    "[]",
    "[\"/x\", \"~/y\", \"../z\"]",
    "[\"*.example.com\"]",
    "\"host\"",
    "\"allowlist\"",
    "\"none\"",
    "\"\\u00e9\u{e9}\"",
    "1",
    "{ mode = \"host\" }",
    "{ allow = [\"evil.test\"] }",
    "{ gpu = true }",
    "{ sign_commits = true }",
    "[\"SHA256:lWjL0C3S5+B8ePwi/DFRh00bqCJl9Ng5J+uTx5VRZF0\"]",
    "'''\nmulti\n'''",
];

fn toml_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => (proptest::sample::select(KEYS), proptest::sample::select(VALUES))
            .prop_map(|(k, v)| format!("{k} = {v}\n").into_bytes()),
        1 => proptest::sample::select(&["[network]\n", "[devices]\n", "[ssh]\n", "[[network]]\n", "# c\n", "\n", "é = 1\n"][..])
            .prop_map(|s| s.as_bytes().to_vec()),
    ]
}

fn toml_text() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => mutated(seeds("config-toml"), 3),
        2 => proptest::collection::vec(toml_line(), 0..8).prop_map(|l| l.concat()),
    ]
}

/// The human's user file, which the workspace file is merged over.
const USER: &str = "writable = [\"~/extra\"]\nallow_ssh_agent = true\nallow_user_namespaces = true\n\
                    reveal = [\"~/.aws/config\"]\n[devices]\ngpu = true\n[network]\nmode = \"allowlist\"\nallow = [\"a.test\"]\n\
                    [ssh]\nallow = [\"a.test\"]\nkeys = [\"SHA256:2ZVS3ORjMcB2CdBuJzhNAFW4ULjqQgQKcwL4P7Jvf6U\"]\n";

#[test]
fn no_workspace_file_loosens_the_policy_and_every_refusal_names_a_line() {
    let (home, ws) = (Path::new("/h"), Path::new("/w"));
    let mut user = Config::default();
    user.merge_text(USER, Path::new("/h/u.toml"), Scope::User, home, ws)
        .unwrap();
    check("config-toml", 512, toml_text(), |bytes| {
        // The launcher reads the file as UTF-8 (a file that is not is refused before this).
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return Ok(());
        };
        let mut c = user.clone();
        match c.merge_text(
            text,
            Path::new("/w/.claude-sandbox.toml"),
            Scope::Workspace,
            home,
            ws,
        ) {
            Ok(()) => {
                prop_assert_eq!(&c.writable, &user.writable);
                prop_assert_eq!(&c.reveal, &user.reveal);
                prop_assert!(c.allow_ssh_agent <= user.allow_ssh_agent);
                prop_assert!(c.allow_user_namespaces <= user.allow_user_namespaces);
                prop_assert!(c.quarantine_new_executables >= user.quarantine_new_executables);
                prop_assert!(c.network.mode() >= user.network.mode());
                prop_assert!(c.devices.gpu <= user.devices.gpu);
                prop_assert_eq!(&c.network.allow, &user.network.allow);
                prop_assert_eq!(&c.ssh.allow, &user.ssh.allow);
                prop_assert!(c.ssh.sign_commits <= user.ssh.sign_commits);
                let (now, before) = (c.ssh.keys.as_ref(), user.ssh.keys.as_ref());
                prop_assert!(now.is_some_and(|n| n.iter().all(|k| before.unwrap().contains(k))));
            }
            Err(crate::error::Error::Config { line, .. }) => {
                prop_assert!(
                    line >= 1 && line <= text.lines().count().max(1) + 1,
                    "line {}",
                    line
                );
            }
            Err(e) => prop_assert!(false, "not a config error: {}", e),
        }
        Ok(())
    });
}

const GLOBALS: &[&str] = &[
    "numStartups",
    "tipsHistory",
    "env",
    "apiKeyHelper",
    "mcpServers",
    "allowedTools",
    "hasTrustDialogAccepted",
    "autoUpdates",
    "remoteControlAtStartup",
    "oauthAccount",
    "primaryApiKey",
    "projects",
];
const PROJECT_KEYS: &[&str] = &[
    "history",
    "allowedTools",
    "mcpServers",
    "hasTrustDialogAccepted",
    "env",
];
const PROJECTS: &[&str] = &["/w", "/other", "/w/"];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (0u8..3).prop_map(Value::from),
        proptest::sample::select(&["", "x", "/bin/sh"][..]).prop_map(Value::from),
        Just(Value::Array(Vec::new())),
        Just(Value::Object(Map::new())),
        Just(serde_json::json!({"NODE_OPTIONS": "--require /x"})),
        proptest::sample::select(&["u1", "u2"][..])
            .prop_map(|u| serde_json::json!({"accountUuid": u})),
    ]
}

fn object_of(keys: &'static [&'static str], value: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    proptest::collection::btree_map(proptest::sample::select(keys), value, 0..keys.len())
        .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()))
        .boxed()
}

/// A `~/.claude.json`: global keys, and `projects` as an object of project entries (or anything).
fn claude_json() -> BoxedStrategy<Value> {
    let project = prop_oneof![4 => object_of(PROJECT_KEYS, leaf().boxed()), 1 => leaf()].boxed();
    let projects = prop_oneof![4 => object_of(PROJECTS, project), 1 => leaf()].boxed();
    (
        object_of(GLOBALS, leaf().boxed()),
        proptest::option::of(projects),
    )
        .prop_map(|(mut g, p)| {
            if let (Value::Object(m), Some(p)) = (&mut g, p) {
                m.insert("projects".into(), p);
            }
            g
        })
        .boxed()
}

/// A seed (a real file's shape), with generated keys laid over its top level and its projects.
fn seeded() -> impl Strategy<Value = Value> {
    let seeds: Vec<Value> = seeds("claude-json")
        .iter()
        .map(|b| serde_json::from_slice(b).expect("a seed of claude-json is JSON"))
        .collect();
    (proptest::sample::select(seeds), claude_json()).prop_map(|(mut seed, over)| {
        if let (Value::Object(s), Value::Object(o)) = (&mut seed, over) {
            for (k, v) in o {
                match (s.get_mut(&k), v) {
                    (Some(Value::Object(sp)), Value::Object(op)) if k == "projects" => {
                        for (p, e) in op {
                            sp.insert(p, e);
                        }
                    }
                    (_, v) => {
                        s.insert(k, v);
                    }
                }
            }
        }
        seed
    })
}

/// The launch's copy, the jail's copy and the human's file now: made up, or grown from the seeds.
fn base_and_jail() -> impl Strategy<Value = (Value, Value, Value)> {
    // Now and then not an object at all (a file the agent replaced with a list, a number).
    let file = || prop_oneof![4 => claude_json(), 4 => seeded(), 1 => leaf()];
    (file(), file(), file())
}

#[test]
fn the_merge_carries_back_the_jails_changes_and_holds_what_is_not_data() {
    check(
        "claude-json",
        512,
        base_and_jail(),
        |(base, jail, human)| {
            let found = changes(&base, &jail, "/w");
            // Everything accepted: every key the changes name has the jail's value.
            let mut all = base.clone();
            for c in &found {
                apply(&mut all, &c.key, c.value.as_ref());
            }
            for c in &found {
                prop_assert_eq!(get(&all, &c.key), c.value.as_ref(), "{:?}", c.key);
            }
            // Only what crosses by itself, onto the human's file as it is now: nothing that runs,
            // names a place or logs in differs from the human's own unless it is an empty default new
            // to the launch's copy (or the same account).
            let mut merged = human.clone();
            for c in found
                .iter()
                .filter(|c| c.verdict.consequence == Consequence::Data)
            {
                apply(&mut merged, &c.key, c.value.as_ref());
            }
            for c in &found {
                // The keys that are not data, written out again from Claude Code's own lists (the
                // oracle is this list, not the judge's).
                let guarded = match &c.key {
                    Key::Global(k) => matches!(
                        k.as_str(),
                        "env"
                            | "apiKeyHelper"
                            | "mcpServers"
                            | "enabledMcpjsonServers"
                            | "disabledMcpjsonServers"
                            | "enableAllProjectMcpServers"
                            | "allowedTools"
                            | "hasTrustDialogAccepted"
                            | "installMethod"
                            | "autoUpdates"
                            | "autoUpdatesProtectedForNative"
                            | "autoInstallIdeExtension"
                            | "remoteControlAtStartup"
                            | "autoUploadSessions"
                            | "autoAddRemoteControlDaemonWorker"
                            | "oauthAccount"
                            | "primaryApiKey"
                            | "customApiKeyResponses"
                    ),
                    Key::Project { project, key } => {
                        matches!(
                            key.as_str(),
                            "env"
                                | "mcpServers"
                                | "enabledMcpjsonServers"
                                | "disabledMcpjsonServers"
                                | "enableAllProjectMcpServers"
                                | "allowedTools"
                                | "hasTrustDialogAccepted"
                                | "mcpContextUris"
                        ) && !(project == "/w" && key == "hasTrustDialogAccepted")
                    }
                };
                if !guarded || get(&merged, &c.key) == get(&human, &c.key) {
                    continue;
                }
                let v = get(&merged, &c.key);
                let empty = matches!(v, None | Some(Value::Null | Value::Bool(false)))
                    || v.is_some_and(|v| {
                        v.as_array().is_some_and(Vec::is_empty)
                            || v.as_object().is_some_and(Map::is_empty)
                    });
                let same_account = matches!(&c.key, Key::Global(k) if k == "oauthAccount")
                    && get(&base, &c.key)
                        .and_then(|a| a.get("accountUuid"))
                        .is_some()
                    && get(&base, &c.key).and_then(|a| a.get("accountUuid"))
                        == v.and_then(|a| a.get("accountUuid"));
                prop_assert!(
                    (get(&base, &c.key).is_none() && empty) || same_account,
                    "{:?} crossed as data: base {:?}, jail {:?}",
                    c.key,
                    get(&base, &c.key),
                    v
                );
            }
            Ok(())
        },
    );
}
