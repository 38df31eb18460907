"""gpt2's named sizes: GPT-2 small to xl and GPT-3-like 2.7B and 6.7B, their parameter counts, and the
errors of a size that cannot be built."""
import numpy as np
import pytest

import accelsim as A
from accelsim.models.transformer import GPT2_SIZES, gpt2_param_count


def trainable_count(g: A.Graph) -> int:
    return sum(int(np.prod(n.shape)) for n in g.params if n.trainable)


def test_sizes_are_gpt2s_and_gpt3s_published_shapes():
    """GPT-2's released hparams (n_layer, n_embd, n_head); GPT-3 Table 2.1 (n_layers, d_model, n_heads)."""
    shapes = {name: (s["layers"], s["d_model"], s["heads"]) for name, s in GPT2_SIZES.items()}
    assert {k: shapes[k] for k in ("small", "medium", "large", "xl", "gpt3-2.7b", "gpt3-6.7b")} == {
        "small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20),
        "xl": (48, 1600, 25), "gpt3-2.7b": (32, 2560, 32), "gpt3-6.7b": (32, 4096, 32)}
    # the other GPT-3 and Megatron-LM sizes: tests/test_zoo_scale.py


def test_gpt2s_defaults_are_the_small_size():
    opts = A.models.options("gpt2")
    assert opts["size"] == "small"
    assert {k: opts[k] for k in GPT2_SIZES["small"]} == GPT2_SIZES["small"]


@pytest.mark.parametrize("size", list(GPT2_SIZES))
def test_a_size_builds_its_layers_width_and_heads_and_records_them(size):
    g = A.models.build("gpt2", size=size, limits=None)  # shapes only: GPT-3 175B is too large to evaluate
    preset = GPT2_SIZES[size]
    assert g.by_name("wte").shape == (preset.get("vocab", 50257), preset["d_model"])
    assert sum(n.name.endswith(".ln1.gamma") for n in g.params) == preset["layers"]
    opts = g.source.options_dict()
    assert opts["size"] == size and {k: opts[k] for k in preset} == preset


@pytest.mark.parametrize("size", ["small", "medium"])
def test_the_analytic_count_is_the_built_graphs(size):
    assert gpt2_param_count(size) == trainable_count(A.models.build("gpt2", size=size))


def test_the_analytic_count_follows_overrides_seq_and_vocab():
    g = A.models.build("gpt2", size="medium", layers=2, seq=16, vocab=64)
    assert gpt2_param_count("medium", seq=16, vocab=64, layers=2) == trainable_count(g)
    g = A.models.build("gpt2", size="large", d_model=64, heads=4, layers=3, seq=8, vocab=32)
    assert gpt2_param_count("large", seq=8, vocab=32, layers=3, d_model=64) == trainable_count(g)


def test_published_parameter_counts():
    """With the tied LM head and 1024 positions, GPT-2 has 124,439,808 / 354,823,168 / 774,030,080 /
    1,557,611,200 parameters (Hugging Face's gpt2 checkpoints); GPT-3's 2.7B and 6.7B (n_ctx 2048)."""
    assert [gpt2_param_count(s) for s in ("small", "medium", "large", "xl")] == [
        124_439_808, 354_823_168, 774_030_080, 1_557_611_200]
    assert round(gpt2_param_count("gpt3-2.7b", seq=2048) / 1e9, 1) == 2.7
    assert round(gpt2_param_count("gpt3-6.7b", seq=2048) / 1e9, 1) == 6.7


def test_explicit_options_override_the_size_and_the_source_rebuilds_the_same_graph():
    g = A.models.build("gpt2", size="medium", layers=2, seq=8, vocab=32, batch=1)
    opts = g.source.options_dict()
    assert (opts["size"], opts["layers"], opts["d_model"], opts["heads"]) == ("medium", 2, 1024, 16)
    again = A.models.build("gpt2", **opts)
    assert again.dump() == g.dump() and again.source == g.source


def test_without_a_size_the_explicit_shape_is_recorded_with_the_default_size():
    g = A.models.build("gpt2", layers=2, d_model=16, heads=2, seq=8, vocab=32)
    assert g.source.options_dict()["size"] == "small"
    assert A.models.build("gpt2", **g.source.options_dict()).dump() == g.dump()


@pytest.mark.parametrize("opts, match", [
    ({"size": "huge"}, "option size='huge' is invalid; expected one of small, medium, large, xl, gpt3-125m"),
    ({"size": 3}, "option size=3 is invalid"),
    ({"size": "Medium"}, "option size='Medium' is invalid"),
    ({"size": "medium", "layers": 0}, "option layers=0 is invalid; expected an integer from 1 to 128"),
    ({"size": "medium", "heads": 12}, r"d_model=1024 must be divisible by heads=12 \(layers=24, d_model=1024 from "
                                      r"size='medium'; give an option explicitly"),
    ({"size": "xl", "tensor_parallel": 2}, r"tensor_parallel=2 must divide .*25 heads.* from size='xl'"),
    ({"size": "small", "d_model": 100}, r"d_model=100 must be divisible by heads=12 \(layers=12, heads=12 from "
                                        "size='small'"),
])
def test_a_size_that_cannot_be_built_says_why(opts, match):
    with pytest.raises(A.ModelError, match=match):
        A.models.build("gpt2", **opts)


def test_size_is_gpt2s_preset_not_other_models_image_size():
    assert A.models.build("superres", size=6).source.options_dict()["size"] == 6
    with pytest.raises(A.ModelError, match="option size='medium' is invalid; expected an integer"):
        A.models.build("superres", size="medium")


@pytest.mark.parametrize("kwargs, match", [
    ({"size": "huge"}, "unknown size 'huge'; known sizes: small, medium"),
    ({"layers": 0}, "layers=0 is invalid; expected a positive integer"),
    ({"d_model": True}, "d_model=True is invalid"),
    ({"seq": 2.0}, "seq=2.0 is invalid"),
])
def test_the_count_refuses_what_build_refuses(kwargs, match):
    with pytest.raises(A.ModelError, match=match):
        gpt2_param_count(**kwargs)
