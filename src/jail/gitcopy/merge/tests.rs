use super::*;
use crate::handback::Consequence;

fn keys(text: &str) -> Vec<Key> {
    gitconfig::parse(text.as_bytes()).unwrap()
}

fn no_local(_: &[u8]) -> bool {
    false
}

fn merged(base: &str, jail: &str, human: &str) -> Merge {
    let f: &dyn Fn(&[u8]) -> bool = &no_local;
    merge(
        &keys(base),
        &keys(jail),
        &keys(human),
        &Ctx { local_writable: f },
    )
}

const BASE: &str = "[core]\n\tbare = false\n[user]\n\tname = h\n";

#[test]
fn everyday_changes_are_carried_out() {
    let jail = format!(
        "{BASE}\temail = a@b\n\
         [remote \"origin\"]\n\turl = https://x/y\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
         [remote \"gh\"]\n\turl = git@github.com:o/r.git\n\
         [branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n\
         [push]\n\tautoSetupRemote = true\n\
         [alias]\n\tco = checkout\n\tlg = log --oneline --graph\n\
         [submodule \"lib\"]\n\tactive = true\n"
    );
    let m = merged(BASE, &jail, BASE);
    let names: Vec<&str> = m.set.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "user.email",
            "remote.origin.url",
            "remote.origin.fetch",
            "remote.gh.url",
            "branch.main.remote",
            "branch.main.merge",
            "push.autosetupremote",
            "alias.co",
            "alias.lg",
            "submodule.lib.active"
        ]
    );
    assert!(m.held.is_empty() && m.conflicts.is_empty(), "{m:?}");
}

#[test]
fn what_runs_a_program_is_held_not_dropped() {
    for planted in [
        "[core]\n\tfsmonitor = ./x\n",
        "[core]\n\tsshCommand = x\n",
        "[alias]\n\tst = !x\n",
        "[alias]\n\tst = grep -O\"touch /tmp/p #\" -e hello\n",
        "[include]\n\tpath = ../x\n",
        "[includeIf \"gitdir:/\"]\n\tpath = x\n",
        "[filter \"a\"]\n\tclean = x\n",
        "[remote \"o\"]\n\turl = ext::sh -c x\n",
        "[credential]\n\thelper = !x\n",
        "[man \"man\"]\n\tpath = /w/.tools/m\n",
        "[tar \"tar.gz\"]\n\tcommand = touch /tmp/p; cat\n",
        "[trailer \"sign\"]\n\tcommand = touch /tmp/p\n",
        "[init]\n\ttemplateDir = /w/.tools/tpl\n",
        "[core]\n\tworktree = /w/build/wt\n",
        "[remote \"origin\"]\n\turl = fd::3\n",
        "[remote \"origin\"]\n\turl = ssh://-oProxyCommand=x/y\n",
        "[browser \"x\"]\n\tpath = /w/x\n",
    ] {
        let m = merged(BASE, &format!("{BASE}{planted}"), BASE);
        assert!(m.set.is_empty(), "{planted}: {m:?}");
        assert_eq!(m.held.len(), 1, "{planted}: {m:?}");
        assert_eq!(
            m.held[0].verdict.consequence,
            Consequence::Program,
            "{planted}"
        );
    }
}

#[test]
fn places_are_held() {
    let with = "[remote \"origin\"]\n\turl = https://github.com/o/r\n";
    let m = merged(
        with,
        "[remote \"origin\"]\n\turl = https://evil.example/o/r\n",
        with,
    );
    assert_eq!(m.held.len(), 1, "{m:?}");
    assert_eq!(m.held[0].verdict.consequence, Consequence::Place);
    assert_eq!(
        m.held[0].human,
        vec![Some(b"https://github.com/o/r".to_vec())]
    );
    for planted in [
        "[url \"/w/evil.git\"]\n\tinsteadOf = https://github.com/\n",
        "[http]\n\tproxy = http://evil:8080\n",
    ] {
        let m = merged(BASE, &format!("{BASE}{planted}"), BASE);
        assert_eq!(m.held.len(), 1, "{planted}: {m:?}");
        assert_eq!(
            m.held[0].verdict.consequence,
            Consequence::Place,
            "{planted}"
        );
    }
    // A local repository: held when the jail could write its hooks, carried when not.
    let jail = format!("{BASE}[branch \"main\"]\n\tpushRemote = ./node_modules/x.git\n");
    let yes: &dyn Fn(&[u8]) -> bool = &|_| true;
    let m = merge(
        &keys(BASE),
        &keys(&jail),
        &keys(BASE),
        &Ctx {
            local_writable: yes,
        },
    );
    assert_eq!(m.held.len(), 1, "{m:?}");
    assert!(merged(BASE, &jail, BASE).held.is_empty());
}

