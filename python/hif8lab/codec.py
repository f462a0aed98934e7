"""HiF8, OCP E4M3 and E5M2 through hif8lab's Rust codec: the reference for everything else.

Every function takes and returns NumPy arrays (any shape; f32 values, u8 codes)::

    >>> import numpy as np, hif8lab.codec as codec
    >>> codec.qdq(np.array([17.3, 50000.0], np.float32))
    array([16., inf], dtype=float32)
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from . import _core

FORMATS = ("hif8", "e4m3", "e5m2")


def _f32(x: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float32))


def _scale(scale: Any) -> float:
    """A scale as the codec takes it: a finite f32 > 0 (NaN, 0 or Inf would make every value
    NaN without a word)."""
    s = np.float32(scale)
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"scale must be a finite number > 0 (as an f32), got {scale!r}")
    return float(s)


#: Elements the codec takes per call: the array goes through in pieces of this size, so the
#: bytes handed to the Rust core and back add a few MiB to the input and the output, not
#: copies of the whole array (whole-array copies once peaked at 5.7× the input).
CHUNK = 1 << 20


def _chunked(a: np.ndarray, out_dtype: Any, convert: Any) -> np.ndarray:
    """``convert(bytes of a piece) -> bytes`` over ``a`` (f32, contiguous) in pieces of
    ``CHUNK`` elements, written into one output array of ``a``'s shape."""
    flat = a.reshape(-1)
    out = np.empty(flat.shape, dtype=out_dtype)
    # At least one call, so an empty array still has its format checked by the core.
    for start in range(0, max(flat.size, 1), CHUNK):
        piece = flat[start:start + CHUNK]
        out[start:start + piece.size] = np.frombuffer(convert(piece.tobytes()), dtype=out_dtype)
    return out.reshape(a.shape)


def qdq(x: Any, format: str = "hif8", scale: float = 1.0, saturate: bool = False) -> np.ndarray:
    """``Q(x·scale)/scale`` elementwise, both products in f32 (the lab's fake quantization).

    ``saturate=True`` clamps values beyond the format's range to its largest finite value;
    otherwise they become ±Inf (HiF8, E5M2) or NaN (E4M3, which has no Inf).
    """
    a = _f32(x)
    s, sat = _scale(scale), bool(saturate)
    return _chunked(a, np.float32, lambda b: _core.qdq(b, format, s, sat))


def encode(x: Any, format: str = "hif8", saturate: bool = False) -> np.ndarray:
    """The 8-bit code of each value (no scaling), as uint8."""
    a = _f32(x)
    sat = bool(saturate)
    return _chunked(a, np.uint8, lambda b: _core.encode(b, format, sat))


def decode(codes: Any, format: str = "hif8") -> np.ndarray:
    """The value of each 8-bit code, as f32. Codes are whole numbers in 0..=255: anything else
    (256, -1, 1.7) is a ValueError, never wrapped or truncated."""
    raw = np.asarray(codes)
    if raw.dtype != np.uint8:
        if raw.size and not np.issubdtype(raw.dtype, np.number):
            raise ValueError(f"codes must be numbers in 0..=255, got dtype {raw.dtype}")
        wide = raw.astype(np.float64)
        bad = ~((wide == np.floor(wide)) & (wide >= 0) & (wide <= 255))
        if bad.any():
            first = raw.reshape(-1)[int(np.argmax(bad.reshape(-1)))]
            raise ValueError(f"codes must be whole numbers in 0..=255, got {first!r}")
    c = np.ascontiguousarray(raw.astype(np.uint8))
    out = _core.decode(c.tobytes(), format)
    return np.frombuffer(out, dtype=np.float32).reshape(c.shape).copy()


def facts(format: str = "hif8") -> dict:
    """The format's landmarks: max_finite, min_normal, min_subnormal, overflow_threshold,
    underflow_max, has_inf, natural_target."""
    return json.loads(_core.facts(format))
