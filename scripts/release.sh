#!/usr/bin/env bash
# Builds the release's binaries into dist/ and pins them: dist/SHA256SUMS, and
# lua/handoff/release.lua (the version, the settings' digest, the download URL and every asset's
# SHA-256), the file :HandoffInstall trusts. Commit that file with the release: the checksums are
# then part of the plugin's git history, so an asset replaced on the release page (binary and
# SHA256SUMS together) is refused.
#
#   scripts/release.sh [TARGET...]   build these (default: all five below) into dist/; a target
#                                    this machine cannot build is named and left to the CI
#                                    workflow (.github/workflows/release.yml)
#   --no-build                       build nothing: check the SHA256SUMS in --out against its
#                                    files (when there is one), then pin the files there (a
#                                    release the CI workflow built, downloaded into a folder)
#   --prebuilt FILE                  add FILE as an asset, named for the target its --version
#                                    states, instead of building (tests; repeatable)
#   --out DIR                        where the assets go (default: dist)
#   --lua FILE                       the Lua file written (default: lua/handoff/release.lua;
#                                    "-": none)
#   --url URL                        the release's folder, {version} replaced (default: the
#                                    GitHub releases of the `origin` remote)
#
# Linux targets are static (musl): no glibc floor. They are cross-built with cargo-zigbuild
# (installed from PyPI with zig, scripts/deps.sh ensure_zigbuild). macOS needs Apple's SDK and
# Windows MSVC's: this script builds them only on those systems.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/deps.sh"

all_targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc)
out="$root/dist"
lua="$root/lua/handoff/release.lua"
url=""
build=1
targets=()
prebuilt=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --prebuilt) prebuilt+=("$2"); shift ;;
    --out) out="$2"; shift ;;
    --lua) lua="$2"; shift ;;
    --url) url="$2"; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    -*) echo "release.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
if [ ${#prebuilt[@]} -gt 0 ]; then
  build=0
fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Paths as given, before the script changes folder.
if [ "$lua" != "-" ]; then
  mkdir -p "$(dirname "$lua")"
  lua="$(cd "$(dirname "$lua")" && pwd)/$(basename "$lua")"
fi
for i in "${!prebuilt[@]}"; do
  prebuilt[$i]="$(cd "$(dirname "${prebuilt[$i]}")" && pwd)/$(basename "${prebuilt[$i]}")"
done

version="$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n1)"
digest="$(sed -n 's/^ *digest = "\([0-9a-f]*\)",$/\1/p' "$root/lua/handoff/schema.lua" | head -n1)"
[ -n "$version" ] && [ -n "$digest" ] || { echo "release.sh: cannot read the version (Cargo.toml) or the settings' digest (lua/handoff/schema.lua)" >&2; exit 1; }
if [ -z "$url" ]; then
  origin="$(git -C "$root" remote get-url origin 2>/dev/null || true)"
  slug="$(printf '%s' "$origin" | sed -n 's#^\(https://github\.com/\|git@github\.com:\)\([^/]*/[^/]*\)$#\2#p' | sed 's/\.git$//')"
  if [ -n "$slug" ]; then
    url="https://github.com/$slug/releases/download/v{version}"
  fi
fi

# sha256sum, or macOS's shasum (the same output and -c).
sha256() {
  if command -v sha256sum >/dev/null; then sha256sum "$@"; else shasum -a 256 "$@"; fi
}

asset_name() { # TARGET → the asset's file name
  case "$1" in
    *windows*) echo "handoff-nvim-$1.exe" ;;
    *) echo "handoff-nvim-$1" ;;
  esac
}

# Why this machine cannot build TARGET, or nothing.
cannot_build() {
  local target="$1" os
  os="$(uname -s)"
  case "$target" in
    *-linux-musl)
      if [ "$zigbuild" != 1 ]; then echo "cargo-zigbuild and zig could not be installed (pip)"; return; fi
      if ! rustup target list --installed 2>/dev/null | grep -qx "$target" && ! rustup target add "$target" >&2; then
        echo "rustup cannot add the $target standard library"
      fi ;;
    *-apple-darwin) [ "$os" = Darwin ] || echo "needs Apple's SDK (the CI workflow builds it on macOS)" ;;
    *-windows-msvc) case "$os" in MINGW*|MSYS*|CYGWIN*|Windows_NT) ;; *) echo "needs MSVC (the CI workflow builds it on Windows)" ;; esac ;;
    *) echo "not a target this project releases" ;;
  esac
}

