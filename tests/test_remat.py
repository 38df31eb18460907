"""Rematerialization: recomputed activations give bit-identical steps, lower the compiled peak memory at a
cost in makespan, make a step fit that did not, replay from saved schedules, and refuse bad policies."""
import json
import math

import numpy as np
import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.graph.verify import verify
from accelsim.limits import graph_flops
from accelsim.models.sizes import SMALL
from accelsim.ops.registry import OPS
from accelsim.remat import (NONDETERMINISTIC_OPS, REMAT_PASS, RematPolicy, activation_peak_bytes, cut_points,
                            layer_boundaries, layer_count, parse_policy)
from accelsim.schedule.io import read_schedule
from accelsim.source import graph_for


def _trains(name: str) -> bool:
    g = A.training_graph(A.models.build(name, **SMALL[name]))
    return any(n.phase == "backward" for n in g.nodes)


TRAINING_MODELS = [m for m in A.models.names() if _trains(m)]
# an activation-heavy GPT-2 step (activations ~10x its parameters) that compiles in well under a second
BIG_GPT2 = {"batch": 4, "seq": 64, "layers": 3, "d_model": 32, "heads": 4, "vocab": 32}


def _step(name: str, dtype: str = "float64", **opts) -> A.Graph:
    return A.training_graph(A.models.build(name, **{**SMALL[name], "dtype": dtype, **opts}))


def _policies(graph: A.Graph) -> list[str]:
    """Every kind of policy; the budget one at what checkpointing every layer reaches, so it must act."""
    reachable = activation_peak_bytes(A.rematerialize(graph, "every:1"))
    return ["none", "sqrt", "every:1", "every:2", f"budget:{reachable}"]


def _assert_same_step(got: dict, ref: dict) -> None:
    assert set(got) == set(ref)
    for k in ref:
        assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), k


# ---- numbers unchanged ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TRAINING_MODELS)
def test_every_policy_keeps_outputs_gradients_and_updates_bit_identical_in_float64(name):
    graph = _step(name)
    ref = A.evaluate(graph)
    for policy in _policies(graph):
        out = A.rematerialize(graph, policy)
        assert verify(out) is out
        _assert_same_step(A.evaluate(out), ref)


@pytest.mark.parametrize("name", ["mlp", "resnet_block", "gpt2"])
def test_every_policy_keeps_the_step_bit_identical_in_float32(name):
    graph = _step(name, "float32")
    ref = A.evaluate(graph)
    for policy in _policies(graph):
        _assert_same_step(A.evaluate(A.rematerialize(graph, policy)), ref)


def test_a_tensor_parallel_step_stays_exact_and_recomputes_on_each_nodes_rank():
    graph = _step("gpt2", tensor_parallel=2)
    out = A.rematerialize(graph, "every:1")
    _assert_same_step(A.evaluate(out), A.evaluate(graph))
    recomputed = [n for n in out.nodes if n.name.endswith(".recompute")]
    by_name = {n.name: n for n in graph.nodes}
    assert recomputed and all(n.rank == by_name[n.name.removesuffix(".recompute")].rank for n in recomputed)


def test_the_registry_has_no_random_op_so_nothing_is_refused_for_nondeterminism():
    assert NONDETERMINISTIC_OPS == frozenset()
    rng = np.random.default_rng(0)
    for op in OPS.values():
        for arrays, attrs in (op.examples(rng) if op.examples else [])[:2]:
            first, second = op.ref(*arrays, **attrs), op.ref(*arrays, **attrs)
            assert np.array_equal(first, second, equal_nan=True), op.name


# ---- what is recomputed -----------------------------------------------------------------------------------


