"""QAT overhead of hif8lab.torch: the same Llama trained unquantized and quantized in torch eager.

    python -m hif8lab.torch.bench                       # SmolLM2-135M's shape, ctx 128, batch 2
    python -m hif8lab.torch.bench --shape tiny --json   # a small shape, one JSON object

Arms, alternated over ``--rounds`` so that a noisy machine hits all alike: ``eager`` (no
quantizers), ``qat`` (the paper's placement and recipe, every statistic of the trace),
``qat-amax`` (quantization and the estimators only, no statistics: ``Recipe(stats=False)``)
and, with ``--compile``, each under ``torch.compile``. Prints per arm the median step time,
tokens/s and the ratio to ``eager`` with its range over rounds, and per quantized linear the
number of aten operations (≈ GPU kernels in eager mode) of one training call, forward and
backward, against the plain linear's. Ratios are given by wall clock and by process CPU time
(every thread's; what a loaded machine leaves honest), with the load average before and
after, and the amax collectives per micro-batch with ``amax_reduce="max"`` (fused, and one
per call). Weights are random (no download): the shape is what costs time.

Each arm runs in a process of its own (spawned; one runs a step at a time, the others wait),
so each has its own allocator state and thread pool, as a real training run has: in one
process (``--one-process``) the arms' allocations interleave, and which of them finds its
memory already mapped changes from step to step (page faults per step of the same arm
varied 150 k–370 k there).

The allocator matters on the CPU: glibc's defaults hand large freed blocks back to the
kernel, so every step faults its tensors' pages in again (zeroed; the kernel's time, in
process CPU), and a quantized step allocates more (its fake-quantized operands). With
``--malloc keep`` the process keeps freed memory (glibc ``mallopt``: no mmap, no trimming),
as PyTorch's CUDA caching allocator does on a GPU and jemalloc/tcmalloc, the usual CPU
training set-up, do on the CPU; ``system`` (default) leaves the C library as it is. The
report prints the allocator, and per arm the kernel's share of the CPU time and the page
faults per step, so that the two costs are told apart.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import resource
import statistics
import sys
import time
from typing import Dict, List

import torch
import torch.nn as nn

from .nn import Recipe, quantize

SHAPES = {
    # layers, d_model, d_ff, heads, kv heads, vocab (SmolLM2-135M: tied, rope 1e5)
    "smollm2-135m": (30, 576, 1536, 9, 3, 49152),
    "tiny": (6, 128, 384, 4, 2, 512),
}


def build(shape: str, seed: int = 0) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, dim, ff, heads, kv, vocab = SHAPES[shape]
    config = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=ff, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, tie_word_embeddings=True,
                         rope_theta=100000.0, max_position_embeddings=8192)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


class Arm:
    """One arm in this process: its model, session and optimizer, stepped by ``step``."""

    def __init__(self, name: str, shape: str, recipe: Recipe | None, compiled: bool, batch: int, context: int,
                 device: str = "cpu", dtype: str = "f32"):
        self.name = name
        self.device = torch.device(device)
        self.autocast = torch.bfloat16 if dtype == "bf16" else None
        self.model = build(shape).to(self.device)
        self.session = quantize(self.model, recipe) if recipe is not None else None
        self.quantizers = len(self.session.ids) if self.session is not None else 0
        self.forward = torch.compile(self.model) if compiled else self.model
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1)
        vocab = self.model.config.vocab_size
        g = torch.Generator().manual_seed(1)
        self.x = torch.randint(0, vocab, (batch, context + 1), generator=g).to(self.device)
        self.step_no = 0
        if self.session is not None:
            self.session.timing = True

    def ready(self) -> None:
        """Two warm-up steps (allocations, first-call paths, compilation)."""
        self.step()
        self.step()

    def step(self) -> dict:
        """One training step and its figures: wall and process CPU seconds (every thread; the
        measure a loaded machine leaves honest), of it the kernel's CPU seconds, the minor
        page faults (all threads), and the quantizers' CPU seconds (the session's own timer;
        None without a session)."""
        if self.session is not None:
            self.session.start_step(self.step_no)
        t = time.perf_counter()
        c = time.process_time()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        q0 = self.session.cpu_s if self.session is not None else 0.0
        with torch.autocast(self.device.type, dtype=self.autocast or torch.bfloat16, enabled=self.autocast is not None):
            logits = self.forward(input_ids=self.x[:, :-1], use_cache=False).logits
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                               self.x[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if self.session is not None and self.step_no % 10 == 9:
            self.session.drain()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        self.step_no += 1
        return {"wall": wall, "cpu": cpu, "sys": r1.ru_stime - r0.ru_stime, "faults": r1.ru_minflt - r0.ru_minflt,
                "quant": self.session.cpu_s - q0 if self.session is not None else None}

    def close(self) -> None:
        pass


class ArmProcess:
    """An ``Arm`` in a process of its own (spawned): its own allocator state and thread
    pool, as a real training process has; only one arm's process runs a step at a time.
    The same ``ready``/``step``/``close`` as ``Arm``."""

    def __init__(self, name: str, malloc: str, **kw):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.name = name
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_arm_worker, args=(child, name, malloc, kw), daemon=True)
        self.proc.start()
        child.close()
        self.quantizers = 0

    def ready(self) -> None:
        """Waits for the worker's arm, its warm-up steps done."""
        self.quantizers = self._recv()["quantizers"]

    def step(self) -> dict:
        self.conn.send("step")
        return self._recv()

    def _recv(self) -> dict:
        try:
            msg = self.conn.recv()
        except EOFError:
            raise RuntimeError(f"bench arm {self.name}: its process ended (exit code {self.proc.exitcode})") from None
        if "error" in msg:
            raise RuntimeError(f"bench arm {self.name}: {msg['error']}")
        return msg

    def close(self) -> None:
        try:
            self.conn.send("stop")
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.kill()


