#!/usr/bin/env python3
"""A/B of the guard's CPU during workspace churn (benches/guard/work.rs's churn rows), two binaries
alternating: 20 000 files made, written twice and removed in 200 new directories under DIR of the
workspace (DIR tagged with CACHEDIR.TAG for `target`). The guard's CPU is the launcher's own
utime + stime (read from /proc while it is an unreaped zombie) less that of an empty launch; the
work's CPU is bare bwrap's (without a PID namespace, so that it reaches us).
usage: ab-churn.py BINARY_A BINARY_B [N] [DIR...]   (default DIRs: target build-out node_modules/.pkg)"""
import os, resource, subprocess, sys, statistics, time
import abscene
A, B = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
dirs = sys.argv[4:] or ["target", "build-out", "node_modules/.pkg"]
root, ws, home, path = abscene.scene("cs-abc-", repos=1, dirs=2, exes=50)
subprocess.run(["sync"])
def script(d):
    tag = f"printf 'Signature: 8a477f597d28d172789f06886806bc55\\n' > {d}/CACHEDIR.TAG; " if d == "target" else ""
    return (f"mkdir -p {d}; {tag}for d in $(seq 200); do mkdir {d}/d$d; "
            f"for f in $(seq 100); do echo a > {d}/d$d/f$f; echo b >> {d}/d$d/f$f; done; done; rm -rf {d}")
def guarded(b, tag, s):
    env = {"HOME": home, "PATH": path, "CLAUDE_SANDBOX_RUNTIME_DIR": f"{root}/rt-{tag}"}
    p = subprocess.Popen([b, "run", "--", "bash", "-c", s], cwd=ws, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    f = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    assert p.wait() == 0
    return cpu
def bare(s):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["bwrap", "--bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                    "--chdir", ws, "bash", "-c", s], check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
m = statistics.median
empty = {A: m([guarded(A, "a", "true") for _ in range(5)]), B: m([guarded(B, "b", "true") for _ in range(5)])}
print(f"load average {os.getloadavg()[0]:.2f}; guard CPU less an empty launch's (ms) / work CPU (s)")
for d in dirs:
    s = script(d)
    ga, gb, w = [], [], []
    for _ in range(n):
        w.append(bare(s)); ga.append(guarded(A, "a", s) - empty[A]); gb.append(guarded(B, "b", s) - empty[B])
    wm = m(w)
    print(f"{d:20} work {wm:5.2f} s   A {m(ga)*1e3:6.0f} ms ({m(ga)/wm*100:4.1f} %)   "
          f"B {m(gb)*1e3:6.0f} ms ({m(gb)/wm*100:4.1f} %)   runs A {[round(x*1e3) for x in ga]} B {[round(x*1e3) for x in gb]}")
subprocess.run(["rm", "-rf", root])
