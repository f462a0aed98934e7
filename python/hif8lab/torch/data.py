"""The data of a run: the corpus as one token stream, and the lab's sampler over it.

A stream is either tokenized when the run starts (``--data`` a text or JSONL file: read whole,
fine for studies) or **pre-tokenized shards** written once by ``python -m hif8lab.torch.tokenize``
(``--data`` the shard folder): ``index.json`` and ``tokens-NNNNN.bin`` files of little-endian
``uint16`` (vocabularies up to 65,536) or ``uint32`` ids, memory-mapped, so a rank touches only
the pages of the sequences it draws and nothing is tokenized or held in memory at start. The
shards hold exactly the stream the file would give (documents joined by EOS, or UTF-8 bytes
joined by a newline), so a run draws the same sequences from either.

``index.json``::

    {"hif8lab_tokens": 1, "dtype": "uint16", "tokens": N, "max_id": M, "vocab": V,
     "tokenizer": {"kind": "bytes" | "hf", "name": ..., "fingerprint": ...},
     "source": {"path": ..., "bytes": ...},
     "shards": [{"file": "tokens-00000.bin", "tokens": n0}, ...]}
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, List, Optional

import numpy as np
import torch


class InputError(Exception):
    """Bad input: names the file or argument; exit status 2."""


INDEX = "index.json"
TOKENS_VERSION = 1
#: An index lists shards (a line each): 64 MiB is millions of shards.
MAX_INDEX_BYTES = 64 << 20


def read_corpus(path: Path) -> List[str]:
    if not path.is_file():
        raise InputError(f"--data {path}: no such file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: byte {e.start}: not UTF-8") from None
    if path.suffix == ".jsonl":
        docs = (_jsonl_text(path, i, line) for i, line in enumerate(text.splitlines(), 1))
        return [d for d in docs if d is not None]
    return [text]


def tokenize(docs: List[str], tok, vocab: int, source: str) -> np.ndarray:
    """One token stream: UTF-8 bytes (documents joined by a newline; the lab's ``bytes``
    tokenizer) without a model tokenizer, else the tokenizer's ids, documents joined by EOS."""
    ids: List[int] = []
    if tok is None:
        if vocab < 256:
            raise InputError(f"{source}: byte tokens need a vocabulary of at least 256, the model has {vocab}")
        return np.frombuffer("\n".join(docs).encode("utf-8"), dtype=np.uint8).astype(np.int64)
    else:
        eos = tok.eos_token_id if tok.eos_token_id is not None else 0
        for d in docs:
            ids.extend(tok(d, add_special_tokens=False)["input_ids"])
            ids.append(eos)
    return np.asarray(ids, dtype=np.int64)


def hash_u32(seed: int, index: np.ndarray) -> np.ndarray:
    """hif8lab_format::hash_u32 (a counter-based hash), vectorized over ``index``."""
    def lowbias32(x):
        x = x ^ (x >> np.uint32(16))
        x = x * np.uint32(0x7FEB352D)
        x = x ^ (x >> np.uint32(15))
        x = x * np.uint32(0x846CA68B)
        return x ^ (x >> np.uint32(16))

    with np.errstate(over="ignore"):
        s = np.uint32(seed & 0xFFFFFFFF)
        i = np.asarray(index, dtype=np.uint64).astype(np.uint32)
        return lowbias32(lowbias32(i ^ (s * np.uint32(0x9E3779B9))) + s)


class Windows:
    """Training sequences of context + 1 tokens at seeded offsets, the lab's sampler
    (hif8lab_train::data::Sampler): sequence g starts at hash_u32(seed, g) mod (tokens −
    context − 1). Step s, micro-batch m, process r, row i draw sequence
    g = s·G + (m·W + r)·b + i (G sequences a step, W processes, b rows a micro-batch), so the
    data depend only on the seed and the global batch, not on how the batch is split, and a
    one-process run draws the lab's sequence for the same text, tokenizer and seed."""

    def __init__(self, stream: np.ndarray, context: int, seed: int, source: str):
        if len(stream) < context + 2:
            raise InputError(f"{source}: {len(stream)} tokens; a run needs at least context + 2 = {context + 2}")
        self.stream, self.context = stream, context
        self.span = len(stream) - context - 1
        self.seed32 = (seed & 0xFFFFFFFF) ^ (seed >> 32)

    def batch(self, step: int, micro: int, rank: int, world: int, b: int, global_batch: int) -> torch.Tensor:
        g = step * global_batch + (micro * world + rank) * b + np.arange(b)
        starts = hash_u32(self.seed32, g).astype(np.int64) % self.span
        c = self.context
        rows = np.stack([self.stream[i:i + c + 1] for i in starts])
        return torch.from_numpy(rows)


# --- pre-tokenized shards ------------------------------------------------------------------

