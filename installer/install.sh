#!/usr/bin/env bash
# Install claude-sandbox: bubblewrap (through the distribution's package manager), the binary (built
# from this checkout with cargo, or --binary PATH) into a root-owned directory, and the runtime
# directory. Idempotent. Records what it installed in a manifest so that --uninstall removes exactly
# that and nothing else.
#
#   sudo bash installer/install.sh [--prefix DIR] [--binary PATH] [--no-packages]
#   sudo bash installer/install.sh --uninstall [--prefix DIR]
#   DESTDIR=/staging bash installer/install.sh ...   (stage into a tree, for packaging and tests)
set -euo pipefail

prefix=/usr/local
binary=""
packages=1
uninstall=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --binary) binary=$2; shift 2 ;;
    --binary=*) binary=${1#*=}; shift ;;
    --no-packages) packages=0; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

dest=${DESTDIR:-}
root="$dest$prefix"
manifest="$root/share/claude-sandbox/manifest"
here=$(cd "$(dirname "$0")/.." && pwd)

say() { printf 'claude-sandbox install: %s\n' "$*"; }

if [ "$uninstall" = 1 ]; then
  [ -f "$manifest" ] || { say "nothing installed under $root (no manifest)"; exit 0; }
  # Files first, then directories deepest first; a directory is removed only if empty.
  tac "$manifest" | while IFS= read -r path; do
    if [ -d "$path" ] && [ ! -L "$path" ]; then rmdir "$path" 2>/dev/null || true; else rm -f "$path"; fi
  done
  rm -f "$manifest"
  rmdir "$root/share/claude-sandbox" 2>/dev/null || true
  say "removed what was installed under $root"
  exit 0
fi

install_packages() {
  command -v bwrap >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
  elif command -v apk >/dev/null 2>&1; then
    apk add --no-cache bubblewrap
  elif command -v dnf >/dev/null 2>&1; then
    dnf install -y bubblewrap
  else
    say "no apt-get, apk or dnf: install bubblewrap yourself"; return 1
  fi
}
[ "$packages" = 1 ] && [ -z "$dest" ] && install_packages

if [ -z "$binary" ]; then
  command -v cargo >/dev/null 2>&1 || { say "cargo not found: install Rust or pass --binary PATH"; exit 1; }
  (cd "$here" && cargo build --release --locked -q)
  binary="$here/target/release/claude-sandbox"
fi
[ -x "$binary" ] || { say "$binary is not an executable"; exit 1; }

record() { grep -qxF "$1" "$manifest" 2>/dev/null || echo "$1" >> "$manifest"; }
mkdir -p "$root/share/claude-sandbox" "$root/bin"
touch "$manifest"
record "$root/share/claude-sandbox"
# Root-owned, not writable by the user the agent runs as: the guard of the next session.
install -m 0755 "$binary" "$root/bin/claude-sandbox.new"
mv -f "$root/bin/claude-sandbox.new" "$root/bin/claude-sandbox"
record "$root/bin/claude-sandbox"

# The shared runtime directory: sticky and world-writable like /tmp; each user's own is 0700.
if [ -z "$dest" ]; then
  mkdir -p /run/claude-sandbox && chmod 1777 /run/claude-sandbox
fi
say "installed $root/bin/claude-sandbox ($("$root/bin/claude-sandbox" --version))"
