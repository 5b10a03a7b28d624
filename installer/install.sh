#!/usr/bin/env bash
# Install claude-sandbox: bubblewrap (apt, apk or dnf), the binary into a root-owned directory, the
# prompt hook (/etc/profile.d/, sourced from /etc/bash.bashrc and /etc/zsh/zshrc), the runtime
# directory, and on request root-owned wrappers that run an agent through the jail.
#
#   sudo bash installer/install.sh [--prefix DIR] [--sysconfdir DIR] [--binary PATH]
#                                  [--wrap claude,codex,...] [--no-packages]
#                                  [--lock-policy] [--fail-closed] [--audit-syslog TARGET]
#                                  [--audit-otlp URL]
#   sudo bash installer/install.sh --uninstall [--prefix DIR] [--sysconfdir DIR]
#
# The binary: --binary PATH; else the one for this machine's architecture packaged with this script
# (the devcontainer Feature: bin/ARCH/claude-sandbox; the npm package: its platform package); else,
# with --wrap, the one already installed in PREFIX/bin (adding a wrapper later needs no cargo); else
# built from this checkout with cargo; else `cargo install claude-sandbox`. The prebuilt binaries
# need Linux on x86_64 or aarch64 with glibc 2.31 or later; elsewhere this stops and says so.
# A copy of this script and the hook stay in PREFIX/share/claude-sandbox (doctor names it).
# --wrap NAME or NAME=/path/to/real: a wrapper PREFIX/bin/NAME that runs the real NAME through
# `claude-sandbox run`. Without =/path the real NAME is looked up each time the wrapper runs (on PATH,
# skipping PREFIX/bin), so the agent may be installed after the wrapper. PREFIX/bin must come before
# the real one on PATH (/usr/local/bin comes before /usr/bin on Debian and Ubuntu).
# Idempotent. Every file and directory it creates (never one that existed before) is recorded in
# PREFIX/share/claude-sandbox/manifest; --uninstall removes exactly those, and only its own block
# from the shell rc files. bubblewrap stays installed.
# --lock-policy, --fail-closed, --audit-syslog, --audit-otlp: the image's policy, written to
# SYSCONFDIR/claude-sandbox/config.toml (`locked`, `fail_closed`, `[audit]`: docs/config.md); a file
# there that this script did not write is left alone, and the run stops naming the lines to add.
# Environment: as a devcontainer Feature, WRAPAGENTS=claude,codex does what --wrap does, BINARY what
# --binary does, LOCKPOLICY/FAILCLOSED=true and AUDITSYSLOG/AUDITOTLP what the policy options do.
set -euo pipefail

prefix=/usr/local
sysconfdir=/etc
binary=${BINARY:-}
packages=1
uninstall=0
wrap=${WRAPAGENTS:-}
lock_policy=${LOCKPOLICY:-false}
fail_closed=${FAILCLOSED:-false}
audit_syslog=${AUDITSYSLOG:-}
audit_otlp=${AUDITOTLP:-}
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
    --lock-policy) lock_policy=true; shift ;;
    --fail-closed) fail_closed=true; shift ;;
    --audit-syslog) audit_syslog=$2; shift 2 ;;
    --audit-syslog=*) audit_syslog=${1#*=}; shift ;;
    --audit-otlp) audit_otlp=$2; shift 2 ;;
    --audit-otlp=*) audit_otlp=${1#*=}; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

dest=${DESTDIR:-}
root="$dest$prefix"
etc="$dest$sysconfdir"
share="$root/share/claude-sandbox"
manifest="$share/manifest"
header="# claude-sandbox install manifest v2: what install.sh created; --uninstall removes exactly this"
self_dir=$(cd "$(dirname "$0")" && pwd)
here=$(cd "$self_dir/.." && pwd)
# A packaged Feature (installer/package-feature.sh), the npm package and an installed copy
# (PREFIX/share/claude-sandbox) carry the hook beside this script; a checkout has it in profile.d/.
hook_src="$here/profile.d/claude-sandbox.sh"
[ -f "$hook_src" ] || hook_src="$self_dir/claude-sandbox.sh"
begin="# >>> claude-sandbox prompt hook >>>"
end="# <<< claude-sandbox prompt hook <<<"
mark="# claude-sandbox wrapper"

say() { printf 'claude-sandbox install: %s\n' "$*"; }
die() { printf 'claude-sandbox install: %s\n' "$*" >&2; exit 1; }

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
  mapfile -t entries < "$manifest"
  v2=0; [ "${entries[0]-}" = "$header" ] && v2=1
  rm -f "$manifest"
  # rc files first (only our block goes), then files, then directories deepest first, each only if
  # empty: a directory that holds something we did not put there stays, and we say so.
  for e in "${entries[@]}"; do
    case "$e" in rc:*) unhook_rc "${e#rc:}" ;; esac
  done
  for e in "${entries[@]}"; do
    case "$e" in
      file:*) rm -f "${e#file:}" ;;
      rcfile:*) f=${e#rcfile:}; [ -s "$f" ] || rm -f "$f" ;;
      '#'*|rc:*|dir:*) ;;
      # A manifest written before v2 listed directories that existed before; only its files go.
      *) if [ "$v2" = 0 ] && { [ -L "$e" ] || [ -f "$e" ]; }; then rm -f "$e"; fi ;;
    esac
  done
  for e in "${entries[@]}"; do
    case "$e" in dir:*) printf '%s\n' "${e#dir:}" ;; esac
  done | sort -r | while IFS= read -r d; do
    [ -d "$d" ] || continue
    rmdir "$d" 2>/dev/null || say "left $d: it holds files install.sh did not create"
  done
  say "removed what was installed under $root and $etc"
  say "what stays: bubblewrap; each user's ~/.local/state/claude-sandbox or"
  say "  /var/lib/claude-sandbox/UID (the jail's cache layers:"
  say "  \`claude-sandbox cache clear\` before uninstalling, or remove it) and runtime directory"
  say "  (/run/claude-sandbox/UID, \$XDG_RUNTIME_DIR/claude-sandbox or /var/tmp/claude-sandbox-UID:"
  say "  alerts and quarantined files; review \`claude-sandbox alerts\` first); open shells keep the"
  say "  prompt hook until they exit"
  exit 0
