#!/usr/bin/env python3
"""A/B of the launch with every feature on (benches/guard/features.rs's scene: 5 repositories, 10
PATH dirs of 200 executables, four cache/data layers over the human's directories, the network
allowlist with its proxy, the jail's git-config copies, ~/.claude and ~/.codex), two binaries and
bare bwrap alternating. Each runs `sh -c 'date +%s%N'`: the time until the command starts is
split from the rest. Prints medians and the median of the pairs' differences (B - A).
usage: ab-features.py BINARY_A BINARY_B [N]     (AB_VV=1: print one `-vv` launch of each)"""
import os, subprocess, sys, time, statistics
import abscene
A, B = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
root, ws, home, path = abscene.scene("cs-abf-")
for d in [".cache/pip", ".npm/_cacache", ".cargo/registry/index", ".local/share/pnpm/store",
          ".claude/projects", ".codex/sessions", ".config/claude-sandbox"]:
    os.makedirs(f"{home}/{d}")
open(f"{home}/.claude/settings.json", "w").write("{}\n")
open(f"{home}/.config/claude-sandbox/config.toml", "w").write(
    '[network]\nmode = "allowlist"\nallow = ["registry.npmjs.org"]\n')
subprocess.run(["sync"])
PROBE = ["sh", "-c", "date +%s%N"]
def env(tag):
    return {"HOME": home, "PATH": path, "CLAUDE_SANDBOX_RUNTIME_DIR": f"{root}/rt-{tag}",
            "CLAUDE_SANDBOX_LAYERS_DIR": f"{root}/layers-{tag}"}
def timed(cmd, **kw):
    t0 = time.time_ns()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, **kw)
    t2 = time.time_ns()
    t1 = int(out.stdout.split()[-1])
    return (t1 - t0) / 1e6, (t2 - t1) / 1e6
def run(b, tag):
    return timed([b, "run", "--"] + PROBE, cwd=ws, env=env(tag))
def bare():
    return timed(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid"] + PROBE)
if os.environ.get("AB_VV"):
    for b, tag in ((A, "a"), (B, "b")):
        for _ in range(2): run(b, tag)
        print(f"== {b}")
        subprocess.run([b, "-vv", "run", "--", "true"], cwd=ws, env=env(tag))
for _ in range(3): run(A, "a"); run(B, "b"); bare()
ra, rb, rbare = [], [], []
for _ in range(n):
    ra.append(run(A, "a")); rb.append(run(B, "b")); rbare.append(bare())
m = statistics.median
print(f"load average {os.getloadavg()[0]:.2f}; until the command starts / after it ends (ms)")
print(f"{'':28} {'start':>8} {'end':>8}  n")
for name, v in (("bare bwrap", rbare), ("A " + os.path.basename(A), ra), ("B " + os.path.basename(B), rb)):
    print(f"{name:28} {m([x[0] for x in v]):8.2f} {m([x[1] for x in v]):8.2f}  {len(v)}")
for name, v in (("A", ra), ("B", rb)):
    print(f"{name} - bare, start (median of pairs) {m([x[0] - y[0] for x, y in zip(v, rbare)]):+8.2f}")
print(f"{'B - A, start (median of pairs)':28} {m([b[0] - a[0] for a, b in zip(ra, rb)]):+8.2f}")
print(f"{'B - A, end (median of pairs)':28} {m([b[1] - a[1] for a, b in zip(ra, rb)]):+8.2f}")
if os.environ.get("AB_KEEP"): print("kept", root)
else: subprocess.run(["rm", "-rf", root])
