"""Delayed-scaling state of every quantizer of a model, on the model's device.

One ``QuantBank`` holds, for Q quantizers, the amax histories as a ``[Q, H]`` ring buffer,
each estimator's last scale ``[Q, E]`` and the host-side call counts (known without reading
the device). Estimates of every quantizer and estimator are computed at once at the start of
each micro-batch (``begin_micro``): on the CPU by the Rust estimators themselves
(``hif8lab_scaling::estimator``, through ``_core.RowEstimates``), elsewhere by their twin in
f32 torch ops in exactly the Rust order (``estimate_rows``), so that they equal
``hif8lab.scaling.Quantizer`` bit for bit (the tests run both on every call). The bank
executes the plan the Rust core resolves (``ScalingConfig.plan()``: the flat estimator
descriptors the WGSL kernel also gets, the history length, the scale rule); it parses no
estimator name and keeps no default of its own; a quantizer called twice in one micro-batch
gets its row recomputed.

Two ways to record a call. ``decide`` then ``observe``: a few tiny ops per call, the call's
estimates and scales at hand (for its statistics). Or, under delayed scaling, where the
active scale does not depend on the call's amax: ``active_scale`` (computed for every
quantizer at ``begin_micro``: per call an index, or a host float on the CPU) and ``defer``,
which only queues the amax; ``commit`` decides and records every queued call at once (the
same f32 operations on rows as ``decide`` on one, so the same bits), and runs before
anything reads the state (``begin_micro``, a second call of the same quantizer, the
``hist``/``scales``/``n``/``pos``/``calls`` properties, ``state_dict``). Nothing is read
back from the device per call: statistics stay there until ``drain`` hands them to the
trace writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from .. import _core
from .. import scaling as rs



#: The kinds this bank implements (``estimate_rows``); a kind the Rust core adds and this
#: file does not is refused when a bank is made (and fails ``test_estimators``).
IMPLEMENTED_KINDS = ("most_recent", "max_window", "mean_window", "ema", "holt", "current")


@dataclass(frozen=True)
class Spec:
    """A resolved estimator: one descriptor of the plan (f32 where the Rust code uses f32)."""

    name: str
    kind: str
    n: int = 0
    alpha: float = 0.0
    beta: float = 0.0
    damping: float = 0.0

    @staticmethod
    def of(descriptor: dict) -> "Spec":
        """The spec of one of the plan's estimator descriptors."""
        kind = descriptor["kind_name"]
        if kind not in IMPLEMENTED_KINDS:
            raise NotImplementedError(
                f"estimator {descriptor['name']}: kind '{kind}' has no torch twin in hif8lab.torch.bank"
            )
        return Spec(descriptor["name"], kind, n=int(descriptor["n"]), alpha=descriptor["alpha"],
                    beta=descriptor["beta"], damping=descriptor["damping"])


def _f(v: float, device) -> torch.Tensor:
    return torch.tensor(np.float32(v), dtype=torch.float32, device=device)


def _clamp_between(v, lo, hi):
    """Rust's ``clamp_between``: below lo → lo, above hi → hi, else v (NaN passes)."""
    return torch.where(v < lo, lo, torch.where(v > hi, hi, v))


