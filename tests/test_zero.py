"""ZeRO stages 1-3 (compiler/planning/zero.py): real numbers through sharded schedules, per-chip model-state memory
against the paper's formula, communication volume against plain all-reduce, and refused options.

Oracle: the unsharded step. check() runs every task on real arrays through the schedule's memory and
compares with the numpy reference of one big-batch step, so a shard read from the wrong rows, a
reduce-scatter summing the wrong slice or a gather in the wrong order fails by tensor and index.
"""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.errors import ScheduleError
from accelsim.models.sizes import SMALL
from accelsim.model_states import (ModelStateBytes, schedule_model_states, trainable_elements,
                                            zero_bytes)
from accelsim.api import validate_schedule
from accelsim.compiler.planning.zero import sharding
from accelsim.zero_memory import zero_memory

X4 = "hwconfigs/groq_like_x4.yaml"  # four chips, fully connected
COLLECTIVE_KINDS = ("allreduce", "reduce_scatter", "all_gather")


@pytest.fixture(scope="module")
def hw():
    return A.load_hw(X4)


def train(name: str, **options):
    return A.training_graph(A.models.build(name, **(options or SMALL[name])), optimizer="adam")


@pytest.fixture(scope="module")
def graphs():
    return {name: train(name) for name in ("mlp", "transformer_block")}


def assert_checks(schedule, graph, hw):
    report = A.check(schedule, graph=graph, hw=hw, backend="numba")
    assert report.passed, (report.failures[:5], report.corruptions[:3])


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
@pytest.mark.parametrize("d", [2, 4])
@pytest.mark.parametrize("zero", [1, 2, 3])
def test_every_stage_computes_the_unsharded_step(graphs, hw, name, d, zero):
    graph = graphs[name]
    schedule = A.compile(graph, hw, data_parallel=d, zero=zero, split=False)
    kinds = {t.kind for t in schedule.tasks}
    assert "allreduce" not in kinds and {"reduce_scatter", "all_gather"} <= kinds
    assert any(x.parts == d for x in schedule.tensors)  # optimizer state (and at stage 3 parameters) as shards
    assert_checks(schedule, graph, hw)


@pytest.mark.parametrize("options", [dict(microbatches=2, zero=2), dict(microbatches=3, zero=3, max_in_flight=2),
                                     dict(microbatches=2, zero=1, pipeline_stages=2)])
def test_micro_batches_and_pipeline_stages_keep_the_numbers(graphs, hw, options):
    """Stage 2-3 reduce-scatter every micro-batch and accumulate the shards; stage 1 reduces at the end."""
    graph = graphs["transformer_block"]
    schedule = A.compile(graph, hw, data_parallel=2, split=False, **options)
    assert_checks(schedule, graph, hw)
    assert A.simulate(schedule).makespan_cycles == schedule.makespan_cycles


def test_stage_3_of_gpt2_with_split_nodes_and_tensor_parallel_ranks(hw):
    gpt2 = train("gpt2")
    assert_checks(A.compile(gpt2, hw, data_parallel=2, zero=3), gpt2, hw)
    tp = A.training_graph(A.models.build("transformer_block", tensor_parallel=2, **SMALL["transformer_block"]),
                          optimizer="adam")
    assert_checks(A.compile(tp, hw, data_parallel=2, zero=3, split=False), tp, hw)


def test_a_zero_schedule_survives_json(graphs, hw, tmp_path):
    graph = graphs["mlp"]
    schedule = A.compile(graph, hw, data_parallel=2, zero=3, split=False)
    path = tmp_path / "z.json"
    A.save_schedule(schedule, path)
    loaded = A.load_schedule(path, graph=graph, hw=hw)
    assert (loaded.tasks, loaded.tensors, loaded.options) == (schedule.tasks, schedule.tensors, schedule.options)
    assert_checks(loaded, graph, hw)


# ---- memory: ZeRO's formula -------------------------------------------------------------------

