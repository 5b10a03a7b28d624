//! `claude-sandbox review`, for real: the interactive view in a real terminal (tmux) — keys, a
//! resize, a long list, a binary file, an escape sequence in what the jail named — and the same
//! items as a listing on a pipe; a held item survives a launcher killed before the session's end.

use crate::common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// A session that leaves: 30 held git keys (aliases that run programs), one `~/.claude.json` key
/// whose value carries an escape sequence, and a quarantined binary (a planted `~/.local/bin/git`).
fn leave_items(f: &Fixture) {
    std::fs::write(f.home.join(".claude.json"), "{\"numStartups\":1}\n").unwrap();
    let aliases = (0..30).fold(String::new(), |s, i| {
        s + &format!("git config alias.x{i:02} '!sh -c evil{i}'; ")
    });
    let script = format!(
        "{aliases} python3 -c \"
import json, os
p = os.path.expanduser('~/.claude.json')
d = json.load(open(p))
d['env'] = {{'X': 'a\\x1b]52;c;ZXZpbA==\\x07b'}}
json.dump(d, open(p + '.tmp.1.a', 'w'))
os.rename(p + '.tmp.1.a', p)
\"; cp /bin/true ~/.local/bin/git; sleep 0.5"
    );
    ok(&f.jail(&script));
}