def test_backward_reads_recomputed_copies_and_each_dropped_value_is_last_read_in_forward():
    graph = _step("gpt2")
    out = A.rematerialize(graph, "every:1")
    (record,) = [p for p in out.passes if p.name == REMAT_PASS]
    readers = out.consumers()
    for i in record.only:  # ids of the source graph; the forward pass keeps its ids
        assert out.nodes[i].name == graph.nodes[i].name and out.nodes[i].phase == "forward"
        assert all(out.nodes[r].phase == "forward" for r in readers[i])
    copies = [n for n in out.nodes if n.name.endswith(".recompute")]
    assert sorted(n.name for n in copies) == sorted(f"{graph.nodes[i].name}.recompute" for i in record.only)
    assert all(n.phase == "backward" for n in copies)
    assert graph_flops(out) > graph_flops(graph)


def test_leaves_outputs_and_the_loss_are_never_recomputed():
    graph = _step("gpt2")
    out = A.rematerialize(graph, "every:99")  # no checkpoint between layers: everything else is recomputed
    (record,) = out.passes
    results = set(graph.outputs.values()) | {graph.loss}
    assert not any(graph.nodes[i].is_leaf or i in results for i in record.only)
    assert out.outputs.keys() == graph.outputs.keys()


def test_none_is_the_identity_and_records_nothing():
    graph = _step("mlp")
    out = A.rematerialize(graph, "none")
    assert out is not graph and out.dump() == graph.dump() and out.passes == graph.passes


def test_gpt2_layers_are_the_halves_of_its_blocks_plus_the_head():
    graph = _step("gpt2", layers=3)
    assert layer_count(graph) == 2 * 3 + 1
    assert set(layer_boundaries(graph)) <= set(cut_points(graph))


def test_an_mlp_chain_has_a_cut_at_every_node_and_a_layer_per_linear():
    graph = _step("mlp")  # sizes 16, 8, 4: two linear layers
    forward = [n.id for n in graph.nodes if n.phase == "forward" and not n.is_leaf]
    assert cut_points(graph) == forward and layer_count(graph) == 2


def test_sqrt_checkpoints_every_ceil_sqrt_of_the_layers():
    graph = _step("gpt2", layers=4)  # 9 layers: every 3rd boundary kept
    assert layer_count(graph) == 9
    sqrt, every3 = A.rematerialize(graph, "sqrt"), A.rematerialize(graph, f"every:{math.ceil(math.sqrt(9))}")
    assert sqrt.passes == every3.passes and sqrt.dump() == every3.dump()


def test_a_budget_policy_meets_its_estimate_and_recomputes_less_than_needed_otherwise():
    graph = A.training_graph(A.models.build("gpt2", **BIG_GPT2))
    base = activation_peak_bytes(graph)
    out = A.rematerialize(graph, f"budget:{base // 2}")
    assert activation_peak_bytes(out) <= base // 2
    assert graph_flops(out) - graph_flops(graph) < graph_flops(A.rematerialize(graph, "sqrt")) - graph_flops(graph)
    assert A.rematerialize(graph, f"budget:{base}").dump() == graph.dump()  # fits already: nothing to do


# ---- the compiled schedule -------------------------------------------------------------------------------


@pytest.mark.parametrize("hw_name", ["groq_like", "a100_like"])
def test_sqrt_lowers_the_compiled_peak_memory_of_gpt2_and_lengthens_its_makespan(hw_name):
    graph = A.training_graph(A.models.build("gpt2", **BIG_GPT2))
    hw = A.load_hw(hw_name)
    before = A.compile(graph, hw, split=False)
    after = A.compile(A.rematerialize(graph, "sqrt"), hw, split=False)
    assert sum(after.peak_memory_bytes.values()) < sum(before.peak_memory_bytes.values())
    assert after.makespan_cycles >= before.makespan_cycles


@pytest.mark.parametrize("hw_name", ["groq_like", "a100_like"])
def test_recomputation_waits_until_the_forward_pass_reaches_the_loss(hw_name):
    """The ordering barrier: without it the list scheduler would fill idle units with recomputation
    during the forward pass and keep its values alive as long as the originals."""
    graph = A.training_graph(A.models.build("gpt2", **BIG_GPT2))
    out = A.rematerialize(graph, "every:1")
    sched = A.compile(out, hw_name, split=False)
    loss_inputs = [i for i in out.nodes[out.loss].inputs if not out.nodes[i].is_leaf]
    reached = max(t.end for t in sched.tasks if t.kind == "node" and t.node in loss_inputs)
    recomputed = [t for t in sched.tasks if out.nodes[t.node].name.endswith(".recompute")]
    assert recomputed and min(t.start for t in recomputed) >= reached


