#!/usr/bin/env bash
# Builds the browser demo into web/dist/: release wasm of crates/app, wasm-bindgen (the exact
# version the lock file pins, installed if missing), optionally wasm-opt -O2 from the npm
# package binaryen@132 (never Debian's binaryen: it emits broken wasm), and index.html.
#
#   scripts/build-web.sh            # build
#   scripts/build-web.sh --opt      # also run wasm-opt -O2 (HIF8LAB_WASM_OPT=1 does the same)
set -euo pipefail
cd "$(dirname "$0")/.."

opt="${HIF8LAB_WASM_OPT:-0}"
for a in "$@"; do
  case "$a" in
    --opt) opt=1 ;;
    -h|--help) sed -n 2,8p "$0"; exit 0 ;;
    *) echo "build-web.sh: unknown argument '$a' (try --help)" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_toolchain
target=$(target_dir)

# wasm-bindgen-cli must match the wasm-bindgen crate in Cargo.lock exactly.
want=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)
if [ "$have" != "$want" ]; then
  echo "build-web.sh: installing wasm-bindgen-cli $want (found '${have:-none}'; takes a few minutes)" >&2
  # --locked first; its lock file can name a crate version the registry no longer offers.
  # (Without the lint wrapper scripts/test.sh may pass: it is for this workspace's crates.)
  env -u RUSTC_WORKSPACE_WRAPPER cargo install wasm-bindgen-cli --version "$want" --locked \
    || env -u RUSTC_WORKSPACE_WRAPPER cargo install wasm-bindgen-cli --version "$want"
fi

# Whole-program LTO in one codegen unit for the wasm only (native release builds keep the
# defaults): about 6 % smaller gzipped. The UI crates (egui, epaint, egui_plot, eframe, the
# app) and the parsers that run once per file (serde_json, toml, safetensors) are optimized
# for size (`z`), the engine and trainer (the CPU fallback's hot loops) for speed. Measured:
# with `s` for the UI crates 3.02 MB gzipped once the statistics of the verdicts and SQNR
# landed; with `z` 2.93 MB, which keeps the demo under its 3 MB budget. naga (the WGSL
# translator, run once per kernel at start) joined them when the baseline build reached
# 2.98 MB: 2.90 MB with it.
# The train crate (the trainer's host side, lessons, claims: its hot loops are the engine's),
# skrifa (glyph outlines, rasterized once into the font atlas) and the PNG/deflate crates
# (exports) joined when the shipped lessons' base, the real-model lesson and the fetch of
# their files took the SIMD build to 3.01 MB (3.03 without SIMD). wgpu and egui-wgpu (the
# browser's WebGPU calls, a thin layer over JavaScript) and csv joined when the lab crate's
# split took the baseline build to 2.98 MB: 2.95 MB with them. harfrust (egui's text shaper:
# a label is shaped when its text changes, then drawn from egui's cache, like epaint's other
# work) joined when the shared size checks and the app's narrow panel contexts took the
# baseline build to 3.0014 MB: 2.956 MB with it.
ui_size=()
for crate in egui epaint egui_plot eframe hif8lab-app hif8lab-train hif8lab-lab serde_json toml toml_parser \
  winnow safetensors naga skrifa harfrust png flate2 miniz_oxide wgpu egui-wgpu csv csv-core; do
  ui_size+=(--config "profile.release.package.$crate.opt-level=\"z\"")