fn review_json(f: &Fixture) -> Vec<serde_json::Value> {
    let out = f.cmd(["review", "--json"]).output().unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_review_in_a_terminal_decides_with_keys_and_shows_nothing_raw() {
    let f = Fixture::sharing_local_bin();
    leave_items(&f);
    let before = review_json(&f);
    assert_eq!(before.len(), 32, "{before:#?}");
    let env: Vec<String> = f.env().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let t = Tmux::start(
        &f.root,
        &format!(
            "cd {} && env -i TERM=xterm {} {} review; echo REVIEW-ENDED:$?; sleep 30",
            f.ws.display(),
            env.join(" "),
            bin().display()
        ),
    );
    let s = t.wait_for("claude-sandbox review: 32 item(s)", 1);
    // What the jail named is shown escaped: no raw ESC or BEL reached the terminal's screen.
    assert!(!s.contains('\u{1b}') && !s.contains('\u{7}'), "{s:?}");
    // Oldest first: the quarantined binary, shown as hex.
    t.run(&["send-keys", "-t", "t", "Enter"]);
    let s = t.wait_for("binary,", 1);
    assert!(s.contains("7f 45 4c 46"), "the ELF header as hex: {s}");
    t.run(&["send-keys", "-t", "t", "q"]);
    // Down to the `~/.claude.json` key: its value is shown escaped.
    t.run(&["send-keys", "-t", "t", "j"]);
    let s = t.wait_for("u001b]52", 1);
    assert!(s.contains("> h") && s.contains("env = "), "{s}");
    assert!(!s.contains('\u{1b}') && !s.contains('\u{7}'), "{s:?}");
    // A resize redraws it within the new width.
    t.run(&["resize-window", "-t", "t", "-x", "70", "-y", "20"]);
    std::thread::sleep(Duration::from_millis(300));
    let s = t.wait_for("claude-sandbox review", 1);
    assert!(s.lines().all(|l| l.chars().count() <= 70), "{s}");
    // Accept asks first; `n` keeps it.
    t.run(&["send-keys", "-t", "t", "a"]);
    t.wait_for("y yes", 1);
    t.run(&["send-keys", "-t", "t", "n"]);
    t.wait_for("not accepted", 1);
    // Reject the env key; then back to the top and accept the binary (restored).
    t.run(&["send-keys", "-t", "t", "r"]);
    t.wait_for("left out env", 1);
    t.run(&["send-keys", "-t", "t", "g"]);
    t.run(&["send-keys", "-t", "t", "a"]);
    t.wait_for("y yes", 1);
    t.run(&["send-keys", "-t", "t", "y"]);
    t.wait_for("restored", 1);
    t.run(&["send-keys", "-t", "t", "q"]);
    let s = t.wait_for("REVIEW-ENDED:", 1);
    assert!(s.contains("REVIEW-ENDED:1"), "30 still wait: {s}");
    let after = review_json(&f);
    assert_eq!(after.len(), 30, "{after:#?}");
    assert!(
        f.home.join(".local/bin/git").is_file(),
        "accepted: restored"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap()).unwrap();
    assert!(v.get("env").is_none(), "rejected: not yours");
}

#[test]
fn on_a_pipe_the_review_is_a_listing_and_scripts_decide_by_id() {
    let f = Fixture::sharing_local_bin();
    leave_items(&f);
    let out = f.cmd(["review"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "something waits");
    let text = stdout(&out);
    assert!(
        text.starts_with("32 item(s) wait for your review:"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(
        text.contains("u001b]52;c;ZXZpbA==") && text.ends_with("show ID` shows one\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{}: alias.x00",
            f.ws.join(".git/config").display()
        )),
        "{text}"
    );
    let items = review_json(&f);
    let ids: Vec<String> = items
        .iter()
        .filter(|i| i["kind"] == "held" && i["what"].as_str().unwrap().starts_with("alias."))
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    let mut args = vec!["review".to_string(), "reject".to_string()];
    args.extend(ids.iter().cloned());
    ok(&f.cmd(&args).output().unwrap());
    let git = |k: &str| {
        let o = std::process::Command::new("git")
            .args(["config", "--get", k])
            .current_dir(&f.ws)
            .envs(f.env())
            .output()
            .unwrap();
        stdout(&o).trim().to_string()
    };
    assert_eq!(git("alias.x00"), "");
    // A rejected item can still be taken; accepted, it is set as the jail wrote it.
    let x00 = items
        .iter()
        .find(|i| i["what"].as_str().unwrap().starts_with("alias.x00 "))
        .map_or_else(
            || panic!("alias.x00 is held: {items:?}"),
            |i| i["id"].as_str().unwrap().to_string(),
        );
    ok(&f.cmd(["review", "accept", &x00]).output().unwrap());
    assert_eq!(git("alias.x00"), "!sh -c evil0");
    // A wrong id is a usage error, and says where to look.
    let out = f.cmd(["review", "accept", "h0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("claude-sandbox review"),
        "{}",
        stderr(&out)
    );
}

/// The launcher killed outright while the jail's change to `~/.claude.json` waits for the end of
/// the session: the next launch finishes the dead session, and the change is held, not lost.
#[test]
fn a_held_change_survives_a_killed_launcher() {
    let f = Fixture::sharing_local_bin();
    std::fs::write(f.home.join(".claude.json"), "{\"numStartups\":1}\n").unwrap();
    let script = "python3 -c \"
import json, os
p = os.path.expanduser('~/.claude.json')
d = json.load(open(p)); d['apiKeyHelper'] = '/w/key.sh'
json.dump(d, open(p + '.tmp', 'w')); os.rename(p + '.tmp', p)
\" && touch ready && sleep 60";
    let mut child = f
        .cmd(["run", "--", "bash", "-c", script])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while !f.ws.join("ready").exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the session never got ready"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(child.id(), nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    // The jail dies with its launcher (bwrap --die-with-parent); the next launch finishes it.
    let t0 = Instant::now();
    loop {
        ok(&f.jail("true"));
        if !review_json(&f).is_empty() || t0.elapsed() > Duration::from_secs(20) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let items = review_json(&f);
    assert_eq!(items.len(), 1, "{items:#?}");
    assert!(
        items[0]["what"]
            .as_str()
            .unwrap()
            .starts_with("apiKeyHelper"),
        "{items:#?}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(f.home.join(".claude.json")).unwrap()).unwrap();
    assert!(v.get("apiKeyHelper").is_none());
}

/// Issue 31's usability bar: an agent that makes `pkg/.npmrc` and `sub/.vscode/settings.json` as
/// part of its task uses them inside the session (npm in `pkg/` reads the new `.npmrc`; the
/// settings are read back and edited again), both are held at its end, out of the workspace, and
/// one `review accept` with both ids puts them back byte for byte, where your npm reads them.
#[test]
fn new_configs_below_the_root_work_inside_and_are_accepted_in_one_step() {
    let t = "new_configs_below_the_root_work_inside_and_are_accepted_in_one_step";
    if !(tool_or_say(t, "npm", false) && tool_or_say(t, "node", false)) {
        return;
    }
    let f = Fixture::new();
    std::fs::create_dir_all(f.ws.join("pkg")).unwrap();
    std::fs::write(
        f.ws.join("pkg/package.json"),
        "{\"name\":\"pkg\",\"version\":\"1.0.0\"}\n",
    )
    .unwrap();
    f.git(&f.ws, &["add", "pkg/package.json"]);
    f.git(&f.ws, &["commit", "-qm", "pkg"]);
    let npmrc = "save-exact=true\ninit-license=ISC-from-the-session\n";
    let settings = "{\n  \"editor.tabSize\": 4,\n  \"files.eol\": \"\\n\",\n  \"x\": \"é\"\n}";
    let out = f.jail(&format!(
        "printf '{npmrc}' > pkg/.npmrc && \
         (cd pkg && echo \"npm-inside:$(npm config get init-license)\") && sleep 1 && \
         mkdir -p sub/.vscode && printf '{{\"editor.tabSize\": 2}}' > sub/.vscode/settings.json && \
         python3 -c \"import json; json.load(open('sub/.vscode/settings.json'))\" && \
         printf '%s' '{settings}' > sub/.vscode/settings.json && echo WORKED"
    ));
    let so = stdout(&out);
    assert!(
        so.contains("npm-inside:ISC-from-the-session") && so.contains("WORKED"),
        "{so}{}",
        stderr(&out)
    );
    for held in ["pkg/.npmrc", "sub/.vscode/settings.json"] {
        assert!(
            !f.ws.join(held).exists(),
            "{held} not held:\n{}",
            stderr(&out)
        );
    }
    // The watcher told of the new `.npmrc` while the session ran (a tick after it was made); the
    // review lists it once, as the held file, not as a held file and an alert.
    let alerts = f.cmd(["alerts", "--all", "--json"]).output().unwrap();
    let alerts: Vec<serde_json::Value> = serde_json::from_slice(&alerts.stdout).unwrap();
    let npmrc_path = f.ws.join("pkg/.npmrc");
    assert!(
        alerts.iter().any(
            |a| a["kind"] == "entry-point-created" && a["path"] == npmrc_path.to_str().unwrap()
        ),
        "no live alert: {alerts:#?}"
    );
    let items = review_json(&f);
    assert_eq!(items.len(), 2, "{items:#?}");
    let id_of = |rel: &str| {
        let target = f.ws.join(rel);
        items
            .iter()
            .find(|i| i["kind"] == "held" && i["target"] == target.to_str().unwrap())
            .and_then(|i| i["id"].as_str())
            .unwrap_or_else(|| panic!("{rel} not in the review: {items:#?}"))
            .to_string()
    };
    let ids = [id_of("pkg/.npmrc"), id_of("sub/.vscode/settings.json")];
    let accepted = f
        .cmd(["review", "accept", ids[0].as_str(), ids[1].as_str()])
        .output()
        .unwrap();
    assert!(accepted.status.success(), "{}", stderr(&accepted));
    assert_eq!(
        std::fs::read(f.ws.join("pkg/.npmrc")).unwrap(),
        npmrc.as_bytes()
    );
    assert_eq!(
        std::fs::read(f.ws.join("sub/.vscode/settings.json")).unwrap(),
        settings.as_bytes()
    );
    assert!(review_json(&f).is_empty(), "{:#?}", review_json(&f));
    // Your own npm, outside, in pkg/: the accepted file is the project's config.
    let mut npm = Command::new("npm");
    npm.args(["config", "get", "init-license"])
        .current_dir(f.ws.join("pkg"))
        .env_clear()
        .envs(f.env());
    let got = npm.output().unwrap();
    assert_eq!(
        stdout(&got).trim(),
        "ISC-from-the-session",
        "{}",
        stderr(&got)
    );
}
