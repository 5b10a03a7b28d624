use super::*;
use crate::handback::Consequence;
use crate::held::{Change, Store};

fn hold_file(rt: &Path, id: &str, target: &Path, bytes: &[u8]) {
    let item = Item {
        id: id.into(),
        time: crate::alerts::now_rfc3339(),
        session: "s".into(),
        consequence: Consequence::Identity,
        why: "another account".into(),
        target: target.to_path_buf(),
        what: "auth.json".into(),
        change: Change::File {
            sha256: crate::quarantine::sha256_bytes(bytes),
            mode: 0o600,
            before: crate::quarantine::sha256_path(target),
        },
    };
    Store::new(rt).hold(&item, Some(bytes)).unwrap();
}

#[test]
fn held_items_are_listed_decided_and_gone_from_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(&rt).unwrap();
    let target = dir.path().join("auth.json");
    std::fs::write(&target, "{\"a\":1}\n").unwrap();
    hold_file(&rt, "h1", &target, b"{\"a\":2}\n");
    hold_file(&rt, "h2", &dir.path().join("other.json"), b"x");
    let entries = collect(&rt);
    assert_eq!(
        entries.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["h1", "h2"]
    );
    let p = preview(&rt, &entries[0], 50);
    assert!(
        p.contains(&"- {\"a\":1}".to_string()) && p.contains(&"+ {\"a\":2}".to_string()),
        "{p:?}"
    );
    accept(&rt, "h1").unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"{\"a\":2}\n");
    reject(&rt, "h2").unwrap();
    assert!(collect(&rt).is_empty());
    let mut out = Vec::new();
    print_list(&collect(&rt), "", &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "nothing waits for your review\n"
    );
}

#[test]
fn what_the_jail_named_is_escaped_in_the_listing_and_the_preview() {
    let dir = tempfile::tempdir().unwrap();
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(&rt).unwrap();
    let evil = dir.path().join("a\u{1b}]52;c;ZXZpbA==\u{7}b");
    hold_file(&rt, "h3", &evil, "line\u{1b}[2K\n".as_bytes());
    let mut out = Vec::new();
    print_list(&collect(&rt), "", &mut out);
    let text = String::from_utf8(out).unwrap();
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("a\\e]52;c;ZXZpbA==\\x07b"), "{text}");
    let e = &collect(&rt)[0];
    for l in preview(&rt, e, 50) {
        assert!(!l.contains('\u{1b}'), "{l:?}");
    }
    let mut shown = Vec::new();
    show(&rt, "h3", "", &mut shown).unwrap();
    assert!(!shown.contains(&0x1b));
}

#[test]
fn an_unknown_id_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let e = accept(dir.path(), "h123").unwrap_err();
    assert_eq!(e.exit_code(), crate::error::EXIT_USAGE, "{e}");
}