build_target() {
  local target="$1"
  case "$target" in
    *-linux-musl)
      (cd "$root" && cargo zigbuild --release --locked --target "$target" --bin handoff-nvim) ;;
    *)
      rustup target add "$target" >&2 || true
      (cd "$root" && cargo build --release --locked --target "$target" --bin handoff-nvim) ;;
  esac
  local exe="handoff-nvim"
  case "$target" in *windows*) exe="handoff-nvim.exe" ;; esac
  cp "$root/target/$target/release/$exe" "$out/$(asset_name "$target").tmp"
  mv "$out/$(asset_name "$target").tmp" "$out/$(asset_name "$target")"
}

if [ "$build" = 1 ]; then
  zigbuild=0
  case " ${targets[*]} " in *-linux-musl*) ensure_zigbuild && zigbuild=1 ;; esac
  for target in "${targets[@]}"; do
    why="$(cannot_build "$target")"
    if [ -n "$why" ]; then
      echo "release.sh: $target not built here: $why" >&2
      continue
    fi
    echo "release.sh: building $target" >&2
    build_target "$target"
  done
fi

for file in "${prebuilt[@]}"; do
  stated="$("$file" --version | sed -n 's/^target //p')"
  [ -n "$stated" ] || { echo "release.sh: $file states no target (--version)" >&2; exit 1; }
  cp "$file" "$out/$(asset_name "$stated").tmp"
  chmod 755 "$out/$(asset_name "$stated").tmp"
  mv "$out/$(asset_name "$stated").tmp" "$out/$(asset_name "$stated")"
done

cd "$out"
shopt -s nullglob
assets=()
for file in handoff-nvim-*; do
  case "$file" in *.tmp) ;; *) assets+=("$file") ;; esac
done
[ ${#assets[@]} -gt 0 ] || { echo "release.sh: no assets in $out" >&2; exit 1; }
if [ "$build" = 0 ] && [ ${#prebuilt[@]} -eq 0 ] && [ -f SHA256SUMS ]; then
  # Pinning a release built elsewhere: its own list must agree with its files.
  sha256 --strict -c SHA256SUMS >&2
fi
sha256 "${assets[@]}" > SHA256SUMS.tmp
mv SHA256SUMS.tmp SHA256SUMS

# Each asset that runs here must be this version with these settings (a stale or foreign
# binary is not pinned).
for file in "${assets[@]}"; do
  if said="$("./$file" --version 2>/dev/null)"; then
    got_version="$(printf '%s\n' "$said" | sed -n '1s/^handoff-nvim //p')"
    got_digest="$(printf '%s\n' "$said" | sed -n 's/^schema //p')"
    if [ "$got_version" != "$version" ] || [ "$got_digest" != "$digest" ]; then
      echo "release.sh: $file is version $got_version with settings $got_digest; this checkout is $version with $digest" >&2
      exit 1
    fi
  fi
done

if [ "$lua" != "-" ]; then
  {
    echo "-- Written by scripts/release.sh: do not edit. The release :HandoffInstall installs, and the"
    echo "-- SHA-256 of each of its binaries: the installer trusts these checksums only. Committed with"
    echo "-- the release, they are part of the plugin's history, not fetched beside the binaries."
    echo "return {"
    echo "  version = \"$version\","
    echo "  -- The settings' digest the release's binaries answer (lua/handoff/schema.lua's then)."
    echo "  schema_digest = \"$digest\","
    if [ -n "$url" ]; then
      echo "  -- Where the assets are ({version} replaced); the install.url setting overrides it."
      echo "  url = \"$url\","
    fi
    echo "  assets = {"
    while read -r sum file; do
      target="${file#handoff-nvim-}"
      target="${target%.exe}"
      size="$(wc -c < "$file" | tr -d ' ')"
      echo "    [\"$target\"] = { file = \"$file\", sha256 = \"$sum\", size = $size },"
    done < SHA256SUMS
    echo "  },"
    echo "}"
  } > "$lua.tmp"
  mv "$lua.tmp" "$lua"
  echo "release.sh: wrote $lua ($version, ${#assets[@]} assets); commit it with the release" >&2
fi
echo "release.sh: $out: ${assets[*]} SHA256SUMS" >&2