BIG_MLP = dict(batch=4, sizes=(256, 256, 256, 256, 256))
"""Large enough that 64-byte alignment of the smallest shards (a bias's 64 rows of 1 byte) costs nothing."""


@pytest.fixture(scope="module")
def big():
    return train("mlp", **BIG_MLP)


@pytest.mark.parametrize("d", [2, 4])
@pytest.mark.parametrize("zero", [1, 2, 3])
def test_per_chip_model_states_follow_the_zero_formula(big, hw, d, zero):
    schedule = A.compile(big, hw, data_parallel=d, zero=zero, split=False)
    coeffs = ModelStateBytes.of_training(big, hw)
    assert (coeffs.param_bytes, coeffs.grad_bytes, coeffs.optimizer_bytes) == (1, 1, 2)  # int8 Adam: 1 + 1 + 2
    formula = zero_bytes(coeffs, trainable_elements(big), d, zero)
    chips = zero_memory(schedule, big, hw)
    assert [c.chip for c in chips] == list(range(d))
    for c in chips:
        assert c.formula_bytes == formula
        assert formula <= c.model_state_peak_bytes <= 1.05 * formula, c
        assert (c.gathered_peak_bytes > 0) == (zero == 3)  # the transient whole parameters of stage 3
        assert (c.bucket_peak_bytes > 0) == (zero >= 2)  # full gradients until their reduce-scatter
    # the other engineer's accounting of every model-state tensor sees the same chips with the transients in
    for mine, theirs in zip(chips, schedule_model_states(schedule, big)):
        assert mine.with_transients_peak_bytes == theirs.model_state_peak_bytes


def test_each_stage_needs_less_model_state_memory_than_the_one_before(big, hw):
    peaks = [max(c.model_state_peak_bytes for c in zero_memory(A.compile(big, hw, data_parallel=4, zero=z,
                                                                         split=False), big, hw))
             for z in range(4)]
    assert peaks == sorted(peaks, reverse=True) and len(set(peaks)) == 4


# ---- communication ------------------------------------------------------------------------------


def sent_bytes(schedule, kind: str) -> dict[int, int]:
    """Bytes every member of every `kind` collective sends, per graph node."""
    out: dict[int, int] = {}
    for t in schedule.tasks:
        if t.kind == kind:
            out[t.node] = out.get(t.node, 0) + t.bytes_moved
    return out


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_stages_1_and_2_move_the_all_reduce_bytes_and_stage_3_half_again_for_backward_reads(graphs, hw, name):
    graph = graphs[name]
    d = 4
    plain = sent_bytes(A.compile(graph, hw, data_parallel=d, split=False), "allreduce")
    params = [p for p in graph.params if p.trainable]
    grad_of = {p.id: graph.outputs[f"{p.name}.grad"] for p in params}
    new_of = {p.id: graph.outputs[f"{p.name}.new"] for p in params}
    consumers = graph.consumers()
    read_in_backward = {p.id for p in params if any(graph.nodes[c].phase == "backward" for c in consumers[p.id])}
    assert read_in_backward and read_in_backward != set(grad_of)  # weights are; biases are not
    for zero in (1, 2, 3):
        schedule = A.compile(graph, hw, data_parallel=d, zero=zero, split=False)
        scattered, gathered = sent_bytes(schedule, "reduce_scatter"), sent_bytes(schedule, "all_gather")
        assert not sent_bytes(schedule, "allreduce")
        for p in params:
            g, all_reduce = grad_of[p.id], plain[grad_of[p.id]]
            assert scattered[g] * 2 == all_reduce  # the all-reduce's reduce-scatter half
            if zero < 3:  # ... and its all-gather half, of the updated parameter
                assert scattered[g] + gathered[new_of[p.id]] == all_reduce
            else:  # forward's all-gather, and backward's for a parameter backward reads
                assert scattered[g] + gathered[p.id] == all_reduce * (1.5 if p.id in read_in_backward else 1)
        total = sum(scattered.values()) + sum(gathered.values())
        assert (total == sum(plain.values())) == (zero < 3)


