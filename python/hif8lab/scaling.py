"""hif8lab's delayed scaling from Python: the Rust estimators and the lab's trace format.

``Quantizer`` is the Rust ``QuantizerState`` (history, scale rule, cold start, every
estimator's decision per call): the reference the on-device estimators of
``hif8lab.torch`` are checked against call by call. ``TraceWriter`` / ``read_trace`` write and
read the one trace format ``hif8lab replay``, ``grid``-style reports and the app read.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from . import _core

#: The lab's default scaling config, as the Rust core spells it (``ScalingConfig::default``:
#: the one place the defaults are written).
DEFAULTS: dict = json.loads(_core.default_config())

#: The default shadow set (SPEC.md §3), windows resolved with ``window``.
DEFAULT_ESTIMATORS = tuple(DEFAULTS["shadow"])

#: The estimator kinds the Rust reference implements (``EstimatorKind::ALL``).
ESTIMATOR_KINDS = tuple(_core.estimator_kinds())


def estimator_name(name: str, window: int | None = None) -> str:
    """Canonical spelling of an estimator (``max`` → ``max_window(64)`` with the default
    window); raises ValueError for an unknown one."""
    return _core.estimator_name(name, None if window is None else int(window))


@dataclass(frozen=True)
class ScalingConfig:
    """The lab's ``[qat.scaling]`` table."""

    estimator: str = DEFAULTS["estimator"]
    window: int = DEFAULTS["window"]
    target: float = DEFAULTS["target"]
    margin: int = DEFAULTS["margin"]
    cold_start: str = DEFAULTS["cold_start"]
    shadow: Sequence[str] = DEFAULT_ESTIMATORS
    format: str = DEFAULTS["format"]
    overflow: str = DEFAULTS["overflow"]

    def to_json(self) -> str:
        """The config as the Rust core reads it. A value of the wrong kind is a ValueError
        naming its field (a window of 64.9 is not truncated; a NaN target is not sent)."""
        for name in ("window", "margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise ValueError(f"scaling config: {name} must be a whole number, got {v!r}")
        if not isinstance(self.target, (int, float, np.integer, np.floating)) or isinstance(self.target, bool) \
                or not math.isfinite(float(self.target)):
            raise ValueError(f"scaling config: target must be a finite number > 0, got {self.target!r}")
        if isinstance(self.shadow, str):
            raise ValueError(f"scaling config: shadow must be a list of estimators, got the string {self.shadow!r}")
        return json.dumps(
            {
                "estimator": self.estimator,
                "window": int(self.window),
                "target": float(self.target),
                "margin": int(self.margin),
                "cold_start": self.cold_start,
                "shadow": list(self.shadow),
                "format": self.format,
                "overflow": self.overflow,
            }
        )

    def resolved(self) -> tuple[list[str], int, int]:
        """(estimator names in order, index of the active one, history length)."""
        return _core.resolve_config(self.to_json())

    def plan(self) -> dict:
        """The plan the Rust core resolves this config into (``ScalingConfig::plan``): the
        estimators as flat descriptors (``name``, ``kind``, ``kind_name``, ``n``, ``alpha``,
        ``beta``, ``damping``; the WGSL kernel's), ``active``, ``history_len``, ``target``,
        ``margin``, ``margin_scale``, ``epsilon``, ``cold_start``, ``format``, ``overflow``.
        Raises ValueError naming the field out of range."""
        return json.loads(_core.plan(self.to_json()))


class Decision(NamedTuple):
    est: float
    raw_est: float
    scale: float
    kept_previous: bool
    cold: bool


class Quantizer:
    """One quantizer's delayed-scaling state, computed by the Rust reference."""

    def __init__(self, config: ScalingConfig = ScalingConfig()):
        self._q = _core.Quantizer(config.to_json())

    def call(self, amax: float) -> list[Decision]:
        """Every estimator's decision for a call whose amax is ``amax``; then records it."""
        return [Decision(*d) for d in self._q.call(float(amax))]

    def reset(self) -> None:
        self._q.reset()

    def history(self) -> list[float]:
        return self._q.history()

    def scales(self) -> list[float]:
        return self._q.scales()

    @property
    def estimators(self) -> list[str]:
        return self._q.estimators()

    @property
    def active_index(self) -> int:
        return self._q.active_index


def replay(series: dict, window: int | None = None, target: float | None = None,
           format: str | None = None) -> dict:
    """``hif8lab replay`` of ``{quantizer name: [amax, …]}``: per quantizer and estimator,
    calls above the estimate, worst ratio, overflow, …"""
    return json.loads(
        _core.replay(json.dumps({k: [float(v) for v in vs] for k, vs in series.items()}),
                     None if window is None else int(window),
                     None if target is None else float(target), format)
    )


class Trace(NamedTuple):
    header: dict
    records: list
    warnings: list


def read_trace(path: str | os.PathLike) -> Trace:
    """A trace file read by the Rust reader (non-finite numbers come back as floats)."""
    header, records, warnings = _core.trace_read(os.fspath(path))
    return Trace(json.loads(header), _decode_records(json.loads(records)), warnings)


_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _num(v):
    return _NONFINITE.get(v, v) if isinstance(v, str) else v


def _decode_records(records: list) -> list:
    for r in records:
        for k in ("amax", "est", "scale", "sqnr_db"):
            if k in r:
                r[k] = _num(r[k])
        for s in r.get("shadow", {}).values():
            s["est"] = _num(s["est"])
    return records


def _encode_num(v: float):
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    return v


def _encode_record(r: dict) -> dict:
    r = dict(r)
    for k in ("amax", "est", "scale", "sqnr_db"):
        if k in r and r[k] is not None:
            r[k] = _encode_num(float(r[k]))
    if r.get("sqnr_db") is None:
        r.pop("sqnr_db", None)
    r["shadow"] = {
        name: {"est": _encode_num(float(s["est"])), "above_est": int(s["above_est"]),
               "overflow": int(s["overflow"])}
        for name, s in r.get("shadow", {}).items()
    }
    return r


class TraceWriter:
    """Writes a trace through the Rust writer: the header first (the file replaced
    atomically), then records appended in batches, each line whole."""

    def __init__(self, path: str | os.PathLike, header: dict, resume: bool = False):
        self.path = os.fspath(path)
        if not resume:
            h = dict(header)
            h.setdefault("hif8lab_trace", _core.TRACE_VERSION)
            _core.trace_start(self.path, json.dumps(h))

    def write(self, records: Iterable[dict]) -> int:
        """Appends records (dicts with the trace record's fields); returns how many."""
        batch = [_encode_record(r) for r in records]
        if not batch:
            return 0
        return _core.trace_append(self.path, json.dumps(batch))
