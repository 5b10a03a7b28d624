#!/usr/bin/env bash
# Package the devcontainer Feature: a folder holding devcontainer-feature.json, install.sh, the prompt
# hook and a release binary built from this checkout (a Feature sees only its own folder, so it cannot
# build from source). Usage: bash installer/package-feature.sh [OUT_DIR]   (default target/feature)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/target/feature/claude-sandbox}
(cd "$here" && cargo build --release --locked -q)
rm -rf "$out" && mkdir -p "$out"
cp "$here/installer/devcontainer-feature.json" "$out/"
install -m 0755 "$here/installer/install.sh" "$out/install.sh"
cp "$here/profile.d/claude-sandbox.sh" "$out/claude-sandbox.sh"
cp -r "$here/battery" "$out/battery"
install -m 0755 "$here/target/release/claude-sandbox" "$out/claude-sandbox"
echo "$out"
