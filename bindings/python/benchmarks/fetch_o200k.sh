#!/usr/bin/env bash
# Put o200k_base.tiktoken where Python tiktoken looks for it offline.
# tiktoken would download it from a blob store (offline machines cannot reach it); the same file
# (sha256 446a9538...) ships inside the tiktoken-rs crate in the Rust package registry, so take it from
# there (cargo's registry cache, or a throwaway `cargo fetch`). tiktoken re-checks the
# sha256 when it loads the cache, so a wrong file is refused, not used.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${TIKTOKEN_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tiktoken}"
want=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
# tiktoken's cache key: sha1 of the download URL
key=fb374d419588a4632f3f557e76b4b70aebbca790
mkdir -p "$cache"
if [ -f "$cache/$key" ] && [ "$(sha256sum "$cache/$key" | cut -d' ' -f1)" = "$want" ]; then
  echo "o200k_base already in $cache"; exit 0
fi
find_asset() { ls "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken 2>/dev/null | head -n1; }
src="$(find_asset || true)"
if [ -z "$src" ]; then
  tmp="$(mktemp -d)"
  mkdir -p "$tmp/src" && echo 'fn main(){}' > "$tmp/src/main.rs"
  printf '[package]\nname="o200kfetch"\nversion="0.0.0"\nedition="2021"\n[dependencies]\ntiktoken-rs="0.12"\n' > "$tmp/Cargo.toml"
  (cd "$tmp" && cargo fetch -q)
  src="$(find_asset)"
  rm -rf "$tmp"
fi
got="$(sha256sum "$src" | cut -d' ' -f1)"
[ "$got" = "$want" ] || { echo "unexpected sha256 $got for $src" >&2; exit 1; }
cp "$src" "$cache/$key"
echo "o200k_base copied from $src to $cache"
