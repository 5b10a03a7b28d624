#!/usr/bin/env bash
# Release binaries for x86_64 and aarch64 Linux, linked against glibc 2.31 (Debian 11, Ubuntu 20.04)
# so that they run on every glibc distribution since, with checksums. One command:
#
#   bash installer/dist.sh [--target x86_64|aarch64|all] [--out DIR]     (default: all, TARGET/dist)
#
# Writes, for each target T (x86_64-unknown-linux-gnu, aarch64-unknown-linux-gnu):
#   DIR/claude-sandbox-VERSION-T.tar.gz   claude-sandbox-VERSION-T/{claude-sandbox,README.md,LICENSE*}
#   DIR/T/claude-sandbox                  the bare binary (the npm packages and the Feature take it)
#   DIR/SHA256SUMS                        sha256sum format, over the tarballs and the bare binaries
# and checks that no binary needs a glibc symbol newer than 2.31.
#
# Why glibc with an old baseline rather than static musl: docs/performance.md ("Release binaries").
# The compiler is Debian 12's rustc-web (the same 1.96 for both targets: the aarch64 std comes from
# libstd-rust-web-dev:arm64, no rustup); the linker is gcc (gcc-aarch64-linux-gnu for aarch64) with
# --sysroot pointing at Debian 11's libc6-dev, fetched once with apt into the cache directory
# ($CLAUDE_SANDBOX_DIST_CACHE, default /var/cache/claude-sandbox-dist). Needs root only to install
# the packages it is missing (apt-get; it says which).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
targets=(x86_64 aarch64)
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --target) case "$2" in all) targets=(x86_64 aarch64) ;; x86_64|aarch64) targets=("$2") ;;
                *) echo "dist.sh: --target takes x86_64, aarch64 or all, not $2" >&2; exit 2 ;; esac; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "dist.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
target_dir=${CARGO_TARGET_DIR:-$here/target}
out=${out:-$target_dir/dist}
cache=${CLAUDE_SANDBOX_DIST_CACHE:-/var/cache/claude-sandbox-dist}
# The glibc the binaries are linked against, and so the oldest they run on.
baseline_suite=bullseye
baseline_glibc=2.31
rustc=/usr/bin/rustc
cargo=/usr/bin/cargo
t0=$(date +%s)
step() { echo "== dist: $* (+$(( $(date +%s) - t0 ))s)"; }
die() { echo "dist.sh: $*" >&2; exit 1; }

triple() { echo "$1-unknown-linux-gnu"; }
debarch() { case $1 in x86_64) echo amd64 ;; aarch64) echo arm64 ;; esac; }
linker() { case $1 in x86_64) echo gcc ;; aarch64) echo aarch64-linux-gnu-gcc ;; esac; }
linker_pkg() { case $1 in x86_64) echo gcc ;; aarch64) echo gcc-aarch64-linux-gnu ;; esac; }

step "toolchain"
missing=()
[ -x "$rustc" ] && [ -x "$cargo" ] || missing+=(rustc-web cargo-web)
for t in "${targets[@]}"; do
  [ -d "/usr/lib/rustlib/$(triple "$t")/lib" ] || missing+=("libstd-rust-web-dev:$(debarch "$t")")
  command -v "$(linker "$t")" >/dev/null 2>&1 || missing+=("$(linker_pkg "$t")")
