//! Unit tests of `layers`: the plan, the mounts' order, the store.

use super::*;
use crate::jail::policy::LayerMount;

#[test]
fn overlay_needs_5_11_a_store_off_overlayfs_and_plain_paths() {
    let p = Path::new("/h/.cache");
    assert!(overlay_possible("6.18.44-fc-v669", false, &[p]));
    assert!(overlay_possible("5.11.0", false, &[p]));
    assert!(!overlay_possible("5.10.200", false, &[p]));
    assert!(!overlay_possible("6.1.0", true, &[p]));
    assert!(!overlay_possible("6.1.0", false, &[Path::new("/h/a,b")]));
    assert!(!overlay_possible("6.1.0", false, &[Path::new("/h/a:b")]));
    assert!(!overlay_possible("garbage", false, &[p]));
}

fn by_name<'a>(layers: &'a [Layer], n: &str) -> &'a Layer {
    layers.iter().find(|l| l.name == n).unwrap()
}

#[test]
fn missing_layers_are_the_jails_own_and_nested_ones_need_yours() {
    let root = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir_all(home.join(".cargo/registry")).unwrap();
    std::fs::create_dir_all(home.join(".local/bin")).unwrap();
    std::fs::write(home.join(".npm"), "").unwrap(); // a file: left alone
    let store = home.join("store");
    let layers = plan(&home, &store);
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    // Parents first; `~/.cargo/git` and `~/.local/share/pnpm` are missing below existing top
    // directories: they lie in the data layers. A missing `~/go` or `~/bin` (a home PATH
    // directory's top) is the jail's own layer all the same.
    assert_eq!(
        names,
        ["local", "cargo", "go", "bin", "cache", "cargo-registry"]
    );
    assert!(!by_name(&layers, "go").human && !by_name(&layers, "bin").human);
    let by = |n: &str| layers.iter().find(|l| l.name == n).unwrap();
    assert_eq!(by("cache").lower, store.join("empty"));
    assert_eq!(by("cargo-registry").lower, home.join(".cargo/registry"));
    assert_eq!(
        by("cargo-registry").upper,
        store.join("cargo-registry/upper")
    );
    assert!(by("cargo-registry").human && !by("cache").human);
    assert!(by("local").data && by("cargo").data && !by("cache").data);
}

#[test]
fn a_data_layer_without_an_overlay_shows_yours_read_only_a_cache_never() {
    let root = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir_all(home.join(".local/share")).unwrap();
    std::fs::create_dir_all(home.join(".cache")).unwrap();
    let mut layers = plan(&home, &home.join("s"));
    for l in &mut layers {
        l.overlay = false;
    }
    let by = |n: &str| layers.iter().find(|l| l.name == n).unwrap();
    assert_eq!(by("local").mount(), LayerMount::Yours);
    assert_eq!(by("cache").mount(), LayerMount::Own);
    assert_eq!(by("cargo").mount(), LayerMount::Own, "you have no ~/.cargo");
}

#[test]
fn clear_removes_an_overlay_work_dir_and_refuses_while_in_use() {
    let root = tempfile::tempdir().unwrap();
    let store = root.path().join("layers");
    let mut layers = plan(root.path(), &store);
    let held = prepare(&store, &mut layers).unwrap();
    let stuck = store.join("cache/work/work");
    std::fs::create_dir_all(&stuck).unwrap();
    std::fs::write(stuck.join("f"), "x").unwrap();
    std::fs::set_permissions(&stuck, std::fs::Permissions::from_mode(0o000)).unwrap();
    assert!(clear(&store, Some("cache")).is_err());
    drop(held);
    // Another test's child may still share the lock's open file description for the moment
    // between its fork and its exec (O_CLOEXEC closes it only at exec): retry, bounded.
    let t0 = std::time::Instant::now();
    while clear(&store, Some("cache")).is_err() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "the lock was not released"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!store.join("cache").exists());
    assert!(store.join("npm/own").is_dir());
    assert!(clear(&store, Some("nope")).is_err());
}

#[test]
fn the_shared_base_is_used_only_when_roots_sticky_and_a_real_directory() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    let base = t.path().join("base");
    std::fs::create_dir(&base).unwrap();
    let root = rustix::process::geteuid().is_root();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Owned by whoever runs the test: root's is usable, anyone else's is not.
    assert_eq!(shared_base_usable(&base), root);
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(
        !shared_base_usable(&base),
        "not sticky: another user could rename yours"
    );
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&base, &link).unwrap();
    assert!(!shared_base_usable(&link), "a symlink is refused");
    assert!(!shared_base_usable(&t.path().join("missing")));
}

#[test]
fn a_home_off_overlayfs_keeps_its_own_store_whatever_the_shared_base() {
    let t = tempfile::tempdir().unwrap();
    let env = crate::host::HostEnv::of(&[]);
    // This machine's temporary directories are not on overlayfs (the devcontainer test has the
    // other case, for real: a home on the container's overlayfs and the Feature's volume).
    if fs_magic(t.path()) != Some(OVERLAYFS_SUPER_MAGIC) {
        assert_eq!(
            store_dir(t.path(), &env),
            t.path().join(".local/state/claude-sandbox/layers")
        );
    }
    let env = crate::host::HostEnv::of(&[(crate::host::LAYERS_DIR, "/elsewhere")]);
    assert_eq!(store_dir(t.path(), &env), Path::new("/elsewhere"));
}
