"""hif8lab.torch on a GPU, checked against the Rust core and timed: the torch half of
``scripts/gpu-check.sh``.

    python -m hif8lab.torch.gpucheck --out gpu-check-torch.json [--device cuda] [--steps 20]

Checks, in this order, each written into one JSON document (atomically, at the end):

- ``codec``: ``fake_quant``/``qdq`` on the device against the Rust codec on every bf16 value,
  for HiF8, E4M3 and E5M2, saturating or not, at five scales: how many values differ (NaN
  payloads not compared). Must be 0.
- ``estimators``: the on-device ``QuantBank`` against the Rust ``Quantizer`` call by call
  (every estimator's estimate and scale, 6 quantizers × 150 calls of drifting, spiking,
  zero, infinite and tiny amaxes, a reset half-way). Must be 0 differences.
- ``train``: SmolLM2-135M's shape (random weights: the shape is what costs time), ctx 128,
  batch 2, the paper's placement, ``--steps`` steps per arm under ``torch.autocast(bf16)``:
  eager, QAT and QAT without statistics, and with ``--compile`` each under
  ``torch.compile``; step times and the QAT overhead against eager.

Without a GPU it prints why, writes ``{"gpu": false, "reason": …}`` and exits 3, unless
``--device cpu`` asks for the checks on the CPU (how the tests exercise it, on smaller sizes).
Exit status: 0 every check passed, 1 a check failed, 2 bad arguments, 3 no GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

import numpy as np
import torch

FORMATS = ("hif8", "e4m3", "e5m2")
SCALES = (1.0, 15.0 / 3.7, 0.001953125, 1234.5, 3.0e-5)

#: Exit status when there is no GPU to check.
NO_GPU = 3


def all_bf16() -> np.ndarray:
    """Every bf16 bit pattern, as f32."""
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """Elements whose bits differ (both NaN counts as equal: payloads are not compared)."""
    a, b = np.ascontiguousarray(a, np.float32).view(np.uint32), np.ascontiguousarray(b, np.float32).view(np.uint32)
    nan_a = (a & 0x7FFFFFFF) > 0x7F800000
    nan_b = (b & 0x7FFFFFFF) > 0x7F800000
    return int((~((a == b) | (nan_a & nan_b))).sum())


def codec_check(device: str, values: np.ndarray | None = None) -> Dict:
    """The torch codec on ``device`` against the Rust codec on ``values`` (every bf16 value)."""
    from hif8lab import codec
    from hif8lab.torch import fakequant as tq

    values = all_bf16() if values is None else values
    x = torch.from_numpy(values).to(device)
    cases: List[Dict] = []
    for fmt in FORMATS:
        for saturate in (False, True):
            for scale in SCALES:
                rust = codec.qdq(values, fmt, scale, saturate)
                mine = tq.qdq(x, scale, fmt, saturate).cpu().numpy()
                cases.append({"format": fmt, "saturate": saturate, "scale": scale,
                              "differ": differing(rust, mine)})
    return {"values_per_case": int(values.size), "cases": len(cases),
            "differ": sum(c["differ"] for c in cases),
            "failed_cases": [c for c in cases if c["differ"]]}


def amax_sequences(rng: np.random.Generator, q: int, calls: int) -> np.ndarray:
    """amax sequences with drifts, spikes, zeros, one Inf and tiny values."""
    base = np.exp(rng.normal(0, 2, size=(q, 1))) * np.exp(np.cumsum(rng.normal(0, 0.05, size=(q, calls)), axis=1))
    spikes = rng.random((q, calls)) < 0.03
    base = np.where(spikes, base * rng.uniform(10, 2000, size=(q, calls)), base)
    base[0, 5] = 0.0
    base[1 % q, 7] = np.inf
    base[2 % q, 3:6] = 1e-30
    return base.astype(np.float32)


def estimator_check(device: str, quantizers: int = 6, calls: int = 150) -> Dict:
    """The on-device bank against the Rust quantizer, call by call."""
    from hif8lab import scaling as rs
    from hif8lab.torch.bank import QuantBank

    shadow = ("most_recent", "max_window", "mean_window", "ema(0.1)", "holt(0.5,0.1,0.9)", "current")
    config = rs.ScalingConfig(estimator="max_window", window=64, target=15.0, shadow=shadow)
    rng = np.random.default_rng(7)
    amax = amax_sequences(rng, quantizers, calls)
    bank = QuantBank(config, quantizers, device)
    refs = [rs.Quantizer(config) for _ in range(quantizers)]
    compared = differ = 0
    first = None
    for t in range(calls):
        if t == calls * 3 // 5:  # QAT switching on again: every history forgotten
            bank.reset()
            for r in refs:
                r.reset()
        bank.begin_micro()
        for q in rng.permutation(quantizers):
            a = torch.tensor(amax[q, t], device=device)
            est, scale = bank.decide(int(q), a)
            bank.observe(int(q), a, scale)
            est, scale = est.cpu().numpy(), scale.cpu().numpy()
            for k, d in enumerate(refs[q].call(float(amax[q, t]))):
                same_est = differing(np.float32([est[k]]), np.float32([d.est])) == 0
                same_scale = differing(np.float32([scale[k]]), np.float32([d.scale])) == 0
                compared += 1
                if not (same_est and same_scale):
                    differ += 1
                    first = first or {"call": t, "quantizer": int(q), "estimator": bank.names[k],
                                      "torch": [float(est[k]), float(scale[k])], "rust": [d.est, d.scale]}
    return {"compared": compared, "differ": differ, "first_difference": first, "estimators": bank.names}


def train_check(device: str, steps: int, compiled: bool, shape: str = "smollm2-135m", rounds: int = 2) -> Dict:
    """Step times of eager and QAT (and under torch.compile) in bf16 autocast on ``device``."""
    from hif8lab.torch import bench

    args = argparse.Namespace(shape=shape, batch=2, context=128 if shape == "smollm2-135m" else 32,
                              steps=max(1, steps // max(1, rounds)), rounds=rounds, compile=compiled,
                              device=device, dtype="bf16")
    return bench.run(args)


def write_atomic(path: Path, doc: Dict) -> None:
    """``doc`` as JSON at ``path``: a temporary file beside it, then a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def verdict(doc: Dict) -> List[str]:
    """What failed in a finished document (empty: every check passed)."""
    failed = []
    if doc.get("codec", {}).get("differ", 0):
        failed.append(f"codec: {doc['codec']['differ']} values differ from the Rust codec")
    if doc.get("estimators", {}).get("differ", 0):
        failed.append(f"estimators: {doc['estimators']['differ']} of {doc['estimators']['compared']} "
                      "estimates or scales differ from the Rust quantizer")
    for name, arm in doc.get("train", {}).get("arms", {}).items():
        if not (arm.get("step_s", 0) > 0):
            failed.append(f"train: arm {name} has no step time")
    return failed


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hif8lab.torch.gpucheck", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the JSON document to write")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (the checks on the CPU, smaller)")
    p.add_argument("--steps", type=int, default=20, help="training steps per arm")
    p.add_argument("--compile", action="store_true", help="also time each arm under torch.compile")
    p.add_argument("--shape", default=None, help="smollm2-135m (GPU default) or tiny (CPU default)")
    try:
        args = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    start = time.time()
    doc: Dict = {"torch": torch.__version__, "device": args.device}
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        reason = (f"torch {torch.__version__} sees no CUDA device "
                  f"(torch.version.cuda = {torch.version.cuda}); nothing was checked")
        print(f"gpucheck: no GPU: {reason}", file=sys.stderr)
        write_atomic(Path(args.out), {**doc, "gpu": False, "reason": reason})
        return NO_GPU
    doc["gpu"] = args.device.startswith("cuda")
    if doc["gpu"]:
        doc["device_name"] = torch.cuda.get_device_name(torch.device(args.device))
    cpu = not doc["gpu"]
    # On the CPU (tests): a subset of the bf16 values and a tiny model.
    values = all_bf16()[:: 97] if cpu else None
    doc["codec"] = codec_check(args.device, values)
    doc["estimators"] = estimator_check(args.device, calls=40 if cpu else 150)
    doc["train"] = train_check(args.device, args.steps, args.compile, args.shape or ("tiny" if cpu else "smollm2-135m"))
    doc["seconds"] = round(time.time() - start, 1)
    doc["failed"] = verdict(doc)
    write_atomic(Path(args.out), doc)
    arms = doc["train"]["arms"]
    print(f"gpucheck on {doc.get('device_name', args.device)}: codec {doc['codec']['differ']} of "
          f"{doc['codec']['values_per_case'] * doc['codec']['cases']} differ; estimators "
          f"{doc['estimators']['differ']} of {doc['estimators']['compared']} differ; bf16 step "
          + ", ".join(f"{n} {a['step_s'] * 1e3:.1f} ms (×{a['ratio_to_eager']:.2f})" for n, a in arms.items())
          + f"; {doc['seconds']} s; {args.out}", file=sys.stderr)
    for f in doc["failed"]:
        print(f"gpucheck: FAILED: {f}", file=sys.stderr)
    return 1 if doc["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
