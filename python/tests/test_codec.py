"""The torch fake quantization equals the Rust codec bit for bit."""

import numpy as np
import pytest
import torch

from hif8lab import codec
from hif8lab.torch import fakequant as tq

FORMATS = ["hif8", "e4m3", "e5m2"]
SCALES = [1.0, 15.0 / 3.7, 0.001953125, 1234.5, 3.0e-5]


def same_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: identical bits, or both NaN (NaN payloads are not compared)."""
    a, b = a.view(np.uint32), b.view(np.uint32)
    nan_a = (a & 0x7FFFFFFF) > 0x7F800000
    nan_b = (b & 0x7FFFFFFF) > 0x7F800000
    return (a == b) | (nan_a & nan_b)


def check(values: np.ndarray, fmt: str, scale: float, saturate: bool) -> None:
    rust = codec.qdq(values, fmt, scale, saturate)
    mine = tq.qdq(torch.from_numpy(values), scale, fmt, saturate).numpy()
    ok = same_bits(rust, mine)
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        pytest.fail(
            f"{fmt} scale {scale} saturate {saturate}: {int((~ok).sum())} of {values.size} differ; "
            f"first x={values[i]!r} (bits {values.view(np.uint32)[i]:#010x}): "
            f"rust {rust[i]!r}, torch {mine[i]!r}"
        )


def all_bf16() -> np.ndarray:
    return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def all_f16() -> np.ndarray:
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def boundaries(fmt: str) -> np.ndarray:
    """Every code's value, its neighbours one f32 ulp away and the midpoints between
    consecutive codes with their neighbours (tiers, overflow, underflow, denormals)."""
    values = codec.decode(np.arange(256, dtype=np.uint8), fmt)
    finite = np.unique(np.abs(values[np.isfinite(values)]))
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    thr = codec.facts(fmt)["overflow_threshold"]
    pts = np.concatenate([finite, mids.astype(np.float32), [thr, 2 * finite.max(), finite.min() / 2]])
    pts = pts.astype(np.float32)
    around = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    return np.concatenate([around, -around]).astype(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("saturate", [False, True])
def test_every_bf16_and_f16_value(fmt, saturate):
    for scale in SCALES:
        check(all_bf16(), fmt, scale, saturate)
        check(all_f16(), fmt, scale, saturate)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("saturate", [False, True])
def test_every_code_boundary(fmt, saturate):
    for scale in SCALES:
        check(boundaries(fmt) / np.float32(scale), fmt, scale, saturate)
    check(boundaries(fmt), fmt, 1.0, saturate)


def test_ten_million_random_f32():
    rng = np.random.default_rng(20261204)
    bits = rng.integers(0, 1 << 32, size=10_000_000, dtype=np.uint64).astype(np.uint32)
    values = bits.view(np.float32)
    for fmt in FORMATS:
        for saturate in (False, True):
            check(values, fmt, 1.0, saturate)
    # magnitudes where the formats live, at a scale
    normal = (rng.standard_normal(2_000_000) * np.exp(rng.uniform(-12, 12, 2_000_000))).astype(np.float32)
    for fmt in FORMATS:
        check(normal, fmt, 15.0 / 7.25, False)


def test_codec_round_trip_of_every_code():
    for fmt in FORMATS:
        values = codec.decode(np.arange(256, dtype=np.uint8), fmt)
        finite = values[np.isfinite(values)]
        back = codec.decode(codec.encode(finite, fmt), fmt)
        assert same_bits(back, finite).all(), fmt
        assert same_bits(tq.qdq(torch.from_numpy(finite), 1.0, fmt).numpy(), finite).all(), fmt


def test_fake_quant_is_straight_through():
    x = torch.tensor([0.3, -5.0, 50000.0], requires_grad=True)
    y = tq.fake_quant(x, 1.0)
    assert torch.isinf(y[2])
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones(3))


def test_unknown_format_is_refused_by_name():
    with pytest.raises(ValueError, match="e3m4"):
        tq.qdq(torch.ones(2), 1.0, "e3m4")
    with pytest.raises(ValueError, match="e3m4"):
        codec.qdq(np.ones(2, np.float32), "e3m4")


def test_compiled_qdq_is_the_same_bits():
    """torch.compile of the fake quantization (what QatSession runs by default) equals the
    Rust codec too."""
    fq = tq.compiled(tq.qdq, "qdq")
    rng = np.random.default_rng(11)
    values = rng.integers(0, 1 << 32, size=1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for fmt in FORMATS:
        for saturate in (False, True):
            for scale in (1.0, 15.0 / 3.7):
                rust = codec.qdq(values, fmt, scale, saturate)
                mine = fq(torch.from_numpy(values), torch.tensor(np.float32(scale)), fmt, saturate).numpy()
                assert same_bits(rust, mine).all(), (fmt, saturate, scale)
                b = boundaries(fmt)
                mine = fq(torch.from_numpy(b), torch.tensor(np.float32(1.0)), fmt, saturate).numpy()
                assert same_bits(codec.qdq(b, fmt, 1.0, saturate), mine).all(), (fmt, saturate)


def test_qdq_and_encode_hold_little_more_than_input_and_output():
    """The codec goes through the array in pieces: its peak is the output plus a few MiB, not
    copies of the whole input (once 5.7x the input)."""
    import tracemalloc

    x = np.random.default_rng(3).standard_normal(1 << 23, dtype=np.float32).reshape(1 << 11, -1)
    for f, out_bytes in ((lambda a: codec.qdq(a, "hif8", 4.0), x.nbytes),
                         (lambda a: codec.encode(a, "hif8"), x.size)):
        tracemalloc.start()
        y = f(x)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert y.shape == x.shape
        assert peak < out_bytes + 24 * codec.CHUNK, (peak, x.nbytes)
    # The pieces join up: the same bits as one piece of each element alone.
    small = x.reshape(-1)[codec.CHUNK - 3:codec.CHUNK + 3]
    assert np.array_equal(codec.qdq(x, "hif8", 4.0).reshape(-1)[codec.CHUNK - 3:codec.CHUNK + 3],
                          np.array([codec.qdq(np.array([v]), "hif8", 4.0)[0] for v in small]))
    with pytest.raises(ValueError, match="nosuch"):
        codec.qdq(np.zeros(0, np.float32), "nosuch")

