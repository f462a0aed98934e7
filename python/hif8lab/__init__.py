"""hif8lab for Python: HiF8 fake quantization with per-tensor delayed scaling.

- ``hif8lab.codec``: encode / decode / qdq of NumPy arrays through the Rust codec (the reference).
- ``hif8lab.scaling``: the Rust estimators and the lab's trace format (writer and reader).
- ``hif8lab.torch``: W8A8(G8) fake quantization with delayed scaling for PyTorch models, and a
  training entry point for torchrun (``python -m hif8lab.torch.train --help``).
"""

from . import codec, scaling  # noqa: F401
from ._core import TRACE_VERSION  # noqa: F401

__all__ = ["codec", "scaling", "TRACE_VERSION"]
__version__ = "0.1.0"
