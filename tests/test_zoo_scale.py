"""The zoo at scale: GPT-3 and Megatron-LM size presets and their published parameter counts, building
without the evaluation limit where nothing is evaluated, and estimate_tasks against compiled steps."""
import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.limits import estimate_tasks
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


# ---- estimate_tasks counts what compile builds ----------------------------------------------------------

@pytest.fixture(scope="module")
def a100_x64():
    return A.load_hw("a100_x64")


@pytest.mark.parametrize("model, t, d, p, m", [
    ("transformer_block", 1, 2, 1, 2), ("transformer_block", 2, 1, 1, 3), ("transformer_block", 4, 2, 1, 2),
    ("transformer_block", 2, 2, 2, 2), ("transformer_block", 4, 1, 2, 1), ("gpt2", 2, 1, 2, 2),
])
def test_estimate_tasks_is_the_compiled_count_but_for_transfers_which_it_bounds(model, t, d, p, m, a100_x64):
    """Nodes on each rank that computes them, tensor-parallel all-reduce members, accumulations, data-parallel
    all-reduces and updates are counted exactly; pipeline transfers (none with p = 1) from above."""
    fwd = A.models.build(model, **{**A.models.sizes.SMALL[model], "heads": 4}, tensor_parallel=t)
    graph = A.training_graph(fwd, optimizer="momentum")  # optimizer state: per-step tasks per rank
    tasks = A.compile(graph, a100_x64, microbatches=m, data_parallel=d, pipeline_stages=p, tensor_parallel=t,
                      split=False, max_in_flight=m).tasks  # one plan: no search over windows or splits
    transfers = sum(task.kind == "transfer" for task in tasks)
    assert (transfers == 0) == (p == 1)
    assert estimate_tasks(graph, m, d, 1) == len(tasks) - transfers
    assert len(tasks) <= estimate_tasks(graph, m, d, p) <= estimate_tasks(graph, m, d, 1) + 4 * len(tasks)


@pytest.mark.parametrize("t, d, m, zero", [(2, 2, 2, 2), (2, 2, 2, 3)])
def test_estimate_tasks_bounds_a_zero_step_from_above(t, d, m, zero, a100_x64):
    """ZeRO's reduce-scatters and all-gathers are counted as if every parameter were sharded: exact at
    stages 1 and 2 where every update shards (transformer_block's do), an upper bound at stage 3 (a
    parameter read by forward nodes only is gathered once per micro-batch, not twice)."""
    fwd = A.models.build("transformer_block", **{**A.models.sizes.SMALL["transformer_block"], "heads": 4},
                         tensor_parallel=t)
    graph = A.training_graph(fwd, optimizer="adam")
    tasks = A.compile(graph, a100_x64, microbatches=m, data_parallel=d, tensor_parallel=t, zero=zero,
                      split=False, max_in_flight=m).tasks
    assert any(task.kind == "reduce_scatter" for task in tasks)
    if zero < 3:
        assert estimate_tasks(graph, m, d, 1, zero) == len(tasks)
    else:
        assert len(tasks) <= estimate_tasks(graph, m, d, 1, zero) <= 1.1 * len(tasks)


# ---- the SuperPOD-like machine ---------------------------------------------------------------------------

def test_the_superpod_is_128_dgx_a100_nodes_on_hdr_infiniband():
    """1,024 A100s as a100_like, 8 per node on NVSwitch, one 200 Gb/s HDR port per GPU between nodes."""
    pod, gpu, x64 = A.load_hw("a100_superpod"), A.load_hw("a100_like"), A.load_hw("a100_x64")
    assert pod.n_chips == 1024
    assert pod.chips[0].model_dump(exclude={"count"}) == gpu.chips[0].model_dump(exclude={"count"})
    scale_out = pod.interconnect.scale_out
    assert (scale_out.chips_per_node, scale_out.nics) == (8, "per_chip")
    # the rates NCCL reaches (the config's [NT]): 0.92 of HDR's 200 Gb/s, 0.8 of NVLink's 300 GB/s
    assert scale_out.bytes_per_cycle(pod.clock_hz) * pod.clock_hz == pytest.approx(0.92 * 200e9 / 8)
    assert pod.interconnect.bytes_per_cycle(pod.clock_hz) * pod.clock_hz == pytest.approx(0.8 * 300e9)
    assert pod.interconnect.model_dump() == x64.interconnect.model_dump()  # the same links, more nodes


