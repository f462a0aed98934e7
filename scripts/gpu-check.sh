#!/usr/bin/env bash
# The prepared GPU check: about 10 minutes on one GPU, every figure in one JSON document.
#   scripts/gpu-check.sh [--out FILE] [--bin PATH] [--python PY] [--compile] [--probe-only]
# 1. the WGSL kernels' tests on the machine's GPU adapter (the CPU backend as their oracle)
#    and scripts/bench-gpu.sh there (kernel throughput, training tokens/s of the presets and
#    of the real models' shapes);
# 2. hif8lab.torch on CUDA (python -m hif8lab.torch.gpucheck): fake quantization of every bf16
#    value bit for bit against the Rust codec, the estimators call by call against the Rust
#    quantizer, and 20 QAT steps of SmolLM2-135M's shape in bf16 autocast with the overhead
#    against bf16 eager (and under torch.compile with --compile).
# Writes {"gpu", "adapter", "device_type", "cuda", "wgsl_tests", "bench_gpu", "torch",
# "failed", "seconds"} to --out (default <target dir>/gpu-check.json), atomically.
# Exit status: 0 every check passed; 1 a check failed (the JSON's "failed" says which);
# 2 bad arguments; 3 no GPU here: neither a GPU adapter (only a CPU one such as lavapipe, or
# none) nor CUDA for torch — it says so, writes {"gpu": false, "reason": …} and measures
# nothing. Parts without their GPU are skipped and named (a Vulkan GPU without CUDA runs 1
# only; CUDA without a Vulkan driver runs 2 only).
# --probe-only: find the GPU and stop (exit 0 with one, 3 without; the JSON says what was
# found, "probe_only": true): what scripts/test.sh runs, so the script stays working.
# --bin PATH: an hif8lab binary already built (default: builds the release one).
# --python PY: a python with torch and the package (default: $HIF8LAB_TORCH_PYTHON, then the
# shared venv scripts/test-python.sh makes, then python3).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
target=$(target_dir)
out="$target/gpu-check.json"
bin=""
python=${HIF8LAB_TORCH_PYTHON:-}
compile=()
probe_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--bin|--python)
      [ $# -ge 2 ] || { echo "gpu-check.sh: $1 needs a value" >&2; exit 2; }
      case "$1" in --out) out=$2 ;; --bin) bin=$2 ;; --python) python=$2 ;; esac
      shift ;;
    --compile) compile=(--compile) ;;
    --probe-only) probe_only=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$python" ]; then
  venv="${XDG_CACHE_HOME:-$HOME/.cache}/hif8lab/venv-torch"
  if [ -x "$venv/bin/python" ]; then python="$venv/bin/python"; else python=python3; fi
fi
start=$(date +%s)
if [ -z "$bin" ]; then
  cargo build --release --locked -p hif8lab-cli >&2
  bin="$target/release/hif8lab"
elif [ ! -x "$bin" ]; then
  echo "gpu-check.sh: --bin $bin: no executable there" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Which adapter? One short training measurement names it (none: no adapter at all).
adapter="" device_type="none"
if "$bin" bench train --preset smoke --backend gpu --steps 1 --json >"$work/probe.json" 2>"$work/probe.err"; then
  adapter=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["adapter"])' "$work/probe.json")
  device_type=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device_type"])' "$work/probe.json")
