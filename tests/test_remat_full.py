"""Full recomputation (`full:K`, remat/budget.full_plan): each checkpointed segment re-runs its whole forward
before its backward, as torch.utils.checkpoint and Megatron-LM's --recompute-granularity full do."""
import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.compiler.hierarchy.layer_templates import recipe
from accelsim.compiler.planning.layers import find_layers
from accelsim.models.sizes import SMALL
from accelsim.ops.registry import get_op
from accelsim.remat import RematPolicy, activation_peak_bytes, layer_boundaries, parse_policy
from accelsim.schedule.options import StepOptions
from accelsim.source import graph_for

ACTIVATION_HEAVY = {"batch": 4, "seq": 64, "layers": 3, "d_model": 32, "heads": 4, "vocab": 32}


def _step(name: str, dtype: str = "float64", **opts) -> A.Graph:
    return A.training_graph(A.models.build(name, **{**SMALL[name], "dtype": dtype, **opts}))


def _flops(graph: A.Graph, node) -> int:
    return int(get_op(node.op).flops(node.shape, *(graph.nodes[i].shape for i in node.inputs), **node.attrs))


def _recomputed(graph: A.Graph) -> list:
    return [n for n in graph.nodes if n.phase == "backward" and n.name.endswith(".recompute")]


@pytest.mark.parametrize("name", ["gpt2", "mlp", "transformer_block", "resnet_block"])
def test_full_recomputation_gives_the_gradients_of_no_remat_and_of_selective_remat_in_float64(name):
    graph = _step(name)
    ref = A.evaluate(graph)
    selective = A.evaluate(A.rematerialize(graph, "every:1"))
    for policy in ("full:1", "full:2"):
        got = A.evaluate(A.rematerialize(graph, policy))
        assert set(got) == set(ref)
        for k in ref:
            assert np.array_equal(got[k], ref[k]) and np.array_equal(got[k], selective[k]), (policy, k)


def test_full_recomputes_every_gemm_of_the_checkpointed_layers_even_those_backward_never_reads():
    """GPT-2's attention output projection and second MLP GEMM are read by no backward node, so every:1 skips
    them; full:1 recomputes the forward GEMMs of every layer but the last (the LM head, not checkpointed)."""
    graph = _step("gpt2", layers=3)
    last = layer_boundaries(graph)[-1]
    tensor = [n for n in graph.nodes if n.phase == "forward" and get_op(n.op).category == "tensor"]
    checkpointed = sum(_flops(graph, n) for n in tensor if n.id < last)
    assert 0 < checkpointed < sum(_flops(graph, n) for n in tensor)  # the LM head is left out
    flops = {}
    for policy in ("every:1", "full:1"):
        out = A.rematerialize(graph, policy)
        flops[policy] = sum(_flops(out, n) for n in _recomputed(out) if get_op(n.op).category == "tensor")
    assert flops["full:1"] == checkpointed and flops["every:1"] < checkpointed


def test_recomputed_values_nobody_reads_stay_in_the_graph_and_are_scheduled_as_real_work():
    graph = _step("gpt2", "float32")
    out = A.rematerialize(graph, "full:1")
    read_by_backward = {i for n in graph.nodes if n.phase == "backward" for i in n.inputs}
    last = layer_boundaries(graph)[-1]
    unread_gemms = {n.name for n in graph.nodes if n.phase == "forward" and n.id < last and
                    get_op(n.op).category == "tensor" and n.id not in read_by_backward}
    recomputed = _recomputed(out)
    assert unread_gemms and unread_gemms <= {n.name.removesuffix(".recompute") for n in recomputed}
    assert any(n.id not in {i for m in out.nodes for i in m.inputs} for n in recomputed)  # dead, yet kept
    sched = A.compile(out, "groq_like", split=False, effort="fast")
    scheduled = {t.node for t in sched.tasks if t.kind == "node" and t.end > t.start}
    assert {n.id for n in recomputed} <= scheduled
    assert graph_for(sched).dump() == out.dump()  # the schedule's source replays the rewrite, unread values too
    assert A.check(sched, backend="numpy", graph=out, hw="groq_like").passed  # dead values are computed, in place


def test_full_lowers_the_activation_estimate_below_keeping_everything():
    graph = A.training_graph(A.models.build("gpt2", **ACTIVATION_HEAVY))
    assert activation_peak_bytes(A.rematerialize(graph, "full:1")) < activation_peak_bytes(graph)


def test_one_segment_has_nothing_to_checkpoint():
    graph = _step("gpt2")
    out = A.rematerialize(graph, "full:99")  # the only segment ends at the loss: not checkpointed
    assert out.dump() == graph.dump() and not _recomputed(out)


