//! Churn at memory speed (issue 36): 20 000 files made, written twice and removed in 200 new
//! directories of a workspace on tmpfs, the CPU of the whole process tree counted by a cgroup, so
//! that what the guard makes the writer pay (inotify's events, each woken read) is counted with
//! the watcher's own, and the session's launch and end too. Bare bwrap, the guarded run, and the
//! guarded run with the watcher polling (`CLAUDE_SANDBOX_WATCH=poll`), alternating. Printed, never
//! asserted. Needs a cgroup the bench can make (root: v2 at /sys/fs/cgroup, or v1's cpuacct) and a
//! tmpfs at /dev/shm; says so and prints no figure without them.

use super::{fixture_in, pct, Table};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A cgroup of the bench's own, removed when dropped.
struct Cgroup {
    dir: PathBuf,
    /// v1's `cpuacct.usage` (ns) or v2's `cpu.stat` (`usage_usec`).
    v2: bool,
}

impl Cgroup {
    fn make() -> Option<Cgroup> {
        let name = format!("cs-bench-{}", std::process::id());
        let v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let parent = if v2 {
            "/sys/fs/cgroup"
        } else {
            "/sys/fs/cgroup/cpuacct"
        };
        let dir = Path::new(parent).join(name);
        std::fs::create_dir(&dir).ok()?;
        Some(Cgroup { dir, v2 })
    }

    /// CPU seconds used in the cgroup so far.
    fn used(&self) -> f64 {
        if self.v2 {
            let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap();
            let usec = stat
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .unwrap();
            usec.trim().parse::<f64>().unwrap() / 1e6
        } else {
            let ns = std::fs::read_to_string(self.dir.join("cpuacct.usage")).unwrap();
            ns.trim().parse::<f64>().unwrap() / 1e9
        }
    }

    /// CPU seconds the command and everything it started used, run to its end inside the cgroup.
    fn run(&self, c: &Command) -> f64 {
        let mut sh = Command::new("bash");
        sh.arg("-c")
            .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
            .arg(&self.dir)
            .arg(c.get_program())
            .args(c.get_args())
            .envs(c.get_envs().filter_map(|(k, v)| Some((k, v?))));
        if let Some(d) = c.get_current_dir() {
            sh.current_dir(d);
        }
        sh.stdout(Stdio::null()).stderr(Stdio::null());
        let before = self.used();
        let st = sh.status().unwrap();
        assert!(st.success(), "{c:?} failed: {st}");
        self.used() - before
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn on_tmpfs(p: &Path) -> bool {
    rustix::fs::statfs(p).is_ok_and(|s| s.f_type == 0x0102_1994)
}

pub(super) fn tree_cpu_rows() {
    let shm = Path::new("/dev/shm");
    let Some(cg) = Cgroup::make() else {
        println!(
            "churn on tmpfs, whole tree CPU: NOT MEASURED (no cgroup could be made: run as root)"
        );
        return;
    };
    if !on_tmpfs(shm) {
        println!("churn on tmpfs, whole tree CPU: NOT MEASURED (/dev/shm is not a tmpfs)");
        return;
    }
    let (d, ws, path) = fixture_in(shm, 1, 2, 50);
    let script = super::work::churn_script("build-out", false);
    let bare = {
        let mut c = Command::new("/usr/bin/bwrap");
        c.args([
            "--bind", "/", "/", "--dev", "/dev", "--bind", "/dev/shm", "/dev/shm",
        ])
        .args([
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-pid",
            "--chdir",
        ])
        .arg(&ws)
        .args(["bash", "-c", &script]);
        c
    };
    let guarded = super::launch_of(d.path(), &ws, &path, &["bash", "-c", &script]);
    let mut polled = super::launch_of(d.path(), &ws, &path, &["bash", "-c", &script]);
    polled.env("CLAUDE_SANDBOX_WATCH", "poll");
    // Alternating, after one round to warm up (not counted).
    let mut runs: [Vec<f64>; 3] = Default::default();
    for round in 0..6 {
        for (cmd, to) in [&bare, &guarded, &polled].into_iter().zip(runs.iter_mut()) {
            let cpu = cg.run(cmd);
            if round > 0 {
                to.push(cpu);
            }
        }
    }
    let [bm, gm, pm] = runs.each_ref().map(|v| pct(v, 0.5));
    for (label, v, target) in [
        ("churn 20k on tmpfs, tree CPU: bare", bm, ""),
        ("churn 20k on tmpfs, tree CPU: guarded", gm, "<= +10 %"),
        ("churn 20k on tmpfs, tree CPU: guarded, poll", pm, ""),
    ] {
        Table::row(
            label,
            format!("{:.0} ms", v * 1e3),
            String::new(),
            target,
            format!("{:+.1} %", (v / bm - 1.0) * 100.0),
            runs[0].len(),
        );
    }
    drop(d);
}