def estimate_rows(ordered: torch.Tensor, n: torch.Tensor, specs: Sequence[Spec]) -> torch.Tensor:
    """Every estimator's raw estimate for each row of ``ordered`` ([R, H], the history
    right-aligned: oldest valid entry at column H − n, newest last; ``n`` [R] ≥ 1 valid
    entries) as [R, E]. Rows with n = 0 give garbage (the caller treats them as cold)."""
    R, H = ordered.shape
    dev = ordered.device
    cols = torch.arange(H, device=dev)
    first = (H - n).unsqueeze(1)  # [R, 1] first valid column
    valid = cols.unsqueeze(0) >= first
    out = []
    for s in specs:
        if s.kind == "most_recent":
            out.append(ordered[:, -1])
        elif s.kind == "current":
            out.append(torch.full((R,), float("nan"), device=dev))
        elif s.kind == "max_window":
            w = max(1, min(s.n, H))
            x = ordered[:, H - w:]
            x = torch.where(valid[:, H - w:], x, torch.full_like(x, float("-inf")))
            # NaN-propagating max, as the Rust fold with max_nan
            m = x.amax(dim=1)
            m = torch.where(torch.isnan(x).any(dim=1), torch.full_like(m, float("nan")), m)
            out.append(m)
        elif s.kind == "mean_window":
            w = max(1, min(s.n, H))
            s_sum = torch.zeros(R, dtype=torch.float32, device=dev)
            lo = torch.full((R,), float("inf"), device=dev)
            hi = torch.full((R,), float("-inf"), device=dev)
            started = torch.zeros(R, dtype=torch.bool, device=dev)
            for j in range(H - w, H):
                v = valid[:, j]
                a = ordered[:, j]
                s_sum = torch.where(v, s_sum + a, s_sum)
                # the Rust fold: seeded with the window's first value, then < / > updates
                lo = torch.where(v & ~started, a, torch.where(v & (a < lo), a, lo))
                hi = torch.where(v & ~started, a, torch.where(v & (a > hi), a, hi))
                started = started | v
            count = torch.clamp(n, max=w).to(torch.float32)
            out.append(_clamp_between(s_sum / count, lo, hi))
        elif s.kind == "ema":
            alpha = _f(s.alpha, dev)
            keep = _f(np.float32(1.0) - np.float32(s.alpha), dev)
            e = ordered[:, 0]
            for j in range(1, H):
                a = ordered[:, j]
                lo = torch.where(a < e, a, e)
                hi = torch.where(a < e, e, a)
                upd = _clamp_between(alpha * a + keep * e, lo, hi)
                col = first.squeeze(1)
                e = torch.where(j > col, upd, torch.where(j == col, a, e))
            out.append(e)
        elif s.kind == "holt":
            a32, b32, p32 = np.float32(s.alpha), np.float32(s.beta), np.float32(s.damping)
            alpha, phi = _f(a32, dev), _f(p32, dev)
            one_minus_alpha = _f(np.float32(1.0) - a32, dev)
            beta = _f(b32, dev)
            one_minus_beta = _f(np.float32(1.0) - b32, dev)
            level = ordered[:, 0]
            trend = torch.zeros(R, dtype=torch.float32, device=dev)
            col = first.squeeze(1)
            for j in range(1, H):
                a = ordered[:, j]
                previous = level
                forecast = level + phi * trend
                lo = torch.where(a < forecast, a, forecast)
                hi = torch.where(a < forecast, forecast, a)
                new_level = _clamp_between(alpha * a + one_minus_alpha * forecast, lo, hi)
                new_trend = beta * (new_level - previous) + one_minus_beta * phi * trend
                level = torch.where(j > col, new_level, torch.where(j == col, a, level))
                trend = torch.where(j > col, new_trend, torch.where(j == col, torch.zeros_like(trend), trend))
            out.append(level + phi * trend)
        else:
            raise ValueError(s.kind)
    return torch.stack(out, dim=1)


def _amax_rows(amaxes: list, device) -> torch.Tensor:
    """Amaxes given as 0-d f32 tensors or as Python floats (f32 values) as one f32 tensor."""
    if all(isinstance(a, float) for a in amaxes):
        return torch.tensor(amaxes, dtype=torch.float32, device=device)
    return torch.stack([torch.as_tensor(a, dtype=torch.float32, device=device) for a in amaxes])


_ROW_ESTIMATES: dict = {}


def _row_estimates(config: rs.ScalingConfig):
    """The Rust row estimator of a scaling config, made once per config (not kept on the
    bank: a bank pickles and copies with its model)."""
    key = config.to_json()
    if key not in _ROW_ESTIMATES:
        _ROW_ESTIMATES[key] = _core.RowEstimates(key)
    return _ROW_ESTIMATES[key]


