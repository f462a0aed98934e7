"""The data path for long runs (pre-tokenized, memory-mapped shards), the recipe's flags
generated from ``Recipe``, and sharded checkpoints resumed on another number of processes."""

import dataclasses
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import TINY, env, train
from hif8lab.torch.data import INDEX, InputError, TokenShards, Windows, read_corpus, tokenize, write_shards
from hif8lab.torch.nn import Recipe
from hif8lab.torch.recipe_cli import add_recipe_arguments, recipe_from_args, split_list


def tokenize_cli(*args):
    return subprocess.run([sys.executable, "-m", "hif8lab.torch.tokenize", *args], capture_output=True, text=True,
                          env=env())


@pytest.fixture
def jsonl(tmp_path):
    p = tmp_path / "docs.jsonl"
    rng = random.Random(0)
    with open(p, "w", encoding="utf-8") as f:
        for i in range(300):
            words = " ".join(rng.choice(["alpha", "beta", "γάμμα", "δ", "ε\u2028?", "zeta"]) for _ in range(rng.randint(0, 30)))
            f.write(json.dumps({"text": f"doc {i}: {words}"}) + "\n")
    return p


def test_shards_hold_the_stream_the_file_gives_across_shard_boundaries(tmp_path, jsonl):
    out = tmp_path / "shards"
    r = tokenize_cli("--model", TINY, "--data", str(jsonl), "--out", str(out), "--shard-tokens", "1000",
                     "--context", "32")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    expected = tokenize(read_corpus(jsonl), None, 256, str(jsonl))
    shards = TokenShards(out)
    assert summary["tokens"] == len(shards) == len(expected)
    assert summary["shards"] == -(-len(expected) // 1000) > 3
    assert summary["dtype"] == "uint16" and summary["read_tokens_per_s"] > 0
    np.testing.assert_array_equal(shards[0:len(shards)], expected)
    # every window a run draws is the same, including those that cross a shard's end
    a, b = Windows(shards, 32, 7, "s"), Windows(expected, 32, 7, "e")
    for step in range(40):
        np.testing.assert_array_equal(a.batch(step, 0, 1, 2, 3, 6).numpy(), b.batch(step, 0, 1, 2, 3, 6).numpy())
    crossing = shards[990:1010]
    np.testing.assert_array_equal(crossing, expected[990:1010])


def test_a_hf_tokenizer_stream_matches_and_a_mismatch_is_refused(tmp_path, jsonl):
    from transformers import PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {f"w{i}": i for i in range(200)}
    vocab.update({"[UNK]": 200, "</s>": 201})
    t = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]", eos_token="</s>")
    out = tmp_path / "hf"
    write_shards(jsonl, tok, 256, out, shard_tokens=333, batch_docs=7)
    np.testing.assert_array_equal(TokenShards(out)[0:10**9], tokenize(read_corpus(jsonl), tok, 256, "x"))
    from hif8lab.torch.data import open_tokens

    with pytest.raises(InputError, match="field 'tokenizer'"):
        open_tokens(out, None, 256, "x")
    with pytest.raises(InputError, match="field 'max_id'"):
        open_tokens(out, tok, 100, "x")