done
if [ ${#missing[@]} -gt 0 ]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [ "$(id -u)" = 0 ] || die "missing ${missing[*]}: install them as root (arm64 ones after \`dpkg --add-architecture arm64 && apt-get update\`)"
  case " ${missing[*]} " in *:arm64*) dpkg --print-foreign-architectures | grep -qx arm64 || { dpkg --add-architecture arm64; }; esac
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed (Debian 12 with bookworm-security has rustc-web 1.96)"
fi
"$rustc" --version

# Debian 11's C library (libc6, libc6-dev and what they link with) for one architecture, unpacked as
# a sysroot, with the absolute symbolic links the packages carry made to point inside it (else the
# linker would follow them to this machine's newer glibc).
sysroot() {
  local arch=$1 root="$cache/sysroot-$baseline_suite-$1"
  if [ -f "$root/.complete" ]; then echo "$root"; return; fi
  local apt="$cache/apt-$baseline_suite"
  local mirror
  mirror=$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | awk '{print $2}' | head -n 1 || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  mkdir -p "$apt"/etc/apt/{sources.list.d,preferences.d,apt.conf.d} "$apt"/var/lib/apt/lists/partial \
    "$apt"/var/cache/apt/archives/partial "$apt"/var/lib/dpkg "$apt/debs-$arch"
  touch "$apt/var/lib/dpkg/status"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $baseline_suite main" > "$apt/etc/apt/sources.list"
  local opts=(-q -o "Dir=$apt" -o "Dir::State::status=$apt/var/lib/dpkg/status" -o APT::Architecture=amd64
    -o APT::Architectures::=amd64 -o APT::Architectures::=arm64 -o APT::Sandbox::User=root)
  [ -f "$apt/var/lib/apt/lists/.updated" ] || {
    apt-get "${opts[@]}" update >"$apt/update.log" 2>&1 || { tail -n 5 "$apt/update.log" >&2; die "apt-get update of $baseline_suite from $mirror failed"; }
    touch "$apt/var/lib/apt/lists/.updated"
  }
  (cd "$apt/debs-$arch" && apt-get "${opts[@]}" download libc6:"$arch" libc6-dev:"$arch" libgcc-s1:"$arch" \
    linux-libc-dev:"$arch" libcrypt1:"$arch" libcrypt-dev:"$arch" >"$apt/download-$arch.log" 2>&1) \
    || { tail -n 5 "$apt/download-$arch.log" >&2; die "downloading Debian $baseline_suite's libc6-dev:$arch failed"; }
  rm -rf "$root.tmp" && mkdir -p "$root.tmp"
  local deb
  for deb in "$apt/debs-$arch"/*.deb; do dpkg-deb -x "$deb" "$root.tmp"; done
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    case $target in /*) ln -sfn "$root${target}" "$link" ;; esac
  done < <(find "$root.tmp" -type l)
  # (They name $root already: the tree is renamed into place whole.)
  rm -rf "$root" && mv "$root.tmp" "$root"
  touch "$root/.complete"
  echo "$root"
}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)
mkdir -p "$out"
for t in "${targets[@]}"; do
  tr=$(triple "$t")
  step "sysroot for $tr (Debian $baseline_suite, glibc $baseline_glibc)"
  root=$(sysroot "$(debarch "$t")")
  step "build $tr"
  up=$(echo "$tr" | tr 'a-z-' 'A-Z_')
  low=$(echo "$tr" | tr '-' '_')
  # The target's flags only (cargo with --target keeps them off build scripts, which run here).
  # gcc searches its own ../../../<multiarch> (this machine's glibc) before the sysroot's, so the
  # sysroot's crt files (-B) and libraries (-L) are named first.
  lib="$root/usr/lib/$t-linux-gnu"
  link="-C link-arg=--sysroot=$root -C link-arg=-B$lib -C link-arg=-L$lib -C link-arg=-L$root/lib/$t-linux-gnu"
  env "CARGO_TARGET_${up}_LINKER=$(linker "$t")" \
      "CARGO_TARGET_${up}_RUSTFLAGS=$link" \
      "CC_${low}=$(linker "$t")" "CFLAGS_${low}=--sysroot=$root -O2" \
      RUSTC="$rustc" RUSTDOC=/usr/bin/rustdoc CARGO_TARGET_DIR="$target_dir" \
      "$cargo" build --release --locked --quiet --target "$tr" --manifest-path "$here/Cargo.toml" --bin claude-sandbox
  bin="$target_dir/$tr/release/claude-sandbox"
  # The newest glibc symbol version the binary needs must be the baseline's or older.
  # (readelf reads either architecture; this machine's objdump lists no aarch64 symbols.)
  newest=$(readelf --dyn-syms -W "$bin" | grep -oE 'GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
  [ -n "$newest" ] || die "$tr: no glibc symbol version found in $bin (readelf --dyn-syms)"
  [ "$(printf '%s\n%s\n' "$newest" "$baseline_glibc" | sort -V | tail -n 1)" = "$baseline_glibc" ] \
    || die "$tr: the binary needs glibc $newest, newer than the baseline $baseline_glibc"
  interp=$(readelf -lW "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
  echo "$tr: $(stat -c %s "$bin") bytes, needs glibc >= $newest, interpreter $interp"
  mkdir -p "$out/$tr"
  install -m 0755 "$bin" "$out/$tr/claude-sandbox"
  name="claude-sandbox-$version-$tr"
  stage=$(mktemp -d)
  mkdir "$stage/$name"
  install -m 0755 "$bin" "$stage/$name/claude-sandbox"
  cp "$here/README.md" "$stage/$name/"
  # Reproducible: fixed owner, order and times (the last commit's).
  mtime=$(git -C "$here" log -1 --format=%ct 2>/dev/null || echo 0)
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -cf - "$name" \
    | gzip -n -9 > "$out/$name.tar.gz"
  rm -rf "$stage"
done

step "checksums"
(cd "$out" && find . -name 'claude-sandbox*.tar.gz' -o -path './*/claude-sandbox' | sed 's|^\./||' | sort \
  | xargs sha256sum > SHA256SUMS && cat SHA256SUMS)
step "done: $out"