class QuantBank:
    """The delayed-scaling state of ``count`` quantizers under one scaling config."""

    def __init__(self, config: rs.ScalingConfig, count: int, device: torch.device | str = "cpu",
                 rows_by: Optional[str] = None):
        if rows_by not in (None, "rust", "torch"):
            raise ValueError(f"rows_by must be 'rust', 'torch' or None, got {rows_by!r}")
        plan = config.plan()
        self.config = config
        #: who computes the rows' estimates (``_raw_estimates``): None, the Rust estimators on
        #: the CPU and their torch twin elsewhere; "torch" forces the twin (its tests)
        self.rows_by = rows_by
        self.plan = plan
        self.specs = [Spec.of(d) for d in plan["estimators"]]
        self.names: List[str] = [s.name for s in self.specs]
        self.active = plan["active"]
        self.H = max(1, plan["history_len"])
        self.Q = count
        self.device = torch.device(device)
        self.cold_start = plan["cold_start"]
        self._constants()
        self.reset()

    def _constants(self) -> None:
        plan = self.plan
        self._target = _f(plan["target"], self.device)
        self._pow2 = _f(plan["margin_scale"], self.device)
        self._eps = _f(plan["epsilon"], self.device)
        self._target_host, self._pow2_host, self._eps_host = (
            np.float32(plan[k]) for k in ("target", "margin_scale", "epsilon"))
        self._current = torch.tensor([s.kind == "current" for s in self.specs], device=self.device)
        self._current_cols = [j for j, s in enumerate(self.specs) if s.kind == "current"]
        self._has_current = bool(self._current_cols)

    def to(self, device) -> "QuantBank":
        device = torch.device(device)
        if device != self.device:
            self.commit()
            self.device = device
            for k in ("_hist", "_scales", "_target", "_pow2", "_eps", "_current", "_estimates"):
                setattr(self, k, getattr(self, k).to(device))
            self._next_ok = [False] * self.Q
        return self

    def follow(self, device) -> None:
        """Moves to ``device`` (the model's weights moved there); from the meta device (a
        model built without memory, then ``to_empty``) the state starts fresh there."""
        device = torch.device(device)
        if device == self.device:
            return
        if self.device.type == "meta":
            self.device = device
            self._constants()
            self.reset()
        else:
            self.to(device)

    # --- state -------------------------------------------------------------------------

    def reset(self) -> None:
        """Forgets every history and scale (QAT switching on after warmup)."""
        self._hist = torch.zeros(self.Q, self.H, dtype=torch.float32, device=self.device)
        self._scales = torch.ones(self.Q, len(self.specs), dtype=torch.float32, device=self.device)
        self._n = [0] * self.Q  # valid history entries (host)
        self._pos = [0] * self.Q  # next ring slot (host)
        self._calls = [0] * self.Q  # calls since creation (host)
        self._fresh = [False] * self.Q
        self._estimates = torch.zeros(self.Q, len(self.specs), dtype=torch.float32, device=self.device)
        self._deferred: List[Tuple[int, torch.Tensor]] = []
        self._deferred_q: set = set()
        #: the active scale of each quantizer's next call as begin_micro found it, valid
        #: while its state has not changed since (``_next_ok``); a host copy on the CPU
        self._next: List[torch.Tensor] = []
        self._next_host: List[float] = []
        self._next_ok = [False] * self.Q
        #: every estimator's (est, scale) of each quantizer's next call, host lists made on
        #: the first ``decision_host`` after begin_micro (valid where ``_next_ok``)
        self._decisions_host: Optional[Tuple[list, list]] = None

    # The state as a reader sees it: every deferred call committed first.

    @property
    def hist(self) -> torch.Tensor:
        """The amax histories, a ring buffer [Q, H] (see ``ordered``)."""
        self.commit()
        return self._hist

    @property
    def scales(self) -> torch.Tensor:
        """Each estimator's last scale [Q, E]."""
        self.commit()
        return self._scales

    @property
    def n(self) -> List[int]:
        """Valid history entries per quantizer."""
        self.commit()
        return self._n

    def count(self, q: int) -> int:
        """Quantizer q's valid history entries (committing only a deferred call of q)."""
        if q in self._deferred_q:
            self.commit()
        return self._n[q]

    @property
    def pos(self) -> List[int]:
        """The next ring slot per quantizer."""
        self.commit()
        return self._pos

    @property
    def calls(self) -> List[int]:
        """Calls recorded since the bank was made."""
        self.commit()
        return self._calls

    def ordered(self, rows: Optional[Sequence[int]] = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The histories oldest first, right-aligned ([R, H]) and their valid counts."""
        self.commit()
        rows = list(range(self.Q)) if rows is None else list(rows)
        H = self.H
        idx = np.empty((len(rows), H), dtype=np.int64)
        base = np.arange(H)
        for i, q in enumerate(rows):
            idx[i] = (self._pos[q] + base) % H
        idx_t = torch.from_numpy(idx).to(self.device, non_blocking=True)
        hist = self._hist[torch.tensor(rows, device=self.device)] if len(rows) != self.Q else self._hist
        n = torch.tensor([self._n[q] for q in rows], dtype=torch.int64).to(self.device, non_blocking=True)
        return torch.gather(hist, 1, idx_t), n

    def _raw_estimates(self, rows: Optional[Sequence[int]] = None) -> torch.Tensor:
        """Every estimator's raw estimate for ``rows`` (all by default) from their histories
        now, [R, E]: on the CPU by the Rust estimators themselves (``_core.RowEstimates``
        on the ring buffers: one call, ~0.1 ms for 225 rows where the torch ops over the
        history's columns took ~6 ms), elsewhere by their torch twin ``estimate_rows``
        (the same bits; tested on both). A row without history gives NaN or garbage (the
        callers treat it as cold)."""
        rows_by = getattr(self, "rows_by", None)  # a bank pickled before the field: the default
        by_rust = self.device.type == "cpu" if rows_by is None else rows_by == "rust"
        if not by_rust:
            ordered, n = self.ordered(rows)
            return estimate_rows(ordered, n, self.specs)
        self.commit()
        qs = range(self.Q) if rows is None else list(rows)
        hist = self._hist if rows is None else self._hist[qs]
        raw = _row_estimates(self.config).ring(hist.detach().cpu().contiguous().numpy().tobytes(), self.H,
                                               [self._pos[q] for q in qs], [self._n[q] for q in qs])
        out = torch.from_numpy(np.frombuffer(raw, dtype=np.float32).copy()).view(len(qs), len(self.specs))
        return out.to(self.device)

    def begin_micro(self) -> None:
        """Computes every quantizer's estimates from its history, and the active scale of
        its next call, once per micro-batch."""
        self.commit()
        if self.Q == 0:
            return
        self._estimates = self._raw_estimates()
        self._fresh = [True] * self.Q
        a = self.active
        cold = torch.tensor([c == 0 for c in self._n], device=self.device)
        raw = torch.where(cold, torch.full_like(self._estimates[:, a], float("nan")), self._estimates[:, a])
        nxt = self._active_of(raw, self._scales[:, a])
        self._next = list(nxt.unbind())
        self._next_host = nxt.tolist() if self.device.type == "cpu" else []
        self._next_ok = [True] * self.Q
        self._decisions_host = None

    def state_dict(self) -> dict:
        self.commit()
        return {
            "hist": self._hist.detach().cpu(),
            "scales": self._scales.detach().cpu(),
            "n": list(self._n),
            "pos": list(self._pos),
            "calls": list(self._calls),
            "estimators": list(self.names),
        }

    def load_state_dict(self, state: dict) -> None:
        if list(state["estimators"]) != self.names:
            raise ValueError(
                f"the saved scaling state has estimators {state['estimators']}, this recipe {self.names}"
            )
        if tuple(state["hist"].shape) != (self.Q, self.H):
            raise ValueError(f"the saved scaling state has shape {tuple(state['hist'].shape)}, "
                             f"this model {(self.Q, self.H)}")
        self._deferred, self._deferred_q = [], set()
        self._hist = state["hist"].to(self.device)
        self._scales = state["scales"].to(self.device)
        self._n, self._pos, self._calls = list(state["n"]), list(state["pos"]), list(state["calls"])
        self._fresh = [False] * self.Q
        self._next_ok = [False] * self.Q

    def set_row(self, q: int, hist: torch.Tensor, scales: torch.Tensor, n: int, pos: int, calls: int) -> None:
        """Sets quantizer q's whole state (a loaded checkpoint's row)."""
        self.commit()
        self._hist[q] = hist.to(self.device, torch.float32)
        self._scales[q] = scales.to(self.device, torch.float32)
        self._n[q], self._pos[q], self._calls[q] = int(n), int(pos), int(calls)
        self._fresh[q] = False
        self._next_ok[q] = False

    # --- one call ----------------------------------------------------------------------

    def _scale_of(self, raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The scale of raw estimates, element by element, and whether it is usable (the
        estimate finite and > 0, and so the scale)."""
        scale = self._target / (raw + self._eps) / self._pow2
        return scale, torch.isfinite(raw) & (raw > 0) & torch.isfinite(scale) & (scale > 0)

    def _settle(self, raw: torch.Tensor, previous: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(est, scale) from raw estimates and the previous scales, element by element: an
        unusable estimate (not finite, not > 0, or a scale that is not) keeps the previous
        scale and reports the estimate it implies."""
        scale, usable = self._scale_of(raw)
        implied = self._target / (previous * self._pow2)
        return torch.where(usable, raw, implied), torch.where(usable, scale, previous)

    def _active_of(self, raw: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        """``_settle``'s scale alone (the same f32 operations)."""
        scale, usable = self._scale_of(raw)
        return torch.where(usable, scale, previous)

    def decide(self, q: int, amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every estimator's (est [E], scale [E]) for quantizer q's call whose amax is the
        0-d tensor ``amax`` (read only by just-in-time cold start and current scaling)."""
        if q in self._deferred_q:
            self.commit()
        if self._n[q] == 0:
            if self.cold_start == "jit":
                raw = amax.expand(len(self.specs))
            else:
                raw = torch.full((len(self.specs),), float("nan"), device=self.device)
            raw = torch.where(self._current, amax, raw)
        else:
            raw = torch.where(self._current, amax, self._estimates_of(q))
        return self._settle(raw, self._scales[q])

    def _estimates_of(self, q: int) -> torch.Tensor:
        """Quantizer q's estimates from its history now: those of the micro-batch's start,
        or its row recomputed once it has been called since."""
        if not self._fresh[q]:
            self._estimates[q] = self._raw_estimates([q])[0]
            self._fresh[q] = True
        return self._estimates[q]

    def active_scale(self, q: int) -> torch.Tensor:
        """The active estimator's scale for quantizer q's call, where it does not depend on
        the call's amax (not ``current``, not a just-in-time cold start): the same bits as
        ``decide(q, amax)[1][active]`` (the same f32 operations on one element)."""
        if q in self._deferred_q:
            self.commit()
        if self._next_ok[q]:
            return self._next[q]
        a = self.active
        if self._n[q] == 0:
            raw = torch.full((), float("nan"), device=self.device)
        else:
            raw = self._estimates_of(q)[a]
        return self._active_of(raw, self._scales[q, a])

    def active_scale_host(self, q: int) -> float:
        """``active_scale(q)`` as a Python float (exactly the f32): from begin_micro's host
        copy on the CPU, else read back."""
        if q in self._deferred_q:
            self.commit()
        if self._next_ok[q] and self._next_host:
            return self._next_host[q]
        return self.active_scale(q).item()

    def decision_host(self, q: int, amax: float) -> Optional[Tuple[List[float], List[float]]]:
        """``decide(q, amax)`` as host lists (est [E], scale [E]), on the CPU, where q's state
        is begin_micro's and the call is not a just-in-time cold start: the estimates of
        every row settled at once, made once per micro-batch, and the ``current``
        estimators' columns from ``amax`` (the call's, an f32 value) by the same f32
        operations in numpy scalars. Else None (call ``decide``)."""
        if q in self._deferred_q:
            self.commit()
        if not self._next_ok[q] or self.device.type != "cpu" or (self._n[q] == 0 and self.cold_start == "jit"):
            return None
        if self._decisions_host is None:
            # rows whose state changed since begin_micro are wrong here and never served;
            # a current column's raw estimate is NaN here: it settles to the previous scale
            # and the estimate that implies, what an unusable amax gives below
            cold = torch.tensor([c == 0 for c in self._n], device=self.device).unsqueeze(1)
            unknown = cold | self._current.unsqueeze(0)
            raw = torch.where(unknown, torch.full_like(self._estimates, float("nan")), self._estimates)
            est, scale = self._settle(raw, self._scales)
            self._decisions_host = (est.tolist(), scale.tolist())
        est, scale = self._decisions_host[0][q], self._decisions_host[1][q]
        if not self._has_current:
            return est, scale
        est, scale = list(est), list(scale)
        a = np.float32(amax)
        with np.errstate(all="ignore"):  # inf and NaN as torch gives them, no warning
            c = np.float32(self._target_host / (a + self._eps_host)) / self._pow2_host
        if np.isfinite(a) and a > 0 and np.isfinite(c) and c > 0:
            for j in self._current_cols:
                est[j], scale[j] = float(a), float(c)
        return est, scale

    def observe(self, q: int, amax: torch.Tensor, scale: torch.Tensor) -> None:
        """Records quantizer q's finished call: its amax into the history, its scales."""
        if q in self._deferred_q:
            self.commit()
        self._scales[q] = scale
        self._hist[q, self._pos[q]] = amax
        self._advance(q)

    def _advance(self, q: int) -> None:
        self._pos[q] = (self._pos[q] + 1) % self.H
        self._n[q] = min(self._n[q] + 1, self.H)
        self._calls[q] += 1
        self._fresh[q] = False
        self._next_ok[q] = False

    def defer(self, q: int, amax) -> None:
        """Queues quantizer q's call (amax a 0-d f32 tensor, or a Python float holding an f32
        value) for ``commit``, which decides
        it as ``decide`` would now (q's state cannot change before: anything that would
        change it commits first) and records it as ``observe`` would."""
        if q in self._deferred_q:
            self.commit()
        self._deferred.append((q, amax))
        self._deferred_q.add(q)

    def commit(self) -> None:
        """Decides and records every deferred call, all rows at once."""
        if self._deferred:
            calls, self._deferred, self._deferred_q = self._deferred, [], set()
            self.record_rows([q for q, _ in calls], _amax_rows([a for _, a in calls], self.device))

    def decide_rows(self, qs: Sequence[int], amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``decide`` of the calls of distinct quantizers ``qs`` with amaxes ``amax`` [R],
        on rows: (est [R, E], scale [R, E]), the same bits as R calls of ``decide``."""
        rows = torch.tensor(list(qs), device=self.device)
        E = len(self.specs)
        for q in qs:
            if self._n[q] > 0:
                self._estimates_of(q)
        raw = self._estimates.index_select(0, rows)
        cold = [self._n[q] == 0 for q in qs]
        a = amax.reshape(-1, 1)
        if any(cold):
            mask = torch.tensor(cold, device=self.device).unsqueeze(1)
            first = a.expand(-1, E) if self.cold_start == "jit" else torch.full_like(raw, float("nan"))
            raw = torch.where(mask, first, raw)
        raw = torch.where(self._current.unsqueeze(0), a, raw)
        return self._settle(raw, self._scales.index_select(0, rows))

    def record_rows(self, qs: Sequence[int], amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Decides the calls ``qs`` with amaxes ``amax`` [R] in order (``decide_rows``) and
        records them (``observe``, in one scatter per run of distinct quantizers: a
        quantizer's second call is decided after its first is recorded); returns (est [R, E],
        scale [R, E])."""
        runs, start = [], 0
        while start < len(qs):
            end, seen = start, set()
            while end < len(qs) and qs[end] not in seen:
                seen.add(qs[end])
                end += 1
            runs.append(self._record_distinct(qs[start:end], amax[start:end]))
            start = end
        if len(runs) == 1:
            return runs[0]
        return torch.cat([e for e, _ in runs]), torch.cat([c for _, c in runs])

    def _record_distinct(self, qs: Sequence[int], amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        est, scale = self.decide_rows(qs, amax)
        rows = torch.tensor(list(qs), device=self.device)
        slots = torch.tensor([self._pos[q] for q in qs], device=self.device)
        self._scales.index_copy_(0, rows, scale)
        self._hist.index_put_((rows, slots), amax.reshape(-1))
        for q in qs:
            self._advance(q)
        return est, scale
