"""ZeRO stage 3 at stage granularity (compiler/hierarchy/zero3.py, compose.py), as the task level plans it
(compiler/planning/zero.py): each forward and backward item all-gathers the parameters it reads over the
replicas' links and waits for a gather only where its reader would start before it ends; every micro-batch's
gradients are reduce-scattered; no all-gather follows the update. Steps built by hand: F=10, B=20 cycles."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.step import StageStep
from accelsim.compiler.hierarchy.templates import step_work
from accelsim.compiler.hierarchy.zero3 import gathered_bytes, pass_gathers, zero3_sharding
from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.load import load_hw
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import collective_cost
from accelsim.schedule.options import StepOptions

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
    comp = compose(one_stage(2, forward=((PARAM, 0, 0, 0, -1),), backward=((PARAM, 5, 8, 0, -1),)), "1f1b", hw8, zero=3)
    forward_end = 10 + gather_cycles
    backward_end = forward_end + 20 + gather_cycles - 3
    assert spans_of(comp, "forward") == [(0, forward_end, 0)]
    assert spans_of(comp, "backward") == [(forward_end, backward_end, 0)]
    second = forward_end + 5
    assert spans_of(comp, "all_gather") == [(0, gather_cycles, 0), (second, second + gather_cycles, 0)]
    assert comp.makespan_cycles == backward_end + 5  # the update, and no all-gather after it
    assert comp.exposed_cycles["all_gather"] == 2 * gather_cycles - 3
    assert comp.busy_cycles == (10 + 20 + 5,)  # waiting for a gather is not work
    assert comp.peak_gathered_bytes == (PARAM,)


def test_a_gather_issued_long_before_its_reader_is_hidden(hw8, gather_cycles):
    long = 10 * gather_cycles
    chunks = (ChunkWork(0, long, 20, 0, 0, 0, 0, forward_gathers=((PARAM, 0, long - 1, 0, -1),)),)
    work = StepWork((StageWork(0, (0,), 5, 0, PARAM, 0),), chunks, microbatches=1, data_parallel=2, tensor_parallel=1)
    comp = compose(work, "1f1b", hw8, zero=3)
    assert comp.makespan_cycles == long + 20 + 5 and comp.exposed_cycles["all_gather"] == 0


@pytest.mark.parametrize("slack", [0, 1000, 10**9])
def test_work_that_needs_no_gathered_parameter_runs_while_its_reader_waits(hw8, gather_cycles, slack):
    comp = compose(one_stage(2, forward=((PARAM, 0, 0, slack, -1),)), "1f1b", hw8, zero=3)
    assert spans_of(comp, "forward") == [(0, 10 + max(0, gather_cycles - slack), 0)]


def test_a_gather_whose_reader_reads_only_the_micro_batch_goes_once_the_item_before_starts(hw8, gather_cycles):
    # M=2 on one chip (1F1B): F0 B0 F1 B1. F1's gather is ready at -1: issued as B0 starts, hidden by it when B0
    # is long enough; the first F0 has no item before, so it goes at 0
    long = 2 * gather_cycles
    chunks = (ChunkWork(0, 10, long, 0, 0, 0, 0, forward_gathers=((PARAM, -1, 0, 0, -1),)),)
    work = StepWork((StageWork(0, (0,), 5, 0, PARAM, 0),), chunks, microbatches=2, data_parallel=2, tensor_parallel=1)
    comp = compose(work, "1f1b", hw8, zero=3)
    first_end = 10 + gather_cycles
    assert spans_of(comp, "all_gather") == [(0, gather_cycles, 0), (first_end, first_end + gather_cycles, 1)]
    second = first_end + long
    assert [(a, b) for a, b, _ in spans_of(comp, "forward")] == [(0, first_end), (second, second + 10)]


def test_a_parameter_another_stage_gathered_first_comes_by_transfer(hw8):
    # p=2: chunk 1's forward reads, 3 cycles in, a parameter chunk 0 gathered first (gpt2's tied matrix): chunk
    # 0's forward item sends its copy as it ends (cycle 10), and chunk 1's forward, started at 10 on its input,
    # waits for it
    send = topology_of(hw8).route(0, 1).cycles(PARAM)
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0),
              ChunkWork(1, 10, 20, 0, 0, 0, 0, forward_gathers=((PARAM, 0, 3, 0, 0),)))
    stages = (StageWork(0, (0,), 5, 0, PARAM, 0), StageWork(1, (1,), 5, 0, PARAM, 0))
    comp = compose(StepWork(stages, chunks, microbatches=1, data_parallel=2, tensor_parallel=1), "1f1b", hw8, zero=3)
    assert not spans_of(comp, "all_gather")
    assert spans_of(comp, "transfer") == [(10, 10 + send, 0)]
    (forward,) = [(x.start, x.end) for x in comp.spans if x.kind == "forward" and x.stage == 1]
    assert forward == (10, 10 + send + 7)
    assert comp.exposed_cycles["all_gather"] == send - 3


@pytest.mark.parametrize("zero, sends", [(0, 1), (3, 2)])
def test_under_zero_3_a_weight_gradient_for_another_stage_is_sent_every_micro_batch(hw8, zero, sends):
    """The task level sums no gradient over the step under ZeRO (planning/step_sums.py): the LM head's part of the
    tied matrix's gradient crosses once per micro-batch, not once per step."""
    nbytes = 10**8
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0),
              ChunkWork(1, 10, 20, 0, 0, 0, 0, backward_bytes=nbytes, update_sends=((0, nbytes),)))
    stages = (StageWork(0, (0,), 5, nbytes, 0, 0), StageWork(1, (1,), 5, 0, 0, 0))
    comp = compose(StepWork(stages, chunks, microbatches=2, data_parallel=2, tensor_parallel=1), "1f1b", hw8, zero=zero)
    send = topology_of(hw8).route(1, 0).cycles(nbytes)
    crossed = [x for x in comp.spans if x.kind == "transfer" and x.stage == 1 and x.end - x.start == send]
    assert len(crossed) == sends
    (update,) = [x for x in comp.spans if x.kind == "update" and x.stage == 0]
    assert update.start >= max(x.end for x in crossed)


