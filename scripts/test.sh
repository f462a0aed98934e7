#!/usr/bin/env bash
# The one test command of hif8lab.
#
# On a fresh Debian machine (root, apt available) it first installs what is missing and
# says so, then runs: rustfmt check, every workspace test with clippy's lints (-D warnings)
# on in the same build, the crate dependency-direction check, the desktop app under Xvfb, the
# browser demo's two builds (clippy's wasm32 lints on; the baseline validated without SIMD)
# and the demo in headless Chromium (WebGPU on SwiftShader, and the CPU fallback), and the
# Python package with its tests (scripts/test-python.sh: PyTorch in a cached virtual
# environment), the API docs (cargo doc, warnings as errors). Exits non-zero on any failure.
#
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    the loop while editing: rustfmt, clippy's lints, the unit tests
#                              and the fast integration tests (GPU ones on lavapipe), the
#                              dependency and module-cycle checks; no Python, app, browser or
#                              docs (a few minutes with a warm target)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
case "${1:-}" in
  --quick) quick=true ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
# The integration-test binaries of the quick loop: those that finish in seconds once built
# (the slow ones train whole runs, grids or real-model fixtures; measured in
# docs/benchmarks.md).
QUICK_TESTS=(properties estimators streaming traces kernels shaders model_ops module_cycles
  format_fixtures codec scaling studies)

# Each step says how long the ones before it took (and the end gives the table), so a slow
# step shows in the log.
t0=$(date +%s); t_step=$t0; step=""; timings=()
say() {
  local now; now=$(date +%s)
  [ -n "$step" ] && timings+=("$(printf '%5d s  %s' $((now - t_step)) "$step")")
  step=$*; t_step=$now
  printf '\n==> [%d:%02d] %s\n' $(((now - t0) / 60)) $(((now - t0) % 60)) "$*"
}
SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then SUDO="sudo"; fi

