"""The authors' settings as options: their torch-op fallback quantizer (`codec =
"authors-fallback"`), bf16 weights and AdamW moments, weight decay on every parameter, and
`--faithful` for all four."""

import json

import numpy as np
import pytest
import torch

from authors_reference import quant_hif8
from conftest import train
from hif8lab import codec
from hif8lab.torch import fakequant as tq
from hif8lab.torch.nn import Recipe

BF16 = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)


def differ(a, b):
    a, b = np.ascontiguousarray(a).view(np.uint32), np.ascontiguousarray(b).view(np.uint32)
    nan = ((a & 0x7FFFFFFF) > 0x7F800000) & ((b & 0x7FFFFFFF) > 0x7F800000)
    return ~((a == b) | nan)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_fallback_codec_is_the_authors_function(dtype):
    x = torch.from_numpy(BF16).to(dtype)
    mine = tq.authors_fallback_unscaled(x).float().numpy()
    theirs = quant_hif8(x, None, -1).float().numpy()
    assert not differ(mine, theirs).any()
    # through qdq_codec at a scale: Q(x·s)/s in f32
    s = 15.0 / 3.7
    y = torch.from_numpy(BF16)
    want = (quant_hif8(y * torch.tensor(s, dtype=torch.float32), None, -1) / torch.tensor(s)).numpy()
    assert not differ(tq.qdq_codec(y, s, "hif8", False, "authors-fallback").numpy(), want).any()


def test_where_the_fallback_differs_from_hif8():
    """Measured on every bf16 value at scale 1 (the table in docs/python.md): the same in
    HiF8's range [2⁻²², 2¹⁵), different above it (no overflow to Inf) and below it (tiny values
    kept as powers of two), and ±Inf becomes NaN."""
    lab = codec.qdq(BF16, "hif8", 1.0, False)
    fb = tq.qdq_codec(torch.from_numpy(BF16), 1.0, "hif8", False, "authors-fallback").numpy()
    d = differ(lab, fb)
    mag, fin = np.abs(BF16), np.isfinite(BF16)
    inside = fin & (mag >= 2.0 ** -22) & (mag < 2.0 ** 15)
    assert inside.sum() == 9472 and not (d & inside).any()
    assert (d & fin & (mag >= 2.0 ** 15)).sum() == 28736
    assert (d & fin & (mag > 0) & (mag < 2.0 ** -22)).sum() == 16383
    assert int(d.sum()) == 45121
    assert np.isnan(fb[BF16 == np.inf]).all() and np.isinf(lab[BF16 == np.inf]).all()
    big = np.float32(1e6)
    assert np.isfinite(tq.qdq_codec(torch.tensor([big]), 1.0, "hif8", False, "authors-fallback").numpy()).all()


def test_recipe_checks_the_codec():
    assert Recipe(codec="authors-fallback").codec == "authors-fallback"
    with pytest.raises(ValueError, match="codec"):
        Recipe(codec="fast")
    with pytest.raises(ValueError, match="HiF8"):
        Recipe(codec="authors-fallback", format="e4m3", target=448.0)


def test_faithful_trains_in_bf16_with_the_fallback_and_decay_on_every_parameter(tmp_path, corpus):
    out = tmp_path / "run"
    train(out, corpus, "--faithful", "--steps", "3", "--context", "32", "--skip-first", "0", "--skip-last", "0",
          "--checkpoint-every", "3", "--tokenizer", "bytes")
    args = json.loads((out / "run.json").read_text())["args"]
    assert (args["weights_dtype"], args["optimizer_dtype"], args["decay_all"], args["codec"]) == \
        ("bf16", "bf16", True, "authors-fallback")
    ck = sorted((out / "checkpoints").glob("step_*"))[-1]
    model = torch.load(ck / "model.pt", map_location="cpu", weights_only=True)
    assert {t.dtype for t in model.values() if torch.is_floating_point(t)} == {torch.bfloat16}
    opt = torch.load(ck / "optimizer.pt", map_location="cpu", weights_only=True)
    # every parameter (norms too) in a group that decays
    assert all(g["weight_decay"] > 0 or not g["params"] for g in opt["param_groups"])
    decayed = sum(len(g["params"]) for g in opt["param_groups"] if g["weight_decay"] > 0)
    norms = [k for k in model if "norm" in k]
    params = [k for k in model if not k.endswith("._extra_state")]  # (the quantizers' state rides along)
    assert norms and decayed >= len(params) - 1  # (the tied head shares the embedding's tensor)
    moments = [v for st in opt["state"].values() for k, v in st.items() if k in ("exp_avg", "exp_avg_sq")]
    assert moments and {m.dtype for m in moments} == {torch.bfloat16}
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(np.isfinite(x["loss"]) for x in lines)


@pytest.mark.parametrize("flags, message", [
    (["--faithful", "--weights-dtype", "f32"], "cannot be combined"),
    (["--weights-dtype", "bf16", "--optimizer-dtype", "f32"], "moments in the parameters' dtype"),
    (["--codec", "authors-fallback", "--format", "e4m3"], "HiF8 quantizer"),
])
def test_impossible_combinations_are_refused_by_name(tmp_path, corpus, flags, message):
    r = train(tmp_path / "run", corpus, "--steps", "1", *flags, check=False)
    assert r.returncode == 2 and message in r.stderr, r.stderr