def test_the_update_waits_for_every_bucket_under_zero_3(hw8):
    grad = 20 * 2**20
    comp = compose(one_stage(2, grad=grad, update=1000), "1f1b", hw8, bucket_bytes=grad // 2, zero=3)
    last = max(end for _, end, _ in spans_of(comp, "reduce_scatter"))
    (update,) = spans_of(comp, "update")
    assert update[:2] == (last, last + 1000)


def test_every_micro_batch_reduce_scatters_its_gradients_and_the_update_waits_for_the_last(hw8):
    grad = 10 * 2**20
    rs = collective_cost(topology_of(hw8), "reduce_scatter", (0, 1), grad).cycles
    comp = compose(one_stage(2, M=2, grad=grad), "1f1b", hw8, zero=3)
    scatters = spans_of(comp, "reduce_scatter")
    assert [m for _, _, m in scatters] == [0, -1]  # micro-batch 0's, then the last (the step's) one
    assert all(end - start == rs for start, end, _ in scatters)  # each the whole gradient's
    (update,) = spans_of(comp, "update")
    assert update[0] == scatters[-1][1] and comp.makespan_cycles == update[1]
    assert not spans_of(comp, "all_gather") and not spans_of(comp, "allreduce")


def test_zero_3_with_one_replica_is_zero_0(hw8):
    """As at task level (zero.ZeroSteps.of): a shard of one replica is the whole, nothing is gathered, and a weight
    gradient for another stage is summed over the step and sent once, as without ZeRO."""
    work = one_stage(1, M=2, forward=((PARAM, 0, 0, 0, -1),), backward=((PARAM, 5, 8, 0, -1),), grad=10**6)
    assert compose(work, "1f1b", hw8, zero=3).span_rows == compose(work, "1f1b", hw8, zero=0).span_rows
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0),
              ChunkWork(1, 10, 20, 0, 0, 0, 0, backward_bytes=10**8, update_sends=((0, 10**8),)))
    stages = (StageWork(0, (0,), 5, 10**8, 0, 0), StageWork(1, (1,), 5, 0, 0, 0))
    sent = StepWork(stages, chunks, microbatches=2, data_parallel=1, tensor_parallel=1)
    assert compose(sent, "1f1b", hw8, zero=3).span_rows == compose(sent, "1f1b", hw8, zero=0).span_rows


@pytest.mark.parametrize("gathers, message", [
    (((PARAM, 9, 8, 0, -1),),
     r"forward_gathers\[0\] is \(10000000, 9, 8, 0, -1\): expected ready \(9\) at most need \(8\)"),
    (((PARAM, 5, 8, 0, -1), (PARAM, 2, 8, 0, -1)),
     r"forward_gathers\[1\] .*at least the ready of the gather before it \(5\)"),
    (((PARAM, -2, 8, 0, -1),), r"forward_gathers\[0\] must be \(bytes, ready, need, slack, source\): integers"),
    (((PARAM, 0, 8, -5, -1),), r"forward_gathers\[0\] must be \(bytes, ready, need, slack, source\)"),
    (((PARAM, 0.5, 8, 0, -1),), r"forward_gathers\[0\] must be \(bytes, ready, need, slack, source\)"),
    (((PARAM, 0, 8, 0),), r"forward_gathers\[0\] must be \(bytes, ready, need, slack, source\)"),
    (((PARAM, 0, 8, 0, 0),), r"forward_gathers\[0\] is .*: expected source -1 \(an all-gather\) or another chunk's"),
    ([(PARAM, 0, 8, 0, -1)],
     r"forward_gathers must be a tuple of \(bytes, ready, need, slack, source\) tuples, got \["),
])
def test_bad_gathers_are_refused_naming_the_chunk_field_and_value(hw8, gathers, message):
    with pytest.raises(ScheduleError, match=r"chunks\[0\]\." + message):
        compose(one_stage(2, forward=gathers), "1f1b", hw8, zero=3)


