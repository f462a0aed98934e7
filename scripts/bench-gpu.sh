#!/usr/bin/env bash
# The GPU benchmark in one command, for a machine with a real GPU (Vulkan, Metal or DX12):
# builds in release and prints one JSON document:
#   {"adapter", "device_type", "backend", "allow_cpu", "seconds",
#    "kernels": <hif8lab bench kernels --json>,
#    "train": {"smoke": <bench train --json>, "small": …, "medium": …,
#              "smollm2-135m": …, "smollm2-360m": …}}
# (the last two: the real models' shapes, tied, vocab 49,152, ctx 128, batch 2)
# (copy / qdq / quant_stats GB/s and their ratio to copy, matmul GFLOP/s per size, layout and
# fusion; tokens/s plain and QAT, host ms per step, dispatches per step). Under 5 minutes on a
# GPU. On a CPU adapter (lavapipe, SwiftShader) it stops with a message, unless given
# --allow-cpu: then it runs the small sizes only (what CI does to keep this script working).
#   scripts/bench-gpu.sh [--allow-cpu] [--bin PATH]
# --bin PATH uses an hif8lab binary already built instead of building the release one (CI
# passes its debug build: the script is what it checks there, not the figures).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
allow_cpu=0
bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --allow-cpu) allow_cpu=1 ;;
    --bin)
      [ $# -ge 2 ] || { echo "bench-gpu.sh: --bin needs a path" >&2; exit 2; }
      bin=$2
      shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "bench-gpu.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
start=$(date +%s)
if [ -z "$bin" ]; then
  cargo build --release --locked -p hif8lab-cli >&2
  bin="$(target_dir)/release/hif8lab"
elif [ ! -x "$bin" ]; then
  echo "bench-gpu.sh: --bin $bin: no executable there" >&2
  exit 2
fi
# Which adapter? One short train measurement names it.
probe=$("$bin" bench train --preset smoke --backend gpu --steps 1 --json) || {
  echo "bench-gpu.sh: no GPU adapter could be opened (see the error above)" >&2
  exit 1
}
device_type=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["device_type"])' "$probe")
adapter=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["adapter"])' "$probe")
if [ "$device_type" = "Cpu" ] && [ "$allow_cpu" = 0 ]; then
  echo "bench-gpu.sh: the adapter is '$adapter', a CPU (device type Cpu), not a GPU: its figures" >&2
  echo "would measure an emulator. Run it where a GPU driver is installed, or pass --allow-cpu" >&2
  echo "to check the script itself on small sizes." >&2
  exit 1
fi
if [ "$allow_cpu" = 1 ] && [ "$device_type" = "Cpu" ]; then
  kernels=$("$bin" bench kernels --json --sizes 128,256 --elements 1048576)
  presets=(smoke)
  steps=3
else
  kernels=$("$bin" bench kernels --json)
  presets=(smoke small medium)
  steps=20
fi
train="{"
sep=""
for p in "${presets[@]}"; do
  t=$("$bin" bench train --preset "$p" --backend gpu --steps "$steps" --json)
  train="$train$sep\"$p\":$t"
  sep=","
done
if [ "$device_type" != "Cpu" ]; then
  # The real models' shapes (SmolLM2-135M and the 360 M Llama shape).
  s135=(--set model.vocab=49152 --set model.d_model=576 --set model.layers=30 --set model.heads=9
    --set model.kv_heads=3 --set model.d_ff=1536 --set model.context=128
    --set model.tie_embeddings=true --set train.batch=2)
  s360=(--set model.vocab=49152 --set model.d_model=960 --set model.layers=32 --set model.heads=15
    --set model.kv_heads=5 --set model.d_ff=2560 --set model.context=128
    --set model.tie_embeddings=true --set train.batch=2)
  t=$("$bin" bench train --preset small --backend gpu --steps 10 --json "${s135[@]}")
  train="$train$sep\"smollm2-135m\":$t"
  t=$("$bin" bench train --preset small --backend gpu --steps 10 --json "${s360[@]}")
  train="$train,\"smollm2-360m\":$t"
fi
train="$train}"
end=$(date +%s)
python3 - "$adapter" "$device_type" "$allow_cpu" "$((end - start))" "$kernels" "$train" <<'PY'
import json, sys
adapter, device_type, allow_cpu, seconds, kernels, train = sys.argv[1:]
print(json.dumps({
    "adapter": adapter,
    "device_type": device_type,
    "backend": "gpu",
    "allow_cpu": allow_cpu == "1",
    "seconds": int(seconds),
    "kernels": json.loads(kernels),
    "train": json.loads(train),
}, indent=2))
PY
