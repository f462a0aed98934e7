"""W8A8(G8) HiF8 fake quantization with delayed scaling for any PyTorch model.

``quantize(model, Recipe(...))`` replaces the chosen ``nn.Linear`` layers by ``QuantLinear``
(roles A = the input, W = the weight, G = the output gradient; straight-through
gradients), all sharing one ``QuantBank`` (histories and scales on the model's device), and
returns a ``QatSession`` that the training loop tells which optimizer step it is on. The
session switches quantization on after the recipe's warmup (every history reset, as the lab
does), keeps every estimator of the shadow set on the same calls, and gathers the per-call
statistics of the lab's trace on the device until ``drain``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import scaling as rs
from .fakequant import CODECS, check_format
from .placement import MLP_MODULES, FilterFn, placement, warn_left
from .session import QatSession, in_backward  # noqa: F401 (re-exported)

ROLES = ("A", "W", "G")


@dataclass(frozen=True)
class Recipe:
    """The paper's recipe by default: max_window(64), target 15 (top of HiF8's 3-bit tier),
    HiF8 with non-finite overflow, all three roles, every default estimator as a shadow."""

    estimator: str = rs.DEFAULTS["estimator"]
    window: int = rs.DEFAULTS["window"]
    target: float = rs.DEFAULTS["target"]
    format: str = rs.DEFAULTS["format"]
    saturate: bool = False
    warmup_steps: int = 0
    amax_reduce: str = "none"
    #: with ``amax_reduce="max"``: one collective per micro-batch for every A and G amax
    #: (``hif8lab.torch.session``'s rules); False reduces at each call
    fuse_amax: bool = True
    roles: Tuple[str, ...] = ROLES
    shadow: Tuple[str, ...] = rs.DEFAULT_ESTIMATORS
    margin: int = rs.DEFAULTS["margin"]
    cold_start: str = rs.DEFAULTS["cold_start"]
    stats: bool = True
    trace_every: int = 1
    compile: bool = True
    #: ``lab`` (HiF8 as defined: the Rust codec's bits) or ``authors-fallback`` (the torch-op
    #: quantizer of the authors' repository, HiF8 only; see ``fakequant.authors_fallback_unscaled``).
    codec: str = "lab"

    def __post_init__(self):
        object.__setattr__(self, "format", check_format(self.format))  # the canonical spelling
        if self.codec not in CODECS:
            raise ValueError(f"codec must be one of {', '.join(CODECS)}, got '{self.codec}'")
        if self.codec == "authors-fallback" and self.format != "hif8":
            raise ValueError(f"codec 'authors-fallback' is a HiF8 quantizer; format is '{self.format}'")
        if self.amax_reduce not in ("none", "max"):
            raise ValueError(f"amax_reduce must be 'none' or 'max', got '{self.amax_reduce}'")
        bad = [r for r in self.roles if r not in ROLES]
        if bad:
            raise ValueError(f"roles: unknown {bad} (expected A, W, G)")
        if not self.roles:
            raise ValueError("roles: empty: the recipe would quantize nothing (expected some of A, W, G)")
        if self.warmup_steps < 0:
            raise ValueError("warmup_steps must be ≥ 0")
        if self.trace_every < 1:
            raise ValueError("trace_every must be ≥ 1")
        # validates estimator names, window, target, margin through the Rust plan
        self.scaling_config().plan()

    def scaling_config(self) -> rs.ScalingConfig:
        return rs.ScalingConfig(
            estimator=self.estimator, window=self.window, target=self.target, margin=self.margin,
            cold_start=self.cold_start, shadow=tuple(self.shadow), format=self.format,
            overflow="saturate" if self.saturate else "inf",
        )

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class QuantizerId:
    block: int
    module: str
    role: str

    def __str__(self) -> str:
        return f"block{self.block}.{self.module}.{self.role}"


class _QuantLinearFn(torch.autograd.Function):
    """A quantized linear's training call as one autograd node. Forward: ``y = Q_A(x) ·
    Q_W(W)ᵀ (+ b)`` (``QuantLinear._operands``: the unfused model's calls in its order).
    Backward: ``g_q = Q_G(dy)`` (``_quant_grad``), ``dx = g_q · Q_W(W)``, ``dW = g_qᵀ ·
    Q_A(x)``, ``db = Σ g_q``: the straight-through gradients, in one node where two
    straight-through functions, a hook on the output and the linear's own nodes cost 0.2 ms
    more per linear (a CPU training call at the 135 M shape). Under ``torch.autocast`` the
    backward's products take the forward's autocast casts of their operands, as the linear's
    own backward does. The output is a new tensor, not a view (a model may add to it in
    place: Falcon)."""

    @staticmethod
    def forward(ctx, x, weight, bias, module):
        xq, wq = module._operands(x, weight)
        ctx.module = module
        # the dtype autocast runs the linear in (its backward's operands are those casts)
        ctx.cast = _autocast_dtype(x.device.type)
        ctx.save_for_backward(xq, wq)
        ctx.has_bias = bias is not None
        return F.linear(xq, wq, bias)

    @staticmethod
    def backward(ctx, grad):
        xq, wq = ctx.saved_tensors
        g = _quant_grad(ctx.module, grad)
        if ctx.cast is not None:
            g, xq, wq = g.to(ctx.cast), xq.to(ctx.cast), wq.to(ctx.cast)
        g2 = g.reshape(-1, g.shape[-1])
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = g2.mm(wq).view(*g.shape[:-1], wq.shape[1])
        if ctx.needs_input_grad[1]:
            dw = g2.t().mm(xq.reshape(-1, xq.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = g2.sum(0)
        return dx, dw, db, None  # autograd casts each to its input's dtype


def _autocast_dtype(device: str) -> Optional[torch.dtype]:
    """The dtype ``torch.autocast`` casts a linear's operands to on ``device`` now, or None."""
    try:
        return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None
    except (RuntimeError, TypeError):  # a device type without autocast
        return None


def _quant_grad(module: "QuantLinear", grad: torch.Tensor) -> torch.Tensor:
    """The output gradient fake-quantized (role G): with one part by its quantizer; a fused
    projection's split along the output, each part by its own quantizer, in the order the
    unfused model calls them. Unchanged while QAT is off or without role G."""
    session, qs = module.session, module._g_qs
    if not qs or not session.qat:
        return grad
    if len(qs) == 1:
        return session.call(qs[0], grad).to(grad.dtype)
    parts = torch.split(grad, module._sizes, dim=-1)
    # the last part first: the order autograd runs the unfused model's projections in (of
    # nodes ready together, the one made last runs first)
    out = [session.call(q, g).to(g.dtype) for q, g in reversed(list(zip(qs, parts)))]
    return torch.cat(out[::-1], dim=-1)


class QuantLinear(nn.Linear):
    """An ``nn.Linear`` whose input (A), weight (W) and output gradient (G) go through the
    session's delayed-scaling quantizers. ``y = Q_A(x) · Q_W(W)ᵀ (+ b)``; in backward
    ``g_q = Q_G(dy)``, ``dx = g_q · Q_W(W)``, ``dW = g_qᵀ · Q_A(x)``. A fused projection
    (``parts`` of several lab modules along the output) quantizes each part's weight rows and
    output-gradient columns with their own quantizers and the input once per part, exactly as
    the unfused model would.

    Its quantizers' state (histories, scales) is this module's ``_extra_state``, so
    ``state_dict``/``save_pretrained``/``torch.save``/DCP carry it; the session's bank follows
    ``.to(device)`` and ``to_empty`` (from the meta device: a fresh state)."""

    def __init__(self, linear: nn.Linear, session: QatSession, parts: Sequence[Tuple[str, int, Dict[str, int]]]):
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        # not a submodule: the session is shared by every QuantLinear
        object.__setattr__(self, "session", session)
        #: [(lab module, rows along the output, {role: quantizer index})]
        self.parts = [(m, int(n), dict(q)) for m, n, q in parts]
        self._g_qs = self._qs("G")
        self._sizes = [n for _, n, _ in self.parts]

    @property
    def quantizers(self) -> Dict[str, int]:
        """The quantizers of a one-part linear ({role: index})."""
        return self.parts[0][2]

    def _qs(self, role: str) -> List[int]:
        return [q[role] for _, _, q in self.parts if role in q]

    def _weight_parts(self, weight: torch.Tensor) -> List[torch.Tensor]:
        """``weight`` split into the parts' rows (itself for a one-part linear)."""
        if len(self.parts) == 1:
            return [weight]
        return list(torch.split(weight, self._sizes, dim=0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.session
        if not s.qat:
            return F.linear(x, self.weight, self.bias)
        if self.training:
            return _QuantLinearFn.apply(x, self.weight, self.bias, self)
        a_qs, w_qs = self._qs("A"), self._qs("W")
        w_parts = self._weight_parts(self.weight)
        # evaluation: the last scales, frozen (no history update, nothing recorded)
        xq = s.frozen(a_qs[0], x) if a_qs else x
        wq = [s.frozen(q, w) for q, w in zip(w_qs, w_parts)] if w_qs else w_parts
        return F.linear(xq, wq[0] if len(wq) == 1 else torch.cat(wq, dim=0), self.bias)

    def _operands(self, x: torch.Tensor, weight: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(Q_A(x), Q_W(W)) of a training call (the operand itself for a role not quantized),
        in x's and W's dtypes. Part by part, A then W: the unfused model's calls in its
        order. Every part's A quantizer sees the same input; their histories are equal, so
        are their scales and outputs: the first one's is used."""
        s = self.session
        xq, wq = None, []
        for (_, _, qs), w in zip(self.parts, self._weight_parts(weight)):
            if "A" in qs:
                xi = s.call(qs["A"], x)
                xq = xi.to(x.dtype) if xq is None else xq
            wq.append(s.call(qs["W"], w).to(w.dtype) if "W" in qs else w)
        xq = x.detach() if xq is None else xq
        return xq, (wq[0] if len(wq) == 1 else torch.cat(wq, dim=0)).detach()

    # --- the scaling state travels with the module ----------------------------------------

    def get_extra_state(self) -> torch.Tensor:
        qs = [q for _, _, roles in self.parts for q in roles.values()]
        return pack_state(self.session.rows_state(qs))

    def set_extra_state(self, state) -> None:
        self.session.load_rows(unpack_state(state))

    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self.session.bank.follow(self.weight.device)
        return out

    def extra_repr(self) -> str:
        parts = ", ".join(f"{m}[{n}]: {q}" for m, n, q in self.parts)
        return super().extra_repr() + f", quantizers={{{parts}}}"


def pack_state(state: dict) -> torch.Tensor:
    """A module's scaling state as a uint8 tensor (safetensors and DCP store tensors)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return torch.frombuffer(bytearray(buf.getvalue()), dtype=torch.uint8)


def unpack_state(state) -> dict:
    """``pack_state``'s dict, read with ``weights_only=True`` (a tampered file runs no code)."""
    if isinstance(state, dict):
        return state
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8:
        raise ValueError(f"hif8lab scaling state: expected a uint8 tensor, got {type(state).__name__}")
    try:
        return torch.load(io.BytesIO(state.cpu().numpy().tobytes()), weights_only=True)
    except Exception as e:  # noqa: BLE001 (torch raises several kinds for bad bytes)
        raise ValueError(f"hif8lab scaling state: not readable ({type(e).__name__})") from None


def plan(model: nn.Module, modules: Sequence[str] = MLP_MODULES, skip_first: int = 3, skip_last: int = 2
         ) -> Tuple[int, List[Tuple[str, int, str]]]:
    """(number of blocks, [(qualified name, block, lab module)]) of the linears ``quantize``
    would replace (a fused projection once per part)."""
    summary = placement(model, modules, skip_first, skip_last)
    return summary.blocks, [(p.fqn, p.block, m) for p in summary.placed for m, _ in p.parts]


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, last = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, last, new)


def quantize(model: nn.Module, recipe: Recipe = Recipe(), modules: Sequence[str] = MLP_MODULES,
             skip_first: int = 3, skip_last: int = 2, group=None,
             module_filter_fn: Optional[FilterFn] = None) -> QatSession:
    """Replaces the chosen linears of ``model`` by ``QuantLinear`` in place and returns the
    session; ``session.summary`` says what was quantized and which MLP weights of the touched
    blocks stay in high precision (a warning names them). Defaults: the paper's placement (MLP
    projections of the middle blocks; the first 3 and last 2 blocks stay high precision).
    ``module_filter_fn(module, fqn)`` (torchao's idiom) replaces the placement: True
    quantizes a linear under the name its last component maps to, a string names its lab
    module(s), False skips it. Call before wrapping in DDP / FSDP; quantizing twice is refused."""
    if getattr(model, "hif8lab_session", None) is not None or any(
            isinstance(m, QuantLinear) for m in model.modules()):
        raise ValueError("quantize: the model is quantized already (one session per model)")
    summary = placement(model, modules, skip_first, skip_last, module_filter_fn)
    if not summary.placed:
        raise ValueError(
            f"quantize: nothing to quantize ({summary.blocks} blocks, skip_first {skip_first}, "
            f"skip_last {skip_last}, modules {list(modules)})")
    ids: List[QuantizerId] = []
    layout = []
    for p in summary.placed:
        parts = []
        for module, rows in p.parts:
            qs = {}
            for role in ROLES:
                if role in recipe.roles:
                    qs[role] = len(ids)
                    ids.append(QuantizerId(p.block, module, role))
            parts.append((module, rows, qs))
        layout.append((p.fqn, parts))
    summary.quantizers = len(ids)
    device = next(model.parameters()).device
    if recipe.amax_reduce == "max" and group is None and torch.distributed.is_available() \
            and torch.distributed.is_initialized():
        group = torch.distributed.new_group()
    session = QatSession(recipe, ids, device, group)
    session.summary = summary
    for name, parts in layout:
        _set_submodule(model, name, QuantLinear(model.get_submodule(name), session, parts))
    model.register_forward_pre_hook(session._pre_hook)
    model.hif8lab_session = session  # type: ignore[attr-defined]
    warn_left(summary)
    return session