# ---- options and hostile input ------------------------------------------------------------------


@pytest.mark.parametrize("zero", [4, -1, "2", True, 2.0, None])
def test_a_zero_stage_must_be_an_int_from_0_to_3(graphs, hw, zero):
    with pytest.raises(ScheduleError, match=r"zero must be one of \(0, 1, 2, 3\).*got"):
        A.compile(graphs["mlp"], hw, data_parallel=2, zero=zero)


def test_zero_refuses_an_inference_graph(hw):
    with pytest.raises(ScheduleError, match="no update"):
        A.compile(A.models.build("mlp", **SMALL["mlp"]), hw, data_parallel=2, zero=1)


def test_zero_with_one_replica_is_the_unsharded_step(graphs, hw):
    graph = graphs["mlp"]
    sharded = A.compile(graph, hw, zero=3, split=False)
    plain = A.compile(graph, hw, split=False)
    assert sharded.options.zero == 3
    assert sharded.tasks == plain.tasks and sharded.tensors == plain.tensors


def test_zero_refuses_replicas_that_share_a_chip(graphs, hw):
    with pytest.raises(ScheduleError, match="data_parallel=8 on 4 chip.*replicas 0 and 4 on chip0"):
        A.compile(graphs["mlp"], hw, data_parallel=8, zero=2)


def test_a_shard_edited_into_another_replicas_rows_is_refused(graphs, hw):
    graph = graphs["mlp"]
    schedule = A.compile(graph, hw, data_parallel=2, zero=3, split=False)
    i = next(i for i, x in enumerate(schedule.tensors) if x.parts == 2 and x.replica == 0)
    tensors = list(schedule.tensors)
    tensors[i] = tensors[i].model_copy(update={"part": 1})
    with pytest.raises(ScheduleError, match="rows part 1 of 2 only"):
        validate_schedule(schedule.model_copy(update={"tensors": tuple(tensors)}), graph, hw)


def test_a_whole_node_reading_a_shard_is_refused(graphs, hw):
    """A forward task given a parameter's shard in place of its all-gathered copy would compute garbage."""
    graph = graphs["mlp"]
    schedule = A.compile(graph, hw, data_parallel=2, zero=3, split=False)
    tasks = list(schedule.tasks)
    gather = next(t for t in tasks if t.kind == "all_gather" and t.phase == "forward")
    reader = next(t for t in tasks if gather.id in t.deps)
    tasks[reader.id] = reader.model_copy(update={"deps": tuple(d for d in reader.deps if d != gather.id),
                                                  "reads": reader.reads + ((gather.node, -1),)})
    with pytest.raises(ScheduleError, match="placed on chip.* as rows part 0 of 2 only"):
        validate_schedule(schedule.model_copy(update={"tasks": tuple(tasks)}), graph, hw)


@pytest.mark.parametrize("zero", [1, 3])
def test_a_parameter_with_fewer_rows_than_replicas_stays_whole_beside_sharded_ones(hw, zero):
    graph = train("mlp", batch=4, sizes=(16, 8, 3))  # fc2.b has 3 rows for 4 replicas
    sharding_ = sharding(graph, zero, 4)
    small, big = graph.by_name("fc2.b").id, graph.by_name("fc1.w").id
    assert small not in sharding_.leaves and graph.by_name("fc2.b.adam_m").id not in sharding_.leaves
    assert graph.by_name("fc1.w.adam_m").id in sharding_.leaves and (big in sharding_.params) == (zero == 3)
    schedule = A.compile(graph, hw, data_parallel=4, zero=zero, split=False)
    assert {t.kind for t in schedule.tasks if t.node == graph.outputs["fc2.b.grad"] and t.microbatch == -1} == {"allreduce"}
    assert_checks(schedule, graph, hw)
