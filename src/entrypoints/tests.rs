use super::*;

/// A directory tagged as a cache (CACHEDIR.TAG with the specification's signature) or holding a
/// `pyvenv.cfg` is not walked: a repository inside it is not found and the directory is not handed
/// to the watcher. A wrong signature, a FIFO or a symlink of that name, a `pyvenv.cfg` that is a
/// directory prune nothing; the workspace root is never pruned.
#[test]
fn caches_and_environments_are_not_walked_and_nothing_else_is_skipped() {
    let t = tempfile::tempdir().unwrap();
    let ws = t.path();
    let tag = b"Signature: 8a477f597d28d172789f06886806bc55\n# a cache\n";
    let repo_in = |dir: &str| {
        std::fs::create_dir_all(ws.join(dir).join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join(dir).join(".git/objects")).unwrap();
        std::fs::create_dir_all(ws.join(dir).join(".git/refs")).unwrap();
        std::fs::write(ws.join(dir).join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    };
    repo_in("target/debug/build/dep");
    std::fs::write(ws.join("target/CACHEDIR.TAG"), tag).unwrap();
    repo_in("wrongsig/r");
    std::fs::write(ws.join("wrongsig/CACHEDIR.TAG"), b"Signature: 0000\n").unwrap();
    repo_in("fifo/r");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("fifo/CACHEDIR.TAG"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    repo_in("link/r");
    std::fs::write(ws.join("real.tag"), tag).unwrap();
    std::os::unix::fs::symlink(ws.join("real.tag"), ws.join("link/CACHEDIR.TAG")).unwrap();
    std::fs::write(ws.join("CACHEDIR.TAG"), tag).unwrap(); // the root itself: still walked
    repo_in("plain/r");
    repo_in(".venv/src/editable");
    std::fs::write(ws.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
    repo_in("notvenv/r");
    std::fs::create_dir(ws.join("notvenv/pyvenv.cfg")).unwrap();

    let d = discover_workspace(ws, None);
    let found: Vec<PathBuf> = d.repos.iter().map(|r| r.git_dir.clone()).collect();
    let git_dir = |dir: &str| std::fs::canonicalize(ws.join(dir).join(".git")).unwrap();
    for kept in ["wrongsig/r", "fifo/r", "link/r", "plain/r", "notvenv/r"] {
        assert!(
            found.contains(&git_dir(kept)),
            "{kept} not found: {found:?}"
        );
    }
    for skipped in ["target/debug/build/dep", ".venv/src/editable"] {
        assert!(
            !found.contains(&git_dir(skipped)),
            "{skipped}: a repository inside a cache or an environment was walked: {found:?}"
        );
    }
    assert!(d.dirs.contains(&ws.join("wrongsig")));
    assert!(
        !d.dirs
            .iter()
            .any(|x| x.starts_with(ws.join("target")) || x.starts_with(ws.join(".venv"))),
        "a cache or an environment is handed to the watcher: {:?}",
        d.dirs
    );
}

#[test]
fn per_directory_names_are_unique() {
    let mut names: Vec<_> = per_directory().map(|c| c.name).collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
}

/// An `.envrc`'s includes are followed at any depth and through what it sources: sourced files
/// (a directory means its `.envrc`) and every parent's file of a `source_up` are findings, the
/// `.env` files and PATH directories are named, a chain of sources is read once per file.
#[test]
fn envrc_includes_are_followed_through_sourced_files() {
    let t = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(t.path()).unwrap();
    std::fs::create_dir_all(ws.join("a/b")).unwrap();
    std::fs::create_dir_all(ws.join("lib")).unwrap();
    std::fs::write(ws.join(".envrc"), "source_env lib\nsource_env .envrc\n").unwrap();
    std::fs::write(
        ws.join("lib/.envrc"),
        "dotenv ../.env.shared\nPATH_add ../bin\n",
    )
    .unwrap();
    std::fs::write(ws.join("a/b/.envrc"), "source_up .envrc.up\ndotenv\n").unwrap();
    let d = discover_workspace(&ws, None);
    let found = |p: &str| d.findings.iter().any(|f| f.path == ws.join(p));
    for p in ["lib/.envrc", "a/.envrc.up", ".envrc.up"] {
        assert!(found(p), "{p} not sealed: {:#?}", d.findings);
    }
    assert_eq!(d.dotenv, vec![ws.join(".env.shared"), ws.join("a/b/.env")]);
    assert_eq!(d.path_adds, vec![ws.join("bin")]);
}
