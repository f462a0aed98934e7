"""The quantizers of one model: their bank, which step the run is on, the per-call statistics
waiting to be written, and the two things a training loop at scale does to them.

**Recomputation.** Under activation checkpointing (``torch.utils.checkpoint``, re-entrant or
not, and Hugging Face's ``gradient_checkpointing_enable``) a block's forward runs twice: once
in the forward pass and again inside the backward pass to rebuild what it saved. The second
run must see the first run's scales and must not record anything (Transformer Engine's rule:
both forward phases see the same scales and amaxes). A forward call (roles A and W) that
arrives while the autograd engine is executing a backward pass is such a recompute: it takes
the scale the same quantizer used in this micro-batch's forward (in call order) and neither
updates the history nor writes statistics. The output gradient's calls (role G) happen in
backward by nature and are never replayed.

**Fused amax reduction** (``amax_reduce="max"`` on several processes). With delayed scaling a
call's scale comes from the history of *earlier* micro-batches, so this call's all-reduced
amax is needed only when it enters the history, i.e. before the next micro-batch decides.
Each A and G call therefore uses its rank-local amax for its own statistics, is queued, and
one ``all_reduce(MAX)`` over the queue runs when the next micro-batch begins (or at an explicit ``flush()``, which every rank must
call at the same point: the training loop before its last drain), after which the histories are updated in
call order with the reduced values and the queued trace rows get the reduced amax. W is
never reduced: data-parallel ranks (DDP, FSDP's gathered weights) hold the same weights.
Exact semantics are kept where this call's reduced amax decides this call: the ``current``
estimator when it is the active one, a just-in-time cold start (the first call after a
reset), and a ``current`` shadow when the target reaches the format's overflow threshold
(its overflow count could then depend on the amax) each reduce that call at once. A quantizer
called a second time in one micro-batch first flushes the queue (on every rank alike), so
its second call sees its first call's reduced amax, as without fusion.
"""

from __future__ import annotations

import copy
import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from .. import _core
from .bank import QuantBank
from .fakequant import _ABS, _INF, _amax_qdq_into, compiled, overflow_threshold, qdq, qdq_codec

SQNR_CAP_DB = 300.0
FORWARD_ROLES = ("A", "W")

#: The session's host-side bookkeeping (histories' positions, queues, which call this is) is
#: plain Python that ``torch.compile`` would specialize on per quantizer and recompile for each
#: until its limit: the model compiles around it (one graph break per quantizer call), and
#: the quantizer's own ops run under their own compiled functions (``fakequant.compiled``).
_not_traced = torch.compiler.disable


def _timed(fn):
    """Adds the process CPU time of the call to ``session.cpu_s`` while ``session.timing`` is
    set (the benchmark's attribution of a step's time to the quantizers; nested calls count
    once)."""
    import functools
    import time

    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        if not self.timing or self._timing_depth:
            return fn(self, *args, **kwargs)
        self._timing_depth += 1
        t = time.process_time()
        try:
            return fn(self, *args, **kwargs)
        finally:
            self.cpu_s += time.process_time() - t
            self._timing_depth -= 1

    return wrapper


def in_backward() -> bool:
    """Whether the autograd engine is executing a backward pass on this thread (a forward
    call now is a checkpoint's recompute)."""
    return torch._C._current_graph_task_id() != -1


