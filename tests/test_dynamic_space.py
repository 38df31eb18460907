"""The dynamic runtime's buffer space (sim/space.py): granted in the compiled order within a micro-batch, and with the
unit rather than after it, so a fused step the compiler fitted in memory runs to the end where the work queue's
first-come order used to deadlock (issue 28's fused conv chain on Stream's chip); a deadlock that remains (the
runtime ignores the in-flight window) names its cycle of waits."""
import functools
import itertools

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import AccelsimError
from accelsim.passes.fuse_layers import pass_name
from accelsim.sim import SimulationError, simulate
from accelsim.sim.waits import explain_cycle, find_cycle

from test_fused_placement import HW_FILE, _conv_chain  # Stream's chip and its conv -> relu -> conv -> relu chain
from test_sim import SCHEDULES, toy_hw

SRAM, DRAM = "chips.0.memories.0.capacity_bytes", "chips.0.memories.1.capacity_bytes"


@functools.cache
def _fused_chain(tiles: int) -> A.Graph:
    return A.optimize(_conv_chain(), [pass_name(tiles)])


def _fused_step(tiles: int, overrides: dict) -> tuple[A.HwSpec, A.Schedule]:
    hw = A.load_hw(HW_FILE, overrides)
    return hw, A.compile(_fused_chain(tiles), hw, effort="fast")


def _assert_runs_every_task_once_no_faster_than_the_bounds(schedule: A.Schedule, result: A.Result) -> None:
    assert sorted(s.task for s in result.spans) == [t.id for t in schedule.tasks]
    assert result.makespan_cycles >= schedule.bounds.bound_cycles
    for span in result.spans:  # no task runs faster than its cheapest candidate
        cheapest = min(c.cycles for c in schedule.candidates[schedule.tasks[span.task].candidates])
        assert span.end - span.start >= cheapest
    for mem in result.memories:
        assert max(used for _, used in mem.occupancy) <= mem.capacity_bytes


@pytest.mark.parametrize("tiles, overrides", [(2, {SRAM: 2048, DRAM: 25088}), (4, {SRAM: 4096})],
                         ids=["2_tiles_tight_sram_and_dram", "4_tiles_4KiB_sram"])
def test_a_fused_chain_that_deadlocked_the_work_queue_runs_to_the_end_like_its_static_replay(tiles, overrides):
    """Both deadlocked before: with 2 tiles the one SIMD core held tile 0's concat waiting for DRAM that tile 1's
    concat (queued behind it) would have freed, after weight slices and broadcasts that the compiled schedule runs
    late had taken the room both needed; with 4 tiles tile 2's second relu took the SRAM that tile 1's conv needed
    and only the final concat, which reads that conv, frees it."""
    hw, schedule = _fused_step(tiles, overrides)
    static = simulate(schedule, hw, "static")
    assert static.makespan_cycles == schedule.makespan_cycles
    dynamic = simulate(schedule, hw, "dynamic")
    _assert_runs_every_task_once_no_faster_than_the_bounds(schedule, dynamic)
    assert dynamic.summary()["port_bytes"].keys() == static.summary()["port_bytes"].keys()


def test_the_work_queue_never_deadlocks_on_a_fused_chain_that_compiles_and_replays_statically():
    """A sweep over SRAM and DRAM capacities around the chain's working set (most of these points deadlocked
    before): every step that compiles runs to the end in dynamic mode."""
    ran = 0
    for tiles, sram, dram in itertools.product((2, 4), (1024, 2048, 3072, 4096, 8192), (25088, 32768)):
        try:
            hw, schedule = _fused_step(tiles, {SRAM: sram, DRAM: dram})
        except AccelsimError:  # the step does not fit these memories
            continue
        assert simulate(schedule, hw, "static").makespan_cycles == schedule.makespan_cycles
        _assert_runs_every_task_once_no_faster_than_the_bounds(schedule, simulate(schedule, hw, "dynamic"))
        ran += 1
    assert ran >= 10  # of 20 points: the sweep is not vacuous


def test_a_deadlock_from_admitting_more_micro_batches_than_fit_names_its_cycle_in_one_paragraph():
    """8 micro-batches' inputs fill the SRAM (the runtime ignores the in-flight window of 1), so no relu has room
    for its output: relu 0 waits for space held by micro-batch 1's input, whose relu waits behind relu 0."""
    g = A.Graph("two_layers")
    F.exp(F.relu(g.input("x", (64,))))
    hw = toy_hw(8, sram_bytes=8 * 256)
    schedule = A.compile(g, hw, microbatches=8, max_in_flight=1)
    with pytest.raises(SimulationError) as e:
        simulate(schedule, hw, "dynamic")
    header, why, *blocked = str(e.value).split("\n")
    assert header == "simulation of two_layers deadlocked with 16 task(s) blocked:"
    assert why.startswith("Cycle of waits: task 0 (node relu %1, mb 0, replica 0, chip0) waits for 256 B of space "
                          "in chip0:sram (0 B free), held by leaf %0 of mb 1 until task 2 reads it; "
                          "task 2 (node relu %1, mb 1, replica 0, chip0) waits for 256 B of space in chip0:sram")
    assert "spans 8 micro-batches" in why and "in-flight window" in why  # every micro-batch's input fills the SRAM
    assert blocked[0] == "  task 0 (node relu %1, mb 0, replica 0, chip0): waiting for 256 B of space in chip0:sram"


def test_find_cycle_returns_the_cycle_reached_from_the_start_and_nothing_for_a_chain():
    waits = {4: [(1, "d")], 1: [(2, "a")], 2: [(5, "x"), (3, "b")], 3: [(1, "c")]}
    assert find_cycle(waits, [4]) == [(1, "a"), (2, "b"), (3, "c")]
    assert find_cycle({1: [(2, "a")], 2: [(3, "b")]}, [1, 2, 3]) == []


def test_a_cycle_within_one_micro_batch_is_put_down_to_placement_and_no_cycle_explains_nothing():
    cycle = [(1, "waits for 8 B of space in chip0:sram (0 B free), held by the output of task 3 until task 2 reads it"),
             (2, "waits for its input from task 1")]
    why = explain_cycle(cycle, lambda t: f"task {t}", ["mb 0, replica 0"])
    assert why.startswith("Cycle of waits: task 1 waits for 8 B of space in chip0:sram (0 B free), held by the output "
                          "of task 3 until task 2 reads it; task 2 waits for its input from task 1; and so back to the "
                          "first. Within one micro-batch")
    assert "compiled placement" in why and "\n" not in why
    assert explain_cycle([], lambda t: f"task {t}", []) == ""


def test_the_weight_dma_engine_fetches_the_first_layers_weights_first_not_in_task_id_order():
    """tpu_v1_like's weight prefetches have no inputs, so all are ready at once; the one DMA engine used to take them
    in task-id order (the last backward layer's first) and sit on each waiting for a slot in the weight FIFO. A
    prefetch whose micro-batch's earlier-scheduled prefetches have no slot yet is now passed over, so the first
    convolution starts at its compiled time."""
    hw = A.load_hw("tpu_v1_like")
    schedule = A.load_schedule(SCHEDULES / "superres_train_tpu_v1_like.json", hw=hw)
    dynamic = simulate(schedule, hw, "dynamic")
    _assert_runs_every_task_once_no_faster_than_the_bounds(schedule, dynamic)
    first_matmul = min((t for t in schedule.tasks if t.resource == "mxu"), key=lambda t: (t.start, t.id))
    assert dynamic.spans[first_matmul.id].task == first_matmul.id
    assert dynamic.spans[first_matmul.id].start == first_matmul.start
