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

import math
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import scaling as rs
from .bank import QuantBank
from .fakequant import CODECS, check_format, compiled, overflow_threshold, qdq, qdq_codec

#: Hugging Face projection names → the lab's module names (the trace's ``module`` field).
MODULE_NAMES = {
    "gate_proj": "gate", "up_proj": "up", "down_proj": "down",
    "q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o",
    "gate": "gate", "up": "up", "down": "down", "q": "q", "k": "k", "v": "v", "o": "o",
}
_MODULE_ORDER = ["gate", "up", "down", "q", "k", "v", "o"]
ROLES = ("A", "W", "G")
SQNR_CAP_DB = 300.0


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
        check_format(self.format)
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


def _amax_nonfinite(x: torch.Tensor, amax_of=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """max |x| over non-NaN elements (0 for an empty tensor) and the NaN/Inf count;
    ``amax_of`` computes them for a non-empty tensor (``_amax_of``, or its compiled form)."""
    if x.numel() == 0:
        z = torch.zeros((), dtype=torch.float32, device=x.device)
        return z, z.to(torch.float64)
    return (amax_of or _amax_of)(x)


def _amax_of(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    ax = x.detach().float().abs()
    nan = torch.isnan(ax)
    amax = torch.where(nan, torch.zeros_like(ax), ax).amax()
    nonfinite = (~torch.isfinite(ax)).sum(dtype=torch.float64)
    return amax, nonfinite


class QatSession:
    """The quantizers of one model: their bank, which step the run is on, and the per-call
    statistics waiting to be written."""

    def __init__(self, recipe: Recipe, ids: List[QuantizerId], device, group=None):
        self.recipe = recipe
        self.ids = ids
        self.bank = QuantBank(recipe.scaling_config(), len(ids), device)
        self.estimators = self.bank.names
        self.active = self.bank.active
        self.threshold = overflow_threshold(recipe.format)
        self.step = 0
        self.micro = -1
        self.qat = recipe.warmup_steps == 0
        self.group = group
        self._pending: List[Tuple[int, int, int, int, torch.Tensor]] = []
        self._started = False

    # --- the training loop's side ----------------------------------------------------------

    def start_step(self, step: int) -> None:
        """Tells the quantizers the optimizer step about to run (call before its first
        micro-batch). Quantization switches on at ``warmup_steps`` with every history reset."""
        qat = step >= self.recipe.warmup_steps
        if qat and (not self.qat or not self._started):
            self.bank.reset()
        self.qat = qat
        self._started = True
        self.step = step
        self.micro = -1

    def begin_micro(self) -> None:
        """A micro-batch's forward starts (called by a pre-hook on the model)."""
        self.micro += 1
        if self.qat:
            self.bank.begin_micro()

    def traced(self) -> bool:
        return self.recipe.stats and self.step % self.recipe.trace_every == 0

    def drain(self) -> List[dict]:
        """The per-call records gathered since the last drain, as trace records (one
        device→host copy for all of them)."""
        if not self._pending:
            return []
        rows = torch.stack([p[4] for p in self._pending]).detach().cpu().numpy()
        E = len(self.estimators)
        out = []
        for (q, step, micro, numel, _), row in zip(self._pending, rows):
            qid = self.ids[q]
            amax, signal, noise = row[0], row[1], row[2]
            est = row[3:3 + E]
            scale = row[3 + E:3 + 2 * E]
            above = row[3 + 2 * E:3 + 3 * E]
            over = row[3 + 3 * E:3 + 4 * E]
            underflow, nonfinite = row[3 + 4 * E], row[4 + 4 * E]
            a = self.active
            rec = {
                "step": step, "micro": micro, "block": qid.block, "module": qid.module,
                "role": qid.role, "numel": numel, "amax": float(np.float32(amax)),
                "estimator": self.estimators[a], "est": float(np.float32(est[a])),
                "scale": float(np.float32(scale[a])), "above_est": int(above[a]),
                "overflow": int(over[a]), "underflow": int(underflow), "nonfinite": int(nonfinite),
                "sqnr_db": _sqnr_db(signal, noise),
                "shadow": {
                    name: {"est": float(np.float32(est[k])), "above_est": int(above[k]),
                           "overflow": int(over[k])}
                    for k, name in enumerate(self.estimators)
                },
            }
            out.append(rec)
        self._pending = []
        return out

    def header(self, config: Optional[dict] = None) -> dict:
        """The trace header of this session."""
        r = self.recipe
        return {
            "format": r.format, "target": float(np.float32(r.target)), "margin": r.margin,
            "window": r.window, "estimator": self.estimators[self.active],
            "estimators": list(self.estimators),
            "config": {"recipe": r.as_dict(), "quantizers": [str(i) for i in self.ids],
                       **(config or {})},
        }

    def state_dict(self) -> dict:
        return {"bank": self.bank.state_dict(), "step": self.step, "qat": self.qat}

    def load_state_dict(self, state: dict) -> None:
        self.bank.load_state_dict(state["bank"])
        self.qat = bool(state["qat"])
        self._started = True

    # --- one quantizer call -------------------------------------------------------------

    def call(self, q: int, x: torch.Tensor) -> torch.Tensor:
        """Quantizer q's call on x: amax, the estimators' decisions, the fake-quantized x
        (f32) at the active scale, the statistics, and the history update."""
        r = self.recipe
        amax, nonfinite = _amax_nonfinite(x, self._fn("amax", _amax_of))
        if r.amax_reduce == "max" and torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.all_reduce(amax, op=torch.distributed.ReduceOp.MAX, group=self.group)
        est, scale = self.bank.decide(q, amax)
        s = scale[self.active]
        x32 = x.detach().float()
        if r.codec == "lab":
            xq = self._fn("qdq", qdq)(x32, s, r.format, r.saturate)
        else:
            xq = self._fn("qdq_codec", qdq_codec)(x32, s, r.format, r.saturate, r.codec)
        if self.traced():
            self._record(q, x32, xq, amax, nonfinite, est, scale, s)
        self.bank.observe(q, amax, scale)
        return xq

    def frozen(self, q: int, x: torch.Tensor) -> torch.Tensor:
        """x fake-quantized at quantizer q's last active scale (evaluation: no history
        update, nothing recorded)."""
        with torch.no_grad():
            s = self.bank.scales[q, self.active]
            r = self.recipe
            return qdq_codec(x.float(), s, r.format, r.saturate, r.codec).to(x.dtype)

    def _record(self, q, x32, xq, amax, nonfinite, est, scale, s) -> None:
        stats = self._fn("stats", _call_stats)
        row = torch.cat([torch.stack([amax.double()]), stats(x32, xq, est, scale, self.threshold),
                         nonfinite.double().reshape(1)])
        self._pending.append((q, self.step, max(self.micro, 0), x32.numel(), row))

    def _fn(self, name, fn):
        return compiled(fn, name) if self.recipe.compile else fn


def _call_stats(x32, xq, est, scale, threshold: float):
    """[signal, noise, est…, scale…, above…, overflow…, underflow] of one call (f64)."""
    flat = x32.abs().reshape(-1, 1)
    above = (flat > est.unsqueeze(0)).sum(dim=0, dtype=torch.float64)
    over = ((flat * scale.unsqueeze(0)) >= threshold).sum(dim=0, dtype=torch.float64)
    underflow = ((x32 != 0) & (xq == 0)).sum(dtype=torch.float64)
    ok = torch.isfinite(x32) & torch.isfinite(xq)
    x64 = torch.where(ok, x32, torch.zeros_like(x32)).double()
    q64 = torch.where(ok, xq, torch.zeros_like(xq)).double()
    signal = (x64 * x64).sum()
    noise = ((x64 - q64) ** 2).sum()
    return torch.cat([torch.stack([signal, noise]), est.double(), scale.double(), above, over,
                      underflow.reshape(1)])


def _sqnr_db(signal: float, noise: float) -> Optional[float]:
    if not math.isfinite(signal) or signal <= 0 or not math.isfinite(noise):
        return None
    if noise <= 0:
        return SQNR_CAP_DB
    return float(np.float32(min(10 * math.log10(signal / noise), SQNR_CAP_DB)))


class _QuantInput(torch.autograd.Function):
    """Forward: the quantizer's fake quantization; backward: identity (straight through)."""

    @staticmethod
    def forward(ctx, x, session, q):
        return session.call(q, x).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad, None, None


class _QuantGrad(torch.autograd.Function):
    """Forward: identity; backward: the output gradient fake-quantized (role G)."""

    @staticmethod
    def forward(ctx, y, session, q):
        ctx.session, ctx.q = session, q
        return y.view_as(y)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.session.qat:
            return grad, None, None
        return ctx.session.call(ctx.q, grad).to(grad.dtype), None, None


class QuantLinear(nn.Linear):
    """An ``nn.Linear`` whose input (A), weight (W) and output gradient (G) go through the
    session's delayed-scaling quantizers. ``y = Q_A(x) · Q_W(W)ᵀ (+ b)``; in backward
    ``g_q = Q_G(dy)``, ``dx = g_q · Q_W(W)``, ``dW = g_qᵀ · Q_A(x)``."""

    def __init__(self, linear: nn.Linear, session: QatSession, quantizers: Dict[str, int]):
        nn.Module.__init__(self)
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        # not a submodule: the session is shared by every QuantLinear
        object.__setattr__(self, "session", session)
        self.quantizers = dict(quantizers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.session
        if not s.qat:
            return F.linear(x, self.weight, self.bias)
        q = self.quantizers
        if not self.training:
            # evaluation: the last scales, frozen (no history update, nothing recorded)
            xq = s.frozen(q["A"], x) if "A" in q else x
            wq = s.frozen(q["W"], self.weight) if "W" in q else self.weight
            return F.linear(xq, wq, self.bias)
        xq = _QuantInput.apply(x, s, q["A"]) if "A" in q else x
        wq = _QuantInput.apply(self.weight, s, q["W"]) if "W" in q else self.weight
        y = F.linear(xq, wq, self.bias)
        if "G" in q and torch.is_grad_enabled() and y.requires_grad:
            y = _QuantGrad.apply(y, s, q["G"])
        return y

    def extra_repr(self) -> str:
        return super().extra_repr() + f", quantizers={self.quantizers}"


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


def plan(model: nn.Module, modules: Sequence[str], skip_first: int, skip_last: int
         ) -> Tuple[int, List[Tuple[str, int, str]]]:
    """(number of blocks, [(qualified name, block, lab module name)]) of the linears to
    quantize: those named in ``modules`` in blocks skip_first … L − skip_last − 1."""
    wanted = {}
    for m in modules:
        if m not in MODULE_NAMES:
            raise ValueError(f"modules: '{m}' is not a projection the trace can name "
                             f"(expected one of {', '.join(sorted(MODULE_NAMES))})")
        wanted[m] = MODULE_NAMES[m]
    blocks = set()
    found = []
    for name, mod in model.named_modules():
        m = _LAYER.search(name + ".")
        if m:
            blocks.add(int(m.group(1)))
        last = name.rsplit(".", 1)[-1]
        if m and last in wanted and isinstance(mod, nn.Linear):
            found.append((name, int(m.group(1)), wanted[last]))
    if not blocks:
        raise ValueError("quantize: the model has no 'layers.N.' blocks (a Llama-style decoder is expected)")
    n_blocks = max(blocks) + 1
    lo, hi = skip_first, n_blocks - skip_last
    chosen = [f for f in found if lo <= f[1] < hi]
    chosen.sort(key=lambda f: (f[1], _MODULE_ORDER.index(f[2])))
    return n_blocks, chosen


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent, _, last = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, last, new)


def quantize(model: nn.Module, recipe: Recipe = Recipe(), modules: Sequence[str] = ("gate_proj", "up_proj", "down_proj"),
             skip_first: int = 3, skip_last: int = 2, group=None) -> QatSession:
    """Replaces the chosen linears of ``model`` by ``QuantLinear`` in place and returns the
    session. Defaults: the paper's placement (MLP projections of the middle blocks; the first
    3 and last 2 blocks stay high precision). Call before wrapping in DDP / FSDP."""
    if getattr(model, "hif8lab_session", None) is not None:
        raise ValueError("quantize: the model is quantized already (one session per model)")
    n_blocks, chosen = plan(model, modules, skip_first, skip_last)
    if not chosen:
        raise ValueError(
            f"quantize: nothing to quantize ({n_blocks} blocks, skip_first {skip_first}, "
            f"skip_last {skip_last}, modules {list(modules)})")
    ids: List[QuantizerId] = []
    layout = []
    for name, block, mod in chosen:
        qs = {}
        for role in ROLES:
            if role in recipe.roles:
                qs[role] = len(ids)
                ids.append(QuantizerId(block, mod, role))
        layout.append((name, qs))
    device = next(model.parameters()).device
    if recipe.amax_reduce == "max" and group is None and torch.distributed.is_available() \
            and torch.distributed.is_initialized():
        group = torch.distributed.new_group()
    session = QatSession(recipe, ids, device, group)
    for name, qs in layout:
        _set_submodule(model, name, QuantLinear(model.get_submodule(name), session, qs))
    def pre_hook(m, _args):
        if m.training:
            session.begin_micro()

    model.register_forward_pre_hook(pre_hook)
    model.hif8lab_session = session  # type: ignore[attr-defined]
    return session