def test_a_step_that_does_not_fit_fits_when_rematerialized_to_a_budget():
    graph = A.training_graph(A.models.build("gpt2", **BIG_GPT2))
    hw = A.load_hw("groq_like", overrides={"chips.0.memories.mem.capacity_bytes": 800_000})
    with pytest.raises(A.ScheduleError, match="no memory can hold"):
        A.compile(graph, hw, split=False)
    budget = activation_peak_bytes(graph) * 45 // 100
    sched = A.compile(A.rematerialize(graph, f"budget:{budget}"), hw, split=False)
    assert sched.peak_memory_bytes["chip0:mem"] <= 800_000


def test_a_rematerialized_gpt2_step_checks_with_numba():
    graph = _step("gpt2", "float32")
    out = A.rematerialize(graph, "sqrt")
    sched = A.compile(out, "groq_like", split=False)
    assert A.check(sched, backend="numba", graph=out, hw="groq_like").passed


def test_the_schedule_source_replays_remat_in_order_with_other_passes():
    graph = _step("gpt2", "float32")
    out = A.optimize(A.rematerialize(graph, "every:1"), ["cse", "fuse_elementwise"])
    assert [p.name for p in out.passes][0] == REMAT_PASS
    sched = A.compile(out, "groq_like", split=False)
    assert graph_for(sched).dump() == out.dump()
    later = A.rematerialize(A.optimize(graph, ["fuse_epilogue"]), "sqrt")  # optimized first, then remat
    assert graph_for(A.compile(later, "groq_like", split=False)).dump() == later.dump()


def test_an_unoptimized_schedule_without_remat_keeps_its_source_bytes():
    sched = A.compile(_step("mlp", "float32"), "groq_like", split=False)
    assert "passes" not in json.loads(sched.model_dump_json())["source"]


def test_a_tampered_remat_record_is_refused_by_name(tmp_path):
    graph = _step("mlp", "float32")
    sched = A.compile(A.rematerialize(graph, "every:1"), "groq_like", split=False)
    data = json.loads(sched.model_dump_json())
    data["source"]["passes"][0]["only"] = [0]  # the input x: a leaf
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(A.ScheduleError, match="cannot recompute %0 input 'x'"):
        A.simulate(read_schedule(path))


# ---- hostile inputs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy, match", [
    ("every:0", "from 1 to 10000"), ("every:-1", "from 1 to 10000"), ("every:abc", "from 1 to 10000"),
    ("every:2.5", "from 1 to 10000"), ("every:99999999999999999999", "from 1 to 10000"),
    ("every:", "needs an argument"), ("budget:-5", "expected a size"), ("budget:nan", "expected a size"),
    ("budget:1e400", "too large"), ("budget:0", "at least 1"), ("budget:0.5", "whole number of bytes"),
    ("budget:lots", "expected a size"), ("sqrt:2", "takes no argument"), ("none:0", "takes no argument"),
    ("checkpoint", "unknown policy 'checkpoint'"), ("", "empty"), ("every:" + "9" * 100, "too long"),
])
def test_bad_policy_text_is_one_clear_error(policy, match):
    graph = _step("mlp")
    with pytest.raises(A.GraphError, match=match) as e:
        A.rematerialize(graph, policy)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("policy", [3, None, 2.5, ["sqrt"], b"sqrt"])
def test_a_policy_of_the_wrong_type_is_refused(policy):
    with pytest.raises(A.GraphError, match="policy must be a string"):
        A.rematerialize(_step("mlp"), policy)