def _amax_nonfinite(x: torch.Tensor, amax_of=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """max |x| over non-NaN elements (0 for an empty tensor) and the NaN/Inf count;
    ``amax_of`` computes them for a non-empty tensor (``_amax_of``, or its compiled form)."""
    if x.numel() == 0:
        z = torch.zeros((), dtype=torch.float32, device=x.device)
        return z, z.to(torch.float64)
    return (amax_of or _amax_of)(x)


def _amax_of(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """max |x| over non-NaN elements and the NaN/Inf count, on the f32 bits: |x| is the bits
    without the sign, ordered as the floats are (+Inf the largest), NaN above +Inf. Integer
    max and count reductions vectorize where a NaN-aware float max does not (measured on
    884,736 elements, compiled, 2 threads: 0.85 ms against 8 ms)."""
    a = x.detach().float().contiguous().view(torch.int32) & _ABS
    amax = torch.where(a > _INF, torch.zeros_like(a), a).amax().view(torch.float32)
    nonfinite = (a >= _INF).sum(dtype=torch.float64)
    return amax, nonfinite


class QatSession:
    """The quantizers of one model: their bank, which step the run is on, and the per-call
    statistics waiting to be written. ``ids[q]`` names quantizer q (block, module, role)."""

    def __init__(self, recipe, ids: List, device, group=None):
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
        #: collectives this session issued (amax all-reduces), for tests and benchmarks
        self.collectives = 0
        #: with ``timing`` set: process CPU seconds spent in the quantizers (calls, estimates,
        #: reductions)
        self.timing = False
        self.cpu_s = 0.0
        self._timing_depth = 0
        #: what ``quantize`` placed (a ``placement.Summary``), when it made this session
        self.summary = None
        kinds = [s.kind for s in self.bank.specs]
        self._active_current = kinds[self.active] == "current"
        current_shadow = "current" in kinds and kinds[self.active] != "current"
        #: every A and G call reduces at once (no fusion possible; see the module's text)
        self._reduce_each_call = not recipe.fuse_amax or kinds[self.active] == "current" or (
            current_shadow and float(recipe.target) / self.bank.plan["margin_scale"] >= self.threshold)
        self._pending: List[Tuple[int, int, int, int, torch.Tensor]] = []
        self._queued: List[Tuple[int, torch.Tensor, Optional[torch.Tensor]]] = []
        self._queued_q: set = set()
        self._used: Dict[int, List[torch.Tensor]] = {}
        self._replayed: Dict[int, int] = {}
        self._started = False
        #: per quantizer, the f32 buffer its last CPU call wrote its output to (``_out``)
        self._outs: Dict[int, torch.Tensor] = {}

    # --- copies ------------------------------------------------------------------------

    def __getstate__(self):
        # A process group does not pickle (torch.save(model)); a loaded model reduces in the
        # group its new process gives it (quantize's ``group``), or not at all.
        state = dict(self.__dict__)
        state["group"] = None
        state["_outs"] = {}  # scratch memory, not state
        return state

    def __deepcopy__(self, memo):
        # ``copy.deepcopy(model)``: the copy gets its own session (histories, scales and
        # queues copied), sharing only the process group.
        new = QatSession.__new__(QatSession)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, v if k == "group" else {} if k == "_outs" else copy.deepcopy(v, memo))
        return new

    # --- the training loop's side ----------------------------------------------------------

    def start_step(self, step: int) -> None:
        """Tells the quantizers the optimizer step about to run (call before its first
        micro-batch). Quantization switches on at ``warmup_steps`` with every history reset."""
        self.flush()
        qat = step >= self.recipe.warmup_steps
        if qat and (not self.qat or not self._started):
            self.bank.reset()
        self.qat = qat
        self._started = True
        self.step = step
        self.micro = -1

    @_not_traced
    @_timed
    def begin_micro(self) -> None:
        """A micro-batch's forward starts (called by a pre-hook on the model; a recompute
        of the whole model inside backward is not a new micro-batch)."""
        if in_backward():
            return
        self.flush()
        self.micro += 1
        self._used = {}
        self._replayed = {}
        if self.qat:
            self.bank.begin_micro()

    @_not_traced
    def _pre_hook(self, module, _args) -> None:
        if module.training:
            self.begin_micro()

    def traced(self) -> bool:
        return self.recipe.stats and self.step % self.recipe.trace_every == 0

    def drain(self) -> List[dict]:
        """The per-call records gathered since the last drain, as trace records (one
        device→host copy for all of them). Runs no collective: the records of calls whose
        amax still waits for the fused reduction are kept for a later drain (call ``flush()``
        on every rank first to have them all, as at the end of a run)."""
        held = {id(row) for _, _, row in self._queued if row is not None}
        ready = [p for p in self._pending if id(p[4]) not in held]
        self._pending = [p for p in self._pending if id(p[4]) in held]
        if not ready:
            return []
        rows = torch.stack([p[4] for p in ready]).detach().cpu().numpy()
        E = len(self.estimators)
        out = []
        for (q, step, micro, numel, _), row in zip(ready, rows):
            qid = self.ids[q]
            amax, signal, noise = row[0], row[1], row[2]
            est = row[3:3 + E]
            scale = row[3 + E:3 + 2 * E]
            above = row[3 + 2 * E:3 + 3 * E]
            over = row[3 + 3 * E:3 + 4 * E]
            underflow, nonfinite = row[3 + 4 * E], row[4 + 4 * E]
            a = self.active
            out.append({
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
            })
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
        """The whole bank (the run's per-rank checkpoint file). Flushes the fused amax
        reduction first: a collective, so every rank calls it at the same point."""
        self.flush()
        return {"bank": self.bank.state_dict(), "step": self.step, "qat": self.qat}

    def load_state_dict(self, state: dict) -> None:
        self.bank.load_state_dict(state["bank"])
        self.qat = bool(state["qat"])
        self._started = True

    def rows_state(self, qs: List[int]) -> dict:
        """The state of quantizers ``qs`` (a QuantLinear's ``_extra_state``), by name. No
        collective runs here (``state_dict`` is often called on one rank only): amaxes still
        queued for the fused reduction are saved as queued, and queued again on load, so the
        next micro-batch reduces them on every rank (``HfCallback`` flushes at each step's
        end, so the Trainer's checkpoints hold none)."""
        b = self.bank
        return {
            "version": 1, "estimators": list(self.estimators), "history_len": b.H, "qat": self.qat,
            "quantizers": {
                str(self.ids[q]): {"hist": b.hist[q].detach().cpu().clone(),
                                   "scales": b.scales[q].detach().cpu().clone(),
                                   "n": b.n[q], "pos": b.pos[q], "calls": b.calls[q],
                                   "queued": [float(a) for qq, a, _ in self._queued if qq == q]}
                for q in qs
            },
        }

    def load_rows(self, state: dict) -> None:
        """Sets the quantizers ``state`` names (``rows_state``'s dict); refuses a state of
        other estimators, another history length or unknown quantizers, naming them."""
        b = self.bank
        if state.get("version") != 1:
            raise ValueError(f"hif8lab scaling state: version {state.get('version')!r}, expected 1")
        if list(state.get("estimators", [])) != self.estimators:
            raise ValueError(f"hif8lab scaling state: estimators {state.get('estimators')}, this recipe "
                             f"{self.estimators}")
        if state.get("history_len") != b.H:
            raise ValueError(f"hif8lab scaling state: history length {state.get('history_len')}, this recipe {b.H}")
        by_name = {str(i): q for q, i in enumerate(self.ids)}
        rows = state.get("quantizers", {})
        unknown = [n for n in rows if n not in by_name]
        if unknown:
            raise ValueError(f"hif8lab scaling state: quantizers {unknown} are not this model's")
        E = len(self.estimators)
        for name, row in rows.items():
            q = by_name[name]
            hist, scales = row["hist"], row["scales"]
            if tuple(hist.shape) != (b.H,) or tuple(scales.shape) != (E,) or not (0 <= row["n"] <= b.H) \
                    or not (0 <= row["pos"] < b.H):
                raise ValueError(f"hif8lab scaling state: quantizer {name} has another shape")
            b.set_row(q, hist, scales, row["n"], row["pos"], row["calls"])
            self._queued = [e for e in self._queued if e[0] != q]
            self._queued_q.discard(q)
            for a in row.get("queued", []):
                self._queued.append((q, torch.tensor(float(a), dtype=torch.float32, device=b.device), None))
                self._queued_q.add(q)
        self.qat = bool(state["qat"])
        self._started = True

    # --- amax reduction ----------------------------------------------------------------

    def _reducing(self) -> bool:
        return (self.recipe.amax_reduce == "max" and torch.distributed.is_available()
                and torch.distributed.is_initialized())

    def _all_reduce_max(self, t: torch.Tensor) -> None:
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX, group=self.group)
        self.collectives += 1

    @_not_traced
    @_timed
    def flush(self) -> None:
        """Reduces the queued amaxes in one collective and enters them into the histories in
        call order (every rank flushes at the same points of the same program)."""
        if not self._queued:
            return
        queued, self._queued, self._queued_q = self._queued, [], set()
        amaxes = torch.stack([a for _, a, _ in queued])
        self._all_reduce_max(amaxes)
        E = len(self.estimators)
        # the histories are as they were when the calls decided, so deciding again with the
        # reduced amaxes gives the calls' scales (a current shadow's taken at that amax), all
        # rows at once (a quantizer queued twice, from a restored state, in call order)
        est, scale = self.bank.record_rows([q for q, _, _ in queued], amaxes)
        for i, (_, _, row) in enumerate(queued):
            if row is not None:
                row[0] = amaxes[i].double()
                row[3:3 + E] = est[i].double()
                row[3 + E:3 + 2 * E] = scale[i].double()

    # --- one quantizer call -------------------------------------------------------------

    @_not_traced
    @_timed
    def call(self, q: int, x: torch.Tensor) -> torch.Tensor:
        """Quantizer q's call on x: amax, the estimators' decisions, the fake-quantized x
        (f32) at the active scale, the statistics, and the history update (or, for a
        forward call inside a backward pass, the replay of this micro-batch's first call)."""
        r = self.recipe
        role = self.ids[q].role
        forward = role in FORWARD_ROLES
        if forward and in_backward():
            return self._replay(q, x)
        if q in self._queued_q:
            self.flush()
        bank = self.bank
        cold = bank.count(q) == 0 and bank.cold_start == "jit"
        reducing = role != "W" and self._reducing()
        reduce_now = reducing and (self._reduce_each_call or cold)
        traced = self.traced()
        # delayed scaling: the active scale does not depend on this call's amax, so one read
        # of the tensor gives both (the amax and the quantization in one pass), and the
        # call's decision can wait for the bank's commit (all of a micro-batch's at once)
        delayed = not (reduce_now or cold or self._active_current) and r.codec == "lab" and x.numel() > 0
        est = scale = None
        if delayed and x.is_cpu:
            # the Rust core on the operand's own memory in its own shape (no view made, no
            # copy of a contiguous f32 operand: in a training step every tensor operation
            # here costs tens of µs, its memory evicted by the GEMMs between calls); the
            # amax a Python float (a 0-d tensor only where a collective needs one)
            x32 = x if x.dtype == torch.float32 and x.is_contiguous() else x.detach().float().contiguous()
            s = bank.active_scale_host(q)
            xq = self._out(q, x32)
            amax, nonfinite = _amax_qdq_into(x32, xq, s, r.format, r.saturate)
            if traced:  # the host lists made once per micro-batch, where they can be
                est, scale = bank.decision_host(q, amax) or bank.decide(q, torch.tensor(amax, dtype=torch.float32))
            if reducing:
                amax = torch.tensor(amax, dtype=torch.float32)
        else:
            # one flat, detached view: the compiled ops see one rank and no autograd, whatever
            # the operand (a weight, an activation of any rank), so they compile once
            x32 = x.detach().reshape(-1).float()
            if delayed:
                s = bank.active_scale(q)
                amax, nonfinite, xq = self._fn("amax_qdq", _amax_qdq)(x32, s, r.format, r.saturate)
                if traced:
                    est, scale = bank.decide(q, amax)
            else:
                amax, nonfinite = _amax_nonfinite(x32, self._fn("amax", _amax_of))
                if reduce_now:
                    self._all_reduce_max(amax)
                est, scale = bank.decide(q, amax)
                s = scale[self.active]
                xq = self._quantize(x32, s)
        queue = reducing and not reduce_now
        row = self._record(q, x32, xq, amax, nonfinite, est, scale) if traced else None
        if xq.dim() != x.dim():
            xq = xq.view(x.shape)
        if queue:
            self._queued.append((q, amax, row))
            self._queued_q.add(q)
        elif delayed:
            bank.defer(q, amax)
        else:
            bank.observe(q, amax, scale)
        if forward:
            self._used.setdefault(q, []).append(s)
        return xq

    def _out(self, q: int, like: torch.Tensor) -> torch.Tensor:
        """Where quantizer q's CPU call writes its output (f32, ``like``'s shape): the buffer
        its last call wrote (as it is, or its first elements for a smaller operand), unless
        anything still holds that buffer's memory (the autograd graph of a micro-batch not
        yet through backward, a caller's reference, a second call in this micro-batch); else
        a new one, kept for the next call. A weight's quantized copy is thus the same memory
        every step (on the CPU, memory freed and taken again is faulted in again, page by
        page: 62 k page faults a step at the 135 M shape under glibc's defaults, most of
        QAT's extra ones), and nothing that could still be read is ever overwritten."""
        buf = self._outs.get(q)
        if buf is not None and _unshared(buf):
            # an alias, never the buffer itself: whatever holds the output holds the
            # memory through a tensor of its own (its reference the count above sees)
            if buf.shape == like.shape:
                return buf.detach()
            if buf.numel() >= like.numel():
                return buf.view(-1)[:like.numel()].view(like.shape)
        buf = torch.empty(like.shape, dtype=torch.float32)
        self._outs[q] = buf
        return buf.detach()

    def free_buffers(self) -> int:
        """Lets go of the output memory the CPU calls keep for the next step (``_out``: one
        f32 buffer per quantizer, as large as its operand; the weights' copies for the most
        part); the next calls allocate again. Returns the bytes let go (still held where a
        graph or a caller holds them)."""
        freed = sum(b.numel() * b.element_size() for b in self._outs.values())
        self._outs = {}
        return freed

    def _replay(self, q: int, x: torch.Tensor) -> torch.Tensor:
        """A recomputed forward call: the scale of this quantizer's matching first call."""
        used = self._used.get(q, [])
        k = self._replayed.get(q, 0)
        if k >= len(used):
            raise RuntimeError(
                f"hif8lab: quantizer {self.ids[q]} recomputed inside backward without a first forward "
                f"call in this micro-batch ({len(used)} call(s) to replay); checkpointed regions must "
                "be recomputed in the micro-batch that ran them")
        self._replayed[q] = k + 1
        return self._quantize(x.detach().reshape(-1).float(), used[k]).view(x.shape)

    def _quantize(self, x32: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        r = self.recipe
        if r.codec == "lab":
            return self._fn("qdq", qdq)(x32, s, r.format, r.saturate)
        return self._fn("qdq_codec", qdq_codec)(x32, s, r.format, r.saturate, r.codec)

    @_not_traced
    def frozen(self, q: int, x: torch.Tensor) -> torch.Tensor:
        """x fake-quantized at quantizer q's last active scale (evaluation: no history
        update, nothing recorded)."""
        with torch.no_grad():
            s = self.bank.scales[q, self.active]
            r = self.recipe
            return qdq_codec(x.float(), s, r.format, r.saturate, r.codec).to(x.dtype)

    def _record(self, q, x32, xq, amax, nonfinite, est, scale) -> torch.Tensor:
        r = self.recipe
        if x32.device.type == "cpu" and r.codec == "lab":
            row = _call_stats_cpu(x32, xq, amax, nonfinite, est, scale, scale[self.active], r.format, r.saturate)
        else:
            stats = self._fn("stats", _call_stats)
            row = torch.cat([torch.stack([amax.double()]), stats(x32, xq, est, scale, self.threshold),
                             nonfinite.double().reshape(1)])
        self._pending.append((q, self.step, max(self.micro, 0), x32.numel(), row))
        return row

    def _fn(self, name, fn):
        return compiled(fn, name) if self.recipe.compile else fn


def _amax_qdq(x32, s, format: str, saturate: bool):
    """amax, non-finite count and the fake quantization at ``s`` of one operand, in one pass."""
    amax, nonfinite = _amax_of(x32)
    return amax, nonfinite, qdq(x32, s, format, saturate)


def _unshared(buf: torch.Tensor) -> bool:
    """Whether ``buf``'s memory is held by ``buf`` alone (no view, no other tensor on its
    storage, nothing autograd saved): the storage's reference count, one for ``buf`` and one
    for the storage object asked. False where this torch cannot tell."""
    use_count = getattr(torch._C, "_storage_Use_Count", None)
    if use_count is None:
        return False
    return use_count(buf.untyped_storage()._cdata) <= 2


def _call_stats_cpu(x32, xq, amax, nonfinite, est, scale, s, format: str, saturate: bool) -> torch.Tensor:
    """``_record``'s row on the CPU by the Rust core's statistics on the tensors' memory
    (``hif8lab._core.call_stats_at``: the reference the torch ops below are tested against;
    the counts the same, the energies summed in another order). ``est``, ``scale``: [E]
    tensors or host lists."""
    x, q = x32.contiguous(), xq.contiguous()
    ests = est.tolist() if isinstance(est, torch.Tensor) else est
    scales = scale.tolist() if isinstance(scale, torch.Tensor) else scale
    amax_v = float(amax)
    nonfinite = float(nonfinite)
    signal, noise, above, over, under = _core.call_stats_at(
        x.data_ptr(), q.data_ptr(), x.numel(), ests, scales, float(s), amax_v, format, saturate)
    return torch.tensor([amax_v, signal, noise, *ests, *scales, *above, *over, under, nonfinite],
                        dtype=torch.float64)


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
