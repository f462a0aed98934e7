"""A transcription of the delayed-scaling logic of the paper's authors' code, as the reference
for the comparison in test_authors.py: ``HiF8GlobalStateManager`` and ``hif8_qdq_with_amax``
in ``pangu_hif8_pretrain/hif8.py`` of the public repository
chengyingyingcs-pixel/ICME_2026_challange_openpangu_pretrain (update_period 1; the algorithms
"most_recent", "max" and "mean"; "exp_smooth" is a different predictor, not transcribed).
Python floats (f64) as there; the scale then multiplies an f32 tensor, which rounds it to f32.
"""

from collections import deque

import numpy as np


class AuthorsQuantizer:
    def __init__(self, algo: str, history_len: int, max_val: float = 15.0):
        self.algo, self.max_val = algo, max_val
        self.history = deque(maxlen=max(1, int(history_len)))
        self.first = True
        self.scale = None

    def _update_scaling(self):
        h = self.history
        if self.algo == "max":
            pred = max(h)
        elif self.algo == "most_recent":
            pred = h[-1]
        elif self.algo == "mean":
            pred = sum(h) / len(h)
        else:
            raise ValueError(self.algo)
        if not np.isfinite(pred) or pred <= 0:
            pred = 1.0
        self.scale = float(self.max_val) / (pred + 1e-12)

    def call(self, amax: float) -> float:
        """hif8_qdq_with_amax: the scale this call quantizes with, as the f32 the kernel uses."""
        amax = float(amax)
        if self.first:
            self.history.append(amax)  # cold start: track first, then compute
            self._update_scaling()
            self.first = False
        else:
            self._update_scaling()  # from earlier calls only (delayed)
            self.history.append(amax)
        return float(np.float32(self.scale))


# --- the torch-op HiF8 quantizer of the same repository -----------------------------------
# ``HiFloat8/hif8_cuda/quant_cy/base/QFuncs/hif8.py`` (commit 8346596b of 2026-05-25), copied
# as published: ``QTensor.py`` falls back to it when its CUDA extension ``lowbit_quant`` does
# not import, and nothing in the repository builds that extension. ``Q`` and ``qdim`` are
# unused there.

import torch  # noqa: E402
from torch import Tensor  # noqa: E402


@torch.no_grad()
def quant_hif8(x: Tensor, Q, qdim: int):
    x_unsigned = torch.abs(x)
    sign = torch.sign(x)

    if x.dtype==torch.float16:
        e = torch.floor(torch.log2(x_unsigned + 2**-14))
    else:
        e = torch.floor(torch.log2(x_unsigned + 2**-45))

    abse = e.abs()
    mant_bits = torch.zeros_like(abse)
    mant_bits[abse<=15] = 1
    mant_bits[abse<=7] = 2
    mant_bits[abse<=3] = 3

    res = torch.floor(x_unsigned * 2.0**(-e + mant_bits) + 0.5) * 2.0**(e - mant_bits) * sign
    return res
