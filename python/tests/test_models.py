"""quantize() on the Hugging Face decoder families it names: Llama, Mistral, Qwen2."""

import pytest
import torch

from hif8lab.torch import QuantLinear, Recipe, quantize


def family(name):
    import transformers as t

    common = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=7,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cls, cfg = {"llama": (t.LlamaForCausalLM, t.LlamaConfig), "mistral": (t.MistralForCausalLM, t.MistralConfig),
                "qwen2": (t.Qwen2ForCausalLM, t.Qwen2Config)}[name]
    torch.manual_seed(0)
    return cls(cfg(**common))


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2"])
def test_the_papers_placement_trains(name):
    model = family(name)
    session = quantize(model, Recipe(window=4))
    quantized = [n for n, m in model.named_modules() if isinstance(m, QuantLinear)]
    # 7 blocks: the first 3 and the last 2 stay high precision → blocks 3 and 4
    assert quantized == [f"model.layers.{b}.mlp.{p}" for b in (3, 4) for p in ("gate_proj", "up_proj", "down_proj")]
    assert len(session.ids) == 6 * 3
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randint(0, 128, (2, 17))
    losses = []
    for step in range(4):
        session.start_step(step)
        out = model(input_ids=x, labels=x)  # transformers shifts the labels itself
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(out.loss.item())
    records = session.drain()
    assert len(records) == 4 * 18
    assert {r["role"] for r in records} == {"A", "W", "G"}
    assert losses[-1] < losses[0]


def test_attention_projections_and_an_unknown_name():
    model = family("llama")
    session = quantize(model, Recipe(roles=("A", "W")), modules=("q_proj", "o_proj"), skip_first=0, skip_last=0)
    assert len(session.ids) == 7 * 2 * 2
    assert {i.module for i in session.ids} == {"q", "o"}
    with pytest.raises(ValueError, match="lm_head"):
        quantize(family("llama"), Recipe(), modules=("lm_head",))
    with pytest.raises(ValueError, match="nothing to quantize"):
        quantize(family("llama"), Recipe(), skip_first=4, skip_last=3)
