//! Sockets that appear after launch: an ssh `ControlMaster` socket in `~/.ssh`, a restarted
//! gpg-agent in `~/.gnupg`, a socket under `/run` (a restarted dockerd). Each is made outside
//! while the jail runs, then the jail tries to connect; what the agent legitimately reads in those
//! directories stays readable.

use crate::common::*;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sockets_made_after_launch_are_unreachable_and_ssh_config_stays_readable() {
    let f = Fixture::new();
    let ssh = f.home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::create_dir_all(f.home.join(".gnupg")).unwrap();
    std::fs::write(ssh.join("config"), "Host x\n  ControlPath ~/.ssh/cm-%C\n").unwrap();
    std::fs::write(ssh.join("known_hosts"), "KNOWN-HOST\n").unwrap();
    // Subdirectories hold sockets made later too (a ControlPath from the system config, `${HOME}`
    // or `%h` in its directory part): only their files are in the jail.
    std::fs::create_dir_all(ssh.join("sockets")).unwrap();
    std::fs::create_dir_all(ssh.join("config.d")).unwrap();
    std::fs::write(ssh.join("config.d/work"), "WORK-INCLUDE\n").unwrap();
    std::fs::create_dir_all(f.home.join(".docker/run")).unwrap();
    std::fs::write(f.home.join(".gnupg/pubring.kbx"), "PUBRING\n").unwrap();
    // Under /run only root can make one; the runtime directory's base is hidden anyway.
    let run_sock = is_root()
        .then(|| std::path::PathBuf::from(format!("/run/cs-test-{}.sock", std::process::id())));
    if run_sock.is_none() {
        eprintln!("\n*** /run part NOT RUN as this user (only root can make a socket under /run); the root run covers it.\n");
    }
    let targets: Vec<std::path::PathBuf> = [
        ssh.join("cm-abc"),
        ssh.join("sockets/cm-def"),
        f.home.join(".gnupg/S.gpg-agent"),
        f.home.join(".docker/run/docker.sock"),
    ]
    .into_iter()
    .chain(run_sock.clone())
    .collect();
    let list = targets
        .iter()
        .map(|t| format!("'{}'", t.display()))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!(
        "cat ~/.ssh/config ~/.ssh/known_hosts ~/.ssh/config.d/work ~/.gnupg/pubring.kbx; touch ready; \
         while [ ! -e go ]; do sleep 0.02; done; \
         for s in {list}; do python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"CONNECTED\", sys.argv[1])' \"$s\" 2>&1 | tail -1; done"
    );
    let child = f
        .cmd(["run", "--", "bash", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the jail", || f.ws.join("ready").exists());
    let listeners: Vec<UnixListener> = targets
        .iter()
        .map(|t| UnixListener::bind(t).unwrap())
        .collect();
    for t in &targets {
        assert!(
            std::os::unix::net::UnixStream::connect(t).is_ok(),
            "outside: {}",
            t.display()
        );
    }
    std::fs::write(f.ws.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    drop(listeners);
    for t in &targets {
        let _ = std::fs::remove_file(t);
    }
    let text = ok(&out);
    for visible in ["ControlPath", "KNOWN-HOST", "WORK-INCLUDE", "PUBRING"] {
        assert!(
            text.contains(visible),
            "{visible} unreadable inside:\n{text}"
        );
    }
    assert!(
        !text.contains("CONNECTED"),
        "a socket made after launch was reachable:\n{text}"
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("Errno") || l.contains("Error"))
            .count(),
        targets.len(),
        "{text}"
    );
}