def test_the_1t_machine_is_the_superpod_with_3072_chips():
    from accelsim.hw.overrides import parse_assignments

    pod = A.load_hw("a100_superpod")
    selene = A.load_hw("a100_superpod", overrides=parse_assignments(["chips.0.count=3072"]))
    assert selene.n_chips == 3072 and selene.n_chips // selene.interconnect.scale_out.chips_per_node == 384
    assert selene.chips[0].model_dump(exclude={"count"}) == pod.chips[0].model_dump(exclude={"count"})


def test_hw_show_prints_the_superpod(capsys):
    assert main(["hw", "show", "a100_superpod"]) == 0
    out = capsys.readouterr().out
    assert "a100_superpod" in out and "1,024 chips" in out


# ---- building at scale: each distinct node type is inferred once ------------------------------------------

def test_a_memoized_node_type_is_still_verified_against_its_node():
    """A node whose recorded shape differs from what its type infers is reported, memo or not."""
    import dataclasses

    from accelsim.graph import verify

    g = A.models.build("transformer_block", **A.models.sizes.SMALL["transformer_block"], tensor_parallel=2)
    verify(g)  # every type is memoized now
    node = next(n for n in g.nodes if n.op == "matmul")
    g.nodes[node.id] = dataclasses.replace(node, shape=(3, 3))
    with pytest.raises(A.GraphError, match=rf"%{node.id} matmul .*shape \(3, 3\) but the op registry infers"):
        verify(g)


def test_type_keys_tell_equal_values_of_different_types_apart():
    from accelsim.graph.type_memo import type_key

    one = type_key("sum", [((2, 3), "float32")], {"axes": (1,), "keepdims": False}, "float32")
    assert one == type_key("sum", [((2, 3), "float32")], {"axes": (1,), "keepdims": False}, "float32")
    assert one != type_key("sum", [((2, 3), "float32")], {"axes": (True,), "keepdims": False}, "float32")
    assert one != type_key("sum", [((2, 3), "float32")], {"axes": (1,), "keepdims": 0}, "float32")
    assert one != type_key("sum", [((2, 3.0), "float32")], {"axes": (1,), "keepdims": False}, "float32")


def test_a_refused_node_is_refused_each_time_with_its_own_id():
    g = A.Graph("g")
    x, w = g.input("x", (2, 3)), g.param("w", (4, 5))
    for _ in range(2):
        with pytest.raises(A.ShapeError, match=rf"matmul node %{len(g.nodes)}"):
            x @ w


def test_a_saved_schedule_of_a_model_too_large_to_evaluate_replays(tmp_path, capsys):
    """Its graph is rebuilt from the schedule's source without the evaluation limit; `check` still refuses it
    (by the bytes it would evaluate)."""
    too_large = ["--model", "gpt2", "--batch", "200", "--set", "layers=1", "--hw", "a100_like", "--inference"]
    with pytest.raises(A.ModelError, match="too large to evaluate"):
        A.models.build("gpt2", batch=200, layers=1)
    path = tmp_path / "big.json"
    assert main(["compile", *too_large, "-o", str(path)]) == 0
    assert main(["simulate", str(path), "--out", str(tmp_path / "plots")]) == 0
    assert "simulated (static)" in capsys.readouterr().out
    assert main(["check", str(path)]) == 1
    assert "would allocate about" in capsys.readouterr().err