fi

case "$prefix$sysconfdir" in *"'"*) die "--prefix and --sysconfdir must not contain a single quote" ;; esac

install_packages() {
  command -v bwrap >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap
  elif command -v apk >/dev/null 2>&1; then
    apk add --no-cache bubblewrap
  elif command -v dnf >/dev/null 2>&1; then
    dnf install -y bubblewrap
  else
    die "no apt-get, apk or dnf: install bubblewrap yourself"
  fi
}

installed="$root/bin/claude-sandbox"
# Packaged: the Feature (devcontainer-feature.json beside this script, binaries in bin/ARCH/) or the
# npm package (package.json; the binary in the platform package npm chose: nested or hoisted).
# (A checkout's installer/ holds devcontainer-feature.json too, and no binaries.)
packaged=""
if [ -f "$here/Cargo.toml" ]; then packaged=""
elif [ -f "$self_dir/devcontainer-feature.json" ]; then packaged=Feature
elif [ -f "$self_dir/package.json" ] && grep -q '"name": "claude-sandbox"' "$self_dir/package.json"; then packaged="npm package"
fi
if [ -z "$binary" ] && [ -n "$packaged" ]; then
  build_here="build it here (cargo build --release, Rust 1.85 or later) and give --binary (Feature option \"binary\")"
  arch=$(uname -m)
  case $arch in
    x86_64|amd64) arch=x86_64 cpu=x64 ;;
    aarch64|arm64) arch=aarch64 cpu=arm64 ;;
    *) die "the $packaged has claude-sandbox for x86_64 and aarch64 Linux; this machine is $arch: $build_here" ;;
  esac
  glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null) \
    || die "the $packaged's binaries need glibc 2.31 or later; this system has another C library (musl? Alpine?): $build_here"
  glibc=${glibc#glibc }
  [ "$(printf '%s\n2.31\n' "$glibc" | sort -t. -k1,1n -k2,2n | head -n 1)" = 2.31 ] \
    || die "the $packaged's binaries need glibc 2.31 or later (Debian 11, Ubuntu 20.04); this system has $glibc: $build_here"
  for candidate in "$self_dir/bin/$arch/claude-sandbox" \
                   "$self_dir/node_modules/@claude-sandbox/linux-$cpu/claude-sandbox" \
                   "$here/@claude-sandbox/linux-$cpu/claude-sandbox"; do
    if [ -f "$candidate" ] && [ -x "$candidate" ]; then binary=$candidate; break; fi
  done
  # Without its binary the package can still add wrappers to an installed claude-sandbox (below).
  if [ -z "$binary" ] && ! { [ -n "$wrap" ] && [ -x "$installed" ]; }; then
    die "the $packaged in $self_dir has no claude-sandbox for $arch (npm: was @claude-sandbox/linux-$cpu left out with --omit=optional?)"
  fi
fi
if [ "$packages" = 1 ] && [ -z "$dest" ]; then install_packages; fi

reuse=0
# Reused when only wrappers are added, or when this is no checkout to build from (the installed copy
# of this script, run again: doctor's fix lines).
if [ -z "$binary" ] && [ -x "$installed" ] && { [ -n "$wrap" ] || [ ! -f "$here/Cargo.toml" ]; }; then
  binary=$installed
  reuse=1
  say "keeping the installed $prefix/bin/claude-sandbox (give --binary to replace it)"
fi
if [ -z "$binary" ]; then
  command -v cargo >/dev/null 2>&1 || die "cargo not found (sudo resets PATH): build first with \`cargo build --release\` and pass --binary target/release/claude-sandbox"
  if [ -f "$here/Cargo.toml" ]; then
    (cd "$here" && cargo build --release --locked -q)
    binary="$here/target/release/claude-sandbox"
  else
    staging=$(mktemp -d)
    cargo install --locked --quiet --root "$staging" claude-sandbox
    binary="$staging/bin/claude-sandbox"
  fi
fi
[ -f "$binary" ] && [ -x "$binary" ] || die "$binary is not an executable file"
version=$("$binary" --version 2>&1) || die "$binary does not run here ($version): build it here (cargo build --release) and give --binary"

# What this run creates is recorded; until the manifest's directory exists, records wait here.
pending=()
record() {
  if [ -f "$manifest" ]; then
    grep -qxF "$1" "$manifest" || printf '%s\n' "$1" >> "$manifest"
  else
    pending+=("$1")
  fi
}
# Create DIR and each missing ancestor, recording exactly the ones created.
ensure_dir() {
  local d=$1 missing=()
  while [ ! -e "$d" ] && [ ! -L "$d" ]; do missing=("$d" "${missing[@]}"); d=$(dirname "$d"); done
  [ -d "$d" ] || die "$d exists and is not a directory"
  local m
  for m in "${missing[@]}"; do mkdir -m 0755 "$m"; record "dir:$m"; done
}

ensure_dir "$share"
if [ ! -f "$manifest" ]; then
  printf '%s\n' "$header" > "$manifest"
elif [ "$(head -n 1 "$manifest")" != "$header" ]; then
  # A manifest written before v2 also listed directories that existed before: keep its files only.
  { printf '%s\n' "$header"
    while IFS= read -r e; do
      case "$e" in rc:*) printf '%s\n' "$e" ;; *) if [ -f "$e" ] || [ -L "$e" ]; then printf 'file:%s\n' "$e"; fi ;; esac
    done < "$manifest"; } > "$manifest.new"
  mv -f "$manifest.new" "$manifest"