#[test]
fn removals_conflicts_and_a_flood() {
    let with_remote = "[remote \"o\"]\n\turl = https://h/r\n";
    let m = merged(with_remote, "", with_remote);
    assert_eq!(m.set, vec![("remote.o.url".to_string(), vec![])]);
    // Turning off a key that runs something is the human's to decide.
    let human = "[core]\n\thooksPath = .husky/_\n";
    let m = merged(human, "", human);
    assert!(m.set.is_empty() && m.held.len() == 1, "{m:?}");
    let human = "[core]\n\tfsmonitor = ./hook\n";
    let m = merged(human, "[core]\n\tfsmonitor = false\n", human);
    assert!(m.set.is_empty() && m.held.len() == 1, "{m:?}");
    let m = merged(
        BASE,
        "[user]\n\tname = j\n[core]\n\tbare = false\n",
        "[user]\n\tname = k\n[core]\n\tbare = false\n",
    );
    assert_eq!(m.conflicts, ["user.name"]);
    assert!(m.set.is_empty() && m.held.is_empty());
    let flood = (0..=MAX_CARRIED).fold(String::new(), |s, i| {
        s + &format!("[remote \"r{i}\"]\n\turl = https://h/{i}\n")
    });
    let m = merged(BASE, &format!("{BASE}{flood}"), BASE);
    assert!(m.too_many && m.set.is_empty() && m.held.is_empty());
}

/// Real directories: a bare repository in the workspace (a writable root) is the jail's to shape;
/// one outside it, and a path that does not exist outside the roots, are not.
#[test]
fn a_local_repository_is_writable_when_it_lies_under_a_writable_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::create_dir_all(ws.join("node_modules/x.git/hooks")).unwrap();
    std::fs::create_dir_all(root.join("srv/remote.git/hooks")).unwrap();
    let config = ws.join(".git/config");
    let roots = vec![ws.clone()];
    assert!(local_repo_writable(
        b"./node_modules/x.git",
        &config,
        &roots
    ));
    assert!(
        local_repo_writable(b"../node_modules/x.git", &config, &roots),
        "relative to .git"
    );
    assert!(local_repo_writable(
        ws.join("node_modules/x.git").to_str().unwrap().as_bytes(),
        &config,
        &roots
    ));
    assert!(!local_repo_writable(
        root.join("srv/remote.git").to_str().unwrap().as_bytes(),
        &config,
        &roots
    ));
    assert!(!local_repo_writable(
        b"/nonexistent/elsewhere.git",
        &config,
        &roots
    ));
    // Its hooks moved into the workspace by its own config.
    std::fs::write(
        root.join("srv/remote.git/config"),
        format!("[core]\n\thooksPath = {}\n", ws.join("hooks").display()),
    )
    .unwrap();
    assert!(local_repo_writable(
        root.join("srv/remote.git").to_str().unwrap().as_bytes(),
        &config,
        &roots
    ));
    // A link from outside into the workspace.
    std::os::unix::fs::symlink(ws.join("node_modules/x.git"), root.join("link.git")).unwrap();
    assert!(local_repo_writable(
        root.join("link.git").to_str().unwrap().as_bytes(),
        &config,
        &roots
    ));
    // A record without roots (an older version's): every local path counts.
    assert!(local_repo_writable(b"/srv/remote.git", &config, &[]));
    assert!(local_repo_writable(b"~/x.git", &config, &roots));
}
