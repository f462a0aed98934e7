"""Pre-tokenizes a corpus once into memory-mapped shards that every rank of a run reads only
in part (``--data SHARDS`` of ``python -m hif8lab.torch.train``).

    python -m hif8lab.torch.tokenize --model ./SmolLM2-135M --data corpus.jsonl --out shards/

The shards hold exactly the stream ``train`` would tokenize from the same file (documents
joined by EOS; with ``--tokenizer bytes`` UTF-8 bytes joined by a newline), so a run draws the
same sequences either way. JSONL is streamed line by line (memory stays flat); a plain text
file is one document and is read whole. Prints a JSON summary: tokens, shards, bytes, the
writer's tokens/s, and the reader's: random windows of ``--context`` tokens read as a run
reads them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np

from .data import InputError, TokenShards, Windows, write_shards


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hif8lab.torch.tokenize", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True,
                   help="a Hugging Face folder (its tokenizer and vocabulary), or tiny:LAYERS,DIM,FF,HEADS,KV,VOCAB "
                        "(byte tokens)")
    p.add_argument("--data", required=True, help="a text file, or JSONL with a 'text' field per line")
    p.add_argument("--out", required=True, help="the shard folder (new or empty)")
    p.add_argument("--tokenizer", choices=["auto", "bytes"], default="auto",
                   help="auto: the model folder's tokenizer (bytes when it has none); bytes: UTF-8 bytes")
    p.add_argument("--shard-tokens", type=int, default=1 << 28, help="tokens per shard file (default 2^28)")
    p.add_argument("--batch-docs", type=int, default=256, help="documents per tokenizer call")
    p.add_argument("--context", type=int, default=2048, help="window length for the reader's rate")
    p.add_argument("--quiet", action="store_true")
    return p


def model_tokenizer(spec: str, kind: str):
    """(tokenizer or None, vocabulary size) without loading weights."""
    if spec.startswith("tiny:"):
        try:
            vocab = int(spec[5:].split(",")[5])
        except (IndexError, ValueError):
            raise InputError(f"--model {spec}: expected tiny:LAYERS,DIM,FF,HEADS,KV_HEADS,VOCAB") from None
        return None, vocab
    path = Path(spec)
    if not (path / "config.json").is_file():
        raise InputError(f"--model {path}: not a Hugging Face folder (no config.json)")
    try:
        vocab = json.loads((path / "config.json").read_text())["vocab_size"]
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{path / 'config.json'}: field 'vocab_size': missing") from None
    if not isinstance(vocab, int) or isinstance(vocab, bool) or vocab < 1:
        raise InputError(f"{path / 'config.json'}: field 'vocab_size': {vocab!r} is not a positive whole number")
    tok = None
    if kind == "auto" and any((path / f).exists() for f in ("tokenizer.json", "tokenizer.model")):
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(path)
    return tok, vocab


def reader_rate(folder: Path, context: int, windows: int = 4096, batch: int = 8) -> Optional[float]:
    """Tokens/s of random windows read from the shards as a run reads them (one process)."""
    shards = TokenShards(folder)
    if len(shards) < context + 2:
        return None
    w = Windows(shards, context, seed=0, source=str(folder))
    t0 = time.perf_counter()
    n = 0
    for step in range(windows // batch):
        n += w.batch(step, 0, 0, 1, batch, batch).numel()
    return n / max(time.perf_counter() - t0, 1e-9)


def main(argv: Optional[List[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        for name in ("shard_tokens", "batch_docs", "context"):
            if getattr(args, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1")
        tok, vocab = model_tokenizer(args.model, args.tokenizer)
        out = Path(args.out)
        t0 = time.perf_counter()
        index = write_shards(Path(args.data), tok, vocab, out, args.shard_tokens, args.batch_docs)
        seconds = time.perf_counter() - t0
        rate = reader_rate(out, args.context)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    summary = {"out": str(out), "tokens": index["tokens"], "shards": len(index["shards"]), "dtype": index["dtype"],
               "bytes": sum(s["tokens"] for s in index["shards"]) * np.dtype(index["dtype"]).itemsize,
               "seconds": round(seconds, 3), "write_tokens_per_s": round(index["tokens"] / max(seconds, 1e-9)),
               "read_tokens_per_s": None if rate is None else round(rate), "read_context": args.context,
               "tokenizer": index["tokenizer"]["name"]}
    if not args.quiet:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