def test_full_reaches_the_step_options_and_the_layer_template_probes():
    assert parse_policy(" FULL:2 ") == RematPolicy("full", every=2) and RematPolicy("full", every=1).label == "full:1"
    assert StepOptions.of(remat="full:1").remat == "full:1"
    opts = {"size": "gpt3-175b", "batch": 1, "vocab": 51_200, "seq": 2048, "tensor_parallel": 8}
    found = recipe("gpt2", opts, {"optimizer": "adam"}, "full:1")
    assert found is not None and found.remat == "full:1"
    assert recipe("gpt2", opts, {"optimizer": "adam"}, "full:2") is None  # checkpoints span layers: whole graph
    probe = found.build(1)
    assert probe.passes[-1].name == "rematerialize" and _recomputed(probe)


@pytest.mark.parametrize("policy, match", [
    ("full:0", "full:0: expected a whole number of layers"), ("full:-1", "from 1 to 10000"),
    ("full:1e9", "from 1 to 10000"), ("full:x", "from 1 to 10000"), ("full:", "needs an argument"),
    ("full:NaN", "from 1 to 10000"), ("NaN", "unknown policy 'NaN'"), ("full", "needs an argument"),
    ("full:1000000000", "from 1 to 10000"),
])
def test_bad_full_policy_text_is_one_clear_error(policy, match):
    with pytest.raises(A.GraphError, match=match) as e:
        parse_policy(policy)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("every", [0, -1, 10**9, float("nan"), True, 1.0])
def test_a_full_policy_record_is_checked_when_made(every):
    with pytest.raises(A.GraphError, match="full:K: expected a whole number of layers"):
        RematPolicy("full", every=every)


@pytest.mark.parametrize("value", ["full:0", "full:x", "full:"])
def test_bad_full_values_exit_2_with_one_paragraph(value, capsys):
    try:
        code = main(["compile", "--remat", value])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and "argument --remat" in err and "Traceback" not in err


def test_full_1_recomputes_the_same_work_in_every_repeated_block_so_layer_templates_may_take_it():
    """compiler/hierarchy/layer_templates.py measures a few blocks and repeats them: under full:1 every middle
    block must recompute the same ops, and the last block its own (its MLP half ends at the unrecomputed head)."""
    out = A.rematerialize(_step("gpt2", layers=4), "full:1")
    layers = find_layers(out)
    per_block = [sorted(n.op for n in _recomputed(out) if layers.names[layers.layer_of[n.id]] == f"h{i}")
                 for i in range(4)]
    assert per_block[1] and per_block[1] == per_block[2]
    assert all(any(get_op(op).category == "tensor" for op in ops) for ops in per_block)


def test_full_re_runs_a_tensor_parallel_segments_all_reduces_and_keeps_its_numbers():
    """Megatron-LM's checkpointed layer re-runs its row-parallel linears' all-reduces; every:K keeps their
    results instead (recomputing only arithmetic). The embedding's all-reduce reads no recomputed value and
    stays kept (Megatron-LM does not recompute its embedding)."""
    graph = _step("gpt2", tensor_parallel=2)
    ref = A.evaluate(graph)
    recomputable_input = {n.id for n in graph.nodes if n.op not in ("vocab_embedding", "input", "parameter")}
    collective = {n.name for n in graph.nodes if n.phase == "forward" and get_op(n.op).collective is not None
                  and n.id < layer_boundaries(graph)[-1] and set(n.inputs) <= recomputable_input}
    assert len(collective) == 2 * 2  # two row-parallel linears per block, two blocks
    for policy, recomputes_collectives in (("full:1", True), ("every:1", False)):
        out = A.rematerialize(graph, policy)
        names = {n.name.removesuffix(".recompute") for n in _recomputed(out)}
        assert (collective <= names) == recomputes_collectives and (not collective & names) != recomputes_collectives
        got = A.evaluate(out)
        assert all(np.array_equal(got[k], ref[k]) for k in ref)


def test_graph_passes_after_full_recomputation_keep_its_unread_gemms():
    """CSE and fusion prune what they leave unused, never what was dead before them (passes/rebuild.py)."""
    out = A.rematerialize(_step("gpt2"), "full:1")

    def recomputed_gemm_flops(graph: A.Graph) -> int:
        return sum(_flops(graph, n) for n in graph.nodes
                   if n.name.endswith(".recompute") and get_op(n.op).category == "tensor")

    optimized = A.optimize(out, ["cse", "fuse_elementwise"])
    assert len(optimized.nodes) < len(out.nodes)  # the passes did rewrite something
    assert recomputed_gemm_flops(optimized) == recomputed_gemm_flops(out) > 0