def _arm_worker(conn, name: str, malloc: str, kw: dict) -> None:
    """An ``ArmProcess``'s process: builds its arm, warms it up, then runs a step per request."""
    try:
        set_allocator(malloc)
        arm = Arm(name, **kw)
        arm.ready()
        conn.send({"quantizers": arm.quantizers})
        while conn.recv() == "step":
            conn.send(arm.step())
    except Exception as e:  # noqa: BLE001 (reported to the parent, which names the arm)
        conn.send({"error": f"{type(e).__name__}: {e}"})


def aten_ops_per_linear(recipe: Recipe | None) -> int:
    """aten operations of one training call (forward and backward) of one MLP projection
    (576 → 1536, 256 rows), plain or quantized."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    holder = nn.Module()
    holder.layers = nn.ModuleList([nn.Module()])
    holder.layers[0].up_proj = nn.Linear(576, 1536, bias=False)
    session = None
    if recipe is not None:
        session = quantize(holder, recipe, modules=("up_proj",), skip_first=0, skip_last=0)
        session.start_step(0)
        session.begin_micro()
    x = torch.randn(256, 576, requires_grad=True)
    lin = holder.layers[0].up_proj
    lin(x).sum().backward()  # warm (first-call paths)
    if session is not None:
        session.start_step(1)
        session.begin_micro()
    with Count() as c:
        y = lin(x)
        y.sum().backward()
    return c.n


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hif8lab.torch.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="smollm2-135m")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--steps", type=int, default=1, help="measured steps per arm and round")
    p.add_argument("--rounds", type=int, default=12,
                   help="rounds; each times every arm (order alternating) and gives one ratio per arm")
    p.add_argument("--compile", action="store_true", help="also each arm under torch.compile")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="bf16: every arm under torch.autocast(device, torch.bfloat16)")
    p.add_argument("--malloc", choices=["system", "keep"], default="system",
                   help="keep: the process keeps freed memory (glibc mallopt), as a caching allocator does")
    p.add_argument("--one-process", action="store_true",
                   help="every arm in this process (one allocator state and thread pool for all), "
                        "not each in a process of its own")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        malloc = set_allocator(args.malloc)
    except OSError as e:
        p.error(f"--malloc {args.malloc}: {e}")
    result = run(args, args.malloc)
    result["malloc"] = malloc
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{args.shape}, batch {args.batch} × context {args.context}, {result['threads']} threads, torch "
          f"{torch.__version__}, {result['device']} ({args.dtype}); {result['quantizers']} quantizers; median of "
          f"{args.steps} steps, {args.rounds} rounds; allocator: {malloc}; processes: {result['processes']}")
    for name, a in result["arms"].items():
        lo, hi = a["ratio_range"]
        clo, chi = a["cpu_ratio_range"]
        print(f"  {name:16s} {a['step_s']:8.3f} s/step {a['tokens_per_s']:9.1f} tokens/s  "
              f"×{a['ratio_to_eager']:.2f} of eager [{lo:.2f}, {hi:.2f}]; process CPU {a['cpu_s']:.3f} s "
              f"×{a['cpu_ratio_to_eager']:.2f} [{clo:.2f}, {chi:.2f}]")
        print(f"  {'':16s} of it the kernel's {a['sys_s']:.3f} s; {a['page_faults']:,} page faults per step")
        if "verdict" in a:
            lo, hi = a["cpu_ratio_ci95"]
            print(f"  {'':16s} process CPU × eager, median of rounds: 95 % interval [{lo:.3f}, {hi:.3f}] "
                  f"(bootstrap over rounds); goal ≤ {a['goal']}: {a['verdict']}")
        if "quantizer_cpu_share" in a:
            print(f"  {'':16s} the quantizers' share of its step's process CPU: {100 * a['quantizer_cpu_share']:.1f} % "
                  f"(→ ×{a['overhead_from_share']:.3f} of the same step without them)")
    la = result["load_average"]
    print(f"  load average before {la['before'][0]}, after {la['after'][0]} (1 min)")
    c = result["collectives_per_micro_batch"]
    print(f"  amax collectives per micro-batch (amax_reduce=max, {c['quantizers']} quantizers): fused {c['fused']}, "
          f"one per call {c['per_call']}")
    ops = result["aten_ops_per_linear"]
    print(f"  aten ops per MLP projection, forward + backward: plain {ops['plain']}, "
          f"quantized {ops['qat']} (statistics on), {ops['qat-amax']} (statistics off)")
    return 0


def run(args, malloc: str = "system") -> dict:
    """The arms measured as ``args`` (the parsed options) say: one result dict. Each arm runs
    in a process of its own unless ``args.one_process``."""
    recipe = Recipe()  # the lab's defaults (the paper's recipe), read from the Rust core
    specs = [("eager", None), ("qat", recipe), ("qat-amax", Recipe(stats=False))]
    specs = [(n, r, False) for n, r in specs] + ([(n + "+compile", r, True) for n, r in specs] if args.compile else [])
    kw = dict(shape=args.shape, batch=args.batch, context=args.context, device=args.device, dtype=args.dtype)
    one_process = getattr(args, "one_process", False)
    arms = [Arm(n, recipe=r, compiled=c, **kw) if one_process else ArmProcess(n, malloc, recipe=r, compiled=c, **kw)
            for n, r, c in specs]
    try:
        for a in arms:
            a.ready()
        quantizers = arms[1].quantizers
        steps: Dict[str, List[List[dict]]] = {a.name: [] for a in arms}
        load_before = os.getloadavg()
        for r in range(args.rounds):
            order = arms if r % 2 == 0 else list(reversed(arms))
            for a in order:
                if not one_process:
                    time.sleep(0.05)  # the last arm's idle OpenMP workers stop spinning
                steps[a.name].append([a.step() for _ in range(args.steps)])
        load_after = os.getloadavg()
    finally:
        for a in arms:
            a.close()
    tokens = args.batch * args.context
    result = {
        "shape": args.shape, "batch": args.batch, "context": args.context, "threads": torch.get_num_threads(),
        "torch": torch.__version__, "device": str(torch.device(args.device)), "dtype": args.dtype,
        "device_name": torch.cuda.get_device_name(args.device) if torch.device(args.device).type == "cuda" else "cpu",
        "processes": "one" if one_process else "one per arm",
        "quantizers": quantizers, "rounds": args.rounds, "steps": args.steps,
        "arms": {},
        "aten_ops_per_linear": {"plain": aten_ops_per_linear(None), "qat": aten_ops_per_linear(recipe),
                                "qat-amax": aten_ops_per_linear(specs[2][1])},
    }

    def per_round(name: str, key: str) -> List[float]:
        return [statistics.median(m[key] for m in rnd) for rnd in steps[name]]

    base, cpu_base = per_round("eager", "wall"), per_round("eager", "cpu")
    for name in steps:
        times, cpu = per_round(name, "wall"), per_round(name, "cpu")
        ratios = [t / b for t, b in zip(times, base)]
        cpu_ratios = [t / b for t, b in zip(cpu, cpu_base)]
        result["arms"][name] = {
            "step_s": statistics.median(times), "tokens_per_s": tokens / statistics.median(times),
            "ratio_to_eager": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
            "cpu_s": statistics.median(cpu),
            "cpu_ratio_to_eager": statistics.median(cpu_ratios), "cpu_ratio_range": [min(cpu_ratios), max(cpu_ratios)],
            "cpu_ratio_ci95": median_ci(cpu_ratios),
            "sys_s": statistics.median(per_round(name, "sys")),
            "page_faults": int(statistics.median(per_round(name, "faults"))),
        }
        every = [m for rnd in steps[name] for m in rnd]
        if every[0]["quant"] is not None:
            # the same steps' own split: robust to what the machine does between arms
            share = statistics.median(m["quant"] / m["cpu"] for m in every if m["cpu"] > 0)
            result["arms"][name]["quantizer_cpu_share"] = share
            result["arms"][name]["overhead_from_share"] = 1 / (1 - share) if share < 1 else None
        if name in GOALS and goal_setting(args):
            goal = GOALS[name]
            lo, hi = result["arms"][name]["cpu_ratio_ci95"]
            result["arms"][name]["goal"] = goal
            result["arms"][name]["verdict"] = "met" if hi <= goal else "not met" if lo > goal else "inconclusive"
    result["load_average"] = {"before": [round(v, 2) for v in load_before], "after": [round(v, 2) for v in load_after]}
    result["collectives_per_micro_batch"] = collectives_per_micro(args.shape, args.device)
    return result


#: The overhead goals, process CPU time × eager (fixed before any figure was measured): with
#: every statistic of the trace, and with none.
GOALS = {"qat": 1.3, "qat-amax": 1.1}

#: The setting the goals were fixed for: SmolLM2-135M's shape, batch 2 × context 128, f32 on
#: the CPU, eager. Other settings are measured and printed, never judged (a larger batch
#: spreads the weights' fixed cost over more tokens).
GOAL_SETTING = {"shape": "smollm2-135m", "batch": 2, "context": 128, "dtype": "f32", "device": "cpu"}


def goal_setting(args) -> bool:
    """Whether ``args`` measure the setting the goals are about (``GOAL_SETTING``)."""
    return all(str(getattr(args, k)) == str(v) for k, v in GOAL_SETTING.items())


def median_ci(ratios: List[float], resamples: int = 4000, seed: int = 0) -> List[float]:
    """A 95 % interval of the median of the rounds' ratios: the percentile bootstrap over
    rounds (each round one paired ratio), seeded (the same rounds give the same interval)."""
    import random

    if len(ratios) < 2:
        return [ratios[0], ratios[0]] if ratios else [float("nan"), float("nan")]
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return [meds[int(0.025 * resamples)], meds[int(0.975 * resamples) - 1]]


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4


def set_allocator(mode: str) -> str:
    """``system``: nothing changed. ``keep``: glibc keeps what is freed (no block from mmap,
    the heap's top not handed back below 2 GiB, grown 256 MiB at a time); an error where the C
    library is not glibc. Returns the allocator in words."""
    if mode == "system":
        return "the C library's defaults"
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    if libc is None or not hasattr(libc, "mallopt"):
        raise OSError("needs glibc's mallopt (not found)")
    ok = [libc.mallopt(_M_MMAP_MAX, 0), libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1), libc.mallopt(_M_TOP_PAD, 2**28)]
    if not all(ok):
        raise OSError(f"mallopt refused a parameter ({ok})")
    return "glibc keeping freed memory (mallopt: M_MMAP_MAX 0, M_TRIM_THRESHOLD 2 GiB, M_TOP_PAD 256 MiB)"


def collectives_per_micro(shape: str, device: str) -> dict:
    """Amax collectives per micro-batch with ``amax_reduce="max"`` in steady state (after the
    cold start), fused and one per call, in a one-process gloo group (the count does not
    depend on the number of processes)."""
    import socket

    import torch.distributed as dist

    mine = not dist.is_initialized()
    if mine:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        out = {}
        for name, fuse in (("fused", True), ("per_call", False)):
            model = build(shape).to(device)
            session = quantize(model, Recipe(amax_reduce="max", fuse_amax=fuse, stats=False))
            x = torch.randint(0, model.config.vocab_size, (1, 9), device=device)
            counts = []
            for step in range(3):
                session.start_step(step)
                before = session.collectives
                model(input_ids=x, labels=x, use_cache=False).loss.backward()
                session.flush()
                counts.append(session.collectives - before)
            out[name] = counts[-1]
            out["quantizers"] = len(session.ids)
        return out
    finally:
        if mine:
            dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
