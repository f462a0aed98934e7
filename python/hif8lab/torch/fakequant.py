"""Fake quantization in torch ops, bit for bit the Rust codec (``hif8lab.codec``).

All rounding works on the integer bits of the f32 (as the Rust code and the WGSL kernels
do), so the result is the same on every device: CPU, CUDA or any other torch backend with
int32 bit operations. No per-element Python, no host synchronization.
"""

from __future__ import annotations

import json
from typing import Union

import numpy as np
import torch

from .. import _core

_SIGN = -(2**31)  # 0x8000_0000 as int32
_ABS = 0x7FFF_FFFF
_INF = 0x7F80_0000
_QNAN = 0x7FC0_0000
_FRACTION = 0x7F_FFFF
_ONE = 0x80_0000

# HiF8 (hif8lab_format::hif8)
_HIF8_OVERFLOW = 0x4720_0000  # 40960
_HIF8_MAX = 0x4700_0000  # 32768
_HIF8_UNDERFLOW = 0x3400_0000  # 2^-23
_HIF8_MIN_DENORMAL = 0x3480_0000  # 2^-22

# OCP formats (hif8lab_format::ocp): mantissa bits, min normal exponent, has inf, max bits
_OCP = {
    "e4m3": (3, -6, False, 0x43E0_0000),
    "e5m2": (2, -14, True, 0x4760_0000),
}

FORMATS = ("hif8", "e4m3", "e5m2")



def overflow_threshold(format: str) -> float:
    """|x·scale| at or above this overflows (from the Rust codec's facts)."""
    return float(json.loads(_core.facts(check_format(format)))["overflow_threshold"])

Scale = Union[float, torch.Tensor]


def check_format(format: str) -> str:
    f = format.lower()
    if f not in FORMATS:
        raise ValueError(f"unknown format '{format}' (expected hif8, e4m3 or e5m2)")
    return f


def _i32(v: int, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int32, device=like.device)


def qdq_unscaled(y: torch.Tensor, format: str = "hif8", saturate: bool = False) -> torch.Tensor:
    """``Q(y)`` of an f32 tensor: the nearest value of the format (HiF8 ties away from zero,
    OCP formats ties to even), beyond the range ±Inf / NaN (E4M3) or, saturating, ±max."""
    if y.dtype != torch.float32:
        raise TypeError(f"qdq works on float32 tensors, got {y.dtype}")
    f = check_format(format)
    bits = y.contiguous().view(torch.int32)
    sign = bits & _SIGN
    a = bits & _ABS
    e = (a >> 23) - 127
    if f == "hif8":
        ae = e.abs()
        shift = 19 + (ae > 3).to(torch.int32) + (ae > 7).to(torch.int32) + (ae > 15).to(torch.int32)
        half = torch.bitwise_left_shift(torch.ones_like(a), shift)
        rounded = (a + half) & -(half << 1)
        r = sign | rounded
        r = torch.where(e == -23, sign | _HIF8_MIN_DENORMAL, r)
        r = torch.where(a < _HIF8_UNDERFLOW, torch.zeros_like(r), r)
        ob = _HIF8_MAX if saturate else _INF
        r = torch.where(a >= _HIF8_OVERFLOW, sign | ob, r)
        r = torch.where(a > _INF, bits, r)
        return r.view(torch.float32)
    mb, min_normal_exp, has_inf, max_bits = _OCP[f]
    extra = torch.clamp(min_normal_exp - e, min=0)
    shift = (23 - mb) + extra
    sh = torch.clamp(shift, max=23)
    significand = (a & _FRACTION) | _ONE
    lsb = torch.bitwise_right_shift(significand, sh) & 1
    one = torch.ones_like(a)
    unit = torch.bitwise_left_shift(one, sh)
    rounded = (a + torch.bitwise_right_shift(unit, 1) - 1 + lsb) & -unit
    min_sub_bits = (127 + min_normal_exp - mb) << 23
    at_half = torch.where((a & _FRACTION) == 0, torch.zeros_like(a), torch.full_like(a, min_sub_bits))
    rounded = torch.where(shift == 24, at_half, rounded)
    rounded = torch.where(shift > 24, torch.zeros_like(a), rounded)
    ob = max_bits if saturate else (_INF if has_inf else _QNAN)
    r = torch.where(rounded > max_bits, sign | ob, sign | rounded)
    r = torch.where(a == _INF, sign | ob, r)
    r = torch.where(a > _INF, bits, r)
    return r.view(torch.float32)


def qdq(x: torch.Tensor, scale: Scale = 1.0, format: str = "hif8", saturate: bool = False) -> torch.Tensor:
    """``Q(x·scale)/scale`` in f32 (both products rounded to f32, as the Rust codec does);
    ``scale`` a number or a 0-d (or broadcastable) f32 tensor on x's device."""
    if not torch.is_floating_point(x):
        raise ValueError(f"qdq: x must be a floating-point tensor, got {x.dtype}")
    if not isinstance(scale, torch.Tensor):
        s32 = np.float32(scale)
        if not (np.isfinite(s32) and s32 > 0):
            raise ValueError(f"qdq: scale must be a finite number > 0 (as an f32), got {scale!r}")
    x32 = x.float()
    s = scale if isinstance(scale, torch.Tensor) else torch.tensor(float(scale), dtype=torch.float32,
                                                                    device=x.device)
    s = s.to(torch.float32)
    return qdq_unscaled(x32 * s, format, saturate) / s


