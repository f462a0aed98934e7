"""Continued pretraining with HiF8 QAT and delayed scaling, under torchrun (DDP or FSDP2).

    # one machine, 8 GPUs, the paper's recipe:
    torchrun --nproc_per_node 8 -m hif8lab.torch.train --model ./SmolLM2-135M --data corpus.jsonl \\
        --out runs/max_window --estimator max_window --window 64 --warmup-steps 500 \\
        --lr 1e-5 --steps 10000 --micro-batch 4 --global-batch 512 --context 2048 --parallel fsdp
    # CPU, two processes (gloo): the same command with --nproc_per_node 2

The run folder is the lab's: ``metrics.jsonl`` (one line per step), ``trace.jsonl`` (rank 0's
quantizer calls in the lab's trace format; ``trace.rank<R>.jsonl`` for the other ranks),
``run.json`` (the resolved arguments, world size and recipe), ``checkpoints/step_N/`` (model,
optimizer and every rank's scaling state; ``--resume`` continues from the newest) and, with
``--out-hf DIR``, a Hugging Face folder that ``hif8lab eval``, ``probe`` and the app open.
``hif8lab-app --open OUT`` (or ``--watch OUT`` while it runs) draws it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from .. import scaling as rs
from ..scaling import TraceWriter, estimator_name
from .data import InputError, Windows, hash_u32, read_corpus, open_tokens, tokenize  # noqa: F401
from .nn import quantize
from .placement import MLP_MODULES
from .recipe_cli import add_recipe_arguments, recipe_from_args, roles_of


# --- arguments -----------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m hif8lab.torch.train",
        description=__doc__.split("\n\n")[0],
        epilog="Launch with torchrun for several processes: "
               "torchrun --nproc_per_node N -m hif8lab.torch.train ARGS (gloo on CPU, nccl on GPU). "
               "Without torchrun it runs as one process.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True,
                   help="a Hugging Face folder, a .gguf file (imported with `hif8lab import gguf`), "
                        "or tiny:LAYERS,DIM,FF,HEADS,KV_HEADS,VOCAB for a fresh small Llama")
    p.add_argument("--data", required=True, help="a text file, or JSONL with a 'text' field per line")
    p.add_argument("--lab-stream", action="store_true",
                   help="tokenize a plain text --data file as the lab's trainer does (the whole text, no EOS "
                        "appended), so the same text gives the same sequences as `hif8lab train` and `hif8lab grid`")
    p.add_argument("--tokenizer", choices=["auto", "bytes"], default="auto",
                   help="auto: the model folder's tokenizer (bytes when it has none); bytes: UTF-8 bytes")
    p.add_argument("--out", required=True, help="the run folder (one writer: rank 0)")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    p.add_argument("--out-hf", help="write the final model as a Hugging Face folder here")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--lr-warmup-frac", type=float, default=0.03, help="linear lr warmup, then cosine to 0")
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--micro-batch", type=int, default=2, help="sequences per process per micro-batch")
    p.add_argument("--global-batch", type=int, default=0,
                   help="sequences per optimizer step over all processes (default: micro-batch × processes); "
                        "reached by gradient accumulation")
    p.add_argument("--seed", type=int, default=0, help="data order (and a tiny model's initialization)")
    p.add_argument("--parallel", choices=["none", "ddp", "fsdp"], default="ddp",
                   help="with several processes: DDP or FSDP2 (fully_shard per decoder layer)")
    p.add_argument("--dtype", choices=["auto", "f32", "bf16"], default="auto",
                   help="autocast: bf16 on GPU, f32 on CPU by default")
    p.add_argument("--weights-dtype", choices=["f32", "bf16"], default=None,
                   help="the parameters' dtype (default f32; bf16: as the authors trained; AdamW's "
                        "moments follow the parameters' dtype)")
    p.add_argument("--optimizer-dtype", choices=["f32", "bf16"], default=None,
                   help="AdamW's moments' dtype; torch keeps them in the parameters' dtype, so it must "
                        "equal --weights-dtype (default: that)")
    p.add_argument("--decay-all", action="store_true",
                   help="weight decay on every parameter, norms included (the authors' AdamW); default: "
                        "matrices and embeddings only")
    p.add_argument("--faithful", action="store_true",
                   help="the authors' settings as published: --weights-dtype bf16 --optimizer-dtype bf16 "
                        "--decay-all --codec authors-fallback")
    p.add_argument("--no-qat", action="store_true", help="the high-precision baseline (no quantizers)")
    p.add_argument("--modules", default=",".join(MLP_MODULES),
                   help="the projections to quantize, by name (fused ones such as gate_up_proj as their parts)")
    p.add_argument("--skip-first", type=int, default=3)
    p.add_argument("--skip-last", type=int, default=2)
    p.add_argument("--flush-every", type=int, default=10, help="read statistics back and write them every N steps")
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--checkpoint-format", choices=["full", "sharded"], default="full",
                   help="full: model.pt and optimizer.pt gathered to rank 0; sharded: torch.distributed.checkpoint, "
                        "each rank writes its shards (use at scale; resumable on another number of processes)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (the quantizers' bookkeeping stays eager: one graph break per call)")
    p.add_argument("--activation-checkpointing", action="store_true",
                   help="recompute each decoder layer's activations in backward (transformers' gradient "
                        "checkpointing, non-reentrant); the quantizers replay the forward's scales")
    p.add_argument("--hif8lab", default=None, help="the hif8lab binary (for .gguf import); default: on PATH")
    p.add_argument("--quiet", action="store_true")
    add_recipe_arguments(p)
    return p


# --- model and data ------------------------------------------------------------------------

def tiny_llama(spec: str, seed: int) -> nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    try:
        layers, dim, ff, heads, kv, vocab = (int(v) for v in spec.split(","))
    except ValueError:
        raise InputError(f"--model tiny:{spec}: expected tiny:LAYERS,DIM,FF,HEADS,KV_HEADS,VOCAB") from None
    config = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=ff, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=4096,
                         rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=10000.0)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def import_gguf(path: Path, binary: Optional[str], rank: int) -> Path:
    """A .gguf file as a Hugging Face folder (hif8lab import gguf), cached beside the run."""
    cache = Path(os.environ.get("HIF8LAB_CACHE", Path.home() / ".cache" / "hif8lab")) / "torch-import"
    st = path.stat()
    out = cache / f"{path.stem}-{st.st_size}-{int(st.st_mtime)}"
    if rank == 0 and not (out / "config.json").exists():
        exe = binary or shutil.which("hif8lab")
        if exe is None:
            raise InputError(f"{path}: importing a .gguf needs the hif8lab binary (--hif8lab PATH or on PATH)")
        cache.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([exe, "import", "gguf", str(path), "--out", str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            raise InputError(f"{path}: hif8lab import gguf failed: {r.stderr.strip()}")
    if dist.is_initialized():
        dist.barrier()
    return out


def load_model(args, rank: int):
    """(model, tokenizer or None, source folder or None)."""
    if args.model.startswith("tiny:"):
        return tiny_llama(args.model[5:], args.seed), None, None
    path = Path(args.model)
    if not path.exists():
        raise InputError(f"--model {path}: no such file or folder")
    if path.suffix == ".gguf":
        path = import_gguf(path, args.hif8lab, rank)
    if not (path / "config.json").exists():
        raise InputError(f"--model {path}: not a Hugging Face folder (no config.json)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(path) if any(
        (path / f).exists() for f in ("tokenizer.json", "tokenizer.model")) else None
    return model, tok, path


def lr_at(step: int, steps: int, lr: float, warmup_frac: float) -> float:
    """The lab's schedule (hif8lab_train::trainer::lr_at): linear warmup, cosine to 0."""
    total = max(steps, 1)
    warm = max(math.ceil(warmup_frac * total), 1)
    if step < warm:
        factor = (step + 1) / warm
    else:
        progress = min((step - warm) / max(total - warm, 1), 1.0)
        factor = 0.5 * (1 + math.cos(math.pi * progress))
    return lr * factor


