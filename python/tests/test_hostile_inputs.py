"""Python arguments that used to compute silently wrong results are refused by name."""

import math

import numpy as np
import pytest
import torch

from hif8lab import codec
from hif8lab import scaling as rs
from hif8lab.torch import Recipe, quantize
from hif8lab.torch.fakequant import fake_quant, qdq


@pytest.mark.parametrize("scale", [float("nan"), 0.0, float("inf"), -1.0, 1e-46])
def test_a_scale_that_is_no_scale_is_refused(scale):
    with pytest.raises(ValueError, match="scale"):
        codec.qdq(np.ones(3, np.float32), scale=scale)
    with pytest.raises(ValueError, match="scale"):
        qdq(torch.ones(3), scale)
    with pytest.raises(ValueError, match="scale"):
        fake_quant(torch.ones(3), scale)


def test_integer_tensors_are_refused_not_overflowed():
    with pytest.raises(ValueError, match="floating-point"):
        qdq(torch.tensor([100000], dtype=torch.int32), 1.0)


@pytest.mark.parametrize("codes", [[256], [-1], [1.7], [0, 1, 2**40]])
def test_codes_out_of_range_are_refused_not_wrapped(codes):
    with pytest.raises(ValueError, match="0..=255"):
        codec.decode(codes)


def test_every_code_still_decodes():
    assert codec.decode(np.arange(256)).shape == (256,)
    assert np.array_equal(
        codec.decode(np.arange(256, dtype=np.uint8)), codec.decode(list(range(256))), equal_nan=True
    )


@pytest.mark.parametrize("field,value", [("window", 64.9), ("window", True), ("margin", 0.5),
                                         ("target", float("nan")), ("target", "15")])
def test_config_values_of_the_wrong_kind_name_their_field(field, value):
    with pytest.raises(ValueError, match=field):
        rs.ScalingConfig(**{field: value}).plan()
    with pytest.raises(ValueError, match=field):
        Recipe(**{field: value})


def test_an_empty_role_list_and_a_second_quantize_are_refused():
    with pytest.raises(ValueError, match="roles"):
        Recipe(roles=())
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    m = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                     num_hidden_layers=6, num_attention_heads=2,
                                     num_key_value_heads=1, max_position_embeddings=16))
    quantize(m, Recipe())
    with pytest.raises(ValueError, match="quantized already"):
        quantize(m, Recipe())
    assert not math.isnan(float(m(torch.zeros(1, 4, dtype=torch.long)).logits.detach().sum()))
