"""The Hugging Face ``Trainer``'s side of a QAT session.

    session = quantize(model, Recipe(warmup_steps=500))
    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[HfCallback(session, trace="run/trace.jsonl")])
    trainer.train()            # or trainer.train(resume_from_checkpoint=True)

``HfCallback`` tells the session which optimizer step is about to run (``on_step_begin``:
the Trainer's ``global_step``, once per step whatever the gradient accumulation), so QAT
switches on after the recipe's warmup; it drains the per-call statistics every
``flush_every`` steps into a trace (the lab's format; rank R > 0 writes ``trace.rankR.jsonl``
beside it), or drops them when no trace is asked for (so they never pile up), keeping per
step the active estimator's counts the run's ``metrics.jsonl`` has (``counts[step] =
{"calls_above_est": …, "overflow": …}``). The scaling state needs nothing here: it is part of the model's
``state_dict`` (each quantized linear's ``_extra_state``), so the Trainer's checkpoints carry
it and ``resume_from_checkpoint`` restores it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from transformers import TrainerCallback

from ..scaling import TraceWriter


class HfCallback(TrainerCallback):
    def __init__(self, session, trace: Optional[Union[str, Path]] = None, flush_every: int = 10):
        if flush_every < 1:
            raise ValueError(f"HfCallback: flush_every must be at least 1, got {flush_every}")
        self.session = session
        self.flush_every = flush_every
        self.trace = Path(trace) if trace is not None else None
        self._writer = None
        #: per traced step: calls above the active estimate, elements overflowed
        self.counts = {}

    def _rank(self) -> int:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else int(os.environ.get("RANK", "0"))

    def _open(self, resume: bool, step: int = 0) -> None:
        if self.trace is None or self._writer is not None:
            return
        rank = self._rank()
        path = self.trace if rank == 0 else self.trace.with_name(f"{self.trace.stem}.rank{rank}{self.trace.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        if resume and path.exists():
            from .train import keep_steps_below

            keep_steps_below(path, step)  # the steps after the checkpoint run again
            self._writer = TraceWriter(path, {}, resume=True)
        else:
            self._writer = TraceWriter(path, self.session.header({"rank": rank, "trainer": "transformers.Trainer"}))

    def on_train_begin(self, args, state, control, **kwargs):
        self._open(resume=state.global_step > 0, step=state.global_step)

    def on_step_begin(self, args, state, control, **kwargs):
        self.session.start_step(state.global_step)

    def on_step_end(self, args, state, control, **kwargs):
        # every rank, before the Trainer saves on one: the fused amax reduction's collective
        # runs here, not inside a rank-0-only state_dict
        self.session.flush()
        if state.global_step % self.flush_every == 0 or state.global_step >= state.max_steps:
            self._drain()

    def on_train_end(self, args, state, control, **kwargs):
        self._drain()

    def _drain(self) -> None:
        records = self.session.drain()
        for r in records:
            c = self.counts.setdefault(r["step"], {"calls_above_est": 0, "overflow": 0})
            c["calls_above_est"] += int(r["above_est"] > 0)
            c["overflow"] += r["overflow"]
        if self._writer is not None and records:
            self._writer.write(records)
