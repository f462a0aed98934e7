"""What a GPU team taking the recipe to many GPUs relies on: activation checkpointing leaves the
numerics alone, one amax collective per micro-batch, placement that names what it skips,
the scaling state inside the model's state_dict (device moves, meta init, copies)."""

import copy
import io
import socket
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from hif8lab.torch import QuantLinear, Recipe, quantize


def llama(layers=4, seed=0):
    import transformers as t

    cfg = t.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(seed)
    return t.LlamaForCausalLM(cfg)


def run_steps(model, session, steps=3, micro=2, seed=1):
    """``steps`` optimizer steps of ``micro`` micro-batches (SGD, so every bit of the
    gradients shows in the weights); returns the trace records and the gradients of the
    last step before its update."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    model.train()
    grads = None
    for step in range(steps):
        session.start_step(step)
        for _ in range(micro):
            x = torch.randint(0, 128, (2, 12), generator=g)
            model(input_ids=x, labels=x, use_cache=False).loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        opt.zero_grad()
    session.flush()
    return session.drain(), grads


def same_records(a, b):
    assert len(a) == len(b)
    for r, s in zip(a, b):
        assert {k: r[k] for k in ("step", "micro", "block", "module", "role", "amax", "est", "scale")} == \
               {k: s[k] for k in ("step", "micro", "block", "module", "role", "amax", "est", "scale")}
        assert r["shadow"] == s["shadow"] and r["overflow"] == s["overflow"]


RECIPE = Recipe(window=4, compile=False)


@pytest.mark.parametrize("how", ["hf-reentrant", "hf-non-reentrant", "torch-whole-model"])
def test_checkpointing_leaves_calls_scales_and_gradients_alone(how):
    plain = llama()
    s0 = quantize(plain, RECIPE, skip_first=1, skip_last=1)
    base_records, base_grads = run_steps(plain, s0)

    ck = llama()
    s1 = quantize(ck, RECIPE, skip_first=1, skip_last=1)
    if how.startswith("hf"):
        ck.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": how == "hf-reentrant"})
    else:
        inner = ck.forward

        def forward(*args, **kw):
            return checkpoint(inner, *args, use_reentrant=False, **kw)

        ck.forward = forward
    records, grads = run_steps(ck, s1)
    # the same calls (not twice as many), the same scales and amaxes
    assert len(records) == 3 * 2 * len(s1.ids)
    same_records(records, base_records)
    assert s1.bank.calls == s0.bank.calls
    # and the gradients bit for bit (f32)
    for a, b in zip(grads, base_grads):
        assert torch.equal(a, b)


def test_a_recompute_without_its_forward_is_refused():
    model = llama()
    session = quantize(model, RECIPE, skip_first=1, skip_last=1)
    session.start_step(0)
    lin = next(m for m in model.modules() if isinstance(m, QuantLinear))
    x = torch.randn(3, 32, requires_grad=True)
    y = torch.randn(3, 32, requires_grad=True)

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t.clone()

        @staticmethod
        def backward(ctx, g):
            lin(x)  # a forward call inside backward with nothing to replay
            return g

    with pytest.raises(RuntimeError, match="recomputed inside backward without a first forward"):
        Probe.apply(y).sum().backward()


# --- the CPU path's output memory --------------------------------------------------------


class Repeat(nn.Module):
    """One projection called ``calls`` times per forward (its quantizers as often)."""

    def __init__(self, calls: int):
        super().__init__()
        torch.manual_seed(3)
        self.calls = calls
        self.layers = nn.ModuleList([nn.Module()])
        self.layers[0].up_proj = nn.Linear(24, 24, bias=False)

    def forward(self, x):
        lin = self.layers[0].up_proj
        for _ in range(self.calls - 1):
            x = torch.tanh(lin(x))
        return lin(x)


def repeat_steps(reuse: bool, calls: int, together: bool, monkeypatch, steps=4):
    """Steps of two micro-batches, their backward each after its forward or (``together``)
    after both forwards (the first graph still holds its quantized operands while the second
    forward runs); returns the outputs, the gradients, per step where each quantizer's kept
    buffer lies, and the trace records."""
    import hif8lab.torch.session as session_mod

    if reuse:
        monkeypatch.undo()
    else:
        monkeypatch.setattr(session_mod, "_unshared", lambda buf: False)
    model = Repeat(calls)
    session = quantize(model, Recipe(window=4, compile=False), modules=("up_proj",), skip_first=0, skip_last=0)
    g = torch.Generator().manual_seed(5)
    outs, grads, where = [], [], []
    for step in range(steps):
        session.start_step(step)
        x0, x1 = torch.randn(6, 24, generator=g), torch.randn(6, 24, generator=g)
        y0 = model(x0)
        if not together:
            y0.square().sum().backward()
        y1 = model(x1)
        outs += [y0.detach().clone(), y1.detach().clone()]
        (y0.square().sum() + y1.sum() if together else y1.sum()).backward()
        grads.append(model.layers[0].up_proj.weight.grad.clone())
        model.zero_grad()
        where.append({q: b.data_ptr() for q, b in session._outs.items()})
    session.flush()
    return outs, grads, where, session.drain()


@pytest.mark.parametrize("calls,together", [(1, False), (2, False), (1, True), (2, True)])
def test_cpu_output_memory_is_reused_only_when_nothing_holds_it(monkeypatch, calls, together):
    """A CPU call writes its quantized operand into the memory its quantizer's last call
    wrote, unless anything still holds it (a second call in the same forward, a second
    micro-batch's forward while the first's graph waits for backward). Outputs, gradients
    and trace records equal a run that never reuses memory, bit for bit; with one call per
    micro-batch the memory is reused in steady state (the same addresses step after step)."""
    fresh = repeat_steps(False, calls, together, monkeypatch)
    reused = repeat_steps(True, calls, together, monkeypatch)
    for a, b in zip(fresh[0] + fresh[1], reused[0] + reused[1]):
        assert torch.equal(a, b)
    same_records(fresh[3], reused[3])
    assert len(reused[3]) == 4 * 2 * calls * 3
    if calls == 1 and not together:
        where = reused[2]
        assert len(where[-1]) == 3 and where[-1] == where[-2], "no buffer reused from one step to the next"


def test_free_buffers_lets_the_kept_memory_go():
    model = Repeat(1)
    session = quantize(model, Recipe(window=4, compile=False), modules=("up_proj",), skip_first=0, skip_last=0)
    for step in range(2):
        session.start_step(step)
        model(torch.randn(6, 24)).sum().backward()
    # A [6, 24], W [24, 24], G [6, 24] in f32
    assert session.free_buffers() == (6 * 24 + 24 * 24 + 6 * 24) * 4
    assert session.free_buffers() == 0
    session.start_step(2)
    model(torch.randn(6, 24)).sum().backward()
    assert len(session._outs) == 3


# --- fused amax reduction ------------------------------------------------------------------

@pytest.fixture
def one_rank_group():
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("layers", [4, 8])
def test_one_collective_per_micro_batch_whatever_the_depth(one_rank_group, layers):
    model = llama(layers)
    session = quantize(model, Recipe(window=4, compile=False, amax_reduce="max"), skip_first=1, skip_last=1)
    a_g = sum(1 for i in session.ids if i.role != "W")
    run_steps(model, session, steps=1, micro=1)  # the just-in-time cold start: each A and G call at once
    assert session.collectives == a_g
    before = session.collectives
    run_steps(model, session, steps=3, micro=2)
    # steady state: 3 steps × 2 micro-batches, one collective each (the last by run_steps' flush)
    assert session.collectives - before == 6
    per_call = llama(layers)
    s2 = quantize(per_call, Recipe(window=4, compile=False, amax_reduce="max", fuse_amax=False),
                  skip_first=1, skip_last=1)
    run_steps(per_call, s2, steps=1, micro=1)
    before = s2.collectives
    run_steps(per_call, s2, steps=3, micro=2)
    assert s2.collectives - before == 6 * a_g


def test_state_dict_runs_no_collective_and_keeps_the_queue(one_rank_group, monkeypatch):
    import torch.distributed as dist

    model = llama()
    session = quantize(model, Recipe(window=4, compile=False, amax_reduce="max"), skip_first=1, skip_last=1)
    run_steps(model, session, steps=2, micro=1)
    session.start_step(2)
    x = torch.randint(0, 128, (2, 12))
    model(input_ids=x, labels=x, use_cache=False).loss.backward()
    assert session._queued  # this micro-batch's A and G amaxes wait for the next one
    calls = []
    monkeypatch.setattr(dist, "all_reduce", lambda *a, **k: calls.append(a))
    sd = model.state_dict()  # as a Trainer saving on rank 0 alone would
    assert calls == []
    monkeypatch.undo()
    twin = llama(seed=3)
    s2 = quantize(twin, Recipe(window=4, compile=False, amax_reduce="max"), skip_first=1, skip_last=1)
    twin.load_state_dict(sd)
    assert len(s2._queued) == len(session._queued)
    session.flush()
    s2.flush()
    assert torch.equal(s2.bank.hist, session.bank.hist) and s2.bank.n == session.bank.n


def test_an_active_current_estimator_reduces_each_call(one_rank_group):
    model = llama()
    session = quantize(model, Recipe(estimator="current", compile=False, amax_reduce="max"),
                       skip_first=1, skip_last=1)
    a_g = sum(1 for i in session.ids if i.role != "W")
    run_steps(model, session, steps=2, micro=1)
    assert session.collectives == 2 * a_g


# --- placement -----------------------------------------------------------------------------

class Mlp(nn.Module):
    def __init__(self, fused: bool, d=16, f=24):
        super().__init__()
        if fused:
            self.gate_up_proj = nn.Linear(d, 2 * f, bias=False)
        else:
            self.gate_proj = nn.Linear(d, f, bias=False)
            self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)
        self.fused = fused

    def forward(self, x):
        if self.fused:
            g, u = self.gate_up_proj(x).chunk(2, dim=-1)
        else:
            g, u = self.gate_proj(x), self.up_proj(x)
        return x + self.down_proj(F.silu(g) * u)


class Toy(nn.Module):
    def __init__(self, fused: bool):
        super().__init__()
        self.layers = nn.ModuleList(Mlp(fused) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def one_projection(bias: bool = False, dtype=torch.float32):
    """One quantized up_proj (16 → 24) in block 0 with its session."""
    holder = nn.Module()
    holder.layers = nn.ModuleList([nn.Module()])
    holder.layers[0].up_proj = nn.Linear(16, 24, bias=bias).to(dtype)
    session = quantize(holder, RECIPE, modules=("up_proj",), skip_first=0, skip_last=0)
    return session, holder.layers[0].up_proj


def test_the_output_gradient_is_quantized_without_copying_the_output():
    """The forward makes no copy of the linear's output, a model may add to it in place, and
    the gradient quantized (role G) is the one the linear's output had (before that
    addition): dW = Q_G(dy)ᵀ · Q_A(x) at the trace's scales."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from hif8lab.torch.fakequant import qdq

    class Copies(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            # a copy as large as the output (5 × 24); the bank's few-element updates aside
            self.n += func in (torch.ops.aten.clone.default, torch.ops.aten.copy_.default,
                               torch.ops.aten._to_copy.default) and out.numel() == 5 * 24
            return out

    session, lin = one_projection()
    g = torch.Generator().manual_seed(4)
    for step in range(3):
        session.start_step(step)
        session.begin_micro()
        x = torch.randn(5, 16, generator=g) * 3
        w = torch.randn(5, 24, generator=g) * 1e-3
        with Copies() as c:
            y = lin(x)
        assert c.n == 0
        y.add_(1.0)  # in place on the quantized linear's output (as Falcon does)
        lin.weight.grad = None
        (y * w).sum().backward()
        rec = {r["role"]: r for r in session.drain()}
        gq = qdq(w, rec["G"]["scale"])
        xq = qdq(x, rec["A"]["scale"])
        assert not torch.equal(gq, w)  # the quantization shows in the gradient
        torch.testing.assert_close(lin.weight.grad, gq.t() @ xq, rtol=1e-6, atol=0)


@pytest.mark.parametrize("autocast", [False, True])
def test_a_quantized_linear_is_one_node_with_the_linears_gradients(autocast):
    """A training call is one autograd node between the input's and the parameters'
    gradients, and its gradients are the ones autograd gives the plain linear on the
    quantized operands with the quantized output gradient (straight through), bit for bit,
    in f32 and under bf16 autocast (the backward's products on the forward's casts)."""
    from hif8lab.torch.fakequant import qdq

    session, lin = one_projection(bias=True)
    g = torch.Generator().manual_seed(8)
    for step in range(3):
        session.start_step(step)
        session.begin_micro()
        x = (torch.randn(2, 5, 16, generator=g) * 3).requires_grad_()
        dy = torch.randn(2, 5, 24, generator=g) * 1e-2
        lin.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = lin(x)
        assert [type(f).__name__ for f, _ in y.grad_fn.next_functions if f is not None] == \
               ["AccumulateGrad"] * 3  # x, W and b: nothing between them and the one node
        y.backward(dy.to(y.dtype))
        rec = {r["role"]: r for r in session.drain()}
        xq = qdq(x.detach(), rec["A"]["scale"]).requires_grad_()
        wq = qdq(lin.weight.detach(), rec["W"]["scale"]).requires_grad_()
        b = lin.bias.detach().clone().requires_grad_()
        gq = qdq(dy.to(y.dtype).float(), rec["G"]["scale"]).to(y.dtype)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            ref = F.linear(xq, wq, b)
        ref.backward(gq)
        assert torch.equal(x.grad, xq.grad) and torch.equal(lin.bias.grad, b.grad)
        torch.testing.assert_close(lin.weight.grad, wq.grad, rtol=1e-6 if not autocast else 0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_operands_of_any_layout_are_read_as_their_values(dtype):
    """The CPU path reads an operand's own memory only where it is a contiguous f32 tensor;
    a transposed input, an expanded gradient (``y.sum()``'s: one element in memory) or a
    bf16 operand is read through a contiguous f32 copy: the recorded amaxes are the
    operands' own and the outputs their quantization, never what lies beyond them."""
    from hif8lab.torch.fakequant import qdq

    session, lin = one_projection(dtype=dtype)
    g = torch.Generator().manual_seed(6)
    for step in range(3):
        session.start_step(step)
        session.begin_micro()
        x = (torch.randn(16, 5, generator=g) * (step + 1)).to(dtype).t()  # not contiguous
        assert not x.is_contiguous()
        lin(x).sum().backward()  # the output's gradient: ones, expanded
        rec = {r["role"]: r for r in session.drain()}
        assert rec["A"]["amax"] == x.float().abs().max().item()
        assert rec["W"]["amax"] == lin.weight.float().abs().max().item()
        assert rec["G"]["amax"] == 1.0 and rec["G"]["nonfinite"] == 0
    xq = session.call(lin.quantizers["A"], x)
    assert torch.equal(xq.float(), qdq(x.float(), session.bank.scales[lin.quantizers["A"], session.active]))


def test_a_fused_projection_is_the_unfused_model():
    """The same quantizers, called in the same order on the same operands; only the fused
    GEMM's f32 summation order may differ (a few ulps), so values are compared to 1e-5."""
    torch.manual_seed(0)
    fused = Toy(True)
    plain = Toy(False)
    with torch.no_grad():
        for a, b in zip(fused.layers, plain.layers):
            gate, up = a.gate_up_proj.weight.chunk(2, dim=0)
            b.gate_proj.weight.copy_(gate)
            b.up_proj.weight.copy_(up)
            b.down_proj.weight.copy_(a.down_proj.weight)
    sf = quantize(fused, RECIPE, skip_first=0, skip_last=0)
    sp = quantize(plain, RECIPE, skip_first=0, skip_last=0)
    assert [str(i) for i in sf.ids] == [str(i) for i in sp.ids]
    assert [p.parts for p in sf.summary.placed][0] == (("gate", 24), ("up", 24))
    g = torch.Generator().manual_seed(3)
    opt_f = torch.optim.SGD(fused.parameters(), lr=1e-3)
    opt_p = torch.optim.SGD(plain.parameters(), lr=1e-3)
    for step in range(4):
        sf.start_step(step)
        sp.start_step(step)
        for _ in range(2):
            x = torch.randn(5, 16, generator=g)
            yf, yp = fused(x), plain(x)
            assert torch.isfinite(yf).all()
            torch.testing.assert_close(yf, yp, rtol=1e-5, atol=0)
            (yf ** 2).sum().backward()
            (yp ** 2).sum().backward()
        for a, b in zip(fused.layers, plain.layers):
            ga, gb = a.gate_up_proj.weight.grad, torch.cat([b.gate_proj.weight.grad, b.up_proj.weight.grad])
            torch.testing.assert_close(ga, gb, rtol=1e-5, atol=1e-7)
        opt_f.step()
        opt_p.step()
        opt_f.zero_grad()
        opt_p.zero_grad()
    rf, rp = sf.drain(), sp.drain()
    assert len(rf) == len(rp) == 4 * 2 * len(sf.ids)
    for r, s in zip(rf, rp):
        assert [r[k] for k in ("step", "micro", "block", "module", "role")] == \
               [s[k] for k in ("step", "micro", "block", "module", "role")]
        for k in ("amax", "est", "scale"):
            assert r[k] == pytest.approx(s[k], rel=1e-5)


def test_module_filter_fn_and_refusals_by_name():
    model = llama(4)
    session = quantize(model, RECIPE, module_filter_fn=lambda m, fqn: fqn == "model.layers.2.mlp.down_proj")
    assert [p.fqn for p in session.summary.placed] == ["model.layers.2.mlp.down_proj"]
    # the block's other MLP weights are named as left in high precision
    assert session.summary.left_high_precision == ["model.layers.2.mlp.gate_proj.weight",
                                                   "model.layers.2.mlp.up_proj.weight"]
    with pytest.raises(ValueError, match="quantized already"):
        quantize(model, RECIPE)
    # a name mapped by the filter; an unknown one refused naming the linear
    s2 = quantize(llama(4), RECIPE, module_filter_fn=lambda m, fqn: "o" if fqn.endswith("layers.1.self_attn.o_proj") else False)
    assert [str(i) for i in s2.ids] == ["block1.o.A", "block1.o.W", "block1.o.G"]
    with pytest.raises(ValueError, match="lm_head, which lies in no numbered block"):
        quantize(llama(4), RECIPE, module_filter_fn=lambda m, fqn: fqn == "lm_head")
    toy = Toy(False)
    toy.layers[0].router = nn.Linear(16, 4)
    with pytest.raises(ValueError, match="layers.0.router cannot be quantized .its name maps to none"):
        quantize(toy, RECIPE, module_filter_fn=lambda m, fqn: fqn.endswith("router"))
    with pytest.raises(ValueError, match="both map to block 1's module 'up'"):
        quantize(llama(4), RECIPE, module_filter_fn=lambda m, fqn: "up" if fqn.startswith("model.layers.1.mlp.") and isinstance(m, nn.Linear) else False)


def families():
    import transformers as t

    small = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return t, small


def test_phi3_fused_projections_are_quantized_whole():
    t, small = families()
    torch.manual_seed(0)
    model = t.Phi3ForCausalLM(t.Phi3Config(**small, pad_token_id=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing left behind: no warning
        session = quantize(model, RECIPE, skip_first=1, skip_last=1)
    assert session.summary.left_high_precision == []
    assert {i.module for i in session.ids} == {"gate", "up", "down"}
    assert len(session.ids) == 4 * 3 * 3
    s2 = quantize(t.Phi3ForCausalLM(t.Phi3Config(**small, pad_token_id=0)), RECIPE, modules=("qkv_proj",),
                  skip_first=0, skip_last=0)
    assert [p.parts for p in s2.summary.placed][0] == (("q", 32), ("k", 16), ("v", 16))
    x = torch.randint(0, 128, (2, 9))
    session.start_step(0)
    model(input_ids=x, labels=x).loss.backward()
    assert len(session.drain()) == len(session.ids)


def test_moe_experts_left_in_high_precision_are_named_and_warned():
    t, small = families()
    cfg = t.Qwen2MoeConfig(**{**small, "intermediate_size": 64}, moe_intermediate_size=32,
                           shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                           decoder_sparse_step=1, mlp_only_layers=[])
    torch.manual_seed(0)
    model = t.Qwen2MoeForCausalLM(cfg)
    with pytest.warns(UserWarning, match="left in high precision"):
        session = quantize(model, RECIPE, skip_first=1, skip_last=1)
    left = session.summary.left_high_precision
    assert left and all(".mlp." in n for n in left)
    assert any("experts" in n for n in left)


def test_opt_neox_style_mlps_and_refused_layouts():
    import transformers as t

    torch.manual_seed(0)
    opt = t.OPTForCausalLM(t.OPTConfig(vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=4,
                                       num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32))
    session = quantize(opt, RECIPE, skip_first=1, skip_last=1)
    assert [p.fqn.rsplit(".", 1)[-1] for p in session.summary.placed] == ["fc1", "fc2", "fc1", "fc2"]
    assert {i.module for i in session.ids} == {"up", "down"}
    neox = t.GPTNeoXForCausalLM(t.GPTNeoXConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                                 num_hidden_layers=4, num_attention_heads=4,
                                                 max_position_embeddings=64))
    s_neox = quantize(neox, RECIPE, skip_first=1, skip_last=1)
    assert [p.fqn.rsplit(".", 1)[-1] for p in s_neox.summary.placed] == ["dense_h_to_4h", "dense_4h_to_h"] * 2
    with pytest.raises(ValueError, match="interleaved per head"):
        quantize(t.GPTNeoXForCausalLM(neox.config), RECIPE, modules=("query_key_value",))
    falcon = t.FalconForCausalLM(t.FalconConfig(vocab_size=128, hidden_size=32, num_hidden_layers=4,
                                                num_attention_heads=4, ffn_hidden_size=64))
    s_falcon = quantize(falcon, RECIPE, skip_first=1, skip_last=1)  # blocks named transformer.h.N
    assert [(p.block, p.fqn.rsplit(".", 1)[-1]) for p in s_falcon.summary.placed] == \
        [(1, "dense_h_to_4h"), (1, "dense_4h_to_h"), (2, "dense_h_to_4h"), (2, "dense_4h_to_h")]
    x = torch.randint(0, 128, (2, 9))
    s_falcon.start_step(0)
    falcon(input_ids=x, labels=x).loss.backward()
    assert len(s_falcon.drain()) == len(s_falcon.ids) == 12
    gpt2 = t.GPT2LMHeadModel(t.GPT2Config(vocab_size=128, n_embd=32, n_layer=4, n_head=4, n_positions=64))
    with pytest.raises(ValueError, match="Conv1D"):
        quantize(gpt2, RECIPE, modules=("c_fc",), skip_first=0, skip_last=0)


# --- the scaling state travels with the model ------------------------------------------------

def trained(seed=0):
    model = llama()
    session = quantize(model, RECIPE, skip_first=1, skip_last=1)
    run_steps(model, session, steps=2)
    return model, session


def test_state_dict_carries_the_scaling_state():
    model, session = trained()
    sd = model.state_dict()
    extra = [k for k in sd if k.endswith("_extra_state")]
    assert len(extra) == 6 and all(sd[k].dtype == torch.uint8 for k in extra)
    fresh = llama(seed=5)
    s2 = quantize(fresh, RECIPE, skip_first=1, skip_last=1)
    fresh.load_state_dict(sd)
    assert torch.equal(s2.bank.hist, session.bank.hist) and torch.equal(s2.bank.scales, session.bank.scales)
    assert s2.bank.n == session.bank.n and s2.bank.pos == session.bank.pos and s2.qat
    # both continue identically
    r1, _ = run_steps(model, session, steps=1, seed=9)
    r2, _ = run_steps(fresh, s2, steps=1, seed=9)
    same_records(r1, r2)
    # another recipe's state is refused by name
    other = llama()
    quantize(other, Recipe(window=8, compile=False), skip_first=1, skip_last=1)
    with pytest.raises(ValueError, match="scaling state: estimators"):
        other.load_state_dict(sd)


def test_save_pretrained_torch_save_and_deepcopy(tmp_path):
    from safetensors import safe_open

    model, session = trained()
    model.save_pretrained(tmp_path / "hf")
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as f:
        assert sum(k.endswith("_extra_state") for k in f.keys()) == 6
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    assert torch.equal(loaded.hif8lab_session.bank.hist, session.bank.hist)
    twin = copy.deepcopy(model)
    s2 = twin.hif8lab_session
    assert s2 is not session
    assert all(m.session is s2 for m in twin.modules() if isinstance(m, QuantLinear))
    calls = list(session.bank.calls)
    run_steps(twin, s2, steps=1)
    assert session.bank.calls == calls and s2.bank.calls != calls


def test_meta_device_build_then_to_empty():
    ref = llama()
    s_ref = quantize(ref, RECIPE, skip_first=1, skip_last=1)
    with torch.device("meta"):
        import transformers as t

        meta = t.LlamaForCausalLM(ref.config)
    s_meta = quantize(meta, RECIPE, skip_first=1, skip_last=1)
    assert s_meta.bank.device.type == "meta"
    meta.to_empty(device="cpu")
    assert s_meta.bank.device.type == "cpu"
    sd = {k: v for k, v in ref.state_dict().items() if not k.endswith("_extra_state")}
    meta.load_state_dict(sd, strict=False)
    meta.model.rotary_emb.inv_freq.copy_(ref.model.rotary_emb.inv_freq)
    same_records(run_steps(meta, s_meta)[0], run_steps(ref, s_ref)[0])


# --- the Hugging Face Trainer ----------------------------------------------------------------

class Tokens(torch.utils.data.Dataset):
    def __init__(self, n=48, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.rows = torch.randint(0, 128, (n, 12), generator=g)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def hf_train(out, steps, resume=False, trace=None):
    from transformers import Trainer, TrainingArguments

    from hif8lab.torch import HfCallback

    model = llama()
    session = quantize(model, Recipe(window=4, warmup_steps=2, compile=False), skip_first=1, skip_last=1)
    args = TrainingArguments(output_dir=str(out), max_steps=steps, per_device_train_batch_size=2,
                             gradient_accumulation_steps=3, learning_rate=1e-3, lr_scheduler_type="constant",
                             save_steps=3, save_strategy="steps", logging_steps=1, report_to=[], use_cpu=True,
                             seed=0, data_seed=0, dataloader_num_workers=0, disable_tqdm=True)
    cb = HfCallback(session, trace=trace, flush_every=2)
    trainer = Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[cb])
    trainer.train(resume_from_checkpoint=resume or None)
    return model, session, cb


def test_hf_trainer_switches_qat_on_and_resumes_with_the_scaling_state(tmp_path):
    from hif8lab.scaling import read_trace

    model, session, cb = hf_train(tmp_path / "a", 6, trace=tmp_path / "a" / "trace.jsonl")
    # QAT from step 2 on (warmup 2); 3 micro-batches a step; every quantizer each micro-batch
    records = read_trace(str(tmp_path / "a" / "trace.jsonl")).records
    steps = sorted({r["step"] for r in records})
    assert steps == [2, 3, 4, 5]
    assert len(records) == 4 * 3 * len(session.ids)
    assert sorted({r["micro"] for r in records}) == [0, 1, 2]
    assert sorted(cb.counts) == steps and all(c["overflow"] == 0 for c in cb.counts.values())
    # the checkpoint at step 3 holds the scaling state; a resumed run ends where the whole one did
    ckpt = tmp_path / "a" / "checkpoint-3"
    assert ckpt.is_dir()
    import shutil

    shutil.copytree(ckpt, tmp_path / "b" / "checkpoint-3")
    resumed, s2, _ = hf_train(tmp_path / "b", 6, resume=True)
    assert torch.equal(s2.bank.hist, session.bank.hist) and torch.equal(s2.bank.scales, session.bank.scales)
    assert s2.bank.n == session.bank.n and s2.bank.calls == session.bank.calls
    for (n, a), (_, b) in zip(model.named_parameters(), resumed.named_parameters()):
        assert torch.equal(a, b), n


# --- torch.compile ---------------------------------------------------------------------------

def test_a_whole_llama_compiles_with_qat_without_hitting_the_recompile_limit():
    """The session's bookkeeping is not traced (one graph break per quantizer call), the
    quantizer's ops see one flat detached operand (compiled once): a compiled model trains
    and records what the eager one does; the recompiles are counted."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        model = llama(4)
        session = quantize(model, Recipe(window=4), skip_first=1, skip_last=1)
        twin = llama(4)
        s_twin = quantize(twin, Recipe(window=4, compile=False), skip_first=1, skip_last=1)
        compiled = torch.compile(model)
        g = torch.Generator().manual_seed(0)
        for step in range(3):
            session.start_step(step)
            s_twin.start_step(step)
            x = torch.randint(0, 128, (2, 12), generator=g)
            a = compiled(input_ids=x, labels=x, use_cache=False).loss
            b = twin(input_ids=x, labels=x, use_cache=False).loss
            a.backward()
            b.backward()
            assert a.item() == pytest.approx(b.item(), rel=1e-5)
        recompiles = sum(counters["recompiles"].values()) if "recompiles" in counters else 0
    assert recompiles <= 8, dict(counters["recompiles"])
    ra, rb = session.drain(), s_twin.drain()
    assert len(ra) == len(rb) == 3 * len(session.ids)
    for r, s in zip(ra, rb):
        assert (r["block"], r["module"], r["role"]) == (s["block"], s["module"], s["role"])
        assert r["scale"] == pytest.approx(s["scale"], rel=1e-5)