fi
for e in "${pending[@]}"; do record "$e"; done
pending=()
ensure_dir "$root/bin"
ensure_dir "$etc/profile.d"

# The binary: root-owned when installed by root, never writable by the agent's user.
if [ "$reuse" = 0 ]; then
  install -m 0755 "$binary" "$root/bin/claude-sandbox.new"
  mv -f "$root/bin/claude-sandbox.new" "$root/bin/claude-sandbox"
fi
record "file:$root/bin/claude-sandbox"
bin_path="$prefix/bin/claude-sandbox"

# Shell completions and the man page, generated by the binary itself (an older binary without the
# subcommands simply gets none).
gen() { # gen FILE ARGS...: write the binary's output for ARGS to FILE, recording what is made
  local file=$1; shift
  local out
  out=$("$root/bin/claude-sandbox" "$@" 2>/dev/null) || return 0
  ensure_dir "$(dirname "$file")"
  [ -e "$file" ] || [ -L "$file" ] || record "file:$file"
  printf '%s\n' "$out" > "$file.new" && chmod 0644 "$file.new" && mv -f "$file.new" "$file"
}
gen "$root/share/bash-completion/completions/claude-sandbox" completions bash
gen "$root/share/zsh/site-functions/_claude-sandbox" completions zsh
gen "$root/share/fish/vendor_completions.d/claude-sandbox.fish" completions fish
# The man pages: claude-sandbox(1) and each claude-sandbox-X(1) a page lists (claude-sandbox-run(1),
# claude-sandbox-cache-ls(1), ...).
man_pages() { # man_pages NAME...: that page, then the pages it lists
  gen "$root/share/man/man1/$(IFS=-; echo "claude-sandbox${*:+-$*}").1" man "$@"
  local sub
  for sub in $("$root/bin/claude-sandbox" man "$@" 2>/dev/null | sed -n 's/^claude\\-sandbox\\-\(.*\)(1)$/\1/p' | sed 's/\\-/-/g'); do
    local prefix
    prefix=$(IFS=-; echo "$*")
    man_pages "$@" "${sub#"${prefix:+$prefix-}"}"
  done
}
man_pages