@pytest.mark.parametrize("zero", [4, -1, True, "3"])
def test_a_zero_stage_that_is_not_0_to_3_is_refused_naming_the_value(hw8, zero):
    with pytest.raises(ScheduleError, match=rf"zero must be the ZeRO stage 0, 1, 2 or 3, got {zero!r}"):
        compose(one_stage(2), "1f1b", hw8, zero=zero)


# ---- measured from a template ------------------------------------------------------------------------------------

def test_a_template_measures_the_gathers_of_every_parameter_its_passes_read(hw8):
    """mlp, d=2, one stage: its forward pass reads every sharded parameter, each gathered once, in the order read
    (ready never decreasing, at most need, need within the pass); its backward pass re-gathers the weights it
    reads (fewer: a bias's gradient reads no parameter)."""
    graph = A.training_graph(A.models.build("mlp"), optimizer="adam")
    (chunk,) = step_work(graph, hw8, StepOptions.of(data_parallel=2, zero=3)).chunks
    params = gathered_bytes(graph, hw8, zero3_sharding(graph, 2))
    assert sum(g[0] for g in chunk.forward_gathers) == sum(params.values())
    assert 0 < sum(g[0] for g in chunk.backward_gathers) < sum(params.values())
    passes = ((chunk.forward_gathers, chunk.forward_cycles), (chunk.backward_gathers, chunk.backward_cycles))
    for gathers, cycles in passes:
        readies = [ready for _, ready, _, _, _ in gathers]
        assert readies == sorted(readies) and all(-1 <= r <= need <= cycles for _, r, need, _, _ in gathers)
        assert all(source == -1 for *_, source in gathers)  # one chunk: nothing comes from another


def _task(i: int, deps: list[int], reads: list[int]) -> TaskSpec:
    return TaskSpec(id=i, kind="node", node=i, op="add", phase="forward", microbatch=0, replica=0, stage=0, chip=0,
                    out_chip=0, deps=deps, options=(), out_bytes=0, reads=[(r, -1) for r in reads])


def test_a_pass_gathers_each_parameter_before_its_first_reader_with_the_work_beside_it_as_slack():
    # a [0, 10) reads P1 and only leaves; b [10, 20) reads a and P2 (its inputs' producers ready at cycle 4, the
    # task level's one step ahead); c [20, 25) reads neither, nor anything computed from them
    tasks = [_task(0, [], [100]), _task(1, [0], [101]), _task(2, [], [])]
    spans = {0: (0, 10), 1: (10, 20), 2: (20, 25)}
    gathers = pass_gathers(tasks, spans, lambda t: None if not t.deps else 4, lambda at: min(at, 25),
                           lambda intervals: sum(b - a for a, b in intervals), {100: 7, 101: 9}, {101: 3})
    assert gathers == ((7, -1, 0, 5, -1),   # issued once the item before starts; c may run while a waits
                       (9, 4, 10, 5, 3))    # issued 6 cycles before b, from chunk 3's copy
    # c computes a weight gradient sent to another stage's update: the task level runs it after the chain
    unsent = pass_gathers(tasks, spans, lambda t: None if not t.deps else 4, lambda at: min(at, 25),
                          lambda intervals: sum(b - a for a, b in intervals), {100: 7, 101: 9}, {101: 3},
                          no_slack=frozenset({2}))
    assert unsent == ((7, -1, 0, 0, -1), (9, 4, 10, 0, 3))


def test_the_stage_steps_figures_report_what_each_pass_gathers_and_the_peak_held(hw8):
    """StageStep.to_dict (the CLI's --json): per chunk the bytes its forward and backward passes all-gather over
    the replicas per micro-batch (a copy sent from another chunk is no all-gather), per stage the most held."""
    chunks = (ChunkWork(0, 10, 20, 0, 0, 0, 0, forward_gathers=((PARAM, 0, 0, 0, -1), (3, 0, 5, 0, -1))),
              ChunkWork(1, 10, 20, 0, 0, 0, 0, forward_gathers=((PARAM, 0, 3, 0, 0),),
                        backward_gathers=((5, 0, 0, 0, -1),)))
    stages = (StageWork(0, (0,), 5, 0, PARAM, 0), StageWork(1, (1,), 5, 0, PARAM, 0))
    work = StepWork(stages, chunks, microbatches=1, data_parallel=2, tensor_parallel=1)
    options = StepOptions.of(data_parallel=2, pipeline_stages=2, zero=3, granularity="stage")
    step = StageStep("g", hw8.name, hw8.clock_hz, options, True, 2, work, compose(work, "1f1b", hw8, zero=3))
    figures = step.to_dict()
    gathered = [(c["forward_gather_bytes"], c["backward_gather_bytes"]) for c in figures["chunks"]]
    assert gathered == [(PARAM + 3, 0), (0, 5)]
    assert figures["peak_gathered_bytes"] == [PARAM + 3, PARAM]