@pytest.mark.parametrize("kwargs, match", [
    ({"kind": "every", "every": 0}, "from 1 to 10000"), ({"kind": "every", "every": True}, "from 1 to 10000"),
    ({"kind": "budget", "budget_bytes": -5}, "whole number of bytes"), ({"kind": "sqrt", "every": 2}, "no every"),
    ({"kind": "random"}, "unknown policy kind"),
])
def test_a_policy_record_is_checked_when_made(kwargs, match):
    with pytest.raises(A.GraphError, match=match):
        RematPolicy(**kwargs)


def test_policies_parse_with_byte_suffixes_and_case():
    assert parse_policy("budget:64MiB").budget_bytes == 64 * 2**20
    assert parse_policy(" Budget:2GB ").budget_bytes == 2 * 10**9
    assert parse_policy("EVERY:3") == RematPolicy("every", every=3) and parse_policy("sqrt").label == "sqrt"


@pytest.mark.parametrize("graph, match", [
    (A.passes.inference_graph(A.models.build("mlp", **SMALL["mlp"])), "is an inference graph"),
    (A.training_graph(A.models.build("seed_autodiff")), "no backward pass"),
    (A.models.build("mlp", **SMALL["mlp"]), "is an inference graph"),
    ("mlp", "needs a training Graph"),
])
def test_a_graph_without_a_backward_pass_is_refused(graph, match):
    with pytest.raises(A.GraphError, match=match):
        A.rematerialize(graph, "sqrt")


def test_rematerializing_twice_is_refused():
    with pytest.raises(A.GraphError, match="rematerialized already"):
        A.rematerialize(A.rematerialize(_step("mlp"), "every:1"), "sqrt")


def test_an_unreachable_budget_names_the_budget_and_the_least_reachable_peak():
    with pytest.raises(A.GraphError, match=r"cannot fit a peak of 100 bytes .* the least any recomputation plan "
                                           r"reaches is .* Give a budget of at least \d+ bytes") as e:
        A.rematerialize(_step("gpt2"), "budget:100")
    assert "\n" not in str(e.value)


# ---- the command line -------------------------------------------------------------------------------------

GPT2_ARGS = ["--model", "gpt2"] + [a for k, v in SMALL["gpt2"].items() for a in ("--set", f"{k}={v}")]


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.out, captured.err


def test_a_saved_rematerialized_schedule_simulates_and_checks_from_the_cli(tmp_path, capsys):
    path = tmp_path / "s.json"
    code, out, _ = _run(["compile", *GPT2_ARGS, "--remat", "sqrt", "--split", "off", "-o", str(path)], capsys)
    assert code == 0 and "wrote" in out
    assert json.loads(path.read_text())["source"]["passes"][0]["name"] == REMAT_PASS
    code, out, _ = _run(["simulate", str(path), "--out", str(tmp_path / "plots")], capsys)
    assert code == 0 and "simulated (static)" in out
    code, out, _ = _run(["check", str(path)], capsys)
    assert code == 0 and "check passed" in out


@pytest.mark.parametrize("command", ["run", "compile", "check"])
@pytest.mark.parametrize("value", ["every:0", "every:-1", "every:abc", "budget:-5", "budget:nan", "budget:1e400",
                                   "checkpoint", ""])
def test_bad_remat_values_exit_2_with_one_paragraph(command, value, capsys):
    code, _, err = _run([command, "--remat", value], capsys)
    assert code == 2 and "argument --remat" in err and err.strip().splitlines()[-1].count("rematerialize") == 1


def test_remat_on_an_inference_step_is_refused(capsys):
    code, _, err = _run(["run", *GPT2_ARGS, "--inference", "--remat", "sqrt", "--no-sim"], capsys)
    assert code == 1 and "--inference step has none" in err and err.count("\n") == 1


def test_remat_with_a_saved_schedule_is_refused(tmp_path, capsys):
    path = tmp_path / "s.json"
    assert _run(["compile", *GPT2_ARGS, "--split", "off", "-o", str(path)], capsys)[0] == 0
    code, _, err = _run(["check", str(path), "--remat", "sqrt"], capsys)
    assert code == 1 and "compiled already" in err