# The attack battery's cases, for `claude-sandbox battery` in this container.
battery_src="$here/battery"
[ -d "$battery_src" ] || battery_src="$self_dir/battery"
# (Run from the installed copy, the cases are already there.)
if [ -d "$battery_src" ] && ! [ "$battery_src" -ef "$share/battery" ]; then
  ensure_dir "$share/battery"
  for f in "$battery_src"/*.toml; do
    install -m 0644 "$f" "$share/battery/"
    record "file:$share/battery/$(basename "$f")"
  done
fi

# This script and the hook, so that a later --wrap, --uninstall or doctor's fix has them by a path
# that exists wherever claude-sandbox was installed from (masked inside the jail with the rest of
# PREFIX/share/claude-sandbox).
keep() { # keep SRC NAME MODE
  local dst="$share/$2"
  [ -e "$dst" ] && [ "$1" -ef "$dst" ] && return 0
  [ -e "$dst" ] || record "file:$dst"
  install -m "$3" "$1" "$dst.new" && mv -f "$dst.new" "$dst"
}
keep "$self_dir/$(basename "${BASH_SOURCE[0]}")" install.sh 0755
keep "$hook_src" claude-sandbox.sh 0644

# The image's policy (system configuration): only what was asked for, in a file of our own.
policy=""
[ "$lock_policy" = true ] && policy+=$'locked = true\n'
[ "$fail_closed" = true ] && policy+=$'fail_closed = true\n'
if [ -n "$audit_syslog$audit_otlp" ]; then
  for v in "$audit_syslog" "$audit_otlp"; do
    case "$v" in *'"'*|*'\'*|*$'\n'*) die "audit target ${v@Q}: no quotes, backslashes or newlines" ;; esac
  done
  policy+=$'\n[audit]\n'
  [ -n "$audit_syslog" ] && policy+="syslog = \"$audit_syslog\""$'\n'
  [ -n "$audit_otlp" ] && policy+="otlp = \"$audit_otlp\""$'\n'
fi
sysconf="$etc/claude-sandbox/config.toml"
if [ -n "$policy" ]; then
  policy="# Written by claude-sandbox's install.sh (its options; docs/config.md)."$'\n'"$policy"
  if [ -e "$sysconf" ] && ! grep -qxF "file:$sysconf" "$manifest"; then
    die "$sysconf exists and was not written by this script: add these lines to it yourself (top-level keys before any [table]):
$policy"
  fi
  ensure_dir "$etc/claude-sandbox"
  printf '%s' "$policy" > "$sysconf.new"
  chmod 0644 "$sysconf.new"
  # The binary reads it as a launch would: a value it refuses stops the install, named.
  if ! check=$(CLAUDE_SANDBOX_SYSTEM_CONFIG="$sysconf.new" "$root/bin/claude-sandbox" __check-system-config 2>&1); then
    rm -f "$sysconf.new"
    die "the policy options make a configuration claude-sandbox refuses: $check"
  fi
  mv -f "$sysconf.new" "$sysconf"
  record "file:$sysconf"
  say "policy: $sysconf ($(printf '%s' "$policy" | grep -c '=') settings)"
fi

# The prompt hook, with the binary's absolute path.
sed "s|__claude_sandbox_bin=\${__claude_sandbox_bin:-/usr/local/bin/claude-sandbox}|__claude_sandbox_bin=\${__claude_sandbox_bin:-$bin_path}|" \
  "$hook_src" > "$etc/profile.d/claude-sandbox.sh.new"
chmod 0644 "$etc/profile.d/claude-sandbox.sh.new"
mv -f "$etc/profile.d/claude-sandbox.sh.new" "$etc/profile.d/claude-sandbox.sh"
record "file:$etc/profile.d/claude-sandbox.sh"
# Non-login interactive shells (VS Code terminals, docker exec -it) do not read profile.d.
for rc in "$etc/bash.bashrc" "$etc/zsh/zshrc"; do
  [ -f "$rc" ] || [ "$rc" = "$etc/bash.bashrc" ] || continue
  if [ ! -f "$rc" ]; then
    : > "$rc"
    record "rcfile:$rc"
  fi
  if ! grep -qF "$begin" "$rc"; then
    printf '%s\n[ -r %s/profile.d/claude-sandbox.sh ] && . %s/profile.d/claude-sandbox.sh\n%s\n' \
      "$begin" "$sysconfdir" "$sysconfdir" "$end" >> "$rc"
    record "rc:$rc"
  fi
done

# Agent wrappers. The real agent is resolved when the wrapper runs unless NAME=/path was given.
IFS=',' read -r -a agents <<< "$wrap"
for spec in "${agents[@]}"; do
  [ -n "$spec" ] || continue
  name=${spec%%=*}
  real=${spec#*=}
  [ "$real" = "$spec" ] && real=""
  case "$name" in ''|*[!A-Za-z0-9._-]*) die "--wrap $spec: the name may use only letters, digits, '.', '_' and '-'" ;; esac
  case "$real" in *"'"*) die "--wrap $spec: the path must not contain a single quote" ;; esac
  target="$root/bin/$name"
  if [ -e "$target" ] || [ -L "$target" ]; then
    head -c 512 "$target" 2>/dev/null | grep -qF "$mark" \
      || die "$target exists and is not a claude-sandbox wrapper ($(readlink -f "$target"); npm's global prefix is $prefix?): not replacing it. $( [ -n "${WRAPAGENTS:-}" ] && echo "As a Feature: set \"wrapAgents\": \"\" (or leave $name out of it) and" || echo "Leave --wrap $name out and") run \`claude-sandbox run -- $name\`; or install $name under another prefix (npm config set prefix ~/.local, or the node Feature's nvm) and install again; or give --prefix a directory earlier on PATH than $(dirname "$target")"
  fi
  cat > "$target.new" <<WRAPPER
#!/bin/sh
$mark: runs $name in the jail. Installed by installer/install.sh.
# The real $name is looked up when this runs (on PATH, skipping $prefix/bin and other wrappers),
# so it may be installed after this wrapper.
name='$name'; real='$real'; bin='$bin_path'; here='$prefix/bin'
if [ -z "\$real" ]; then
  set -f; saved_ifs=\$IFS; IFS=:
  for d in \$PATH; do
    case \$d in /*) ;; *) continue ;; esac
    [ "\$d" = "\$here" ] && continue
    if [ -f "\$d/\$name" ] && [ -x "\$d/\$name" ] && ! head -c 512 "\$d/\$name" 2>/dev/null | grep -qF '$mark'; then
      real=\$d/\$name; break
    fi
  done
  IFS=\$saved_ifs; set +f
fi
if [ -z "\$real" ]; then
  echo "claude-sandbox wrapper: no \$name found on PATH outside \$here; install it first" >&2
  exit 127
fi
# Already inside the jail: the launcher set CLAUDE_SANDBOX=1, masked claude-sandbox, and the user
# namespace maps exactly one uid. Outside, a CLAUDE_SANDBOX set by anyone meets a claude-sandbox that
# runs, so the agent still goes through the jail.
if [ "\${CLAUDE_SANDBOX-}" = 1 ] && [ ! -x "\$bin" ]; then
  { read -r _ _ count; read -r more || more=; } < /proc/self/uid_map
  if [ "\$count" = 1 ] && [ -z "\$more" ]; then
    echo "claude-sandbox: already inside the jail; running \$real directly" >&2
    exec "\$real" "\$@"
  fi
fi
exec "\$bin" run -- "\$real" "\$@"
WRAPPER
  chmod 0755 "$target.new"
  mv -f "$target.new" "$target"
  record "file:$target"
  say "wrapped $name -> ${real:-the first $name on PATH outside $prefix/bin, when it runs}"
done

# The shared runtime directory: sticky and world-writable like /tmp; each user's own is 0700.
if [ -z "$dest" ] && [ "$(id -u)" = 0 ] && [ "$sysconfdir" = /etc ]; then
  if [ ! -e /run/claude-sandbox ]; then
    mkdir -m 1777 /run/claude-sandbox
    record "dir:/run/claude-sandbox"
  fi
  chmod 1777 /run/claude-sandbox
  # The shared parent of the jail's layer stores where $HOME is on overlayfs (docs/layers.md); the
  # devcontainer Feature mounts a volume here.
  if [ ! -e /var/lib/claude-sandbox ]; then
    mkdir -p /var/lib && mkdir -m 1777 /var/lib/claude-sandbox
    record "dir:/var/lib/claude-sandbox"
  fi
  chmod 1777 /var/lib/claude-sandbox
fi
say "installed $bin_path ($("$root/bin/claude-sandbox" --version)) and the prompt hook in $sysconfdir/profile.d"
