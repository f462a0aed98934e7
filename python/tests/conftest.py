import os
import subprocess
import sys
from pathlib import Path

import pytest

TINY = "tiny:6,64,128,4,2,256"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("data") / "corpus.txt"
    p.write_text(" ".join(f"The capital of country{i % 50} is city{i % 37}." for i in range(4000)))
    return p


def env() -> dict:
    e = dict(os.environ)
    e["OMP_NUM_THREADS"] = "1"
    e.setdefault("PYTHONHASHSEED", "0")
    return e


def train(out: Path, corpus: Path, *args: str, procs: int = 1, check: bool = True) -> subprocess.CompletedProcess:
    """Runs python -m hif8lab.torch.train (under torchrun with ``procs`` > 1)."""
    base = ["-m", "hif8lab.torch.train", "--data", str(corpus), "--out", str(out), "--quiet", *args]
    if "--model" not in args:
        base += ["--model", TINY]
    if "--trace-every" not in args:
        base += ["--trace-every", "1"]  # the tests read every step's calls (the CLI's default is 20)
    if procs > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(procs),
               "--master_port", str(29500 + (os.getpid() % 2000)), *base]
    else:
        cmd = [sys.executable, *base]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env())
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r
