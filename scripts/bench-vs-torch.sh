#!/usr/bin/env bash
# hif8lab's CPU backend against PyTorch eager on one model shape (`small`: the small
# preset's; `smollm2-135m`: SmolLM2-135M, tied, vocab 49,152, ctx 128, batch 2;
# `smollm2-360m`: the 360 M Llama shape, d 960, 32 layers, 15/5 heads, ff 2560), in one go:
# the project's own PyTorch reference (scripts/torch_reference.py: same model, optimizer and
# QAT recipe, HiF8 W8A8G8 with delayed scaling by the package's hif8lab.torch) and
# `hif8lab bench train --preset small --backend cpu`, both on the same thread count; prints
# both figures and their ratios. Not part of scripts/test.sh.
#
#   scripts/bench-vs-torch.sh [--shape small|smollm2-135m|smollm2-360m] [--threads N] [--steps N] [--rounds N] [--dtype f32|bf16]
#
# --dtype bf16: PyTorch under torch.autocast("cpu", torch.bfloat16) against the lab's
# `train.precision = "bf16"` (on its bf16 kernel where the CPU has one).
#
# --rounds (default 3): how many torch/hif8lab pairs to run, alternating which goes first;
# the summary gives the median ratio, the range and whether each goal held in every round.
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
rounds=3
shape=small
dtype=f32
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --shape) shape=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "bench-vs-torch.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
case "$shape" in
  small) sets=() ;;
  smollm2-135m) sets=(--set model.vocab=49152 --set model.d_model=576 --set model.layers=30
    --set model.heads=9 --set model.kv_heads=3 --set model.d_ff=1536 --set model.context=128
    --set model.tie_embeddings=true --set train.batch=2 --set train.lr=1e-5) ;;
  smollm2-360m) sets=(--set model.vocab=49152 --set model.d_model=960 --set model.layers=32
    --set model.heads=15 --set model.kv_heads=5 --set model.d_ff=2560 --set model.context=128
    --set model.tie_embeddings=true --set train.batch=2 --set train.lr=1e-5) ;;
  *) echo "bench-vs-torch.sh: --shape must be small, smollm2-135m or smollm2-360m, not '$shape'" >&2; exit 2 ;;
esac
case "$dtype" in
  f32) ;;
  bf16) sets+=(--set train.precision=bf16) ;;
  *) echo "bench-vs-torch.sh: --dtype must be f32 or bf16, not '$dtype'" >&2; exit 2 ;;
esac
case "$rounds" in ''|*[!0-9]*|0) echo "bench-vs-torch.sh: --rounds must be a positive integer, not '$rounds'" >&2; exit 2 ;; esac
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
# The reference quantizes with the package (hif8lab.torch), built from this checkout.
CARGO_TARGET_DIR="$target/python" "$python" -m pip install --quiet --force-reinstall --no-deps ./python >&2
cargo build --release --locked -p hif8lab-cli >&2
# Rounds alternate which of the two runs first (torch, ours | ours, torch | ...), so a host
# whose speed drifts slows both alike; every round is printed, then the median ratio.
results=()
for ((r = 0; r < rounds; r++)); do
  echo "bench-vs-torch.sh: round $((r + 1)) of $rounds" >&2
  torch() { "$python" scripts/torch_reference.py --threads "$threads" --steps "$steps" --shape "$shape" --dtype "$dtype"; }
  ours() { "$target/release/hif8lab" --threads "$threads" bench train --preset small "${sets[@]}" --backend cpu --steps "$steps" --json; }
  if ((r % 2 == 0)); then t=$(torch); o=$(ours); else o=$(ours); t=$(torch); fi
  results+=("$t" "$o")
done
python3 - "$shape" "${results[@]}" <<'PY'
import json, statistics, sys
shape = sys.argv[1]
docs = [json.loads(a) for a in sys.argv[2:]]
pairs = list(zip(docs[0::2], docs[1::2]))
t0, o0 = pairs[0]
print(f"{shape} shape ({t0['parameters'] / 1e6:.2f} M parameters; hif8lab counts {o0['params'] / 1e6:.2f} M), "
      f"{t0['threads']} threads, on {o0['adapter']}, {len(pairs)} rounds (torch and hif8lab "
      f"alternating which runs first):")
print("| round | PyTorch plain | PyTorch QAT | PyTorch overhead | hif8lab plain | hif8lab QAT "
      "| hif8lab overhead | ratio plain | ratio QAT |")
print("|---|---|---|---|---|---|---|---|---|")
ratios = []
for i, (t, o) in enumerate(pairs, 1):
    rp = o['tokens_per_s_plain'] / t['tokens_per_s_plain']
    rq = o['tokens_per_s_qat'] / t['tokens_per_s_qat']
    ratios.append((rp, rq, o['qat_overhead']))
    print(f"| {i} | {t['tokens_per_s_plain']:,.0f} | {t['tokens_per_s_qat']:,.0f} | "
          f"{t['qat_overhead']:.2f} | {o['tokens_per_s_plain']:,.0f} | {o['tokens_per_s_qat']:,.0f} | "
          f"{o['qat_overhead']:.2f} | {rp:.2f}× | {rq:.2f}× |")
print(f"(tokens/s; PyTorch {t0['torch']} eager with HiF8 W8A8G8 emulated in torch, "
      "hif8lab bench train on its CPU backend)")
def summary(name, values, goal, higher=True):
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    met = sum((v >= goal) if higher else (v <= goal) for v in values)
    if met == len(values):
        verdict = "met in every round"
    elif met == 0:
        verdict = "not met in any round"
    else:
        verdict = f"inconclusive: met in {met} of {len(values)} rounds"
    sign = "≥" if higher else "≤"
    print(f"{name}: median {med:.2f} (rounds {lo:.2f}–{hi:.2f}); goal {sign} {goal:.2f}: {verdict}")
big = shape.startswith("smollm2")
summary("hif8lab ÷ PyTorch, plain", [r[0] for r in ratios], 3.0 if big else 1.0)
summary("hif8lab ÷ PyTorch, QAT", [r[1] for r in ratios], 4.5 if big else 2.0)
print("gemm_fraction (the step's own GEMMs alone ÷ the step), per round: plain "
      + ", ".join(f"{o['gemm_fraction']:.2f}" for _, o in pairs) + "; QAT "
      + ", ".join(f"{o['gemm_fraction_qat']:.2f}" for _, o in pairs)
      + (" (goal ≥ 0.75)" if big else ""))
summary("hif8lab QAT overhead", [r[2] for r in ratios], 1.10, higher=False)
# The ceiling this machine's GEMMs put on any step: tokens per step ÷ the time its own GEMM
# shapes take alone (as if everything else were free), as ratios to PyTorch's rounds.
bound = [o.get('tokens_per_s_gemm_bound') for _, o in pairs]
if all(b is not None for b in bound):
    print("ceiling (tokens/s if everything besides hif8lab's GEMMs were free), per round: "
          + ", ".join(f"{b:,.0f} = {b / t['tokens_per_s_plain']:.2f}× PyTorch plain, "
                      f"{b / t['tokens_per_s_qat']:.2f}× QAT" for b, (t, _) in zip(bound, pairs)))
PY
