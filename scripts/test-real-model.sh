#!/usr/bin/env bash
# hif8lab on a real pretrained model (SmolLM2-135M-Instruct, GGUF Q4_1) against transformers'
# GGUF loader and PyTorch: import equal to transformers' dequantized weights (max relative
# difference <= 1e-6 per tensor), eval loss of the .gguf within 1e-4 of transformers on the
# same windows, greedy text equal on 5 prompts, and the speed figures of `bench sample` and
# `eval` beside transformers (2 threads), with eval's peak resident memory. Then the Python
# package on it: 20 steps of hif8lab.torch.train under torchrun with 2 processes, the run
# folder read by the app (--check-open) and the Hugging Face folder out scored by `probe`.
#
# Not part of scripts/test.sh (it downloads 98 MB and a PyTorch of several GB, and needs a few
# GiB of memory). The judge's virtual environment: $HIF8LAB_JUDGE_VENV, else
# <cache>/venv-judge (made here). Results: <cache>/real-model/results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

cache=${HIF8LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hif8lab}
gguf=$(scripts/get-model.sh smollm2-135m)
venv=${HIF8LAB_JUDGE_VENV:-$cache/venv-judge}
if ! "$venv/bin/python" -c "import torch, transformers, gguf, accelerate, safetensors" 2>/dev/null; then
  echo "==> making the judge's virtual environment in $venv (PyTorch, transformers, gguf)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch transformers gguf accelerate safetensors numpy
fi

echo "==> building hif8lab (release)"
cargo build --release --quiet -p hif8lab-cli
bin=$(target_dir)/release/hif8lab

work=$cache/real-model
mkdir -p "$work"
text=$work/eval-4k.txt
head -c 4096 /usr/share/common-licenses/Apache-2.0 >"$text"

echo "==> import gguf"
rm -rf "$work/imported"
"$bin" import gguf "$gguf" --out "$work/imported"

echo "==> eval's peak resident memory (default settings, 4 KB text)"
/usr/bin/time -f '%M' -o "$work/eval-rss.txt" "$bin" --threads 2 eval "$gguf" --text "$text" --backend cpu
echo "   peak resident: $(( $(cat "$work/eval-rss.txt") / 1024 )) MiB"

echo "==> the judge (transformers, 2 threads)"
"$venv/bin/python" scripts/real_model_judge.py "$bin" "$gguf" "$work/imported" "$text" "$work/results.json"
echo "results: $work/results.json"

echo "==> hif8lab.torch on the real model: 20 steps under torchrun with 2 processes (gloo)"
torch_venv=${HIF8LAB_TORCH_VENV:-$cache/venv-torch}
HIF8LAB_BIN="$bin" HIF8LAB_TORCH_VENV="$torch_venv" scripts/test-python.sh --install-only
cargo build --release --quiet -p hif8lab-app
app=$(target_dir)/release/hif8lab-app
trun=$work/torch-run
rm -rf "$trun" "$work/torch-hf"
/usr/bin/time -f '%M' -o "$work/torch-rss.txt" env OMP_NUM_THREADS=1 PATH="$(dirname "$bin"):$PATH" \
  "$torch_venv/bin/python" -m torch.distributed.run --nproc_per_node 2 -m hif8lab.torch.train \
  --model "$gguf" --data "$text" --out "$trun" --steps 20 --context 128 --micro-batch 1 \
  --lr 1e-5 --estimator max_window --window 64 --flush-every 5 --trace-every 1 --checkpoint-every 20 \
  --out-hf "$work/torch-hf"
echo "   peak resident of torchrun's process tree leader: $(( $(cat "$work/torch-rss.txt") / 1024 )) MiB"
echo "==> the torch run folder opens in the app"
"$app" --check-open "$trun"
echo "==> the Hugging Face folder out, scored by hif8lab probe"
"$bin" --threads 2 probe "$work/torch-hf" --backend cpu | tail -5
