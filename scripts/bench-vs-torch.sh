#!/usr/bin/env bash
# hif8lab's CPU backend against PyTorch eager on the `small` preset's shape, in one go:
# the project's own PyTorch reference (scripts/torch_reference.py: same model, optimizer and
# QAT recipe, HiF8 W8A8G8 with max_window delayed scaling emulated in torch) and
# `hif8lab bench train --preset small --backend cpu`, both on the same thread count; prints
# both figures and their ratios. Not part of scripts/test.sh.
#
#   scripts/bench-vs-torch.sh [--threads N] [--steps N]
#
# PyTorch comes from a virtual environment at $HIF8LAB_TORCH_VENV (default
# <target dir>/torch-venv), created with `pip install torch` when missing (PyPI's Linux
# wheels pull the CUDA libraries: about 6 GB, a few minutes), or set HIF8LAB_TORCH_PYTHON to
# a python that already has torch.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh
threads=2
steps=10
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "bench-vs-torch.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
target=$(target_dir)
python=${HIF8LAB_TORCH_PYTHON:-}
if [ -z "$python" ]; then
  venv=${HIF8LAB_TORCH_VENV:-$target/torch-venv}
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
    echo "bench-vs-torch.sh: creating $venv with torch (once)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet torch numpy >&2
  fi
  python="$venv/bin/python"
fi
cargo build --release --locked -p hif8lab-cli >&2
torch_json=$("$python" scripts/torch_reference.py --threads "$threads" --steps "$steps")
ours_json=$("$target/release/hif8lab" --threads "$threads" bench train --preset small --backend cpu --steps "$steps" --json)
python3 - "$torch_json" "$ours_json" <<'PY'
import json, sys
t, o = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"small preset shape ({t['parameters'] / 1e6:.2f} M parameters, 1,024 tokens per step), "
      f"{t['threads']} threads, on {o['adapter']}:")
print(f"| | plain tokens/s | QAT tokens/s | QAT overhead |")
print(f"|---|---|---|---|")
print(f"| PyTorch {t['torch']} eager (HiF8 W8A8G8 emulated in torch) | {t['tokens_per_s_plain']:,.0f} | "
      f"{t['tokens_per_s_qat']:,.0f} | {t['qat_overhead']:.2f} |")
print(f"| hif8lab bench train (CPU backend) | {o['tokens_per_s_plain']:,.0f} | "
      f"{o['tokens_per_s_qat']:,.0f} | {o['qat_overhead']:.2f} |")
print(f"| hif8lab ÷ PyTorch | {o['tokens_per_s_plain'] / t['tokens_per_s_plain']:.2f}× | "
      f"{o['tokens_per_s_qat'] / t['tokens_per_s_qat']:.2f}× | |")
PY