def test_a_run_from_shards_equals_the_run_from_the_file(tmp_path, corpus):
    shards = tmp_path / "shards"
    assert tokenize_cli("--model", TINY, "--data", str(corpus), "--out", str(shards), "--shard-tokens", "5000",
                        "--quiet").returncode == 0
    common = ["--steps", "4", "--context", "32", "--skip-first", "1", "--skip-last", "1", "--lr", "1e-3"]
    train(tmp_path / "a", corpus, *common)
    train(tmp_path / "b", shards, *common)
    la = [json.loads(x)["loss"] for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    lb = [json.loads(x)["loss"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert la == lb and len(la) == 4


def test_tokenize_refuses_and_leaves_nothing(tmp_path, jsonl):
    out = tmp_path / "o"
    out.mkdir()
    (out / "x").write_text("keep")
    r = tokenize_cli("--model", TINY, "--data", str(jsonl), "--out", str(out))
    assert r.returncode == 2 and "not empty" in r.stderr and (out / "x").read_text() == "keep"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": 1}\n')
    r = tokenize_cli("--model", TINY, "--data", str(bad), "--out", str(tmp_path / "n"))
    assert r.returncode == 2 and "bad.jsonl:2: field 'text'" in r.stderr
    assert not (tmp_path / "n").exists() and not list(tmp_path.glob(".n.tmp-*"))
    r = tokenize_cli("--model", "tiny:1,2", "--data", str(jsonl), "--out", str(tmp_path / "m"))
    assert r.returncode == 2 and "tiny:LAYERS" in r.stderr


def test_a_hostile_index_is_refused_naming_the_field(tmp_path, jsonl):
    good = tmp_path / "good"
    write_shards(jsonl, None, 256, good, shard_tokens=500)
    index = json.loads((good / INDEX).read_text())
    rng = random.Random(1)
    cases = [
        ("hif8lab_tokens", 2), ("dtype", "float32"), ("dtype", None), ("tokens", -1), ("tokens", "12"),
        ("tokens", index["tokens"] + 1), ("max_id", 1.5), ("vocab", 0), ("tokenizer", []), ("shards", {}),
        ("shards", [{"file": "../good/index.json", "tokens": 1}]), ("shards", [{"file": "nope.bin", "tokens": 1}]),
        ("shards", [{"file": "tokens-00000.bin", "tokens": 499}]), ("shards", [{"file": "tokens-00000.bin"}]),
        ("shards", [{"file": "tokens-00000.bin", "tokens": True}]),
    ]
    for k in range(40):  # random damage: a field deleted or replaced by a random value
        key = rng.choice(list(index))
        cases.append((key, rng.choice([None, -3, "x", [], {}, 1e300, True])))
    for key, value in cases:
        d = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        d.mkdir()
        for f in good.iterdir():
            if f.name != INDEX:
                os.link(f, d / f.name)
        bad = dict(index)
        if value is None:
            bad.pop(key)
        else:
            bad[key] = value
        (d / INDEX).write_text(json.dumps(bad))
        try:
            TokenShards(d)
        except InputError as e:
            assert str(d) in str(e), e
            continue
        # accepted: only where the damage did not change what is read
        assert key in ("source", "vocab", "tokenizer", "max_id") and bad != index, (key, value)
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / INDEX)
    with pytest.raises(InputError, match="not a regular file"):
        TokenShards(fifo)  # not opened: it would block
    zero = tmp_path / "zero"
    zero.mkdir()
    (zero / INDEX).symlink_to("/dev/zero")
    with pytest.raises(InputError, match="not a regular file"):
        TokenShards(zero)
    (tmp_path / "trunc").mkdir()
    (tmp_path / "trunc" / INDEX).write_bytes((good / INDEX).read_bytes()[:40])
    with pytest.raises(InputError, match="not readable JSON"):
        TokenShards(tmp_path / "trunc")


# --- the recipe's flags ---------------------------------------------------------------------

def test_every_recipe_field_has_a_flag_and_round_trips():
    import argparse

    p = argparse.ArgumentParser()
    add_recipe_arguments(p)
    dests = {a.dest for a in p._actions}
    assert {f.name for f in dataclasses.fields(Recipe)} <= dests
    args = p.parse_args(["--margin", "1", "--cold-start", "te", "--shadow", "most_recent,holt(0.3,0.1,0.9)",
                         "--no-stats", "--no-fuse-amax", "--no-compile-quantizers", "--window", "16",
                         "--roles", "A,W", "--codec", "lab"])
    r = recipe_from_args(args)
    assert (r.margin, r.cold_start, r.stats, r.fuse_amax, r.compile, r.window, r.roles) == \
        (1, "te", False, False, False, 16, ("A", "W"))
    assert r.shadow == ("most_recent", "holt(0.3,0.1,0.9)")
    assert split_list("a, b(1,2),c") == ["a", "b(1,2)", "c"]
    defaults = recipe_from_args(p.parse_args(["--codec", "lab"]))
    assert dataclasses.replace(defaults, trace_every=1) == Recipe()  # only the CLI's trace default differs


def test_the_new_flags_reach_the_run(tmp_path, corpus):
    out = tmp_path / "run"
    train(out, corpus, "--steps", "2", "--context", "32", "--skip-first", "2", "--skip-last", "2", "--margin", "1",
          "--cold-start", "te", "--shadow", "most_recent,ema(0.5)", "--no-stats")
    recipe = json.loads((out / "run.json").read_text())["recipe"]
    assert (recipe["margin"], recipe["cold_start"], recipe["shadow"], recipe["stats"]) == \
        (1, "te", ["most_recent", "ema(0.5)"], False)
    r = train(tmp_path / "bad", corpus, "--steps", "2", "--cold-start", "later", check=False)
    assert r.returncode == 2 and "--cold-start" in r.stderr


def test_activation_checkpointing_from_the_command_line_changes_nothing(tmp_path, corpus):
    from hif8lab.scaling import read_trace

    common = ["--steps", "3", "--context", "32", "--skip-first", "1", "--skip-last", "1", "--lr", "1e-3",
              "--global-batch", "4"]
    train(tmp_path / "a", corpus, *common)
    train(tmp_path / "b", corpus, *common, "--activation-checkpointing")
    la = [json.loads(x)["loss"] for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    lb = [json.loads(x)["loss"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert la == lb
    ta = read_trace(tmp_path / "a" / "trace.jsonl").records
    tb = read_trace(tmp_path / "b" / "trace.jsonl").records
    assert len(ta) == len(tb) == 3 * 2 * 4 * 9 and ta == tb
