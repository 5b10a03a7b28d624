#!/bin/bash
# The hard-link scan on a real pnpm workspace and a real uv venv (needs pnpm, uv and the npm and
# PyPI registries): each is copied with `cp -al` (every file then has a link outside the copy), and
# launched three times: the first launch breaks every link, the second reads what changed, the
# third finds every directory unchanged. Prints the launcher's own figure for the phase (-vv).
# usage: hardlinks-real.sh [CLAUDE_SANDBOX_BINARY]   (scratch in /var/tmp/hl-meas)
set -euo pipefail
B=${1:-target/release/claude-sandbox}; B=$(realpath "$B")
M=/var/tmp/hl-meas
mkdir -p "$M/home/.local/bin" "$M/pn" "$M/uvp"
export HOME=$M/home CLAUDE_SANDBOX_RUNTIME_DIR=$M/rt CLAUDE_SANDBOX_LAYERS_DIR=$M/layers
if [ ! -d "$M/pn/node_modules" ]; then
  (cd "$M/pn" && echo '{"name":"pn","version":"1.0.0"}' > package.json && pnpm add express lodash typescript eslint >/dev/null)
fi
if [ ! -d "$M/uvp/.venv" ]; then
  (cd "$M/uvp" && uv venv -q .venv && uv pip install -q --python .venv/bin/python requests django)
fi
export PATH=/usr/local/bin:/usr/bin:/bin
phase() { grep "hard links out" | sed -E 's/.*ms=([0-9.]+).*entries=([0-9]+) unchanged_dirs=([0-9]+) broken=([0-9]+).*/\1 ms, entries read \2, unchanged dirs \3, links broken \4/'; }
for src in pn uvp; do
  echo "$src: $(find "$M/$src" -type f | wc -l) files, $(find "$M/$src" -type f -links +1 | wc -l) with a second link, $(find "$M/$src" -type d | wc -l) directories"
  for i in 1 2 3; do
    rm -rf "$M/w" "$M/rt/hardlinks"; cp -al "$M/$src" "$M/w"; sync
    cd "$M/w"
    for launch in first second third; do
      echo "  run $i, $launch launch: $("$B" -vv run -- true 2>&1 | phase)"
    done
    cd "$M"
  done
done
