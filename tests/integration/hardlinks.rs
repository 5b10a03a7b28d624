//! Hard links out of the workspace (`src/jail/hardlinks.rs`): a write through the workspace's name
//! of a file linked into a store outside (pnpm's, uv's) must never change the store's file, and the
//! agent's own installs must keep working.

use crate::common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

fn nlink(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().nlink()
}

/// uv's layout, made as uv makes it: the venv's files are hard links into `~/.cache/uv`, and the
/// human's other project links the same files.
#[test]
fn a_write_through_a_linked_venv_file_never_reaches_the_store_or_the_other_project() {
    let f = Fixture::new();
    let archive = f.home.join(".cache/uv/archive-v0/abc/six");
    let venv = f.ws.join(".venv/lib/python3.11/site-packages/six");
    let other = f.root.join("other/.venv/lib/python3.11/site-packages/six");
    for d in [&archive, &venv, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(archive.join("__init__.py"), "X = 1\n").unwrap();
    std::fs::hard_link(archive.join("__init__.py"), venv.join("__init__.py")).unwrap();
    std::fs::hard_link(archive.join("__init__.py"), other.join("__init__.py")).unwrap();
    // Linked within the workspace only: left as it is.
    std::fs::write(f.ws.join("a.txt"), "a\n").unwrap();
    std::fs::hard_link(f.ws.join("a.txt"), f.ws.join("b.txt")).unwrap();
    assert_eq!(nlink(&venv.join("__init__.py")), 3);

    let out = f.jail(&format!(
        "echo 'import os; os.system(\"touch /tmp/pwned\")' >> {v}/__init__.py && cat {v}/__init__.py; \
         echo $UV_LINK_MODE $pnpm_config_package_import_method",
        v = venv.display()
    ));
    let out = ok(&out);
    assert!(out.ends_with("copy copy\n"), "{out}");
    assert!(
        out.contains("X = 1\nimport os"),
        "the jail's write failed: {out}"
    );
    assert_eq!(
        read(&archive.join("__init__.py")),
        "X = 1\n",
        "uv's cache changed"
    );
    assert_eq!(
        read(&other.join("__init__.py")),
        "X = 1\n",
        "the other project changed"
    );
    // The agent's write is in the workspace's own copy.
    assert!(read(&venv.join("__init__.py")).contains("import os"));
    assert_eq!(nlink(&venv.join("__init__.py")), 1);
    assert_eq!(nlink(&archive.join("__init__.py")), 2);
    assert_eq!(
        nlink(&f.ws.join("a.txt")),
        2,
        "a link inside the workspace was broken"
    );
}

/// A linked file whose directory the launcher cannot write (so no copy can be made beside it) is
/// bound read-only instead. Only an ordinary user can be refused a directory of its own.
#[test]
fn a_link_that_cannot_be_broken_is_bound_read_only() {
    use std::os::unix::fs::PermissionsExt;
    if is_root() {
        eprintln!(
            "*** a_link_that_cannot_be_broken_is_bound_read_only: root writes any directory, \
             so the copy always succeeds here; the read-only path is tested as an ordinary user ***"
        );
        return;
    }
    let f = Fixture::new();
    let store = f.root.join("store");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(store.join("f.js"), "ok\n").unwrap();
    let dir = f.ws.join("locked");
    std::fs::create_dir(&dir).unwrap();
    std::fs::hard_link(store.join("f.js"), dir.join("f.js")).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let out = f.jail("chmod u+w locked locked/f.js 2>&1; echo evil 2>&1 >> locked/f.js; echo $?");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = ok(&out);
    assert!(
        out.contains("Read-only file system") && out.ends_with("1\n"),
        "{out}"
    );
    assert_eq!(
        read(&store.join("f.js")),
        "ok\n",
        "the store's file changed"
    );
}

/// The real pnpm, offline, from a local tarball: the workspace's `node_modules/.pnpm` files are
/// hard links into `~/.local/share/pnpm/store`. A write through the workspace leaves the store and
/// the human's other project (linked to the same store files) alone; the agent's own `pnpm install` works and links nothing.
#[test]
fn pnpm_store_links_are_broken_and_the_agents_pnpm_install_still_works() {
    let t = "pnpm_store_links_are_broken_and_the_agents_pnpm_install_still_works";
    if !(tool_or_say(t, "pnpm", false) && tool_or_say(t, "node", false)) {
        return;
    }
    let f = Fixture::new();
    let tgz = npm_tarball(&f.root, "hello");
    let pnpm = |dir: &Path| {
        let out = Command::new("pnpm")
            .args(["install", "--offline"])
            .current_dir(dir)
            .envs(f.env())
            .output()
            .unwrap();
        ok(&out);
    };
    let manifest = format!(
        r#"{{"name":"w","version":"1.0.0","dependencies":{{"hello-cs":"file:{}"}}}}"#,
        tgz.display()
    );
    std::fs::write(f.ws.join("package.json"), &manifest).unwrap();
    pnpm(&f.ws);
    // The human's other project, installed from the same store: it links the same files.
    let other = f.root.join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("package.json"), &manifest).unwrap();
    pnpm(&other);
    let linked =
        f.ws.join("node_modules/.pnpm")
            .read_dir()
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with("hello-cs@"))
            .unwrap()
            .path()
            .join("node_modules/hello-cs/bin.js");
    assert_eq!(nlink(&linked), 3, "pnpm did not link from its store here");

    let out = f.jail(&format!(
        "echo 'require(\"fs\").writeFileSync(\"{m}\", \"\")' >> {l} && \
         mkdir -p sub && cp package.json sub/ && cd sub && pnpm install --offline >/dev/null && \
         find node_modules/.pnpm -type f -links +1 | wc -l && node_modules/.bin/hello-cs",
        m = f.root.join("pwned").display(),
        l = linked.display()
    ));
    assert_eq!(
        ok(&out),
        "0\nhello\n",
        "the agent's pnpm install failed or linked"
    );
    assert!(
        read(&linked).contains("writeFileSync"),
        "the jail's write failed"
    );

    // The human's other project runs a clean file.
    let run = Command::new(other.join("node_modules/.bin/hello-cs"))
        .envs(f.env())
        .output()
        .unwrap();
    assert_eq!(ok(&run), "hello\n");
    assert!(!f.root.join("pwned").exists(), "the payload ran outside");
}
