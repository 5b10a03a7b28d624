#!/usr/bin/env bash
# The npm packages, from the binaries installer/dist.sh built: claude-sandbox (the launcher, the
# installer, the prompt hook, the battery) and one package per platform holding its binary
# (@claude-sandbox/linux-x64, @claude-sandbox/linux-arm64), each an `npm pack` tarball ready for
# `npm publish` (platform packages first).
#
#   bash installer/npm/pack.sh [--dist DIR] [--out DIR]     (default: TARGET/dist, TARGET/dist/npm)
#
# Both platforms' binaries must be in DIST (DIST/x86_64-unknown-linux-gnu/claude-sandbox, ...).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$here/target}
dist=$target_dir/dist
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dist) dist=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "pack.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
out=${out:-$dist/npm}
command -v npm >/dev/null 2>&1 || { echo "pack.sh: npm not found (apt-get install npm)" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)
npm_dir=$here/installer/npm
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$out"
rm -f "$out"/claude-sandbox-*.tgz

for pair in x64:x86_64 arm64:aarch64; do
  cpu=${pair%%:*} arch=${pair#*:}
  bin="$dist/$arch-unknown-linux-gnu/claude-sandbox"
  [ -x "$bin" ] || { echo "pack.sh: $bin is missing: run installer/dist.sh first" >&2; exit 1; }
  file -b "$bin" 2>/dev/null | grep -q "$( [ "$arch" = x86_64 ] && echo x86-64 || echo aarch64 )" \
    || { echo "pack.sh: $bin is not an $arch binary" >&2; exit 1; }
  p="$stage/linux-$cpu"
  mkdir -p "$p"
  sed "s/@VERSION@/$version/g; s/@CPU@/$cpu/g" "$npm_dir/platform.package.json" > "$p/package.json"
  install -m 0755 "$bin" "$p/claude-sandbox"
  (cd "$p" && npm pack --silent --pack-destination "$out" >/dev/null)
done

p="$stage/claude-sandbox"
mkdir -p "$p/bin" "$p/battery"
sed "s/@VERSION@/$version/g" "$npm_dir/claude-sandbox/package.json" > "$p/package.json"
install -m 0755 "$npm_dir/claude-sandbox/bin/claude-sandbox" "$p/bin/claude-sandbox"
cp "$npm_dir/claude-sandbox/README.md" "$p/"
install -m 0755 "$here/installer/install.sh" "$p/install.sh"
install -m 0644 "$here/profile.d/claude-sandbox.sh" "$p/claude-sandbox.sh"
install -m 0644 "$here"/battery/*.toml "$p/battery/"
(cd "$p" && npm pack --silent --pack-destination "$out" >/dev/null)
ls -1 "$out"/*.tgz
