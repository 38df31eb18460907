"""A weight gradient one stage sends another (gpt2's tied vocabulary matrix: the LM head's part, summed on the
last stage, added to stage 0's own part) at stage level (compiler/hierarchy/compose.py, sent_sums.py), as the
task level times it: it leaves once computed, not at its pass's end, and with replicas its sum is all-reduced
once the part has arrived and been added, and only then is the matrix updated (issue 27, Agreement: gpt2-2 d=2
p=4 M=4 ZB-H1 was 0.962 when those bytes were reduced in stage 0's buckets during its backward pass)."""
from __future__ import annotations

import pytest

from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.hw.load import load_hw
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_cost

SENT = 10**8
"""Bytes of the weight gradient stage 1 sends stage 0 (all of stage 0's gradient bytes)."""
SUM, REST = 4, 8
"""Cycles of stage 0's update: adding the sent part to its own (StageWork.sent_sum_cycles), then updating the
parameter from the reduced sum."""


@pytest.fixture(scope="module")
def hw8():
    return load_hw("a100_x8")


@pytest.fixture(scope="module")
def send_cycles(hw8) -> int:
    return topology_of(hw8).route(1, 0).cycles(SENT)


@pytest.fixture(scope="module")
def reduce_cycles(hw8) -> int:
    """The sum's all-reduce between stage 0's chip and its replica's (chip 2: replica r adds r * p * t)."""
    return collective_cost(topology_of(hw8), "allreduce", (0, 2), SENT).cycles


def two_stages(update: int, replicas: int, **sender) -> StepWork:
    """p=2, M=1: F=10 and B=20 cycles per chunk; chunk 1 sends SENT bytes of a weight gradient to stage 0, whose
    update (`update` cycles, SUM + REST of them for that parameter) waits for it."""
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0),
              ChunkWork(1, 10, 20, sender.pop("weight_grad", 0), 0, 0, 0, backward_bytes=SENT,
                        update_sends=((0, SENT),), **sender))
    stages = (StageWork(0, (0,), update, SENT, 0, 0, sent_update_cycles=SUM + REST, sent_sum_cycles=SUM),
              StageWork(1, (1,), 5, 0, 0, 0))
    return StepWork(stages, chunks, microbatches=1, data_parallel=replicas, tensor_parallel=1)


def spans_of(comp, stage: int, kind: str) -> list[tuple[int, int]]:
    return [(x.start, x.end) for x in comp.spans if x.stage == stage and x.kind == kind]


@pytest.mark.parametrize("schedule, sender, sent_at", [
    ("1f1b", dict(update_send_after=5, update_send_after_split=1), 20 + 5),      # B 20-40: 5 cycles in
    ("zb-h1", dict(weight_grad=8, update_send_after=5, update_send_after_split=3,
                   sends_after_weight_grad=True), 32 + 3),                      # W 32-40: 3 cycles in
    ("zb-h1", dict(weight_grad=8, update_send_after=5, update_send_after_split=3), 20 + 3),  # B 20-32
    ("1f1b", dict(update_send_after=50), 40),                                   # never past the item's end
])
def test_a_weight_gradient_sent_back_leaves_once_computed(hw8, send_cycles, schedule, sender, sent_at):
    comp = compose(two_stages(30, 1, **sender), schedule, hw8)
    assert spans_of(comp, 1, "transfer") == [(sent_at, sent_at + send_cycles)]
    assert comp.makespan_cycles == sent_at + send_cycles + SUM + REST  # the parameter's update follows it


def test_with_replicas_the_sent_gradients_sum_is_reduced_once_it_arrived_and_was_added(hw8, send_cycles,
                                                                                       reduce_cycles):
    # stage 0's items end at 60, the rest of its update (18 cycles) runs at once; the send (leaving at 25)
    # arrives later: the add (SUM), then the sum's all-reduce, then the parameter's update (REST); its bytes
    # are in no bucket reduced beside the backward pass
    arrived = 25 + send_cycles
    assert arrived > 60 + 18
    comp = compose(two_stages(30, 2, update_send_after=5), "1f1b", hw8)
    assert spans_of(comp, 0, "allreduce") == [(arrived + SUM, arrived + SUM + reduce_cycles)]
    assert spans_of(comp, 0, "update") == [(60, arrived + SUM + reduce_cycles + REST)]
    one = compose(two_stages(30, 1, update_send_after=5), "1f1b", hw8)
    assert comp.makespan_cycles == one.makespan_cycles + reduce_cycles
    assert comp.exposed_cycles["allreduce"] == reduce_cycles
    assert comp.exposed_cycles["transfer"] == arrived - (60 + 18)


def test_the_sums_reduction_hides_under_the_update_of_the_other_parameters(hw8, send_cycles, reduce_cycles):
    # the rest of stage 0's update outlasts the send and the reduction: the add cuts into it when the send
    # arrives, the all-reduce runs under its remainder, and the step ends with the update's last cycle
    update = send_cycles + reduce_cycles + 100 + SUM + REST
    arrived = 25 + send_cycles
    comp = compose(two_stages(update, 2, update_send_after=5), "1f1b", hw8)
    assert spans_of(comp, 0, "allreduce") == [(arrived + SUM, arrived + SUM + reduce_cycles)]
    assert spans_of(comp, 0, "update") == [(60, 60 + update)] and comp.makespan_cycles == 60 + update
    assert comp.exposed_cycles["allreduce"] == 0


def test_after_backward_the_whole_update_follows_the_sums_reduction(hw8, send_cycles, reduce_cycles):
    # Megatron-LM 2021's reduction: stage 0's whole update (30 cycles) waits for the sent part; its sum (SUM
    # cycles of it) is reduced as overlapped, once added, and the other 26 cycles follow that collective
    arrived = 25 + send_cycles
    comp = compose(two_stages(30, 2, update_send_after=5), "1f1b", hw8, reduction="after-backward")
    assert spans_of(comp, 0, "allreduce") == [(arrived + SUM, arrived + SUM + reduce_cycles)]
    assert spans_of(comp, 0, "update") == [(arrived, arrived + reduce_cycles + 30)]
    one = compose(two_stages(30, 1, update_send_after=5), "1f1b", hw8, reduction="after-backward")
    assert comp.makespan_cycles == one.makespan_cycles + reduce_cycles == arrived + reduce_cycles + 30


def test_with_ranks_a_tied_gradient_is_sent_per_rank(hw8):
    """Small gpt2 with two tensor-parallel ranks on two stages: each rank's LM head sends its shard of the
    vocabulary matrix's gradient to its twin on stage 0, so ChunkWork.update_sends counts one shard's bytes
    (per rank, as backward_bytes and the transfers that carry it), not both ranks' (which left the input
    gradient no bytes and made the send and its sum's reduction twice as long)."""
    import accelsim as A
    from accelsim.compiler.hierarchy.templates import step_work
    from accelsim.models.sizes import SMALL
    from accelsim.ops.registry import numel
    from accelsim.schedule.options import StepOptions

    graph = A.training_graph(A.models.build("gpt2", **SMALL["gpt2"], tensor_parallel=2), optimizer="sgd")
    shards = [n for n in graph.params if n.name.startswith("wte[")]
    assert len(shards) == 2
    _, last = step_work(graph, hw8, StepOptions.of(pipeline_stages=2, tensor_parallel=2, effort="fast")).chunks
    (to, nbytes), = last.update_sends
    assert to == 0 and nbytes == numel(shards[0].shape) * hw8.elem_bytes(shards[0].dtype)
    assert 0 < last.backward_bytes - nbytes < nbytes
