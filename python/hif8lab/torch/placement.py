"""Which linears of a model ``quantize`` replaces, under which of the lab's names, and what it
leaves in high precision.

The trace names a quantizer by (block, module, role) with the lab's seven modules (gate, up,
down, q, k, v, o). A model's projections map onto them by name: Llama's ``gate_proj`` …,
OPT's ``fc1``/``fc2``, GPT-NeoX's and Falcon's ``dense_h_to_4h``/``dense_4h_to_h`` (up,
down). A **fused** projection is quantized as its parts: Phi-3's ``gate_up_proj`` as gate and
up, ``qkv_proj`` as q, k and v (split along the output by the model's config). Each part's
weight and output gradient get their own per-tensor quantizer and the shared input one A
quantizer per part, called in the unfused model's order: the same quantizers on the same
operands as the model unfused (only the fused GEMM's f32 summation order can differ). What cannot be named is refused by name, never quantized partially in silence:
two linears of one block mapping to one module (MoE experts as separate linears, e.g.
Mixtral's ``experts.N.w1``), interleaved fused layouts (GPT-NeoX's and Falcon's
``query_key_value``), GPT-2's ``Conv1D`` (not an ``nn.Linear``); experts kept as fused 3-D
parameters (Qwen2-MoE, Qwen3-MoE in recent transformers) are not linears at all. Every weight
matrix of an MLP in a block ``quantize`` touched and left in high precision is listed in the
summary and warned about.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch.nn as nn

#: A model's projection names → the lab's module names (the trace's ``module`` field).
MODULE_NAMES = {
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down",
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o",
    "gate": "gate", "up": "up", "down": "down", "q": "q", "k": "k", "v": "v", "o": "o",
    "fc1": "up", "fc2": "down", "dense_h_to_4h": "up", "dense_4h_to_h": "down",
    "out_proj": "o", "dense": "o",
}
#: Fused projections → their parts, in the order they lie along the output dimension.
FUSED = {"gate_up_proj": ("gate", "up"), "qkv_proj": ("q", "k", "v")}
#: Layouts that cannot be split into the lab's modules (interleaved per head or group).
REFUSED = {"query_key_value": "its q, k and v rows are interleaved per head, not [q; k; v]",
           "c_attn": "GPT-2's Conv1D is not an nn.Linear", "c_fc": "GPT-2's Conv1D is not an nn.Linear",
           "c_proj": "GPT-2's Conv1D is not an nn.Linear"}
MODULE_ORDER = ["gate", "up", "down", "q", "k", "v", "o"]
#: The paper's placement: the MLP projections (every spelling above).
MLP_MODULES = ("gate_proj", "up_proj", "down_proj", "gate_up_proj", "fc1", "fc2", "dense_h_to_4h",
               "dense_4h_to_h")
_BLOCK = re.compile(r"(?:^|\.)(?:layers|h|blocks|block)\.(\d+)\.")
_MLP_WORDS = ("mlp", "moe", "expert", "feed_forward", "ffn")

#: ``module_filter_fn(module, fqn)``: False/None skips the linear, True quantizes it under the
#: name its last component maps to, a string names the lab module (or fused parts, "gate,up").
FilterFn = Callable[[nn.Module, str], Union[bool, str, None]]


@dataclass
class Placed:
    """One replaced linear: its qualified name, block, and the lab modules of its parts with
    their sizes along the output dimension (one part unless fused)."""

    fqn: str
    block: int
    parts: Tuple[Tuple[str, int], ...]


@dataclass
class Summary:
    """What ``quantize`` did: the linears it replaced, the quantizer count, the blocks it
    touched, and every MLP weight matrix of those blocks it left in high precision."""

    blocks: int
    placed: List[Placed] = field(default_factory=list)
    quantizers: int = 0
    left_high_precision: List[str] = field(default_factory=list)

    @property
    def touched(self) -> List[int]:
        return sorted({p.block for p in self.placed})

    def __str__(self) -> str:
        parts = sum(len(p.parts) for p in self.placed)
        s = (f"quantized {len(self.placed)} linears ({parts} lab modules, {self.quantizers} quantizers) "
             f"in blocks {self.touched[0]}–{self.touched[-1]} of {self.blocks}" if self.placed else
             f"quantized nothing ({self.blocks} blocks)")
        if self.left_high_precision:
            s += (f"; left in high precision in those blocks: {len(self.left_high_precision)} MLP weight(s) "
                  f"({', '.join(self.left_high_precision[:4])}{' …' if len(self.left_high_precision) > 4 else ''})")
        return s


def _block_of(name: str) -> Optional[int]:
    m = _BLOCK.search(name + ".")
    return int(m.group(1)) if m else None


def _fused_sizes(model: nn.Module, last: str, out_features: int, fqn: str) -> Tuple[Tuple[str, int], ...]:
    names = FUSED[last]
    if len(names) == 2:
        if out_features % 2:
            raise ValueError(f"quantize: {fqn} ({last}) has an odd output size {out_features}; cannot split "
                             "it into gate and up")
        return tuple((n, out_features // 2) for n in names)
    cfg = getattr(model, "config", None)
    heads = getattr(cfg, "num_attention_heads", None)
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    hidden = getattr(cfg, "hidden_size", None)
    hd = getattr(cfg, "head_dim", None) or (hidden // heads if heads and hidden else None)
    if not (heads and hd) or heads * hd + 2 * kv * hd != out_features:
        raise ValueError(f"quantize: {fqn} (qkv_proj, {out_features} outputs): the model's config does not give "
                         "its q, k, v sizes (num_attention_heads, num_key_value_heads, head_dim)")
    return (("q", heads * hd), ("k", kv * hd), ("v", kv * hd))


def _parts(model: nn.Module, fqn: str, mod: nn.Linear, chosen: Union[bool, str]) -> Tuple[Tuple[str, int], ...]:
    last = fqn.rsplit(".", 1)[-1]
    if isinstance(chosen, str):
        names = tuple(n.strip() for n in chosen.split(",") if n.strip())
        bad = [n for n in names if n not in MODULE_ORDER]
        if bad or not names:
            raise ValueError(f"quantize: module_filter_fn named {chosen!r} for {fqn}; expected lab modules "
                             f"({', '.join(MODULE_ORDER)}), comma-separated for a fused projection")
        if len(names) == 1:
            return ((names[0], mod.out_features),)
        if len(names) == 2 and mod.out_features % 2 == 0:
            return tuple((n, mod.out_features // 2) for n in names)
        if names == ("q", "k", "v"):
            return _fused_sizes(model, "qkv_proj", mod.out_features, fqn)
        raise ValueError(f"quantize: {fqn}: cannot split {mod.out_features} outputs into {names}")
    if last in FUSED:
        return _fused_sizes(model, last, mod.out_features, fqn)
    if last in MODULE_NAMES:
        return ((MODULE_NAMES[last], mod.out_features),)
    why = REFUSED.get(last, "its name maps to none of the lab's modules")
    raise ValueError(f"quantize: {fqn} cannot be quantized ({why}); return a lab module name from "
                     f"module_filter_fn ({', '.join(MODULE_ORDER)}) to name it")


def placement(model: nn.Module, modules: Optional[Sequence[str]], skip_first: int, skip_last: int,
              module_filter_fn: Optional[FilterFn] = None) -> Summary:
    """The linears to replace: with ``module_filter_fn``, those it accepts (in any block);
    else those named in ``modules`` in blocks skip_first … L − skip_last − 1. Refuses by name
    what it cannot name; lists the MLP weights it leaves in high precision in touched blocks."""
    if module_filter_fn is None:
        for m in modules:
            if m in REFUSED:
                raise ValueError(f"modules: '{m}' cannot be quantized ({REFUSED[m]})")
            if m not in MODULE_NAMES and m not in FUSED:
                raise ValueError(f"modules: '{m}' is not a projection the trace can name "
                                 f"(expected one of {', '.join(sorted({*MODULE_NAMES, *FUSED}))})")
    blocks = set()
    for name, _ in model.named_modules():
        b = _block_of(name)
        if b is not None:
            blocks.add(b)
    if not blocks:
        raise ValueError("quantize: the model has no 'layers.N.' (or 'h.N.', 'blocks.N.') blocks: a decoder "
                         "of numbered blocks is expected")
    n_blocks = max(blocks) + 1
    lo, hi = skip_first, n_blocks - skip_last
    placed: List[Placed] = []
    for name, mod in model.named_modules():
        block = _block_of(name)
        last = name.rsplit(".", 1)[-1]
        if module_filter_fn is not None:
            chosen = module_filter_fn(mod, name)
            if not chosen:
                continue
            if not isinstance(mod, nn.Linear):
                raise ValueError(f"quantize: module_filter_fn chose {name} ({type(mod).__name__}); only "
                                 "nn.Linear layers can be quantized")
            if block is None:
                raise ValueError(f"quantize: module_filter_fn chose {name}, which lies in no numbered block "
                                 "(the trace names quantizers by block)")
        else:
            if block is None or not (lo <= block < hi) or last not in modules:
                continue
            if not isinstance(mod, nn.Linear):
                why = REFUSED.get(last, f"a {type(mod).__name__}, not an nn.Linear")
                raise ValueError(f"quantize: {name} cannot be quantized ({why})")
            chosen = True
        placed.append(Placed(name, block, _parts(model, name, mod, chosen)))
    seen: Dict[Tuple[int, str], str] = {}
    for p in placed:
        for module, _ in p.parts:
            other = seen.get((p.block, module))
            if other is not None:
                raise ValueError(
                    f"quantize: {other} and {p.fqn} both map to block {p.block}'s module '{module}' (MoE experts "
                    "or a second projection): the trace names one quantizer per block, module and role; "
                    "choose one with module_filter_fn")
            seen[(p.block, module)] = p.fqn
    placed.sort(key=lambda p: (p.block, MODULE_ORDER.index(p.parts[0][0])))
    summary = Summary(blocks=n_blocks, placed=placed)
    touched = set(summary.touched)
    weights = {id(model.get_submodule(p.fqn).weight) for p in placed}
    for pname, param in model.named_parameters():
        b = _block_of(pname)
        if b in touched and param.ndim >= 2 and id(param) not in weights and \
                any(w in pname.lower() for w in _MLP_WORDS):
            summary.left_high_precision.append(pname)
    return summary


def warn_left(summary: Summary) -> None:
    if summary.left_high_precision and summary.placed:
        warnings.warn(f"hif8lab.torch.quantize: {summary}", stacklevel=3)
