#!/usr/bin/env python3
"""hif8lab's PyTorch reference for `scripts/bench-vs-torch.sh`: the same Llama model
(RMSNorm pre-norm, GQA attention with rotate-half RoPE, SwiGLU MLP, untied head), the same
AdamW (betas 0.9/0.95, eps 1e-8, decay on matrices and embeddings only, global-norm clip 1),
and the same QAT recipe as the `small` preset — HiF8 W8A8G8 fake quantization of the gate,
up and down projections of the middle blocks (the first ceil(3L/26) and last ceil(2L/26)
blocks stay high precision), per-tensor delayed scaling with max_window(64) and target 15 —
emulated in eager PyTorch. Prints one JSON object with tokens/s plain and QAT.

    python3 scripts/torch_reference.py [--threads 2] [--steps 10] [--preset-json JSON]
"""

import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

HIF8_OVERFLOW = 40960.0


def hif8_qdq(x):
    """HiF8 round trip (SPEC.md §1): 3 mantissa bits for |exponent| <= 3, 2 for 4..7, 1 for
    8..15, ties away from zero; below 2^-15 powers of two only (the exponent rounded, 0
    below 2^-23.5); |x| >= 40960 -> inf. Checked against `hif8lab codec qdq` on sample
    values; exact ties in the power-of-two range are not emulated (a speed reference)."""
    a = x.abs()
    l2 = torch.log2(a.clamp_min(2.0 ** -60))
    e = torch.floor(l2)
    ae = e.abs()
    mbits = torch.where(ae <= 3, 3.0, torch.where(ae <= 7, 2.0, 1.0))
    step = torch.exp2(e - mbits)
    q = torch.floor(a / step + 0.5) * step
    r = torch.round(l2)
    tiny = torch.where(r < -23, torch.zeros_like(a), torch.exp2(r))
    q = torch.where(e < -15, tiny, q)
    q = torch.where(q >= HIF8_OVERFLOW, torch.full_like(q, float("inf")), q)
    return torch.copysign(q, x)


class DelayedScale:
    """One quantizer's amax history (window 64) and the max_window estimator."""

    def __init__(self, window=64, target=15.0):
        self.history = []
        self.window = window
        self.target = target

    def __call__(self, x):
        amax = x.detach().abs().max().item()
        est = max(self.history) if self.history else amax
        self.history.append(amax)
        if len(self.history) > self.window:
            self.history.pop(0)
        scale = self.target / est if est > 0 else 1.0
        return hif8_qdq(x * scale) / scale


class QLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, qa, qw, qg):
        xq, wq = qa(x), qw(w)
        ctx.save_for_backward(xq, wq)
        ctx.qg = qg
        return xq @ wq.t()

    @staticmethod
    def backward(ctx, dy):
        xq, wq = ctx.saved_tensors
        g = ctx.qg(dy)
        dx = g @ wq
        dw = g.reshape(-1, g.shape[-1]).t() @ xq.reshape(-1, xq.shape[-1])
        return dx, dw, None, None, None


class Linear(torch.nn.Module):
    def __init__(self, cin, cout, std, quant):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(cout, cin) * std)
        self.q = (DelayedScale(), DelayedScale(), DelayedScale()) if quant else None

    def forward(self, x):
        if self.q is None:
            return x @ self.weight.t()
        return QLinearFn.apply(x, self.weight, *self.q)


def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, m, quant, layers):
        super().__init__()
        c, f, hd = m["d_model"], m["d_ff"], m["d_model"] // m["heads"]
        res = 0.02 / math.sqrt(2 * layers)
        self.heads, self.kv, self.hd = m["heads"], m["kv_heads"], hd
        self.n1 = torch.nn.Parameter(torch.ones(c))
        self.n2 = torch.nn.Parameter(torch.ones(c))
        self.q = Linear(c, m["heads"] * hd, 0.02, False)
        self.k = Linear(c, m["kv_heads"] * hd, 0.02, False)
        self.v = Linear(c, m["kv_heads"] * hd, 0.02, False)
        self.o = Linear(m["heads"] * hd, c, res, False)
        self.gate = Linear(c, f, 0.02, quant)
        self.up = Linear(c, f, 0.02, quant)
        self.down = Linear(f, c, res, quant)

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
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(torch.nn.Module):
    def __init__(self, m, qat):
        super().__init__()
        L = m["layers"]
        first, last = math.ceil(3 * L / 26), math.ceil(2 * L / 26)
        self.wte = torch.nn.Parameter(torch.randn(m["vocab"], m["d_model"]) * 0.02)
        self.blocks = torch.nn.ModuleList(
            Block(m, qat and first <= i < L - last, L) for i in range(L))
        self.nf = torch.nn.Parameter(torch.ones(m["d_model"]))
        # A tied head reads the embedding table (SmolLM2's layout).
        self.head = None if m.get("tie") else Linear(m["d_model"], m["vocab"], 0.02, False)
        hd = m["d_model"] // m["heads"]
        inv = 10000.0 ** (-torch.arange(0, hd, 2).float() / hd)
        ang = torch.arange(m["context"]).float()[:, None] * inv[None, :]
        self.cos, self.sin = ang.cos(), ang.sin()

    def forward(self, x, y):
        h = self.wte[x]
        for b in self.blocks:
            h = b(h, self.cos, self.sin)
        h = rmsnorm(h, self.nf)
        logits = h @ self.wte.t() if self.head is None else self.head(h)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def tokens_per_s(m, t, qat, steps):
    torch.manual_seed(1)
    model = Model(m, qat)
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
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
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
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    m, t = SHAPES[a.shape]
    plain, _ = tokens_per_s(m, t, False, a.steps)
    qat, loss = tokens_per_s(m, t, True, a.steps)
    params = sum(p.numel() for p in Model(m, False).parameters())
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "parameters": params,
                      "tokens_per_s_plain": round(plain, 1), "tokens_per_s_qat": round(qat, 1),
                      "qat_overhead": round(plain / qat, 4), "final_loss_qat": loss}))


if __name__ == "__main__":
    main()
