"""ZeRO stage 3 at stage granularity (compiler/hierarchy/zero3.py, compose.py), as the task level plans it
(compiler/planning/zero.py): each forward and backward item all-gathers the parameters it reads over the
replicas' links and waits for a gather only where its reader would start before it ends; every micro-batch's
gradients are reduce-scattered; no all-gather follows the update. Steps built by hand: F=10, B=20 cycles."""
from __future__ import annotations

import pytest

from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.load import load_hw
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_cost

PARAM = 10**7
"""Bytes of one gathered parameter (its gather lasts thousands of cycles: far longer than an item)."""


@pytest.fixture(scope="module")
def hw8():
    return load_hw("a100_x8")


@pytest.fixture(scope="module")
def gather_cycles(hw8) -> int:
    """A PARAM-byte all-gather between stage 0's chip and its replica's (chip 1 with p=1: replica r adds r)."""
    return collective_cost(topology_of(hw8), "all_gather", (0, 1), PARAM).cycles


def one_stage(replicas: int, M: int = 1, forward=(), backward=(), grad: int = 0, update: int = 5) -> StepWork:
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0, forward_gathers=forward, backward_gathers=backward),)
    return StepWork((StageWork(0, (0,), update, grad, PARAM, 0),), chunks, microbatches=M, data_parallel=replicas,
                    tensor_parallel=1)


def spans_of(comp, kind: str) -> list[tuple[int, int, int]]:
    return [(x.start, x.end, x.microbatch) for x in comp.spans if x.kind == kind]


def test_a_pass_waits_for_a_gather_its_first_reader_needs_and_nothing_follows_the_update(hw8, gather_cycles):
    # forward: the gather goes as the chip is free (cycle 0) and its reader starts the pass: F runs 0-10 plus the
    # gather's cycles; backward: issued 5 cycles in, needed 8 in: the pass stops 3 cycles in for what is left
    comp = compose(one_stage(2, forward=((PARAM, 0, 0),), backward=((PARAM, 5, 8),)), "1f1b", hw8, zero=3)
    forward_end = 10 + gather_cycles
    backward_end = forward_end + 20 + gather_cycles - 3
    assert spans_of(comp, "forward") == [(0, forward_end, 0)]
    assert spans_of(comp, "backward") == [(forward_end, backward_end, 0)]
    assert spans_of(comp, "all_gather") == [(0, gather_cycles, 0), (forward_end + 5, forward_end + 5 + gather_cycles, 0)]
    assert comp.makespan_cycles == backward_end + 5  # the update, and no all-gather after it
    assert comp.exposed_cycles["all_gather"] == 2 * gather_cycles - 3
    assert comp.busy_cycles == (10 + 20 + 5,)  # waiting for a gather is not work
    assert comp.peak_gathered_bytes == (PARAM,)


def test_a_gather_issued_long_before_its_reader_is_hidden(hw8, gather_cycles):
    long = 10 * gather_cycles
    chunks = (ChunkWork(0, long, 20, 0, 0, 0, 0, forward_gathers=((PARAM, 0, long - 1),)),)
    work = StepWork((StageWork(0, (0,), 5, 0, PARAM, 0),), chunks, microbatches=1, data_parallel=2, tensor_parallel=1)
    comp = compose(work, "1f1b", hw8, zero=3)
    assert comp.makespan_cycles == long + 20 + 5 and comp.exposed_cycles["all_gather"] == 0


def test_every_micro_batch_reduce_scatters_its_gradients_and_the_update_waits_for_the_last(hw8):
    grad = 10 * 2**20
    rs = collective_cost(topology_of(hw8), "reduce_scatter", (0, 1), grad).cycles
    comp = compose(one_stage(2, M=2, grad=grad), "1f1b", hw8, zero=3)
    scatters = spans_of(comp, "reduce_scatter")
    assert [m for _, _, m in scatters] == [0, -1]  # micro-batch 0's, then the last (the step's) one
    (update,) = spans_of(comp, "update")
    assert update[0] == scatters[-1][1] and comp.makespan_cycles == update[1]
    assert not spans_of(comp, "all_gather") and not spans_of(comp, "allreduce")


def test_zero_3_with_one_replica_is_zero_0(hw8):
    """As at task level (zero.ZeroSteps.of): a shard of one replica is the whole, nothing is gathered."""
    work = one_stage(1, M=2, forward=((PARAM, 0, 0),), backward=((PARAM, 5, 8),), grad=10**6)
    assert compose(work, "1f1b", hw8, zero=3).span_rows == compose(work, "1f1b", hw8, zero=0).span_rows


@pytest.mark.parametrize("gathers, message", [
    (((PARAM, 9, 8),), r"forward_gathers\[0\] is \(10000000, 9, 8\): expected ready \(9\) at most need \(8\)"),
    (((PARAM, 5, 8), (PARAM, 2, 8)), r"forward_gathers\[1\] .*at least the ready of the gather before it \(5\)"),
    (((PARAM, -1, 8),), r"forward_gathers\[0\] must be a \(bytes, ready, need\) triple of non-negative integers"),
    (((PARAM, 0.5, 8),), r"forward_gathers\[0\] must be a \(bytes, ready, need\) triple"),
    ([(PARAM, 0, 8)], r"forward_gathers must be a tuple of \(bytes, ready, need\) triples, got \["),
])
def test_bad_gathers_are_refused_naming_the_chunk_field_and_value(hw8, gathers, message):
    with pytest.raises(ScheduleError, match=r"chunks\[0\]\." + message):
        compose(one_stage(2, forward=gathers), "1f1b", hw8, zero=3)


@pytest.mark.parametrize("zero", [4, -1, True, "3"])
def test_a_zero_stage_that_is_not_0_to_3_is_refused_naming_the_value(hw8, zero):
    with pytest.raises(ScheduleError, match=rf"zero must be the ZeRO stage 0, 1, 2 or 3, got {zero!r}"):
        compose(one_stage(2), "1f1b", hw8, zero=zero)
