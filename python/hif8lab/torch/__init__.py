"""HiF8 W8A8(G8) fake quantization with per-tensor delayed scaling for PyTorch.

    from hif8lab.torch import Recipe, quantize, fake_quant
    session = quantize(model, Recipe(estimator="max_window", window=64, warmup_steps=500))
    print(session.summary)          # what was quantized, what stayed in high precision
    for step in range(steps):
        session.start_step(step)
        ...forward / backward / optimizer step...

With the Hugging Face Trainer: ``callbacks=[HfCallback(session)]``. Bit for bit the Rust codec
(``hif8lab.codec``) and estimators (``hif8lab.scaling``); training under torchrun:
``python -m hif8lab.torch.train --help``.
"""

from .bank import QuantBank
from .nn import QatSession, QuantizerId, QuantLinear, Recipe, plan, quantize
from .fakequant import fake_quant, overflow_threshold, qdq
from .placement import Summary

__all__ = ["QuantBank", "QatSession", "QuantizerId", "QuantLinear", "Recipe", "Summary", "plan", "quantize",
           "fake_quant", "overflow_threshold", "qdq", "HfCallback"]


def __getattr__(name):
    # transformers is imported only when the callback is asked for
    if name == "HfCallback":
        from .hf import HfCallback

        return HfCallback
    raise AttributeError(name)