done
# Two builds of the same app. pkg/: with WebAssembly SIMD (simd128; every current browser:
# Chrome/Edge 91+, Firefox 89+, Safari 16.4+), which the CPU fallback's loops use (the
# HiF8 codec, statistics, attention blocks, norms). pkg-nosimd/: without, for the browsers
# that lack it and are still in use (Safari 15 to 16.3: iPhones and iPads that cannot
# update past iOS 15/16.3). index.html tests for SIMD and loads one; `?wasm=nosimd` forces
# the other. The baseline build has a target directory of its own, so neither evicts the
# other's cache. HIF8LAB_WASM_SIMD=0 builds only the baseline (into both places' stead:
# pkg/), for a quick build.
build_one() { # build_one TARGET_DIR RUSTFLAGS OUT_DIR
  local dir=$1 flags=$2 out=$3
  CARGO_TARGET_DIR="$dir" CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" \
  CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
    cargo build --release --locked --target wasm32-unknown-unknown -p hif8lab-app --lib "${ui_size[@]}"
  mkdir -p "$out"
  wasm-bindgen --target web --no-typescript --out-dir "$out" "$dir/wasm32-unknown-unknown/release/hif8lab_app.wasm"
  if [ "$opt" = 1 ]; then
    "$tools/node_modules/.bin/wasm-opt" -O2 --enable-bulk-memory --enable-nontrapping-float-to-int \
      --enable-sign-ext --enable-mutable-globals --enable-reference-types --enable-multivalue --enable-simd \
      "$out/hif8lab_app_bg.wasm" -o "$out/hif8lab_app_bg.opt.wasm"
    mv "$out/hif8lab_app_bg.opt.wasm" "$out/hif8lab_app_bg.wasm"
  fi
}

tools=$target/web-tools
if [ "$opt" = 1 ] && [ ! -x "$tools/node_modules/.bin/wasm-opt" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund binaryen@132 >&2
fi

dist=web/dist
tmp="$dist.tmp-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
if [ "${HIF8LAB_WASM_SIMD:-1}" = 0 ]; then
  build_one "$target/wasm-baseline" "" "$tmp/pkg"
else
  # Side by side: each ends in a long single-threaded step (whole-program LTO in one codegen
  # unit, then wasm-opt), which the other's compiling fills. The baseline build's output
  # goes to a log, shown when it fails.
  base_log=$(mktemp)
  build_one "$target/wasm-baseline" "" "$tmp/pkg-nosimd" >"$base_log" 2>&1 &
  base_pid=$!
  # In the background too (not behind `||`, where `set -e` would not stop it at a failure).
  build_one "$target" "-C target-feature=+simd128" "$tmp/pkg" &
  simd_pid=$!
  simd_ok=0
  wait "$simd_pid" || simd_ok=$?
  base_ok=0
  wait "$base_pid" || base_ok=$?
  if [ "$base_ok" != 0 ]; then
    echo "build-web.sh: the baseline (no SIMD) build failed:" >&2
    cat "$base_log" >&2
  else
    grep -E "Finished|warning|error" "$base_log" | sed 's/^/[baseline] /' >&2 || true
  fi
  rm -f "$base_log"
  if [ "$simd_ok" != 0 ] || [ "$base_ok" != 0 ]; then rm -rf "$tmp"; exit 1; fi
fi

cp web/index.html "$tmp/"
# The files the page fetches beside it (natively compiled in; kept out of the wasm module):
# the lessons' pretrained base, the committed real-model grid's data and the real model's
# outlier trace.
mkdir -p "$tmp/lessons"
cp assets/lessons/base.safetensors "$tmp/lessons/base.safetensors"
cp docs/results/real-smollm2/runs.jsonl.gz "$tmp/lessons/real-smollm2.jsonl.gz"
cp docs/results/real-smollm2-dose/outliers/most_recent-low.trace.jsonl.gz "$tmp/lessons/real-smollm2-outliers.trace.jsonl.gz"
# Replace the site in one step, so a server never sees half of it.
rm -rf "$dist.old"
[ -d "$dist" ] && mv "$dist" "$dist.old"
mv "$tmp" "$dist"
rm -rf "$dist.old"

for f in "$dist"/pkg*/hif8lab_app_bg.wasm; do
  raw=$(stat -c %s "$f")
  gz=$(gzip -9 -c "$f" | wc -c)
  awk -v raw="$raw" -v gz="$gz" -v f="$f" -v o="$([ "$opt" = 1 ] && echo ' (wasm-opt -O2)')" \
    'BEGIN { printf "build-web.sh: %s %.2f MB raw, %.2f MB gzipped%s\n", f, raw / 1e6, gz / 1e6, o }'
done