# --- files ---------------------------------------------------------------------------------

def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def append_lines(path: Path, lines: List[str]) -> None:
    if lines:
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
            f.flush()


def keep_steps_below(path: Path, step: int) -> None:
    """Drops the lines of a JSONL file (metrics, trace records) from ``step`` on, and a torn
    last line (a resumed run continues after its checkpoint)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "step" not in obj or obj["step"] < step:
            kept.append(line)
    write_atomic(path, "".join(line + "\n" for line in kept).encode())


def checkpoints(out: Path) -> List[Path]:
    """The finished checkpoints (with their done.json), newest first."""
    done = sorted((p for p in (out / "checkpoints").glob("step_*") if (p / "done.json").exists()),
                  key=lambda p: int(p.name.split("_")[1]))
    return done[::-1]


def newest_checkpoint(out: Path) -> Optional[Path]:
    done = checkpoints(out)
    return done[0] if done else None


# --- the run -------------------------------------------------------------------------------

class Stop:
    def __init__(self):
        self.signal = 0
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._handle)

    def _handle(self, signum, _frame):
        self.signal = signum


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        return run(args)
    except (InputError, ValueError) as e:
        # A value the recipe or the model refuses (ValueError) is the user's input too.
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def run(args) -> int:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(device)
    check_numbers(args)
    b = args.micro_batch
    global_batch = args.global_batch or b * world
    if global_batch % (b * world) != 0:
        raise InputError(f"--global-batch {global_batch} is not a multiple of micro-batch × processes ({b} × {world})")
    accum = global_batch // (b * world)
    try:
        estimator_name(args.estimator, args.window)
    except ValueError as e:
        raise InputError(f"--estimator: {e}") from None
    recipe = recipe_from_args(args)
    out = Path(args.out)
    if args.out_hf:
        check_out_hf(Path(args.out_hf), out)
    lock = None
    if rank == 0:
        if out.exists() and any(p.name != LOCK_FILE for p in out.iterdir()) and not args.resume:
            raise InputError(f"--out {out}: not empty (use --resume to continue the run there)")
        # One writer per run folder: the lock `hif8lab train` takes (flock on .lock).
        lock = take_lock(out)
        if args.resume:
            check_resume_flags(out, args, global_batch)
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    if dist.is_initialized():
        dist.barrier()

    model, tok, source = load_model(args, rank)
    vocab = model.config.vocab_size
    if args.tokenizer == "bytes":
        tok = None
    windows = Windows(open_tokens(Path(args.data), tok, vocab, args.data, args.lab_stream), args.context,
                      args.seed, args.data)
    model.to(device)
    if args.weights_dtype == "bf16":
        model.to(torch.bfloat16)
    session = None
    if not args.no_qat:
        session = quantize(model, recipe, modules=[m.strip() for m in args.modules.split(",") if m.strip()],
                           skip_first=args.skip_first, skip_last=args.skip_last)
    if args.activation_checkpointing:
        if not hasattr(model, "gradient_checkpointing_enable"):
            raise InputError("--activation-checkpointing: the model has no gradient_checkpointing_enable "
                             "(a Hugging Face model is needed)")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if world > 1 and args.parallel == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        wrapped = model
    elif world > 1 and args.parallel == "ddp":
        wrapped = nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None)
    else:
        wrapped = model
    if args.compile:
        wrapped = torch.compile(wrapped)
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 or args.decay_all]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2 and not args.decay_all]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    start = 0
    if args.resume and rank == 0:
        for p in (out / "checkpoints").glob("step_*"):
            if not (p / "done.json").exists():
                shutil.rmtree(p, ignore_errors=True)  # a checkpoint a killed process left half-written
    if dist.is_initialized():
        dist.barrier()
    if args.resume:
        # The newest checkpoint that reads whole; a damaged one (a truncated file beside its
        # done.json) is named and passed over for the one before it.
        for ckpt in checkpoints(out):
            try:
                start = load_checkpoint(ckpt, model, opt, session, rank, world)
                break
            except InputError as e:
                print(f"warning: {e}; resuming from an earlier checkpoint", file=sys.stderr)
    trace_path = out / ("trace.jsonl" if rank == 0 else f"trace.rank{rank}.jsonl")
    if rank == 0:
        keep_steps_below(out / "metrics.jsonl", start)
        write_atomic(out / "run.json", json.dumps({
            "args": vars(args), "world_size": world, "global_batch": global_batch, "grad_accum": accum,
            "recipe": session.recipe.as_dict() if session else None,
            "quantizers": [str(i) for i in session.ids] if session else [],
            "torch": torch.__version__, "device": str(device),
        }, indent=2).encode())
    writer = None
    if session is not None:
        if args.resume and trace_path.exists():
            keep_steps_below(trace_path, start)
            writer = TraceWriter(trace_path, {}, resume=True)
        else:
            writer = TraceWriter(trace_path, session.header({"rank": rank, "world_size": world}))
    autocast = torch.bfloat16 if (args.dtype == "bf16" or (args.dtype == "auto" and cuda)) else None
    stop = Stop()
    pending_metrics: List[dict] = []
    log = (lambda *a: None) if args.quiet or rank != 0 else (lambda *a: print(*a, flush=True))
    step = start
    t_last = time.perf_counter()
    while step < args.steps:
        lr = lr_at(step, args.steps, args.lr, args.lr_warmup_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        if session is not None:
            session.start_step(step)
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        for micro in range(accum):
            rows = windows.batch(step, micro, rank, world, b, global_batch).to(device)
            x, y = rows[:, :-1], rows[:, 1:]
            sync = micro == accum - 1 or not isinstance(wrapped, nn.parallel.DistributedDataParallel)
            ctx = wrapped.no_sync() if not sync else contextlib.nullcontext()
            with ctx:
                with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
                    logits = wrapped(input_ids=x, use_cache=False).logits
                loss = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))
                (loss / accum).backward()
            loss_sum += loss.detach().double()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        mean_loss = loss_sum / accum
        if dist.is_initialized():
            dist.all_reduce(mean_loss, op=dist.ReduceOp.SUM)
            mean_loss /= world
        step += 1
        stopping = _any_stop(stop, device)
        flush = step % args.flush_every == 0 or step == args.steps or stopping
        now = time.perf_counter()
        tokens = global_batch * args.context
        metric = {"step": step - 1, "loss": float(mean_loss), "lr": lr, "grad_norm": float(grad_norm),
                  "tokens_per_s": tokens / max(now - t_last, 1e-9),
                  "qat_enabled": bool(session is not None and session.qat)}
        t_last = now
        if not math.isfinite(metric["loss"]):
            raise RuntimeError(f"non-finite loss at step {step - 1} (overflowing quantizers: --saturate keeps "
                               "values finite)")
        pending_metrics.append(metric)
        if rank == 0:
            log(f"step {step - 1}: loss {metric['loss']:.4f} lr {lr:.3g} grad_norm {metric['grad_norm']:.3f}")
        if flush:
            if session is not None:
                session.flush()  # every rank: the fused amax reduction's last collective
            records = session.drain() if session is not None else []
            if writer is not None:
                writer.write(records)
            if rank == 0:
                append_lines(out / "metrics.jsonl", [json.dumps(m) for m in with_counts(pending_metrics, records)])
            pending_metrics = []
        if step % args.checkpoint_every == 0 or step == args.steps or stopping:
            save_checkpoint(out, step, model, opt, session, rank, world, args.checkpoint_format == "sharded")
            if stopping:
                log(f"stopped by signal {stop.signal} at step {step}; --resume continues")
                return 128 + (stop.signal or signal.SIGTERM)
    if args.out_hf:
        save_hf(args.out_hf, model, tok, source, rank)
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    return 0


def with_counts(metrics: List[dict], records: List[dict]) -> List[dict]:
    """Each step's metrics with the active estimator's calls above the estimate and
    elements overflowed (this process's traced calls of the step)."""
    above: dict = {}
    over: dict = {}
    for r in records:
        above[r["step"]] = above.get(r["step"], 0) + int(r["above_est"] > 0)
        over[r["step"]] = over.get(r["step"], 0) + r["overflow"]
    return [{**m, "calls_above_est": above.get(m["step"], 0), "overflow": over.get(m["step"], 0)} for m in metrics]


def _any_stop(stop: Stop, device) -> bool:
    """Whether any process was asked to stop (all agree, so all checkpoint together)."""
    flag = torch.tensor([1.0 if stop.signal else 0.0], device=device)
    if dist.is_initialized():
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() and not stop.signal:
        stop.signal = signal.SIGTERM
    return bool(flag.item())


def _full_states(model, opt):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    return get_state_dict(model, opt, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def _weights_only(sd: dict) -> dict:
    """A model state dict without the quantizers' ``_extra_state`` (the per-rank scaling files
    carry it; its serialized length varies, which DCP's fixed-shape reads cannot take)."""
    return {k: v for k, v in sd.items() if not k.endswith("._extra_state")}


def save_checkpoint(out: Path, step: int, model, opt, session, rank: int, world: int, sharded: bool = False) -> None:
    """checkpoints/step_N/: ``model.pt`` and ``optimizer.pt`` (full, gathered to rank 0) or,
    sharded, ``dcp/`` (torch.distributed.checkpoint: each rank writes its own shards, nothing
    gathered); ``scaling.rank<R>.pt`` (each rank's quantizer state); ``done.json`` written
    last (a checkpoint without it is ignored and removed on resume)."""
    d = out / "checkpoints" / f"step_{step}"
    if rank == 0:
        d.mkdir(parents=True, exist_ok=True)
    if dist.is_initialized():
        dist.barrier()
    if sharded:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, opt_sd = get_state_dict(model, opt)
        dcp.save({"model": _weights_only(model_sd), "optim": opt_sd}, checkpoint_id=str(d / "dcp"))
    else:
        model_sd, opt_sd = _full_states(model, opt)
        if rank == 0:
            _save(d / "model.pt", model_sd)
            _save(d / "optimizer.pt", opt_sd)
    if session is not None:
        _save(d / f"scaling.rank{rank}.pt", session.state_dict())
    if dist.is_initialized():
        dist.barrier()
    if rank == 0:
        write_atomic(d / "done.json", json.dumps({"step": step, "world_size": world,
                                                  "format": "sharded" if sharded else "full"}).encode())
        for old in sorted((out / "checkpoints").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))[:-2]:
            shutil.rmtree(old, ignore_errors=True)


def _save(path: Path, obj) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_checkpoint(d: Path, model, opt, session, rank: int, world: int) -> int:
    """Restores a checkpoint of either format, on any number of processes: model and
    optimizer resharded as needed; rank r takes the scaling state of rank r mod (the
    checkpoint's processes): exact with ``--amax-reduce max`` (every rank's state is the same),
    a stated approximation without (each rank's own amaxes have no exact continuation on
    another number of ranks; a warning says so)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict

    try:
        meta = json.loads((d / "done.json").read_text())
        saved_world = int(meta["world_size"])
        step = int(meta["step"])
        fmt = meta.get("format", "full")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{d / 'done.json'}: not a checkpoint record ({type(e).__name__})") from None
    if saved_world < 1 or fmt not in ("full", "sharded"):
        raise InputError(f"{d / 'done.json'}: field 'world_size' or 'format' is invalid")
    # weights_only everywhere: a checkpoint holds tensors and plain values, and a tampered
    # file must not run code when it is read. Every file is read before any state changes.
    scaling_sd = _load(d / f"scaling.rank{rank % saved_world}.pt") if session is not None else None
    if saved_world != world and session is not None and session.recipe.amax_reduce != "max" and rank == 0:
        print(f"warning: {d} was written by {saved_world} processes, resumed with {world}: rank r continues "
              f"rank r mod {saved_world}'s amax histories (each rank's own amaxes, --amax-reduce none)",
              file=sys.stderr)
    if fmt == "sharded":
        import torch.distributed.checkpoint as dcp

        model_sd, opt_sd = get_state_dict(model, opt)
        state = {"model": _weights_only(model_sd), "optim": opt_sd}
        try:
            dcp.load(state, checkpoint_id=str(d / "dcp"))
            set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"],
                           options=StateDictOptions(strict=False))
        except Exception as e:  # noqa: BLE001 (DCP raises several kinds for a checkpoint that does not fit)
            raise InputError(f"{d / 'dcp'}: the checkpoint does not fit this model "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    else:
        model_sd = _load(d / "model.pt")
        opt_sd = _load(d / "optimizer.pt")
        try:
            set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict=opt_sd,
                           options=StateDictOptions(full_state_dict=True, strict=True))
        except (RuntimeError, KeyError, ValueError) as e:
            raise InputError(f"{d / 'model.pt'}: the checkpoint does not fit this model "
                             f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if session is not None:
        session.load_state_dict(scaling_sd)
    return step


def _load(path: Path):
    """A checkpoint file, read with weights_only=True (tensors and plain values only); a file
    that is not one is an input error naming it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise InputError(f"{path}: missing from its checkpoint") from None
    except Exception as e:  # noqa: BLE001 (torch raises several kinds for a bad file)
        raise InputError(f"{path}: not a checkpoint this trainer wrote ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''})") from None


#: The flags that define a run: a resume must give the same values (the global batch is
#: compared as the sequences a step draws; the micro-batch may change with the processes).
RUN_DEFINING = ("model", "data", "lab_stream", "tokenizer", "estimator", "window", "target", "format", "saturate",
                "seed", "context", "roles", "modules", "skip_first",
                "skip_last", "no_qat", "warmup_steps", "amax_reduce", "lr", "weight_decay",
                "weights_dtype", "optimizer_dtype", "decay_all", "codec", "shadow", "margin", "cold_start")


def check_resume_flags(out: Path, args, global_batch: int = 0) -> None:
    """Refuses a resume whose run-defining flags differ from the run's (run.json), naming
    each, as `hif8lab train --resume` does; on another number of processes the sequences a
    step draws stay the same only with the same global batch."""
    path = out / "run.json"
    if not path.exists():
        return
    try:
        run = json.loads(path.read_text())
        recorded = run.get("args", {})
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(f"{path}: not readable JSON ({e})") from None
    given = vars(args)
    changed = [f"--{k.replace('_', '-')}: {recorded[k]!r} in the run, {given[k]!r} now"
               for k in RUN_DEFINING if k in recorded and k in given and recorded[k] != given[k]]
    if global_batch and isinstance(run.get("global_batch"), int) and run["global_batch"] != global_batch:
        changed.append(f"global batch: {run['global_batch']} sequences a step in the run, {global_batch} now "
                       f"(on another number of processes pass --global-batch {run['global_batch']})")
    if changed:
        raise InputError(f"--resume {out}: the run was started with other settings ({'; '.join(changed)}); "
                         "resume with the same flags, or start a new run with another --out")


#: The file that marks a folder `--out-hf` wrote (the only kind it replaces).
OUT_HF_MARK = ".hif8lab-out-hf"


def check_out_hf(path: Path, out: Path) -> None:
    """`--out-hf` never replaces a folder it did not write, nor the run folder or anything
    around it."""
    p, o = path.resolve(), out.resolve()
    if p == o or o in p.parents or p in o.parents:
        raise InputError(f"--out-hf {path}: the run folder {out} is or holds it (choose a folder of its own)")
    if path.exists():
        if not path.is_dir():
            raise InputError(f"--out-hf {path}: a file is there (choose a new folder)")
        if any(path.iterdir()) and not (path / OUT_HF_MARK).exists():
            raise InputError(f"--out-hf {path}: a folder this trainer did not write is there; it is "
                             "never replaced (choose a new folder, or remove it)")


#: The lock file of a run folder (hif8lab_train::lock's).
LOCK_FILE = ".lock"


def take_lock(out: Path):
    """The run folder's writer lock (an advisory flock on ``<out>/.lock``, the one the Rust
    CLI takes), held while the process lives; a second writer is refused naming the first."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    f = open(out / LOCK_FILE, "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        holder = f.read().strip()
        f.close()
        raise InputError(f"--out {out}: being written by another process"
                         f"{f' (pid {holder})' if holder else ''}; one writer per run folder") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def check_numbers(args) -> None:
    """The numeric flags' ranges, checked before anything runs (exit 2 naming the flag)."""
    for name in ("steps", "context", "micro_batch", "window", "checkpoint_every", "flush_every", "trace_every"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1")
    if args.global_batch < 0:
        raise InputError(f"--global-batch must be at least 0 (0: micro-batch × processes), got {args.global_batch}")
    for name in ("skip_first", "skip_last", "warmup_steps"):
        if getattr(args, name) < 0:
            raise InputError(f"--{name.replace('_', '-')} must be at least 0, got {getattr(args, name)}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise InputError(f"--lr must be a finite number > 0, got {args.lr}")
    if not (math.isfinite(args.target) and args.target > 0):
        raise InputError(f"--target must be a finite number > 0, got {args.target}")
    if not (math.isfinite(args.grad_clip) and args.grad_clip > 0):
        raise InputError(f"--grad-clip must be a finite number > 0, got {args.grad_clip}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise InputError(f"--weight-decay must be a finite number ≥ 0, got {args.weight_decay}")
    if not (math.isfinite(args.lr_warmup_frac) and 0 <= args.lr_warmup_frac < 1):
        raise InputError(f"--lr-warmup-frac must be in [0, 1), got {args.lr_warmup_frac}")
    resolve_fidelity(args)
    try:
        roles_of(args.roles)
    except ValueError as e:
        raise InputError(str(e)) from None


def resolve_fidelity(args) -> None:
    """``--faithful`` as its four settings, the defaults filled in, and the combinations torch
    cannot run refused (exit 2 naming the flags)."""
    if args.faithful:
        wanted = {"weights_dtype": "bf16", "optimizer_dtype": "bf16", "codec": "authors-fallback"}
        clash = [f"--{k.replace('_', '-')} {getattr(args, k)}" for k, v in wanted.items()
                 if getattr(args, k) not in (None, v)]
        if clash:
            raise InputError("--faithful sets --weights-dtype bf16, --optimizer-dtype bf16, --codec "
                             f"authors-fallback and --decay-all; it cannot be combined with {', '.join(clash)}")
        for k, v in wanted.items():
            setattr(args, k, v)
        args.decay_all = True
    args.weights_dtype = args.weights_dtype or "f32"
    args.codec = args.codec or "lab"
    args.optimizer_dtype = args.optimizer_dtype or args.weights_dtype
    if args.optimizer_dtype != args.weights_dtype:
        raise InputError(f"--optimizer-dtype {args.optimizer_dtype} with --weights-dtype {args.weights_dtype}: torch's "
                         "AdamW keeps its moments in the parameters' dtype (f32 moments for bf16 weights would "
                         "need a master copy, which the authors' code does not keep)")
    if args.codec == "authors-fallback" and args.format != "hif8":
        raise InputError(f"--codec authors-fallback is a HiF8 quantizer; --format is {args.format}")


def save_hf(path: str, model, tok, source: Optional[Path], rank: int) -> None:
    """The trained weights as a Hugging Face folder (the quantized linears are plain
    nn.Linear weights under the same names)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    # the plain model: the quantizers' state stays in the run's checkpoints
    sd = _weights_only(get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)))
    if rank != 0:
        return
    out = Path(path)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, state_dict=sd, safe_serialization=True)
    if tok is not None:
        tok.save_pretrained(tmp)
    (tmp / OUT_HF_MARK).write_text("written by hif8lab.torch.train --out-hf\n")
    # Checked again at the end: only a folder this trainer wrote is replaced.
    if out.exists() and any(out.iterdir()) and not (out / OUT_HF_MARK).exists():
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"--out-hf {out}: a folder this trainer did not write appeared there; it is "
                         "not replaced")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


if __name__ == "__main__":
    sys.exit(main())
