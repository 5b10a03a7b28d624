#!/usr/bin/env bash
# Package the devcontainer Feature: a folder holding devcontainer-feature.json, install.sh, the prompt
# hook, the battery and the release binaries for both architectures (bin/x86_64/claude-sandbox,
# bin/aarch64/claude-sandbox; install.sh takes the one of the container's). A Feature sees only its
# own folder, so it cannot build from source.
#
#   bash installer/package-feature.sh [--dist DIR] [OUT_DIR]
#
# DIR: where installer/dist.sh put the binaries (default TARGET/dist; dist.sh runs first when they
# are missing). OUT_DIR: default TARGET/feature/claude-sandbox; it is replaced.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$here/target}
dist=$target_dir/dist
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dist) dist=$2; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    -*) echo "package-feature.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "package-feature.sh: one OUT_DIR only (see --help)" >&2; exit 2; }; out=$1; shift ;;
  esac
done
out=${out:-$target_dir/feature/claude-sandbox}
for arch in x86_64 aarch64; do
  if [ ! -x "$dist/$arch-unknown-linux-gnu/claude-sandbox" ]; then
    bash "$here/installer/dist.sh" --out "$dist" >&2
    break
  fi
done
rm -rf "$out" && mkdir -p "$out"
cp "$here/installer/devcontainer-feature.json" "$out/"
cp "$here/installer/feature-README.md" "$out/README.md"
install -m 0755 "$here/installer/install.sh" "$out/install.sh"
cp "$here/profile.d/claude-sandbox.sh" "$out/claude-sandbox.sh"
cp -r "$here/battery" "$out/battery"
for arch in x86_64 aarch64; do
  install -D -m 0755 "$dist/$arch-unknown-linux-gnu/claude-sandbox" "$out/bin/$arch/claude-sandbox"
done
echo "$out"
