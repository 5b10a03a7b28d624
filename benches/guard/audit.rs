//! The audit trail's shipping (issue 39): the launch with `[audit]` pointing at a dead collector
//! (nothing listens: refused at once) and at a slow one (it accepts and never answers), beside the
//! launch with no shipping and bare bwrap, alternating. The records are sent by a thread of their
//! own, so the launch until the command starts should not move; at the end the process waits for
//! the queue at most `timeout_ms` (500 ms by default), which the slow collector uses up when the
//! session is shorter than the timeout.

use super::{bare_probe, difference_row, fixture, launch_of, ms, pct, split_run, Table, PROBE};

pub(crate) fn launch_with_shipping() {
    let (scene, ws, path) = fixture(1, 2, 20);
    let etc = scene.path().join("etc");
    std::fs::create_dir_all(&etc).unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Accepts (the kernel completes the handshake into the backlog) and never reads or answers.
    let slow = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let slow_port = slow.local_addr().unwrap().port();
    let configs = [
        ("none", String::new()),
        (
            "dead",
            format!(
                "[audit]\notlp = \"http://127.0.0.1:{dead}\"\nsyslog = \"tcp:127.0.0.1:{dead}\"\n"
            ),
        ),
        (
            "slow",
            format!("[audit]\notlp = \"http://127.0.0.1:{slow_port}\"\n"),
        ),
    ];
    for (name, text) in &configs {
        std::fs::write(etc.join(format!("{name}.toml")), text).unwrap();
    }
    let run = |name: &str| {
        let mut c = launch_of(scene.path(), &ws, &path, &PROBE);
        c.env(
            "CLAUDE_SANDBOX_SYSTEM_CONFIG",
            etc.join(format!("{name}.toml")),
        );
        let (start, end, _) = split_run(c);
        (start, end)
    };
    let (mut b, mut runs) = (Vec::new(), [Vec::new(), Vec::new(), Vec::new()]);
    for round in 0..33 {
        let bare = split_run(bare_probe());
        let these = [run("none"), run("dead"), run("slow")];
        if round >= 3 {
            b.push(bare.0 + bare.1);
            for (v, r) in runs.iter_mut().zip(these) {
                v.push(r);
            }
        }
    }
    drop(slow);
    Table::row(
        "bare bwrap, sh -c date",
        ms(pct(&b, 0.5)),
        ms(pct(&b, 0.99)),
        "reference",
        "1.0",
        b.len(),
    );
    let half = |v: &[(f64, f64)], second: bool| -> Vec<f64> {
        v.iter().map(|x| if second { x.1 } else { x.0 }).collect()
    };
    for (i, label) in [
        "audit shipped to a dead collector",
        "audit shipped to a slow collector (never answers)",
    ]
    .into_iter()
    .enumerate()
    {
        difference_row(
            &format!("  {label}: until the command starts, + vs no shipping (target +1 ms)"),
            &half(&runs[0], false),
            &half(&runs[i + 1], false),
        );
        difference_row(
            &format!("  {label}: after the command ends, + vs no shipping (bound: timeout_ms)"),
            &half(&runs[0], true),
            &half(&runs[i + 1], true),
        );
    }
}
