#!/usr/bin/env python3
"""hif8lab's PyTorch reference for `scripts/bench-vs-torch.sh`: the same Llama model
(RMSNorm pre-norm, GQA attention with rotate-half RoPE, SwiGLU MLP, untied head), the same
AdamW (betas 0.9/0.95, eps 1e-8, decay on matrices and embeddings only, global-norm clip 1),
and the same QAT recipe as the `small` preset — HiF8 W8A8G8 fake quantization of the gate,
up and down projections of the middle blocks (the first ceil(3L/26) and last ceil(2L/26)
blocks stay high precision), per-tensor delayed scaling with the lab's default estimator —
done by the package's own `hif8lab.torch.quantize` (the codec and the delayed scaling held
bit for bit to the Rust reference by python/tests; no second implementation here). Needs
the package installed (`pip install ./python`, as scripts/test-python.sh does). Prints one
JSON object with tokens/s plain and QAT.

    python3 scripts/torch_reference.py [--threads 2] [--steps 10] [--shape small] [--dtype f32|bf16]
"""

import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

from hif8lab.torch import Recipe, quantize


def linear(cin, cout, std):
    """A bias-free linear with normal(0, std) weights (the lab's initialization)."""
    lin = torch.nn.Linear(cin, cout, bias=False)
    torch.nn.init.normal_(lin.weight, std=std)
    return lin


def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, m, layers):
        super().__init__()
        c, f, hd = m["d_model"], m["d_ff"], m["d_model"] // m["heads"]
        res = 0.02 / math.sqrt(2 * layers)
        self.heads, self.kv, self.hd = m["heads"], m["kv_heads"], hd
        self.n1 = torch.nn.Parameter(torch.ones(c))
        self.n2 = torch.nn.Parameter(torch.ones(c))
        self.q = linear(c, m["heads"] * hd, 0.02)
        self.k = linear(c, m["kv_heads"] * hd, 0.02)
        self.v = linear(c, m["kv_heads"] * hd, 0.02)
        self.o = linear(m["heads"] * hd, c, res)
        # Hugging Face's names, which hif8lab.torch.quantize places its quantizers by.
        self.gate_proj = linear(c, f, 0.02)
        self.up_proj = linear(c, f, 0.02)
        self.down_proj = linear(f, c, res)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        h = rmsnorm(x, self.n1)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        v = self.v(h).view(b, t, self.kv, self.hd).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.heads // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, c))
        h = rmsnorm(x, self.n2)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Model(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        L = m["layers"]
        self.wte = torch.nn.Parameter(torch.randn(m["vocab"], m["d_model"]) * 0.02)
        self.layers = torch.nn.ModuleList(Block(m, L) for i in range(L))
        self.nf = torch.nn.Parameter(torch.ones(m["d_model"]))
        # A tied head reads the embedding table (SmolLM2's layout).
        self.head = None if m.get("tie") else linear(m["d_model"], m["vocab"], 0.02)
        hd = m["d_model"] // m["heads"]
        inv = 10000.0 ** (-torch.arange(0, hd, 2).float() / hd)
        ang = torch.arange(m["context"]).float()[:, None] * inv[None, :]
        self.cos, self.sin = ang.cos(), ang.sin()

    def forward(self, x, y):
        h = self.wte[x]
        for b in self.layers:
            h = b(h, self.cos, self.sin)
        h = rmsnorm(h, self.nf)
        logits = h @ self.wte.t() if self.head is None else self.head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def tokens_per_s(m, t, qat, steps, autocast=False):
    torch.manual_seed(1)
    model = Model(m)
    session = None
    if qat:
        L = m["layers"]
        session = quantize(model, Recipe(), skip_first=math.ceil(3 * L / 26),
                           skip_last=math.ceil(2 * L / 26))
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=t["lr"], betas=(0.9, 0.95), eps=1e-8)
    b, c = t["batch"], m["context"]
    data = torch.randint(0, m["vocab"], (steps + 2, b, c + 1))
    for i in range(steps + 2):
        if i == 2:
            start = time.perf_counter()
        x, y = data[i, :, :-1], data[i, :, 1:]
        if session is not None:
            session.start_step(i)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if session is not None and i % 10 == 9:
            session.drain()  # the statistics read back, as a run folder's writer would
    return steps * b * c / (time.perf_counter() - start), loss.item()


# The shapes measured: the `small` preset, SmolLM2-135M (tied head, vocab 49,152) at the
# real-model grid's context and batch, and the 360 M Llama shape at the same (hif8lab: `bench train --preset small --set ...`, see
# scripts/bench-vs-torch.sh).
SHAPES = {
    "small": ({"vocab": 256, "d_model": 192, "layers": 8, "heads": 6, "kv_heads": 3,
               "d_ff": 512, "context": 128}, {"batch": 8, "lr": 1e-3}),
    "smollm2-135m": ({"vocab": 49152, "d_model": 576, "layers": 30, "heads": 9, "kv_heads": 3,
                      "d_ff": 1536, "context": 128, "tie": True}, {"batch": 2, "lr": 1e-5}),
    "smollm2-360m": ({"vocab": 49152, "d_model": 960, "layers": 32, "heads": 15, "kv_heads": 5,
                      "d_ff": 2560, "context": 128, "tie": True}, {"batch": 2, "lr": 1e-5}),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="small")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                    help="bf16: the forward under torch.autocast('cpu', torch.bfloat16) (the "
                         "lab's train.precision = \"bf16\")")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m, t = SHAPES[a.shape]
    bf16 = a.dtype == "bf16"
    plain, _ = tokens_per_s(m, t, False, a.steps, autocast=bf16)
    qat, loss = tokens_per_s(m, t, True, a.steps, autocast=bf16)
    params = sum(p.numel() for p in Model(m).parameters())
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "dtype": a.dtype, "parameters": params,
                      "tokens_per_s_plain": round(plain, 1), "tokens_per_s_qat": round(qat, 1),
                      "qat_overhead": round(plain / qat, 4), "final_loss_qat": loss}))


if __name__ == "__main__":
    main()