#: The codecs a recipe can quantize with: the lab's HiF8 (the format's definition, bit for bit
#: the Rust codec) and the torch-op quantizer the authors' repository falls back to.
CODECS = ("lab", "authors-fallback")


def authors_fallback_unscaled(y: torch.Tensor) -> torch.Tensor:
    """The torch-op HiF8 quantizer of the authors' repository (``quant_cy/base/QFuncs/hif8.py``,
    ``quant_hif8``), which ``QTensor.py`` falls back to when its CUDA extension
    (``lowbit_quant``) does not import — nothing in the repository builds one. Transcribed
    operation for operation, in y's dtype: ``e = floor(log2(|y| + 2⁻⁴⁵))``, mantissa bits 3
    for |e| ≤ 3, 2 for ≤ 7, 1 for ≤ 15, else 0, and ``floor(|y|·2^(m−e) + 0.5)·2^(e−m)·sign``.
    Unlike HiF8 it never overflows (no Inf: above 2¹⁵ it keeps rounding to powers of two), keeps
    values below 2⁻²² (no underflow to zero) and ties away from zero through ``floor(v+0.5)``."""
    x_unsigned = torch.abs(y)
    sign = torch.sign(y)
    if y.dtype == torch.float16:
        e = torch.floor(torch.log2(x_unsigned + 2 ** -14))
    else:
        e = torch.floor(torch.log2(x_unsigned + 2 ** -45))
    abse = e.abs()
    mant_bits = torch.zeros_like(abse)
    mant_bits[abse <= 15] = 1
    mant_bits[abse <= 7] = 2
    mant_bits[abse <= 3] = 3
    return torch.floor(x_unsigned * 2.0 ** (-e + mant_bits) + 0.5) * 2.0 ** (e - mant_bits) * sign


def qdq_codec(x: torch.Tensor, scale: Scale, format: str, saturate: bool, codec: str = "lab") -> torch.Tensor:
    """``qdq`` with the recipe's codec: the lab's (``qdq``) or, for HiF8, the authors' fallback
    (``authors_fallback_unscaled(x·s)/s`` in f32; ``saturate`` has nothing to clip there)."""
    if codec == "lab":
        return qdq(x, scale, format, saturate)
    s = scale if isinstance(scale, torch.Tensor) else torch.tensor(float(scale), dtype=torch.float32,
                                                                    device=x.device)
    s = s.to(torch.float32)
    return authors_fallback_unscaled(x.float() * s) / s


class _FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale, format, saturate):  # noqa: D401
        return qdq(x, scale, format, saturate).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None, None


def fake_quant(x: torch.Tensor, scale: Scale, format: str = "hif8", saturate: bool = False) -> torch.Tensor:
    """``qdq(x·scale)/scale`` with a straight-through gradient (identity, no mask), in x's
    dtype (computed in f32)."""
    check_format(format)
    return _FakeQuant.apply(x, scale, format, bool(saturate))


def amax_qdq_cpu(x32: torch.Tensor, scale: float, format: str = "hif8", saturate: bool = False):
    """amax over the non-NaN |x| (0-d f32), the NaN/±Inf count (0-d f64) and
    ``qdq(x·scale)/scale`` of an f32 CPU tensor (in x's shape), in one call of the Rust core
    on the tensor's own memory (``_amax_qdq_into``, what a CPU session runs: the lab's codec
    and amax pass, the same bits as ``qdq`` and ``_amax_of``; for HiF8 one read of the
    operand). In a CPU training step a compiled torch function costs about as much to call as
    its work on a 135 M model's operand; this costs microseconds to call and runs 3–4× faster
    than the compiled kernel."""
    if x32.dtype != torch.float32 or x32.device.type != "cpu":
        raise ValueError(f"amax_qdq_cpu: a float32 CPU tensor, got {x32.dtype} on {x32.device}")
    x = x32.contiguous()
    out = torch.empty_like(x)
    amax, nonfinite = _amax_qdq_into(x, out, float(scale), check_format(format), bool(saturate))
    return (torch.tensor(amax, dtype=torch.float32), torch.tensor(float(nonfinite), dtype=torch.float64),
            out)


def _amax_qdq_into(x: torch.Tensor, out: torch.Tensor, scale: float, format: str, saturate: bool):
    """The Rust core's amax, non-finite count and fake quantization of ``x`` written to
    ``out``: (amax as a Python float holding the f32, count as an int). Unchecked (a session's
    call costs no more than this): both contiguous f32 CPU tensors of one length, ``format``
    canonical; the caller holds both over the call (the core refuses a null, misaligned or
    overlapping range)."""
    return _core.amax_qdq_at(x.data_ptr(), out.data_ptr(), x.numel(), scale, format, saturate)


_COMPILED = {}


def compiled(fn, name: str):
    """``torch.compile(fn, dynamic=True)``, made once; ``fn`` itself where compiling is
    unavailable or fails (the first call tells: a warning, then eager for good). Compiled
    and eager results are the same bits (integer rounding; the f32 product and quotient are
    single operations that no compiler may contract)."""
    if name in _COMPILED:
        return _COMPILED[name]
    try:
        c = torch.compile(fn, dynamic=True)
    except Exception:  # noqa: BLE001 (no compiler backend here)
        _COMPILED[name] = fn
        return fn
    state = {"fn": c}

    def call(*args):
        try:
            return state["fn"](*args)
        except Exception as e:  # noqa: BLE001
            import warnings

            warnings.warn(f"hif8lab.torch: torch.compile failed ({type(e).__name__}: {e}); running eager")
            state["fn"] = fn
            return fn(*args)

    _COMPILED[name] = call
    return call