def iter_docs(path: Path) -> Iterator[str]:
    """The documents of a corpus file, streamed: JSONL line by line (a ``text`` field each; a
    line is what ends in ``\\n``), any other file as one document (read whole)."""
    if not path.is_file():
        raise InputError(f"--data {path}: no such file")
    if path.suffix != ".jsonl":
        yield from read_corpus(path)
        return
    offset = 0
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(f"{path}: byte {offset + e.start}: not UTF-8") from None
            offset += len(raw)
            doc = _jsonl_text(path, i, line)
            if doc is not None:
                yield doc


def _jsonl_text(path: Path, i: int, line: str) -> Optional[str]:
    """Line i of a JSONL corpus: its ``text`` field, None for a blank line; anything else is
    an input error naming the file and line."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{i}: not JSON ({e.msg})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        raise InputError(f"{path}:{i}: field 'text': missing or not a string")
    try:
        obj["text"].encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{path}:{i}: field 'text': not valid Unicode (a lone surrogate escape)") from None
    return obj["text"]


def tokenizer_fingerprint(tok) -> dict:
    """What a stream's tokenizer was: bytes, or a Hugging Face tokenizer's name and a hash of
    its vocabulary and EOS (the same ids ⇔ the same fingerprint, whatever folder it lies in)."""
    if tok is None:
        return {"kind": "bytes", "name": "bytes", "fingerprint": "bytes"}
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    h = hashlib.sha256(json.dumps([vocab, tok.eos_token_id], ensure_ascii=False).encode()).hexdigest()[:32]
    return {"kind": "hf", "name": str(getattr(tok, "name_or_path", "")), "fingerprint": h}


def write_shards(data: Path, tok, vocab: int, out: Path, shard_tokens: int = 1 << 28, batch_docs: int = 256,
                 progress=None) -> dict:
    """Tokenizes ``data`` into shards under ``out`` (written beside it, renamed into place at
    the end: a killed run leaves no half-written folder). Returns the index."""
    if shard_tokens < 1:
        raise InputError(f"--shard-tokens must be at least 1, got {shard_tokens}")
    if out.exists() and any(out.iterdir()):
        raise InputError(f"--out {out}: not empty (choose a new folder)")
    if tok is None and vocab < 256:
        raise InputError(f"{data}: byte tokens need a vocabulary of at least 256, the model has {vocab}")
    dtype = np.uint16 if vocab <= 1 << 16 else np.uint32
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=False)
    shards: List[dict] = []
    state = {"f": None, "n": 0}
    total = 0
    max_id = -1

    def emit(ids: np.ndarray) -> None:
        nonlocal total, max_id
        if len(ids) == 0:
            return
        max_id = max(max_id, int(ids.max()))
        ids = ids.astype(dtype)
        while len(ids):
            if state["f"] is None:
                name = f"tokens-{len(shards):05d}.bin"
                state["f"] = open(tmp / name, "wb")
                shards.append({"file": name, "tokens": 0})
                state["n"] = 0
            room = shard_tokens - state["n"]
            part, ids = ids[:room], ids[room:]
            state["f"].write(part.astype("<" + np.dtype(dtype).str[1:]).tobytes())
            state["n"] += len(part)
            shards[-1]["tokens"] = state["n"]
            total += len(part)
            if state["n"] == shard_tokens:
                state["f"].close()
                state["f"] = None
        if progress:
            progress(total)

    try:
        if tok is None:
            first = True
            for doc in iter_docs(data):
                chunk = doc.encode("utf-8") if first else b"\n" + doc.encode("utf-8")
                first = False
                emit(np.frombuffer(chunk, dtype=np.uint8))
        else:
            eos = tok.eos_token_id if tok.eos_token_id is not None else 0
            batch: List[str] = []

            def flush_batch():
                if batch:
                    enc = tok(batch, add_special_tokens=False)["input_ids"]
                    emit(np.fromiter((t for ids in enc for t in (*ids, eos)), dtype=np.int64))
                    batch.clear()

            for doc in iter_docs(data):
                batch.append(doc)
                if len(batch) >= batch_docs:
                    flush_batch()
            flush_batch()
        if state["f"] is not None:
            state["f"].close()
        if max_id >= vocab:
            raise InputError(f"{data}: token id {max_id} is outside the model's vocabulary of {vocab}")
        index = {"hif8lab_tokens": TOKENS_VERSION, "dtype": np.dtype(dtype).name, "tokens": total,
                 "max_id": max_id, "vocab": vocab, "tokenizer": tokenizer_fingerprint(tok),
                 "source": {"path": str(data), "bytes": data.stat().st_size}, "shards": shards}
        with open(tmp / INDEX, "w") as f:
            json.dump(index, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        if out.exists():
            out.rmdir()  # empty (checked above)
        os.replace(tmp, out)
        return index
    except BaseException:
        if state["f"] is not None:
            state["f"].close()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        raise


class TokenShards:
    """The shards of a folder as one read-only stream (``len``, slicing), memory-mapped."""

    def __init__(self, folder: Path):
        path = folder / INDEX
        # a regular file of bounded size (a FIFO or /dev/zero under that name is not read)
        if path.exists() and not path.is_file():
            raise InputError(f"{path}: not a regular file")
        if path.is_file() and path.stat().st_size > MAX_INDEX_BYTES:
            raise InputError(f"{path}: {path.stat().st_size} bytes; an index is at most {MAX_INDEX_BYTES}")
        try:
            index = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"--data {folder}: no {INDEX} (not a folder of `python -m hif8lab.torch.tokenize`)") from None
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise InputError(f"{path}: not readable JSON ({e})") from None
        if not isinstance(index, dict):
            raise InputError(f"{path}: not a JSON object")

        def field(name, kind, check=lambda v: True, what=""):
            v = index.get(name)
            if not isinstance(v, kind) or isinstance(v, bool) or not check(v):
                raise InputError(f"{path}: field '{name}': missing or invalid{what} (got {v!r:.80})")
            return v

        if index.get("hif8lab_tokens") != TOKENS_VERSION:
            raise InputError(f"{path}: field 'hif8lab_tokens': {index.get('hif8lab_tokens')!r}, this version reads "
                             f"{TOKENS_VERSION}")
        dtype = field("dtype", str, lambda v: v in ("uint16", "uint32"), " (uint16 or uint32)")
        total = field("tokens", int, lambda v: v >= 0, " (a count ≥ 0)")
        self.max_id = field("max_id", int, lambda v: v >= -1)
        self.vocab = field("vocab", int, lambda v: v >= 1)
        tokz = field("tokenizer", dict)
        self.tokenizer = {k: str(tokz.get(k, "")) for k in ("kind", "name", "fingerprint")}
        shards = field("shards", list)
        self.dtype = np.dtype(dtype).newbyteorder("<")
        self.parts: List[np.ndarray] = []
        starts = [0]
        for k, sh in enumerate(shards):
            if not isinstance(sh, dict) or not isinstance(sh.get("file"), str) or not isinstance(sh.get("tokens"), int) \
                    or isinstance(sh.get("tokens"), bool) or sh["tokens"] < 0:
                raise InputError(f"{path}: field 'shards[{k}]': expected {{\"file\": NAME, \"tokens\": COUNT}}")
            name = sh["file"]
            if "/" in name or "\\" in name or name in ("", ".", ".."):
                raise InputError(f"{path}: field 'shards[{k}].file': {name!r} is not a file name in the folder")
            f = folder / name
            if not f.is_file():
                raise InputError(f"{path}: field 'shards[{k}].file': {f} is missing")
            size = f.stat().st_size
            if size != sh["tokens"] * self.dtype.itemsize:
                raise InputError(f"{f}: {size} bytes, its index says {sh['tokens']} tokens of {dtype} "
                                 f"({sh['tokens'] * self.dtype.itemsize} bytes)")
            self.parts.append(np.memmap(f, dtype=self.dtype, mode="r") if size else np.zeros(0, self.dtype))
            starts.append(starts[-1] + sh["tokens"])
        if starts[-1] != total:
            raise InputError(f"{path}: field 'tokens': {total}, the shards hold {starts[-1]}")
        self.starts = np.asarray(starts, dtype=np.int64)
        self.total = total
        self.folder = folder

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, sl: slice) -> np.ndarray:
        start, stop, step = sl.indices(self.total)
        if step != 1:
            raise ValueError("TokenShards: only contiguous slices")
        out = []
        k = int(np.searchsorted(self.starts, start, side="right")) - 1
        pos = start
        while pos < stop and k < len(self.parts):
            lo = pos - self.starts[k]
            hi = min(stop, self.starts[k + 1]) - self.starts[k]
            out.append(np.asarray(self.parts[k][lo:hi]))
            pos = self.starts[k] + hi
            k += 1
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def open_tokens(data: Path, tok, vocab: int, source: str, lab_stream: bool = False):
    """The run's token stream: a shard folder (checked against the model's vocabulary and
    tokenizer) or a corpus file tokenized now. ``lab_stream``: a plain text file tokenized as
    the lab's trainer tokenizes it (the whole text, no EOS added after it), so that the same
    text gives the same stream, hence the same sequences, as ``hif8lab train`` draws."""
    if lab_stream:
        if data.is_dir() or data.suffix == ".jsonl":
            raise InputError(f"--lab-stream: --data {data} must be one plain text file (the lab's stream of it)")
        (text,) = read_corpus(data)
        if tok is None:
            return tokenize([text], None, vocab, source)
        return np.asarray(tok(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
    if data.is_dir():
        shards = TokenShards(data)
        if shards.max_id >= vocab:
            raise InputError(f"{data / INDEX}: field 'max_id': token id {shards.max_id} is outside the model's "
                             f"vocabulary of {vocab}")
        want = tokenizer_fingerprint(tok)
        if shards.tokenizer["fingerprint"] != want["fingerprint"]:
            raise InputError(f"{data / INDEX}: field 'tokenizer': the shards were tokenized with "
                             f"{shards.tokenizer['name'] or shards.tokenizer['kind']}, this run uses "
                             f"{want['name'] or want['kind']} (another vocabulary)")
        return shards
    return tokenize(read_corpus(data), tok, vocab, source)
