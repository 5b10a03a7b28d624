use super::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn link_targets_and_npm_packages() {
    assert_eq!(
        normal(Path::new("/h/.local/bin/../lib/node_modules/x/bin.js")),
        Path::new("/h/.local/lib/node_modules/x/bin.js")
    );
    let pkg = |p: &str| npm_package(Path::new(p));
    assert_eq!(
        pkg("lib/node_modules/pnpm/bin/pnpm.cjs"),
        Some("lib/node_modules/pnpm".into())
    );
    assert_eq!(
        pkg("lib/node_modules/@scope/tool/cli.js"),
        Some("lib/node_modules/@scope/tool".into())
    );
    assert_eq!(pkg("lib/node_modules/pnpm"), None);
    assert_eq!(pkg("share/claude/versions/2.1"), None);
}

#[test]
fn entry_points_record_and_requires_are_read() {
    let eps = "[gui_scripts]\ng = a:b\n[console_scripts]\npygmentize = pygments.cmdline:main\n\
               [other]\nnot = x:y\n";
    assert_eq!(scripts(eps), vec!["g", "pygmentize"]);
    let record = "pygments/__init__.py,sha256=x,10\n\"odd,name.py\",sha256=y,1\n\
                  ../../../bin/pygmentize,sha256=z,3\n/abs,,\npygments-2.dist-info/RECORD,,\n";
    assert_eq!(
        record_paths(record),
        vec![
            PathBuf::from("pygments/__init__.py"),
            "odd,name.py".into(),
            "pygments-2.dist-info/RECORD".into()
        ]
    );
    let meta = "Name: pytest\nRequires-Dist: pluggy<2,>=1.5\nRequires-Dist: colorama; \
                sys_platform == \"win32\"\nRequires-Dist: hypothesis; extra == \"dev\"\n\nBody\
                \nRequires-Dist: no\n";
    assert_eq!(requires(meta), vec!["pluggy<2,>=1.5", "colorama"]);
}

struct Scene {
    _t: tempfile::TempDir,
    home: PathBuf,
    store: PathBuf,
}

fn scene() -> Scene {
    let t = tempfile::tempdir().unwrap();
    let (home, store) = (t.path().join("home"), t.path().join("store"));
    std::fs::create_dir_all(&home).unwrap();
    Scene { _t: t, home, store }
}

fn write(p: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_console_script_comes_with_its_distribution_byte_for_byte() {
    let s = scene();
    let up = s.store.join("local/upper");
    write(
        &up.join("bin/hello"),
        "#!/usr/bin/python3\nfrom hello import main\n",
        0o755,
    );
    let site = up.join("lib/python3.11/site-packages");
    write(&site.join("hello/__init__.py"), "def main(): pass\n", 0o644);
    write(
        &site.join("hello-1.dist-info/entry_points.txt"),
        "[console_scripts]\nhello = hello:main\n",
        0o644,
    );
    write(
        &site.join("hello-1.dist-info/METADATA"),
        "Name: hello\nRequires-Dist: dep\n",
        0o644,
    );
    write(
        &site.join("hello-1.dist-info/RECORD"),
        "hello/__init__.py,,\nhello-1.dist-info/METADATA,,\nhello-1.dist-info/entry_points.txt,,\n\
         hello-1.dist-info/RECORD,,\n../../../bin/hello,,\n",
        0o644,
    );
    let a = plan(
        &s.home,
        &s.store,
        OsStr::new("/usr/bin:/bin"),
        "hello",
        false,
    )
    .unwrap();
    assert_eq!(a.kind, "pip console script");
    assert_eq!(a.requires, vec!["dep"]);
    assert_eq!(
        a.steps.last().unwrap().to(),
        s.home.join(".local/bin/hello")
    );
    super::super::apply(&a).unwrap();
    let yours = s.home.join(".local/lib/python3.11/site-packages");
    assert_eq!(
        std::fs::read(yours.join("hello/__init__.py")).unwrap(),
        b"def main(): pass\n"
    );
    assert!(yours.join("hello-1.dist-info/RECORD").is_file());
    let bin = s.home.join(".local/bin/hello");
    assert_eq!(
        std::fs::read(&bin).unwrap(),
        std::fs::read(up.join("bin/hello")).unwrap()
    );
    assert_eq!(
        std::fs::metadata(&bin).unwrap().permissions().mode() & 0o7777,
        0o755
    );
    // Now yours: a second adopt refuses to replace it.
    let again = plan(&s.home, &s.store, OsStr::new(""), "hello", false).unwrap_err();
    assert!(
        again.to_string().contains("exists (yours); --force"),
        "{again}"
    );
}

#[test]
fn a_name_that_shadows_a_command_needs_force_and_set_id_bits_are_dropped() {
    let s = scene();
    let sys = s.home.join("sys");
    write(&sys.join("tool"), "", 0o755);
    write(&s.store.join("cargo/upper/bin/tool"), "\x7fELF", 0o4755);
    let path = sys.as_os_str();
    let e = plan(&s.home, &s.store, path, "tool", false).unwrap_err();
    assert!(e.to_string().contains("would shadow"), "{e}");
    assert!(e.to_string().contains("--force"), "{e}");
    let a = plan(&s.home, &s.store, path, "tool", true).unwrap();
    super::super::apply(&a).unwrap();
    let m = std::fs::metadata(s.home.join(".cargo/bin/tool")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o755);
}

#[test]
fn an_npm_link_brings_its_package_and_other_links_into_the_layer_are_refused() {
    let s = scene();
    let up = s.store.join("local/upper");
    write(
        &up.join("lib/node_modules/hello-cs/bin.js"),
        "#!/usr/bin/env node\n",
        0o755,
    );
    write(
        &up.join("lib/node_modules/hello-cs/package.json"),
        "{}",
        0o644,
    );
    std::fs::create_dir_all(up.join("bin")).unwrap();
    std::os::unix::fs::symlink(
        "../lib/node_modules/hello-cs/bin.js",
        up.join("bin/hello-cs"),
    )
    .unwrap();
    write(&up.join("share/claude/versions/9"), "", 0o755);
    std::os::unix::fs::symlink(
        s.home.join(".local/share/claude/versions/9"),
        up.join("bin/claude"),
    )
    .unwrap();
    let a = plan(&s.home, &s.store, OsStr::new(""), "hello-cs", false).unwrap();
    assert_eq!(a.kind, "npm package");
    super::super::apply(&a).unwrap();
    let link = s.home.join(".local/bin/hello-cs");
    assert_eq!(std::fs::read(&link).unwrap(), b"#!/usr/bin/env node\n");
    assert!(s
        .home
        .join(".local/lib/node_modules/hello-cs/package.json")
        .is_file());
    let e = plan(&s.home, &s.store, OsStr::new(""), "claude", false).unwrap_err();
    assert!(e.to_string().contains("cannot bring whole"), "{e}");
    assert!(!s.home.join(".local/bin/claude").exists());
}

#[test]
fn what_is_not_installed_or_not_a_name_is_refused_in_one_line() {
    let s = scene();
    for name in ["missing", "../x", "", ".."] {
        let e = plan(&s.home, &s.store, OsStr::new(""), name, false).unwrap_err();
        assert!(!e.to_string().contains('\n'), "{e}");
        assert!(e.to_string().starts_with("adopt "), "{e}");
    }
}