# --- system packages --------------------------------------------------------------
apt_missing=()
[ -e /usr/share/vulkan/icd.d/lvp_icd.x86_64.json ] || apt_missing+=(mesa-vulkan-drivers)
ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 ' || apt_missing+=(libvulkan1)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || apt_missing+=(fonts-dejavu-core)
if ! $quick; then
[ -x /usr/lib/chromium/chromium ] || apt_missing+=(chromium)
command -v chromedriver >/dev/null || apt_missing+=(chromium-driver)
command -v node >/dev/null || apt_missing+=(nodejs)
command -v python3 >/dev/null || apt_missing+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || apt_missing+=(python3-venv)
command -v npm >/dev/null || apt_missing+=(npm)
command -v wasm-validate >/dev/null || apt_missing+=(wabt)
fi
if [ ${#apt_missing[@]} -gt 0 ]; then
  say "installing with apt: ${apt_missing[*]} (lavapipe: Vulkan on the CPU for GPU tests; DejaVu for plot labels; Chromium and Node for the browser tests; wabt to validate the wasm)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_missing[@]}"
fi

# --- Rust toolchain (pinned in rust-toolchain.toml) --------------------------------
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
ensure_toolchain
target=$(target_dir)

# Every file the tests and the tools they start write to the temporary folder lands in one
# folder of this run, removed when the run ends however it ends: runs on one machine do not
# pile their files up in /tmp. Incremental compilation is off: it only pays back over edits,
# and on a fresh target it would add gigabytes of caches.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/hif8lab-tests.XXXXXX")
# Background steps (the wasm builds, the Python suite) end with the run, however it ends.
# (Each is started with setsid, so its whole process group is stopped: cargo, rustc, pytest.)
stop_jobs() {
  local p
  for p in $(jobs -p); do kill -TERM -- "-$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'stop_jobs; rm -rf "$test_tmp"' EXIT
export TMPDIR="$test_tmp"
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
# A full run from an empty target leaves 3.2 GB there, and its tests write a few hundred MB
# of temporary files: with little room, say so before a build stops half-way on "No space
# left on device".
for dir in "$target" "$test_tmp"; do
  mkdir -p "$dir"
  free_mb=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
  if [ "${free_mb:-0}" -lt 6000 ]; then
    echo "warning: $free_mb MB free where $dir is; a run from an empty target needs about 4 GB" >&2
  fi
done

# Mesa's Vulkan loader complains without a runtime dir (harmless, but noisy).
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}"
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

# --- checks ----------------------------------------------------------------------
say "cargo fmt --check"
cargo fmt --all --check
cargo fmt --manifest-path python/Cargo.toml --check

# clippy's lints (-D warnings) run inside the builds below rather than in `cargo clippy`
# passes of their own: scripts/clippy-driver.sh compiles the workspace's crates (never the
# dependencies) as clippy would, so the dependencies are compiled once instead of once more in
# check mode for each target (native: every target of every crate, as `--all-targets`;
# wasm32: the browser build's crates, in both of its builds).
lint_env=(env CLIPPY_DRIVER="$(rustup which --toolchain "$(pinned_toolchain)" clippy-driver)"
  RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/clippy-driver.sh")

export HIF8LAB_REQUIRE_GPU=1
if $quick; then
  say "quick: cargo test with clippy's lints (unit tests and ${#QUICK_TESTS[@]} fast integration tests; GPU tests on lavapipe)"
  quick_args=()
  for t in "${QUICK_TESTS[@]}"; do quick_args+=(--test "$t"); done
  "${lint_env[@]}" cargo test --workspace --locked --lib --bins "${quick_args[@]}"
  say "dependency direction and module cycles"
  scripts/check-deps.sh
  say "quick checks passed (the full run: scripts/test.sh)"
  printf '%s\n' "${timings[@]}"
  exit 0
fi

# The browser demo's two wasm builds start now, at the lowest priority: they may take the
# CPU the tests leave idle and never slow the tests by much (measured on 2 cores: the tests
# leave little idle, so this saves little; docs/benchmarks.md). Their own step below waits
# for them.
web_log="$test_tmp/build-web.log"
# (A new session is a new scheduler autogroup where Linux has them: its nice value is set too,
# or the builds would get half the CPU whatever their processes' nice.)
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 "$@"' low \
  "${lint_env[@]}" scripts/build-web.sh --opt >"$web_log" 2>&1 &
web_pid=$!

say "cargo test with clippy's lints (workspace, every target, -D warnings; GPU tests on a real adapter — lavapipe here — and must not skip; the wasm builds beside it at low priority)"
"${lint_env[@]}" cargo test --workspace --locked

# The Python package's environment and Rust core (a release build: about 2 minutes) start
# now, beside the API docs, the desktop app and the rest of the wasm builds, at the same low
# priority as those: the Python step's tests, the last step's longest part, then start at
# once. Its output is shown with the Python step's.
python_install_log="$test_tmp/python-install.log"
setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true; exec nice -n 19 "$@"' low \
  env HIF8LAB_BIN="$target/debug/hif8lab" scripts/test-python.sh --install-only >"$python_install_log" 2>&1 &
python_install_pid=$!

say "dependency direction"
scripts/check-deps.sh

say "API docs: cargo doc of the workspace's crates (warnings as errors: broken links, bad markup)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

say "desktop app under Xvfb (smoke preset, autostart) and a non-blank screenshot"
HIF8LAB_APP_BIN="$target/debug/hif8lab-app" scripts/app-screenshot.sh "$target/app-screenshot.png"

say "browser demo: the wasm builds (begun beside the Rust tests; clippy's lints on wasm32, -D warnings; wasm-bindgen, wasm-opt -O2), the size budget (<= 3 MB gzipped), no SIMD in the baseline build"
if ! wait "$web_pid"; then
  cat "$web_log" >&2
  echo "error: scripts/build-web.sh --opt failed (its output above)" >&2
  exit 1
fi
grep -v '^ *\(Compiling\|Checking\|Blocking\)' "$web_log" || true
for wasm in web/dist/pkg/hif8lab_app_bg.wasm web/dist/pkg-nosimd/hif8lab_app_bg.wasm; do
  gz=$(gzip -9 -c "$wasm" | wc -c)
  if [ "$gz" -gt 3000000 ]; then
    echo "error: $wasm is $gz bytes gzipped, over the 3 MB budget" >&2
    exit 1
  fi
done
# The baseline build is for browsers without WebAssembly SIMD, which reject a module holding
# a single SIMD instruction: wabt's validator, with SIMD off, must accept it (and with its
# default features, the SIMD build).
wasm-validate --disable-simd web/dist/pkg-nosimd/hif8lab_app_bg.wasm ||
  { echo "error: web/dist/pkg-nosimd holds SIMD instructions (wasm-validate --disable-simd)" >&2; exit 1; }
wasm-validate web/dist/pkg/hif8lab_app_bg.wasm

# The Python suite runs beside the browser cases, which wait on the page most of the time
# (measured: 5.1 CPU-minutes in 9.8 minutes); its output is shown when both are done.
say "Python package (pip install ./python and its tests: torch vs the Rust codec and estimators, torchrun with 2 processes, the same run in torch and in the lab) beside the browser demo in headless Chromium (WebGPU on SwiftShader, and the CPU fallback)"
if ! wait "$python_install_pid"; then
  cat "$python_install_log" >&2
  echo "error: scripts/test-python.sh --install-only failed (its output above)" >&2
  exit 1
fi
cat "$python_install_log"
python_log="$test_tmp/python.log"
setsid env HIF8LAB_BIN="$target/debug/hif8lab" scripts/test-python.sh >"$python_log" 2>&1 &
python_pid=$!
if [ ! -d web/tests/node_modules/playwright-core ]; then
  (cd web/tests && npm ci --no-audit --no-fund)
fi
# A Hugging Face folder with the byte tokenizer for the browser's file-picker case.
hf_tmp=$(mktemp -d)
"$target/debug/hif8lab" train --preset smoke --backend cpu --quiet --out "$hf_tmp/run" --set train.steps=4
"$target/debug/hif8lab" export hf "$hf_tmp/run" --out "$hf_tmp/hf"
browser_rc=0
HIF8LAB_HF_DIR="$hf_tmp/hf" node web/tests/browser.mjs --mode all --shots "$target" || browser_rc=$?
rm -rf "$hf_tmp"
python_rc=0
wait "$python_pid" || python_rc=$?
echo "--- the Python step's output ---"
cat "$python_log"
if [ "$browser_rc" -ne 0 ] || [ "$python_rc" -ne 0 ]; then
  echo "error: the browser cases exited $browser_rc, the Python step $python_rc" >&2
  exit 1
fi

say "GPU benchmark script on the CPU adapter (--allow-cpu: small sizes, keeps the script working)"
scripts/bench-gpu.sh --allow-cpu --bin "$target/debug/hif8lab" >"$target/bench-gpu.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["train"]["smoke"]["tokens_per_s_qat"] > 0, d; print("bench-gpu.sh --allow-cpu:", d["adapter"], d["seconds"], "s")' "$target/bench-gpu.json"

say "GPU check script: finds the GPU (--probe-only; exit 3 and a JSON that says so without one)"
set +e
scripts/gpu-check.sh --probe-only --bin "$target/debug/hif8lab" --out "$target/gpu-check.json"
gpu_rc=$?
set -e
python3 - "$target/gpu-check.json" "$gpu_rc" <<'PY'
import json, sys
doc, rc = json.load(open(sys.argv[1])), int(sys.argv[2])
assert rc in (0, 3), f"gpu-check.sh --probe-only exited {rc}"
assert doc["gpu"] == (rc == 0), doc
assert rc == 0 or "no GPU on this machine" in doc["reason"], doc
print("gpu-check.sh --probe-only:", "GPU found" if rc == 0 else "no GPU (exit 3):", doc.get("adapter"))
PY

say "all checks passed"
printf '%s\n' "${timings[@]}"
