#!/usr/bin/env bash
# The Python package (python/, hif8lab on PyPI's conventions) and its judges: installs it the
# README's way (`pip install ./python`) into a virtual environment with PyTorch, then runs
# python/tests: the torch fake quantization against the Rust codec bit for bit, the on-device
# estimators against the Rust ones call by call, the per-call statistics, traces replayed by
# `hif8lab replay`, the authors' state-manager logic, torchrun with 2 processes (gloo: DDP,
# FSDP2, both amax_reduce semantics, kill -9 / SIGTERM and resume) and the same run in torch
# and in the lab's own trainer.
#
# The virtual environment: $HIF8LAB_TORCH_VENV, else <cache>/venv-torch (made here once: PyPI's
# torch wheel with its CUDA libraries is several GB; it runs on the CPU). The CUDA packages
# stay: PyPI has no CPU-only torch for Linux, and the wheel it has does not import without
# them (torch 2.15.0 installed with --no-deps: "ValueError: libcublasLt.so.*[0-9] not found";
# measured 2026-12-05), while the CPU wheels' own index is not reachable from these machines. The lab's binary for
# the judges that call it: $HIF8LAB_BIN, else <target>/debug/hif8lab (built when missing).
#
#   scripts/test-python.sh [--install-only] [PYTEST ARGS…]
set -euo pipefail
cd "$(dirname "$0")/.."
install_only=false
if [ "${1:-}" = "--install-only" ]; then install_only=true; shift; fi
. scripts/lib.sh

t_start=$(date +%s)
cache=${HIF8LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hif8lab}
venv=${HIF8LAB_TORCH_VENV:-$cache/venv-torch}
target=$(target_dir)
if ! "$venv/bin/python" -c "import torch, transformers, numpy, pytest" 2>/dev/null; then
  echo "==> making the virtual environment $venv (PyTorch, transformers, pytest; once)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet torch transformers safetensors numpy pytest pytest-xdist accelerate
fi
# accelerate: the Hugging Face Trainer's dependency (HfCallback's test); pytest-xdist: the
# tests in parallel workers. Added to older environments.
for pkg in accelerate:accelerate xdist:pytest-xdist; do
  if ! "$venv/bin/python" -c "import ${pkg%%:*}" 2>/dev/null; then
    "$venv/bin/pip" install --quiet "${pkg#*:}"
  fi
done

bin=${HIF8LAB_BIN:-$target/debug/hif8lab}
if [ ! -x "$bin" ]; then
  echo "==> building the hif8lab binary for the judges"
  cargo build --quiet --locked -p hif8lab-cli
fi

echo "==> pip install ./python (maturin builds the Rust core, with clippy's lints as errors)"
# The Rust core builds in the shared target folder (its own subfolder) so a rerun is quick.
# Its own crate is compiled by clippy-driver (-D warnings) in that very build, as
# scripts/test.sh does for the workspace: no second build of the dependencies in check mode.
ensure_toolchain >/dev/null
CARGO_TARGET_DIR="$target/python" \
  CLIPPY_DRIVER="$(rustup which --toolchain "$(pinned_toolchain)" clippy-driver)" \
  RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/clippy-driver.sh" \
  "$venv/bin/pip" install --quiet --force-reinstall --no-deps ./python

t_installed=$(date +%s)
echo "==> environment and package ready in $((t_installed - t_start)) s"
if $install_only; then exit 0; fi

# One worker per core (at most 4; HIF8LAB_PYTEST_WORKERS overrides, 0 runs in this process):
# each test's torch runs on one thread, and the multi-process tests pick their own ports. On 2
# cores the suite took 671 s in one process and 361 s in two workers (docs/benchmarks.md).
workers=${HIF8LAB_PYTEST_WORKERS:-$(n=$(nproc); echo $((n > 4 ? 4 : n)))}
echo "==> python/tests ($workers workers)"
t_tests=$(date +%s)
# From the repository root, so that `import hif8lab` is the installed package, not the sources.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HIF8LAB_BIN="$bin" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
  -n "$workers" python/tests "$@"
t_end=$(date +%s)
echo "==> Python step: $((t_end - t_start)) s (environment and package $((t_installed - t_start)) s, tests $((t_end - t_tests)) s)"
