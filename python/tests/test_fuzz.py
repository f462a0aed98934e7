"""Fuzzing what a user feeds hif8lab.torch.train: corpus files (text, JSONL) and traces read
back. Every input is either read or refused with InputError / ValueError naming the file;
nothing else escapes."""

import json

import numpy as np
import pytest

from hif8lab.scaling import read_trace
from hif8lab.torch.train import InputError, Windows, read_corpus, tokenize

SEEDS = range(300)


def mutate(rng, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.integers(1, 6)):
        op = rng.integers(0, 4)
        if op == 0 and b:
            b[rng.integers(0, len(b))] = rng.integers(0, 256)
        elif op == 1 and b:
            del b[rng.integers(0, len(b)):rng.integers(0, len(b)) + rng.integers(1, 20)]
        elif op == 2:
            pos = rng.integers(0, len(b) + 1)
            b[pos:pos] = bytes(rng.integers(0, 256, rng.integers(1, 12), dtype=np.uint8))
        else:
            b += rng.choice([b"\xff\xfe", b'{"text": 3}\n', b"[]\n", b'{"text": "\\ud800"}\n', b"\n\n"])
    return bytes(b)


@pytest.mark.parametrize("suffix", [".jsonl", ".txt"])
def test_corpus_files(tmp_path, suffix):
    good = "".join(json.dumps({"text": f"document {i} ünïcode"}) + "\n" for i in range(20)).encode()
    read = refused = 0
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        p = tmp_path / f"c{seed}{suffix}"
        p.write_bytes(mutate(rng, good))
        try:
            docs = read_corpus(p)
        except InputError as e:
            assert str(p) in str(e)
            refused += 1
            continue
        assert all(isinstance(d, str) for d in docs)
        stream = tokenize(docs, None, 256, str(p))
        try:
            w = Windows(stream, 16, seed, str(p))
            assert w.batch(0, 0, 0, 1, 2, 2).shape == (2, 17)
        except InputError as e:
            assert str(p) in str(e)
        read += 1
    assert read > 0 and (refused > 0 or suffix == ".txt")


def test_traces_read_back(tmp_path):
    from hif8lab.scaling import TraceWriter

    path = tmp_path / "t.jsonl"
    w = TraceWriter(path, {"format": "hif8", "target": 15.0, "window": 4, "estimator": "max_window(4)",
                           "estimators": ["max_window(4)"]})
    rec = {"step": 0, "micro": 0, "block": 1, "module": "up", "role": "A", "numel": 8, "amax": 2.5,
           "estimator": "max_window(4)", "est": 2.5, "scale": 6.0, "above_est": 0, "overflow": 0,
           "underflow": 0, "nonfinite": 0, "sqnr_db": 30.0,
           "shadow": {"max_window(4)": {"est": 2.5, "above_est": 0, "overflow": 0}}}
    w.write([rec] * 5)
    good = path.read_bytes()
    assert len(read_trace(path).records) == 5
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        p = tmp_path / f"t{seed}.jsonl"
        p.write_bytes(mutate(rng, good))
        try:
            read_trace(p)
        except ValueError as e:
            assert str(p) in str(e)
