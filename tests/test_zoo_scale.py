"""The zoo at scale: GPT-3 and Megatron-LM size presets and their published parameter counts, building
without the evaluation limit where nothing is evaluated, and estimate_tasks against compiled steps."""
import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.models.transformer import GPT2_SIZES, gpt2_param_count

# Brown et al. 2020, Table 2.1: (n_params as named, n_layers, d_model, n_heads); trained at n_ctx 2048.
GPT3_TABLE = {
    "gpt3-125m": (125e6, 12, 768, 12), "gpt3-350m": (350e6, 24, 1024, 16), "gpt3-760m": (760e6, 24, 1536, 16),
    "gpt3-1.3b": (1.3e9, 24, 2048, 24), "gpt3-2.7b": (2.7e9, 32, 2560, 32), "gpt3-6.7b": (6.7e9, 32, 4096, 32),
    "gpt3-13b": (13e9, 40, 5140, 40), "gpt3-175b": (175e9, 96, 12288, 96),
}
# Narayanan et al. SC21, Table 1: (parameters in billions, attention heads, hidden size, layers).
MEGATRON_TABLE = {
    "megatron-1.7b": (1.7, 24, 2304, 24), "megatron-3.6b": (3.6, 32, 3072, 30),
    "megatron-7.5b": (7.5, 32, 4096, 36), "megatron-18.4b": (18.4, 48, 6144, 40),
    "megatron-39.1b": (39.1, 64, 8192, 48), "megatron-76.1b": (76.1, 80, 10240, 60),
    "megatron-145.6b": (145.6, 96, 12288, 80), "megatron-310.1b": (310.1, 128, 16384, 96),
    "megatron-529.6b": (529.6, 128, 20480, 105), "megatron-1t": (1008.0, 160, 25600, 128),
}


def trainable_count(g: A.Graph) -> int:
    return sum(int(np.prod(n.shape)) for n in g.params if n.trainable)


# ---- presets -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", sorted(GPT3_TABLE))
def test_gpt3_sizes_are_table_2_1_and_count_within_2_percent_of_the_name(size):
    named, layers, d_model, heads = GPT3_TABLE[size]
    preset = GPT2_SIZES[size]
    assert preset["layers"] == layers
    # two rows of Table 2.1 do not multiply out (d_model != n_heads x d_head 128): XL keeps d_model and
    # d_head (16 heads), 13B keeps n_heads and d_head (5120)
    if size == "gpt3-1.3b":
        assert (preset["d_model"], preset["heads"]) == (d_model, d_model // 128)
    elif size == "gpt3-13b":
        assert (preset["d_model"], preset["heads"]) == (heads * 128, heads)
    else:
        assert (preset["d_model"], preset["heads"]) == (d_model, heads)
    assert gpt2_param_count(size, seq=2048) == pytest.approx(named, rel=0.02)


@pytest.mark.parametrize("size", sorted(MEGATRON_TABLE))
def test_megatron_sizes_are_table_1_with_its_parameter_counts(size):
    billions, heads, hidden, layers = MEGATRON_TABLE[size]
    assert GPT2_SIZES[size] == {"layers": layers, "d_model": hidden, "heads": heads, "vocab": 51200, "seq": 2048}
    assert round(gpt2_param_count(size) / 1e9, 1) == billions


def test_the_gpt3_175b_count_is_narayanan_et_als():
    """Table 2 of Narayanan et al. trains GPT-3 175B as 174.6B parameters (vocabulary 51,200); with
    GPT-3's own 50,257 words it is 174.6B too."""
    assert round(gpt2_param_count("gpt3-175b", seq=2048, vocab=51200) / 1e9, 1) == 174.6
    assert round(gpt2_param_count("gpt3-175b", seq=2048) / 1e9, 1) == 174.6


@pytest.mark.parametrize("size", ["megatron-1.7b", "gpt3-1.3b"])
def test_a_large_preset_builds_the_counted_parameters(size):
    g = A.models.build("gpt2", size=size, layers=2, limits=None)
    assert trainable_count(g) == gpt2_param_count(size, layers=2, seq=g.source.options_dict()["seq"])
    assert g.by_name("wpe").shape[0] == GPT2_SIZES[size].get("seq", 1024)


def test_a_preset_seq_or_vocab_yields_to_an_explicit_option():
    g = A.models.build("gpt2", size="megatron-1.7b", layers=1, seq=16, vocab=64)
    assert g.by_name("wte").shape == (64, 2304) and g.by_name("wpe").shape == (16, 2304)
    assert trainable_count(g) == gpt2_param_count("megatron-1.7b", layers=1, seq=16, vocab=64)


# ---- the builder's evaluation limit applies only where something is evaluated --------------------------

def test_build_without_limits_makes_a_model_too_large_to_evaluate():
    with pytest.raises(A.ModelError, match="too large to evaluate"):
        A.models.build("gpt2", size="gpt3-175b", seq=2048)
    g = A.models.build("gpt2", size="gpt3-175b", seq=2048, limits=None)
    assert sum(n.name.endswith(".ln1.gamma") for n in g.params) == 96
    with pytest.raises(A.ModelError, match=r"limits=5 is invalid; expected a models.ModelLimits, or None"):
        A.models.build("gpt2", limits=5)


# gpt2 small at batch 20: each tensor under 2**31 elements, all together over 2**34 (tests/test_models.py)
TOO_LARGE_TO_EVALUATE = ["--model", "gpt2", "--batch", "20", "--hw", "a100_like"]


@pytest.mark.parametrize("argv", [["compile", "-o", "unused.json"], ["run", "--no-sim"]])
def test_compile_and_run_without_check_build_past_the_evaluation_limit(argv, capsys, tmp_path):
    """Nothing is evaluated, so the step is built and then refused by the task limit (set to 1 here)."""
    assert main(argv + TOO_LARGE_TO_EVALUATE + ["--max-tasks", "1"]) == 1
    err = capsys.readouterr().err
    assert "above the limit of 1" in err and "too large to evaluate" not in err


@pytest.mark.parametrize("argv", [["check"], ["run", "--no-sim", "--check"]])
def test_what_evaluates_keeps_the_evaluation_limit(argv, capsys):
    assert main(argv + TOO_LARGE_TO_EVALUATE) == 1
    err = capsys.readouterr().err
    assert "too large to evaluate" in err and "max_total_elements" in err
