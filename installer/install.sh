#!/usr/bin/env bash
# Install claude-sandbox: bubblewrap (apt, apk or dnf), the binary (built from this checkout with cargo,
# `--binary PATH`, or `cargo install claude-sandbox` when there is no checkout) into a root-owned
# directory, the prompt hook (/etc/profile.d/, sourced from /etc/bash.bashrc and /etc/zsh/zshrc), the
# runtime directory, and on request root-owned wrappers that run an agent through the jail.
# Idempotent. Everything it creates is recorded in a manifest; --uninstall removes exactly that.
#
#   sudo bash installer/install.sh [--prefix DIR] [--sysconfdir DIR] [--binary PATH]
#                                  [--wrap claude,codex,...] [--no-packages]
#   sudo bash installer/install.sh --uninstall [--prefix DIR] [--sysconfdir DIR]
#
# --wrap NAME or NAME=/path/to/real: a wrapper PREFIX/bin/NAME that runs the real NAME (found on PATH
# now, outside PREFIX/bin) as `claude-sandbox run -- /path/to/real "$@"`. PREFIX/bin must come before
# the real one on PATH (/usr/local/bin comes before /usr/bin on Debian and Ubuntu).
# Environment: as a devcontainer Feature, WRAPAGENTS=claude,codex does what --wrap does.
set -euo pipefail

prefix=/usr/local
sysconfdir=/etc
binary=""
packages=1
uninstall=0
wrap=${WRAPAGENTS:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --sysconfdir) sysconfdir=$2; shift 2 ;;
    --sysconfdir=*) sysconfdir=${1#*=}; shift ;;
    --binary) binary=$2; shift 2 ;;
    --binary=*) binary=${1#*=}; shift ;;
    --wrap) wrap=$2; shift 2 ;;
    --wrap=*) wrap=${1#*=}; shift ;;
    --no-packages) packages=0; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

dest=${DESTDIR:-}
root="$dest$prefix"
etc="$dest$sysconfdir"
share="$root/share/claude-sandbox"
manifest="$share/manifest"
self_dir=$(cd "$(dirname "$0")" && pwd)
here=$(cd "$self_dir/.." && pwd)
# A packaged Feature (installer/package-feature.sh) carries the hook and a prebuilt binary beside this
# script; a checkout has them in profile.d/ and builds the binary.
hook_src="$here/profile.d/claude-sandbox.sh"
[ -f "$hook_src" ] || hook_src="$self_dir/claude-sandbox.sh"
[ -n "${BINARY:-}" ] && [ -z "${binary:-}" ] && binary=$BINARY
begin="# >>> claude-sandbox prompt hook >>>"
end="# <<< claude-sandbox prompt hook <<<"

say() { printf 'claude-sandbox install: %s\n' "$*"; }

# Remove our marked block from a shell rc file (leaves the rest byte for byte).
unhook_rc() {
  local rc=$1
  [ -f "$rc" ] && grep -qF "$begin" "$rc" || return 0
  local tmp
  tmp=$(mktemp "$rc.XXXXXX")
  awk -v b="$begin" -v e="$end" '$0==b{skip=1;next} $0==e{skip=0;next} !skip' "$rc" > "$tmp"
  chmod --reference="$rc" "$tmp" 2>/dev/null || true
  mv -f "$tmp" "$rc"
}

if [ "$uninstall" = 1 ]; then
  [ -f "$manifest" ] || { say "nothing installed under $root (no manifest)"; exit 0; }
  # Deepest first; a directory is removed only if empty; rc files only lose our block.
  sort -r "$manifest" | while IFS= read -r entry; do
    case "$entry" in
      rc:*) unhook_rc "${entry#rc:}" ;;
      *) if [ -d "$entry" ] && [ ! -L "$entry" ]; then rmdir "$entry" 2>/dev/null || true; else rm -f "$entry"; fi ;;
    esac
  done
  rm -f "$manifest"
  rmdir "$share" "$root/share" "$root/bin" "$root" "$etc/profile.d" "$etc" 2>/dev/null || true
  say "removed what was installed under $root and $etc"
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
if [ "$packages" = 1 ] && [ -z "$dest" ]; then install_packages; fi