fi
cuda=$("$python" -c 'import torch; print("yes" if torch.cuda.is_available() else "no")' 2>/dev/null || echo "no torch")
gpu_adapter=0
if [ -n "$adapter" ] && [ "$device_type" != "Cpu" ]; then gpu_adapter=1; fi
# Assemble the document (python3 only: no third-party packages).
write() {
  python3 - "$out" "$work" "$adapter" "$device_type" "$cuda" "$(($(date +%s) - start))" "$@" <<'PY'
import json, os, sys, tempfile
out, work, adapter, device_type, cuda, seconds, *rest = sys.argv[1:]
doc = {"gpu": rest[0] == "1", "adapter": adapter or None, "device_type": device_type, "cuda": cuda,
       "seconds": int(seconds)}
if rest[0] != "1":
    doc["reason"] = rest[1]
elif len(rest) > 1 and rest[1] == "probe":
    doc["probe_only"] = True
else:
    def load(name):
        p = os.path.join(work, name)
        return json.load(open(p)) if os.path.exists(p) and os.path.getsize(p) else None
    doc["wgsl_tests"] = open(os.path.join(work, "wgsl.txt")).read().strip() if os.path.exists(os.path.join(work, "wgsl.txt")) else "skipped: no GPU adapter"
    doc["bench_gpu"] = load("bench-gpu.json") or "skipped: no GPU adapter"
    doc["torch"] = load("torch.json") or "skipped: no CUDA"
    failed = [l for l in open(os.path.join(work, "failed.txt")).read().splitlines() if l]
    if isinstance(doc["torch"], dict):
        failed += doc["torch"].get("failed", [])
    doc["failed"] = failed
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), prefix=".gpu-check.")
with os.fdopen(fd, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
os.replace(tmp, out)
PY
}
if [ "$gpu_adapter" = 0 ] && [ "$cuda" != "yes" ]; then
  case "$device_type" in
    none) what="no GPU adapter could be opened ($(tail -n 1 "$work/probe.err" 2>/dev/null || true))" ;;
    *) what="the only adapter is '$adapter', a CPU (device type $device_type)" ;;
  esac
  reason="no GPU on this machine: $what, and torch sees no CUDA device ($cuda); nothing was measured"
  echo "gpu-check.sh: $reason" >&2
  write 0 "$reason"
  echo "gpu-check.sh: wrote $out" >&2
  exit 3
fi
if [ "$probe_only" = 1 ]; then
  echo "gpu-check.sh: a GPU is here (adapter '$adapter', $device_type; CUDA for torch: $cuda); --probe-only: nothing measured" >&2
  write 1 probe
  exit 0
fi
: >"$work/failed.txt"
if [ "$gpu_adapter" = 1 ]; then
  echo "gpu-check.sh: WGSL kernels' tests on '$adapter'" >&2
  if HIF8LAB_REQUIRE_GPU=1 cargo test --release --locked -p hif8lab-engine --test kernels >"$work/wgsl.log" 2>&1; then
    grep -E '^test result' "$work/wgsl.log" | tail -n 1 >"$work/wgsl.txt"
  else
    grep -E '^test result|FAILED|panicked' "$work/wgsl.log" | head -n 20 >"$work/wgsl.txt"
    echo "WGSL kernels' tests failed on '$adapter'" >>"$work/failed.txt"
  fi
  echo "gpu-check.sh: scripts/bench-gpu.sh on '$adapter'" >&2
  scripts/bench-gpu.sh --bin "$bin" >"$work/bench-gpu.json" || echo "bench-gpu.sh failed" >>"$work/failed.txt"
fi
if [ "$cuda" = "yes" ]; then
  echo "gpu-check.sh: hif8lab.torch on CUDA" >&2
  CARGO_TARGET_DIR="$target/python" "$python" -m pip install --quiet --force-reinstall --no-deps ./python >&2
  "$python" -m hif8lab.torch.gpucheck --out "$work/torch.json" --device cuda --steps 20 "${compile[@]}" \
    || echo "hif8lab.torch.gpucheck exited non-zero" >>"$work/failed.txt"
fi
write 1
echo "gpu-check.sh: wrote $out" >&2
if python3 -c 'import json,sys; sys.exit(1 if json.load(open(sys.argv[1]))["failed"] else 0)' "$out"; then
  exit 0
fi
python3 -c 'import json,sys; [print("gpu-check.sh: FAILED:", f, file=sys.stderr) for f in json.load(open(sys.argv[1]))["failed"]]' "$out"
exit 1
