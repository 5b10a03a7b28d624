//! `[devices] gpu = true` (issue 41, part 2): the GPU drivers' device nodes are bound into the
//! jail's `/dev` and nothing else of the host's; the workspace file cannot ask for them; `doctor`
//! says what it found. This machine has no GPU: the nodes are real character devices made with
//! `mknod` in the test's own directory (root only; said loudly otherwise), read instead of `/dev`.

use crate::common::*;

fn gpu_on(f: &Fixture) {
    let cfg = f.home.join(".config/claude-sandbox");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[devices]\ngpu = true\n").unwrap();
}

const PROBE: &str =
    "for n in /dev/dri/renderD128 /dev/nvidia0 /dev/nvidiactl /dev/sda /dev/kmsg-copy; do \
     test -c $n && echo \"has $n\"; done; echo x > /dev/dri/renderD128 && echo WROTE; \
     head -c 2 /dev/nvidia0 | od -An -tx1";

#[test]
fn gpu_nodes_are_bound_and_nothing_else_of_dev() {
    let f = Fixture::new();
    let dev = f.root.join("dev");
    std::fs::create_dir_all(dev.join("dri")).unwrap();
    // /dev/null's and /dev/zero's numbers, under GPU names; and a node that is no GPU's.
    let made = [
        "dri/renderD128 c 1 3",
        "nvidia0 c 1 5",
        "nvidiactl c 1 3",
        "sda c 1 3",
        "kmsg-copy c 1 3",
    ]
    .iter()
    .all(|spec| {
        let mut a = spec.split(' ');
        let name = a.next().unwrap();
        std::process::Command::new("mknod")
            .arg(dev.join(name))
            .args(a)
            .status()
            .is_ok_and(|s| s.success())
    });
    if !made {
        assert!(!is_root(), "mknod failed as root");
        eprintln!(
            "!!!!!!!! devices::gpu_nodes_are_bound_and_nothing_else_of_dev NOT RUN as this user: \
             mknod needs root (CI runs it as root) !!!!!!!!"
        );
        return;
    }
    let run = |f: &Fixture| {
        ok(&f
            .cmd(["run", "--", "sh", "-c", PROBE])
            .env("CLAUDE_SANDBOX_TEST_DEV_ROOT", &dev)
            .output()
            .unwrap())
    };
    // Off by default: none of them.
    let off = run(&f);
    assert!(!off.contains("has "), "{off}");
    gpu_on(&f);
    let on = run(&f);
    assert!(on.contains("has /dev/dri/renderD128"), "{on}");
    assert!(
        on.contains("has /dev/nvidia0") && on.contains("has /dev/nvidiactl"),
        "{on}"
    );
    assert!(
        !on.contains("has /dev/sda") && !on.contains("kmsg-copy"),
        "{on}"
    );
    // The nodes work: the bind is the device itself (null's and zero's numbers here).
    assert!(on.contains("WROTE") && on.contains("00 00"), "{on}");
    let explain = ok(&f
        .cmd(["explain"])
        .env("CLAUDE_SANDBOX_TEST_DEV_ROOT", &dev)
        .output()
        .unwrap());
    assert!(
        explain.contains("GPU devices ([devices] gpu): /dev/dri/renderD128"),
        "{explain}"
    );
}

#[test]
fn without_a_gpu_doctor_says_so_and_the_workspace_cannot_ask_for_one() {
    let f = Fixture::new();
    // This machine's own /dev: no GPU (checked, so that the test says what it tested).
    let real = std::path::Path::new("/dev");
    let has_gpu = ["dri", "nvidia0", "nvidiactl", "kfd"]
        .iter()
        .any(|n| real.join(n).exists());
    let doctor = |f: &Fixture| stdout(&f.cmd(["doctor", "--json"]).output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&doctor(&f)).unwrap();
    let devices = |v: &serde_json::Value| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "devices")
            .cloned()
            .expect("a devices check")
    };
    gpu_on(&f);
    let v2: serde_json::Value = serde_json::from_str(&doctor(&f)).unwrap();
    if has_gpu {
        eprintln!("!!!!!!!! this machine has a GPU device node: the no-GPU case is NOT tested here !!!!!!!!");
        assert_eq!(devices(&v2)["mark"], "pass", "{v2}");
    } else {
        assert_eq!(devices(&v)["mark"], "n/a", "{v}");
        let c = devices(&v2);
        assert_eq!(c["mark"], "warn", "{c}");
        assert!(
            c["why"].as_str().unwrap().contains("no GPU device node"),
            "{c}"
        );
        let out = ok(&f
            .cmd(["run", "--", "sh", "-c", "ls /dev"])
            .output()
            .unwrap());
        assert!(!out.contains("dri") && !out.contains("nvidia"), "{out}");
    }
    std::fs::write(f.ws.join(".claude-sandbox.toml"), "[devices]\ngpu = true\n").unwrap();
    let refused = f.cmd(["run", "--", "true"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("devices.gpu"),
        "{}",
        stderr(&refused)
    );
}
