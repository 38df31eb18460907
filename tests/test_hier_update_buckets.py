"""A stage's optimizer update under data parallelism at stage level (compiler/hierarchy/compose.py): each
gradient bucket's share of the update runs once that bucket is reduced, as the task level updates each
parameter once its own gradient is reduced, so the last bucket's all-reduce hides under the update of the
parameters reduced before it (issue 27, Agreement: gpt2-2 d=2 p=2 M=1 was 1.036 when the whole update waited
for the last bucket)."""
from __future__ import annotations

import pytest

from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.hw.load import load_hw
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_cost

GRAD = 20 * 2**20
"""Gradient bytes of the one stage: two buckets of GRAD / 2."""
BACKWARD = 10**6
"""Cycles of the backward pass; the first bucket is complete halfway through it and reduced under the rest."""


@pytest.fixture(scope="module")
def hw8():
    return load_hw("a100_x8")


@pytest.fixture(scope="module")
def allreduce_cycles(hw8) -> int:
    """One bucket's all-reduce between the two replicas' chips."""
    cycles = collective_cost(topology_of(hw8), "allreduce", (0, 1), GRAD // 2).cycles
    assert 0 < cycles < BACKWARD // 2
    return cycles


def one_stage(update: int, sent_update: int = 0) -> StepWork:
    """One stage, one micro-batch (forward 10 cycles, backward BACKWARD), two replicas, GRAD gradient bytes."""
    stage = StageWork(0, (0,), update, GRAD, 0, 0, sent_update_cycles=sent_update)
    return StepWork((stage,), (ChunkWork(0, 10, BACKWARD, 0, 0, 0, 0),), 1, 2, 1)


def update_span(comp):
    (span,) = [x for x in comp.spans if x.kind == "update"]
    return span


def test_the_last_buckets_allreduce_hides_under_the_first_buckets_update(hw8, allreduce_cycles):
    # the first bucket's half of the update (longer than the second bucket's all-reduce) starts as the
    # backward pass ends; the second half follows at once, its bucket reduced meanwhile
    update = 4 * allreduce_cycles
    comp = compose(one_stage(update), "1f1b", hw8, bucket_bytes=GRAD // 2)
    items_end = 10 + BACKWARD
    assert [x.end for x in comp.spans if x.kind == "allreduce"][-1] == items_end + allreduce_cycles
    assert (update_span(comp).start, update_span(comp).end) == (items_end, items_end + update)
    assert comp.makespan_cycles == items_end + update
    assert comp.exposed_cycles["allreduce"] == 0


def test_a_buckets_share_of_the_update_waits_for_its_allreduce(hw8, allreduce_cycles):
    # the first half of the update is shorter than the second bucket's all-reduce: the second half waits for
    # it, and only that wait is exposed
    update = allreduce_cycles // 2 * 2
    comp = compose(one_stage(update), "1f1b", hw8, bucket_bytes=GRAD // 2)
    items_end = 10 + BACKWARD
    assert comp.makespan_cycles == items_end + allreduce_cycles + update // 2
    assert comp.exposed_cycles["allreduce"] == allreduce_cycles - update // 2
    assert update_span(comp).start == items_end


def test_the_part_updating_sent_gradients_still_waits_for_every_bucket(hw8, allreduce_cycles):
    # all of the update is the part other stages' gradients feed (here none are sent): it waits for the last
    # bucket, as before
    update = 4 * allreduce_cycles
    comp = compose(one_stage(update, sent_update=update), "1f1b", hw8, bucket_bytes=GRAD // 2)
    items_end = 10 + BACKWARD
    assert update_span(comp).start == items_end + allreduce_cycles
    assert comp.makespan_cycles == items_end + allreduce_cycles + update
    assert comp.exposed_cycles["allreduce"] == allreduce_cycles
