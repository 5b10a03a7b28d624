#!/usr/bin/env python3
"""A/B launch time of two claude-sandbox binaries, alternating, on the bench's fixture (5 repos,
10 PATH dirs of 200 executables in the workspace, a home with ~/.local/bin; AB_CACHE=1 adds a
~/.cache; AB_STATE=1 a lived-in ~/.claude and ~/.codex; AB_RT=DIR the runtime directories there,
e.g. on tmpfs as /run is). Prints medians and the median of the pairs' differences.
usage: ab-launch.py BINARY_A BINARY_B [N]"""
import os, subprocess, sys, time, statistics
import abscene
A, B = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 40
root, ws, home, path = abscene.scene("cs-ab-")
if os.environ.get("AB_CACHE"): os.makedirs(f"{home}/.cache/tool"); open(f"{home}/.cache/tool/x", "w").write("x")
if os.environ.get("AB_STATE"):
    c = f"{home}/.claude"
    for d in ["projects/-w", "todos", "statsig", "debug", "plans", "file-history", "skills/a", "commands", "shell-snapshots"]:
        os.makedirs(f"{c}/{d}")
    for f, size in [("settings.json", 300), (".credentials.json", 400), ("history.jsonl", 2 << 20),
                    ("stats-cache.json", 4000), ("CLAUDE.md", 2000), ("keybindings.json", 50)]:
        open(f"{c}/{f}", "w").write("x" * size)
    x = f"{home}/.codex"
    for d in ["sessions/2026", "log", "skills/.system", "rules"]:
        os.makedirs(f"{x}/{d}")
    for f, size in [("config.toml", 200), ("auth.json", 500), ("history.jsonl", 1 << 20),
                    ("state_5.sqlite", 4 << 20), ("logs_2.sqlite", 16 << 20), ("AGENTS.md", 100)]:
        open(f"{x}/{f}", "w").write("x" * size)
subprocess.run(["sync"])
def env(tag):
    return {"HOME": home, "PATH": path, "CLAUDE_SANDBOX_RUNTIME_DIR": f"{os.environ.get('AB_RT', root)}/rt-{tag}",
            "CLAUDE_SANDBOX_LAYERS_DIR": f"{root}/layers-{tag}"}
def run(b, tag):
    t = time.perf_counter()
    subprocess.run([b, "run", "--", "true"], cwd=ws, env=env(tag), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - t) * 1e3
def bare():
    t = time.perf_counter()
    subprocess.run(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "true"], check=True)
    return (time.perf_counter() - t) * 1e3
for _ in range(3): run(A, "a"); run(B, "b"); bare()
ra, rb, rbare = [], [], []
for _ in range(n):
    ra.append(run(A, "a")); rb.append(run(B, "b")); rbare.append(bare())
m = statistics.median
print(f"{'':28} {'median':>9} {'p90':>9}  n")
for name, v in (("bare bwrap", rbare), ("A " + os.path.basename(A), ra), ("B " + os.path.basename(B), rb)):
    print(f"{name:28} {m(v):8.2f}  {sorted(v)[int(len(v)*0.9)]:8.2f}  {len(v)}")
print(f"{'B - A (median of pairs)':28} {m([b - a for a, b in zip(ra, rb)]):+8.2f}")
subprocess.run(["rm", "-rf", root])
