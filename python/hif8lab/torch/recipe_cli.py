"""``Recipe``'s fields as command-line flags, generated from the dataclass so the two cannot
drift: every field has a flag (``--field-name``; a field that defaults to True is turned off
with ``--no-field-name``), and ``recipe_from_args`` builds the Recipe from exactly those
flags. A field added to ``Recipe`` without a help text here fails at import (and in
``test_torchrun``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import List

from .nn import ROLES, Recipe

#: One line per Recipe field (the flag's help).
HELP = {
    "estimator": "the active scale estimator (max_window, most_recent, mean_window, ema, holt, current; "
                 "parameters in parentheses, e.g. ema(0.9))",
    "window": "history length of the window estimators (max_window, mean_window without a parameter)",
    "target": "the scaled amax aims at this value (15: top of HiF8's 3-bit tier)",
    "format": "the 8-bit format",
    "saturate": "clamp overflow to ±max instead of Inf/NaN",
    "warmup_steps": "high-precision steps before QAT switches on (every history reset then)",
    "amax_reduce": "none: each rank its own amax (the authors' code); max: all-reduced before the history "
                   "update (Transformer Engine's reduce_amax)",
    "fuse_amax": "with --amax-reduce max: one collective per micro-batch for all A and G amaxes "
                 "(--no-fuse-amax: one per call, as before; the same numbers)",
    "roles": "the quantized operands, comma-separated: A (input), W (weight), G (output gradient)",
    "shadow": "estimators evaluated beside the active one on every call (the trace's shadow columns), "
              "comma-separated",
    "margin": "scale margin: the scale is divided by 2^margin",
    "cold_start": "a quantizer's first call: jit (its own amax, the paper's code) or te (scale 1, "
                  "Transformer Engine)",
    "stats": "per-call statistics (SQNR, overflow, underflow, the shadows' counts) for the trace "
             "(--no-stats: quantization only)",
    "trace_every": "trace the quantizer calls of every Nth step (the default keeps 10,000 steps of a 1 B "
                   "model under about 1 GB per rank; docs/python.md)",
    "compile": "torch.compile the quantizer's ops (--no-compile-quantizers: eager)",
    "codec": "lab: HiF8 as defined (the Rust codec's bits); authors-fallback: the torch-op quantizer the "
             "authors' repository falls back to (no Inf, no underflow; HiF8 only)",
}
#: Flag spellings that differ from the field's name.
FLAG = {"compile": "compile-quantizers"}
#: Choices checked by argparse (the rest by Recipe, which names the field).
CHOICES = {"format": ("hif8", "e4m3", "e5m2"), "amax_reduce": ("none", "max"),
           "cold_start": ("jit", "te"), "codec": ("lab", "authors-fallback")}
#: Defaults of the command line that differ from the library's, and why.
CLI_DEFAULTS = {
    # a 1 B model at the paper's placement traces ~1,600 calls a step (16 micro-batches);
    # every 20th step keeps 10,000 steps under about 1 GB per rank (docs/python.md)
    "trace_every": 20,
    # None: resolved with --faithful (lab unless --faithful)
    "codec": None,
}

_fields = {f.name: f for f in dataclasses.fields(Recipe)}
_missing = sorted(set(_fields) - set(HELP))
if _missing:
    raise AssertionError(f"Recipe fields without a flag help in recipe_cli.HELP: {_missing}")


def split_list(text: str) -> List[str]:
    """Comma-separated names, commas inside parentheses kept (``holt(0.3,0.1,0.9)``)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [s for s in out if s]


def roles_of(text: str) -> tuple:
    """``--roles``: some of A, W, G, comma-separated (a ValueError naming the flag otherwise)."""
    roles = tuple(split_list(text))
    if not roles or any(r not in ROLES for r in roles):
        raise ValueError(f"--roles {text!r}: expected some of A, W, G")
    return roles


def add_recipe_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("recipe (hif8lab.torch.Recipe's fields)")
    for name, f in _fields.items():
        flag = FLAG.get(name, name.replace("_", "-"))
        default = CLI_DEFAULTS.get(name, f.default)
        help = HELP[name]
        if isinstance(f.default, bool):
            if f.default:
                group.add_argument(f"--no-{flag}", dest=name, action="store_false", default=True, help=help)
            else:
                group.add_argument(f"--{flag}", dest=name, action="store_true", default=False, help=help)
        elif isinstance(f.default, tuple):
            group.add_argument(f"--{flag}", dest=name, default=",".join(default), help=f"{help} (default: %(default)s)")
        else:
            kind = type(f.default) if f.default is not None else str
            group.add_argument(f"--{flag}", dest=name, type=kind, default=default, choices=CHOICES.get(name),
                               help=f"{help} (default: %(default)s)")


def recipe_from_args(args: argparse.Namespace) -> Recipe:
    """The Recipe the flags describe (Recipe validates; a bad value is a ValueError naming it)."""
    kw = {}
    for name, f in _fields.items():
        v = getattr(args, name)
        if name == "roles":
            v = roles_of(v)
        elif isinstance(f.default, tuple):
            v = tuple(split_list(v))
        kw[name] = v
    return Recipe(**kw)