if [ -z "$binary" ] && [ -x "$self_dir/claude-sandbox" ]; then binary="$self_dir/claude-sandbox"; fi
if [ -z "$binary" ]; then
  command -v cargo >/dev/null 2>&1 || { say "cargo not found (sudo resets PATH): build first with \`cargo build --release\` and pass --binary target/release/claude-sandbox"; exit 1; }
  if [ -f "$here/Cargo.toml" ]; then
    (cd "$here" && cargo build --release --locked -q)
    binary="$here/target/release/claude-sandbox"
  else
    staging=$(mktemp -d)
    cargo install --locked --quiet --root "$staging" claude-sandbox
    binary="$staging/bin/claude-sandbox"
  fi
fi
[ -x "$binary" ] || { say "$binary is not an executable"; exit 1; }

mkdir -p "$share" "$root/bin" "$etc/profile.d"
touch "$manifest"
record() { grep -qxF "$1" "$manifest" 2>/dev/null || echo "$1" >> "$manifest"; }
for d in "$root" "$root/bin" "$root/share" "$share" "$etc" "$etc/profile.d"; do record "$d"; done

# The binary: root-owned when installed by root, never writable by the agent's user.
install -m 0755 "$binary" "$root/bin/claude-sandbox.new"
mv -f "$root/bin/claude-sandbox.new" "$root/bin/claude-sandbox"
record "$root/bin/claude-sandbox"
bin_path="$prefix/bin/claude-sandbox"

# The attack battery's cases, for `claude-sandbox battery` in this container.
battery_src="$here/battery"
[ -d "$battery_src" ] || battery_src="$self_dir/battery"
if [ -d "$battery_src" ]; then
  mkdir -p "$share/battery"
  record "$share/battery"
  for f in "$battery_src"/*.toml; do
    install -m 0644 "$f" "$share/battery/"
    record "$share/battery/$(basename "$f")"
  done
fi

# The prompt hook, with the binary's absolute path.
sed "s|__claude_sandbox_bin=\${__claude_sandbox_bin:-/usr/local/bin/claude-sandbox}|__claude_sandbox_bin=\${__claude_sandbox_bin:-$bin_path}|" \
  "$hook_src" > "$etc/profile.d/claude-sandbox.sh.new"
chmod 0644 "$etc/profile.d/claude-sandbox.sh.new"
mv -f "$etc/profile.d/claude-sandbox.sh.new" "$etc/profile.d/claude-sandbox.sh"
record "$etc/profile.d/claude-sandbox.sh"
# Non-login interactive shells (VS Code terminals, docker exec -it) do not read profile.d.
for rc in "$etc/bash.bashrc" "$etc/zsh/zshrc"; do
  [ -f "$rc" ] || [ "$rc" = "$etc/bash.bashrc" ] || continue
  [ -f "$rc" ] || { touch "$rc"; record "$rc"; }
  if ! grep -qF "$begin" "$rc"; then
    printf '%s\n[ -r %s/profile.d/claude-sandbox.sh ] && . %s/profile.d/claude-sandbox.sh\n%s\n' \
      "$begin" "$sysconfdir" "$sysconfdir" "$end" >> "$rc"
  fi
  record "rc:$rc"
done

# Agent wrappers.
IFS=',' read -r -a agents <<< "$wrap"
for spec in "${agents[@]}"; do
  [ -n "$spec" ] || continue
  name=${spec%%=*}
  real=${spec#*=}
  if [ "$real" = "$spec" ]; then
    real=""
    IFS=':' read -r -a dirs <<< "$PATH"
    for d in "${dirs[@]}"; do
      [ "$d" = "$prefix/bin" ] && continue
      if [ -x "$d/$name" ] && ! grep -q "claude-sandbox wrapper" "$d/$name" 2>/dev/null; then real="$d/$name"; break; fi
    done
    [ -n "$real" ] || { say "--wrap $name: no $name found on PATH outside $prefix/bin; install it first or give $name=/path"; exit 1; }
  fi
  cat > "$root/bin/$name.new" <<WRAPPER
#!/bin/sh
# claude-sandbox wrapper: runs $real in the jail. Installed by installer/install.sh.
exec '$bin_path' run -- '$real' "\$@"
WRAPPER
  chmod 0755 "$root/bin/$name.new"
  mv -f "$root/bin/$name.new" "$root/bin/$name"
  record "$root/bin/$name"
  say "wrapped $name -> $real"
done

# The shared runtime directory: sticky and world-writable like /tmp; each user's own is 0700.
if [ -z "$dest" ] && [ "$(id -u)" = 0 ] && [ "$sysconfdir" = /etc ]; then
  mkdir -p /run/claude-sandbox && chmod 1777 /run/claude-sandbox
fi
say "installed $bin_path ($("$root/bin/claude-sandbox" --version)) and the prompt hook in $sysconfdir/profile.d"
