"""Tensor parallelism (Megatron-LM): ranks in the graph IR, sharded parameters, the tp_allreduce op,
autodiff's backward all-reduce, the planner's d x p x t chip map, and real numbers through schedules.

Oracle: the unsharded model. A sharded model draws its weights as slices of the unsharded model's
weights, so in float64 its loss, outputs, gradients and updates must equal the unsharded ones (each
shard's gradient equals the matching slice of the whole gradient) up to summation order.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import AccelsimError, GraphError, ShapeError
from accelsim.evaluate import evaluate
from accelsim.graph.ir import Graph
from accelsim.models import parallel_layers as PL
from accelsim.models.transformer import block

X4 = "hwconfigs/groq_like_x4.yaml"
X8 = {"chips.0.count": 8}  # groq_like_x4's fully connected cards, eight of them


def tb(t: int, dtype: str = "float64", layers: int = 1, batch: int = 1, seq: int = 8, d: int = 16,
       heads: int = 4) -> Graph:
    """`layers` pre-LN blocks, Megatron-sharded over t ranks (the zoo's own block for t == 1)."""
    g = Graph("tb", dtype=dtype)
    h = x = g.input("x", (batch, seq, d))
    target = g.input("target", (batch, seq, d))
    for i in range(layers):
        h = block(g, h, heads, f"b{i}") if t == 1 else PL.block(g, h, heads, f"b{i}", t)
    g.output("y", h)
    g.set_loss(F.mse_loss(h, target))
    assert x.id == 0
    return g


def unshard(graph: Graph, name: str, values: dict[str, np.ndarray]) -> np.ndarray:
    """The slice of the unsharded step's result `name` that a sharded result corresponds to."""
    if "[" not in name:
        return values[name]
    base, rest = name.split("[", 1)
    shard, suffix = rest.split("]", 1)
    if base in ("logits",):  # a rank's vocabulary-parallel logits: its slice of the last axis
        k, t = (int(v) for v in shard.split("/"))
        axis = values[base].ndim - 1
    else:
        axis, k, t = graph.by_name(f"{base}[{shard}]").attrs["shard"]
    whole = values[base + suffix]
    size = whole.shape[axis] // t
    return np.take(whole, range(k * size, (k + 1) * size), axis=axis)


def assert_same_step(sharded: Graph, whole: Graph, rtol: float = 1e-11) -> int:
    got, want = evaluate(sharded), evaluate(whole)
    for name, value in got.items():
        ref = unshard(sharded, name, want)
        # atol: a gradient that is zero in exact arithmetic (attention's key bias: softmax ignores a shift
        # of a row's scores) is rounding noise of ~1e-17, and Adam's update scales that noise by lr / eps
        # to ~1e-11 whichever way it was summed
        atol = 1e-9 if name.endswith(".new") else 1e-14
        np.testing.assert_allclose(value, ref, rtol=rtol, atol=max(rtol * np.abs(ref).max(), atol), err_msg=name)
    return len(got)


# ---- the IR ---------------------------------------------------------------------------------------

def test_rank_context_stamps_nodes_and_restores():
    g = Graph("r")
    x = g.input("x", (2,))
    with g.rank(1):
        y = F.exp(x)
        with g.rank(0):
            z = F.sin(y)
        w = F.cos(z)
    v = F.neg(w)
    assert [n.rank for n in g.nodes] == [-1, 1, 0, 1, -1]
    assert g.tensor_parallel == 2 and Graph("empty").tensor_parallel == 1
    assert "@tp1" in g.dump() and v.node.rank == -1


@pytest.mark.parametrize("rank", [-2, 1024, True, 1.0, "1", None])
def test_rank_refuses_what_is_not_a_rank(rank):
    with pytest.raises(GraphError, match="tensor-parallel rank"):
        with Graph("r").rank(rank):
            pass


def test_rank_changes_the_graph_hash():
    from accelsim.schedule.plan import graph_hash

    def one(rank: int) -> Graph:
        g = Graph("h")
        x = g.input("x", (2,))
        with g.rank(rank):
            F.exp(x)
        return g
    assert graph_hash(one(-1)) != graph_hash(one(0))


def test_a_shard_is_a_slice_of_the_whole_parameter():
    g = Graph("s", seed=3)
    whole = g.param("w", (4, 6), std=0.5)
    parts = [g.param("w", (4, 6), std=0.5, shard=(1, k, 3)) for k in range(3)]
    assert [p.node.name for p in parts] == ["w[0/3]", "w[1/3]", "w[2/3]"]
    assert all(p.shape == (4, 2) for p in parts)
    np.testing.assert_array_equal(np.concatenate([g.leaf_value(p.id) for p in parts], axis=1),
                                  g.leaf_value(whole.id))


@pytest.mark.parametrize("shard, error", [
    ((0, 0, 3), ShapeError),      # 4 rows do not split into 3
    ((2, 0, 2), GraphError),      # no axis 2
    ((0, 2, 2), GraphError),      # index out of range
    ((0, -1, 2), GraphError),
    ((0, 0, 0), GraphError),
    ((0, 0, 2048), GraphError),   # above MAX_RANKS
    ((0, 0), GraphError),
    ((0.0, 0, 2), GraphError),
    ((True, 0, 2), GraphError),
    ("0,0,2", GraphError),
])
def test_bad_shards_are_refused(shard, error):
    with pytest.raises(error, match="w"):
        Graph("s").param("w", (4, 6), shard=shard)


def test_tp_allreduce_op_refuses_mismatched_partials():
    g = Graph("a")
    a, b = g.input("a", (2, 3)), g.input("b", (3, 2))
    with pytest.raises(ShapeError, match="tp_allreduce"):
        F.tp_allreduce(a, b)


# ---- the function is the unsharded model's ---------------------------------------------------------

@pytest.mark.parametrize("t, optimizer", [(2, "sgd"), (4, "adam"), (2, "momentum")])
def test_sharded_transformer_trains_exactly_like_the_unsharded_one(t, optimizer):
    sharded = A.training_graph(tb(t, layers=2), optimizer=optimizer)
    whole = A.training_graph(tb(1, layers=2), optimizer=optimizer)
    assert sharded.tensor_parallel == t
    assert assert_same_step(sharded, whole) > 20


@pytest.mark.parametrize("t", [2, 4])
def test_channel_split_resnet_block_trains_exactly_like_the_unsharded_one(t):
    opts = dict(batch=2, channels=4, size=6, dtype="float64")
    sharded = A.training_graph(A.models.build("resnet_block", tensor_parallel=t, **opts), optimizer="adam")
    whole = A.training_graph(A.models.build("resnet_block", **opts), optimizer="adam")
    assert assert_same_step(sharded, whole) > 10


def test_tensor_parallel_one_is_the_zoo_model():
    from accelsim.schedule.plan import graph_hash
    built = A.models.build("resnet_block", batch=2, channels=4, size=6, tensor_parallel=1)
    assert built.tensor_parallel == 1 and all(n.rank == -1 for n in built.nodes)
    assert graph_hash(built) == graph_hash(A.models.build("resnet_block", batch=2, channels=4, size=6))


@pytest.mark.parametrize("layers, t", [(1, 2), (3, 4)])
def test_megatron_all_reduce_count(layers, t):
    """Megatron-LM: two all-reduces of b*s*h elements per layer in forward and two in backward."""
    b, s, h = 2, 8, 16
    step = A.training_graph(tb(t, layers=layers, batch=b, seq=s, d=h))
    reduces = [n for n in step.nodes if n.op == "tp_allreduce"]
    assert sum(n.phase == "forward" for n in reduces) == 2 * layers
    assert sum(n.phase == "backward" for n in reduces) == 2 * layers
    assert all(n.shape == (b, s, h) and len(n.inputs) == t and n.rank == -1 for n in reduces)
    assert all([step.nodes[i].rank for i in n.inputs] == list(range(t)) for n in reduces)


def test_builder_refuses_ranks_that_do_not_divide():
    with pytest.raises(AccelsimError, match="tensor_parallel=3"):
        tb(3, heads=4)
    with pytest.raises(AccelsimError, match="tensor_parallel=3"):
        A.models.build("resnet_block", batch=2, channels=4, size=6, tensor_parallel=3)


# ---- schedules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("t, d, p, hw", [(2, 1, 1, X4), (2, 2, 1, X4), (2, 2, 2, X8), (4, 1, 1, X4)])
def test_tensor_parallel_schedules_check_numerically(t, d, p, hw):
    hw = A.load_hw(X4, overrides=hw) if isinstance(hw, dict) else A.load_hw(hw)
    step = A.training_graph(tb(t, dtype="float32", layers=2, heads=4), optimizer="adam")
    sched = A.compile(step, hw, data_parallel=d, pipeline_stages=p, microbatches=2)
    assert sched.options.tensor_parallel == t
    kinds = {k: [x for x in sched.tasks if x.kind == k] for k in ("tp_allreduce", "allreduce")}
    # 4 all-reduces per layer per micro-batch per replica, one member per rank
    assert len(kinds["tp_allreduce"]) == 4 * 2 * 2 * d * t
    if p == 1:  # every chip takes part in the tensor-parallel all-reduces (with stages, each its own)
        assert len({x.chip for x in kinds["tp_allreduce"]}) == d * t
    chips_used = {x.chip for x in sched.tasks}
    assert len(chips_used) == d * p * t
    result = A.check(sched, graph=step, hw=hw)
    assert result.passed, result


def test_tensor_parallel_communication_matches_megatron():
    """Each member of a ring all-reduce sends 2(t-1)/t of the tensor: per layer and micro-batch,
    4 all-reduces of b*s*h float32 elements."""
    t, layers, m, (b, s, h) = 2, 2, 2, (1, 8, 16)
    hw = A.load_hw(X4)
    step = A.training_graph(tb(t, dtype="float32", layers=layers, batch=b, seq=s, d=h))
    sched = A.compile(step, hw, microbatches=m)
    sent = sum(x.bytes_moved for x in sched.tasks if x.kind == "tp_allreduce")
    elem = hw.elem_bytes("float32")
    assert sent == t * 4 * layers * m * int(np.ceil(2 * (t - 1) / t * b * s * h * elem))


def test_replay_and_determinism():
    hw = A.load_hw(X4)
    step = A.training_graph(tb(2, dtype="float32"))
    one, two = A.compile(step, hw, data_parallel=2), A.compile(step, hw, data_parallel=2)
    assert one.model_dump_json() == two.model_dump_json()
    timeline = A.simulate(one, graph=step, hw=hw)
    assert timeline.makespan_cycles == one.makespan_cycles


def test_saved_schedule_keeps_tensor_parallel(tmp_path):
    from accelsim.schedule.io import save_schedule
    from accelsim.api import load_schedule
    step = A.training_graph(A.models.build("resnet_block", batch=2, channels=4, size=6, tensor_parallel=2))
    sched = A.compile(step, X4)
    path = tmp_path / "s.json"
    save_schedule(sched, path)
    assert json.loads(path.read_text())["options"]["tensor_parallel"] == 2
    again = load_schedule(path)
    assert again.options.tensor_parallel == 2 and A.check(again).passed


def test_unsharded_schedules_do_not_record_the_new_options():
    sched = A.compile(A.models.build("mlp", batch=4, sizes=(16, 8, 4)), X4)
    assert "tensor_parallel" not in json.loads(sched.model_dump_json())["options"]
    assert "zero" not in json.loads(sched.model_dump_json())["options"]


@pytest.mark.parametrize("t, match", [(3, "tensor_parallel=2"), (0, ">= 1"), ("2", ">= 1"), (True, ">= 1")])
def test_compile_refuses_a_degree_the_graph_was_not_built_for(t, match):
    step = A.training_graph(tb(2, dtype="float32"))
    with pytest.raises(AccelsimError, match=match):
        A.compile(step, X4, tensor_parallel=t)


def test_compile_asks_to_build_for_tensor_parallel():
    with pytest.raises(AccelsimError, match="build it with tensor_parallel=2"):
        A.compile(A.models.build("mlp", batch=4, sizes=(16, 8, 4)), X4, tensor_parallel=2)


def test_compile_refuses_too_few_chips():
    step = A.training_graph(tb(4, dtype="float32"))
    with pytest.raises(AccelsimError, match="needs 8 chips"):
        A.compile(step, X4, data_parallel=2)
    with pytest.raises(AccelsimError, match="tensor_parallel=4 needs 4 chips, but the hardware has 1"):
        A.compile(step, "hwconfigs/groq_like.yaml")


# ---- GPT-2 -----------------------------------------------------------------------------------------

def gpt2_small(**extra) -> Graph:
    return A.models.build("gpt2", **{**A.models.sizes.SMALL["gpt2"], **extra})


def test_sharded_gpt2_trains_exactly_like_the_unsharded_one():
    sharded = A.training_graph(gpt2_small(tensor_parallel=2, dtype="float64"), optimizer="adam")
    whole = A.training_graph(gpt2_small(dtype="float64"), optimizer="adam")
    assert assert_same_step(sharded, whole) > 40


def test_gpt2_3d_parallel_step_checks_numerically():
    """The issue's 3D case: d = 2 replicas x p = 2 stages x t = 2 ranks on eight chips."""
    hw = A.load_hw(X4, overrides=X8)
    step = A.training_graph(gpt2_small(tensor_parallel=2), optimizer="adam")
    sched = A.compile(step, hw, data_parallel=2, pipeline_stages=2, microbatches=2)
    assert len({x.chip for x in sched.tasks}) == 8
    assert {x.stage for x in sched.tasks} == {0, 1}
    assert {x.kind for x in sched.tasks} >= {"tp_allreduce", "allreduce", "transfer"}
    result = A.check(sched)  # a zoo model: the schedule rebuilds its own graph
    assert result.passed, result


@pytest.mark.parametrize("passes", ["cse", "auto", ["fuse_elementwise"]])
def test_graph_passes_refuse_ranked_graphs(passes):
    graph = A.models.build("resnet_block", batch=2, channels=4, size=6, tensor_parallel=2)
    with pytest.raises(GraphError, match="tensor-parallel ranks"):
        A.optimize(graph, passes, hw=X4)


def test_tensor_parallel_step_checks_with_cuda_kernels():
    """The CUDA backend (numba's simulator here, a GPU where there is one) through a t = 2 schedule."""
    step = A.training_graph(A.models.build("transformer_block",
                                           **{**A.models.sizes.TINY["transformer_block"], "tensor_parallel": 2}))
    result = A.check(A.compile(step, X4), backend="cuda")
    assert result.passed, result


# ---- the command line ------------------------------------------------------------------------------

TB_SET = ["--set", "batch=1", "--set", "seq=8", "--set", "d_model=16", "--set", "heads=2"]


def test_cli_run_check_with_tensor_parallel(tmp_path, capsys):
    from accelsim.cli import main
    path = tmp_path / "s.json"
    assert main(["compile", "--hw", "groq_like_x4", "--model", "transformer_block", *TB_SET,
                 "--tensor-parallel", "2", "--data-parallel", "2", "-o", str(path)]) == 0
    assert json.loads(path.read_text())["options"]["tensor_parallel"] == 2
    assert main(["check", "--hw", "groq_like_x4", str(path)]) == 0
    assert main(["run", "--hw", "groq_like_x4", "--model", "transformer_block", *TB_SET, "--tensor-parallel", "2",
                 "--no-sim", "--out", str(tmp_path / "plots")]) == 0
    assert "2 tensor-parallel ranks" in " ".join(capsys.readouterr().out.split())  # rich may wrap the line


@pytest.mark.parametrize("argv, match", [
    (["--model", "mlp", "--tensor-parallel", "2"], "has no tensor-parallel build"),
    (["--model", "transformer_block", *TB_SET, "--tensor-parallel", "2", "--set", "tensor_parallel=4"], "disagree"),
    (["--model", "transformer_block", *TB_SET, "--tensor-parallel", "8"], "must divide"),
])
def test_cli_refuses_bad_tensor_parallel(argv, match, capsys):
    from accelsim.cli import main
    assert main(["run", "--hw", "groq_like_x4", "--no-sim", *argv]) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


@pytest.mark.parametrize("flag", [["--tensor-parallel", "0"], ["--tensor-parallel", "x"], ["--zero", "4"],
                                  ["--zero", "-1"]])
def test_cli_argument_errors(flag, capsys):
    from accelsim.cli import main
    with pytest.raises(SystemExit) as e:
        main(["run", "--hw", "groq_like_x4", "--model", "gpt2", *flag])
    assert e.value.code == 2


@pytest.mark.parametrize("key, value", [("tensor_parallel", 1), ("tensor_parallel", 3), ("tensor_parallel", 10**9),
                                        ("tensor_parallel", 0), ("tensor_parallel", "2"), ("tensor_parallel", 2.5),
                                        ("zero", 4), ("zero", -1), ("zero", True)])
def test_tampered_parallel_options_are_refused(tmp_path, key, value):
    """A schedule file whose options disagree with the graph it rebuilds: one paragraph, no traceback."""
    from accelsim.schedule.io import save_schedule
    from accelsim.api import load_schedule
    step = A.training_graph(A.models.build("resnet_block", batch=2, channels=4, size=6, tensor_parallel=2))
    path = tmp_path / "s.json"
    save_schedule(A.compile(step, X4), path)
    data = json.loads(path.read_text())
    data["options"][key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(AccelsimError, match=key):
        A.check(load_schedule(path))
