#!/usr/bin/env bash
# The compact extract of the paper's public repository that docs/results/paper/ is built from:
# the two training logs of the final pair as step,loss,lr,quant CSV (read by
# `hif8lab import log`, pattern kv), the benchmark summary tables verbatim, and SOURCE.md
# naming the repository, its commit, each source file's SHA-256 and each extract file's.
#
#   scripts/paper-extract.sh REPO      # a clone (or bare mirror) of
#                                      # github.com/chengyingyingcs-pixel/ICME_2026_challange_openpangu_pretrain
# Then: hif8lab judge-paper docs/results/paper/extract --out docs/results/paper/results.md
set -euo pipefail
repo=${1:?usage: scripts/paper-extract.sh REPO}
cd "$(dirname "$0")/.."
bin=${HIF8LAB_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release --quiet -p hif8lab-cli
  bin=${CARGO_TARGET_DIR:-$PWD/target}/release/hif8lab
fi
out=docs/results/paper/extract
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
commit=$(git -C "$repo" rev-parse HEAD)
show() { git -C "$repo" show "HEAD:$1"; }
rm -rf "$out"
mkdir -p "$out/summaries"
{
  echo "Source: <https://github.com/chengyingyingcs-pixel/ICME_2026_challange_openpangu_pretrain>, commit \`$commit\`."
  echo
  echo "| file in the repository | SHA-256 | taken as |"
  echo "|---|---|---|"
} >"$work/SOURCE.md"
for run in bf16_lr1e5 max_quant_lr1e5; do
  path=$(git -C "$repo" ls-tree -r --name-only HEAD data_visualize | grep "/train_${run}_.*\.log$")
  show "$path" >"$work/$run.log"
  "$bin" import log "$work/$run.log" --pattern kv --keep lr,quant --out "$work/$run.csv"
  gzip -9 -n -c "$work/$run.csv" >"$out/train_$run.csv.gz"
  echo "| \`$path\` | \`$(sha256sum <"$work/$run.log" | cut -d' ' -f1)\` | \`train_$run.csv.gz\` (step, loss, lr, quant of every step line) |" >>"$work/SOURCE.md"
done
for path in $(git -C "$repo" ls-tree -r --name-only HEAD evaluate_benchmarks/results | grep 'summary_.*\.txt$'); do
  show "$path" >"$out/summaries/$(basename "$path")"
  echo "| \`$path\` | \`$(sha256sum <"$out/summaries/$(basename "$path")" | cut -d' ' -f1)\` | \`summaries/$(basename "$path")\` (verbatim) |" >>"$work/SOURCE.md"
done
# The extract's own files, each with its SHA-256: judge-paper checks every one (and that no
# other file is there) before it judges anything.
{
  echo
  echo "The extract's own files (\`hif8lab judge-paper\` checks each before it judges anything, and refuses a file not listed):"
  echo
  echo "| file of the extract | SHA-256 |"
  echo "|---|---|"
  (cd "$out" && find . -type f ! -name SOURCE.md | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do
    echo "| \`$f\` | \`$(sha256sum <"$f" | cut -d' ' -f1)\` |"
  done)
} >>"$work/SOURCE.md"
mv "$work/SOURCE.md" "$out/SOURCE.md"
du -sh "$out"
