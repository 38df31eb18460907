"""The `fusion` step option (Graph, HwSpec, StepOptions -> the step compiled fused or not): a tile count
fuses every chain of the inference graph into that many tiles (passes/fuse_layers.py), and `auto` compiles
the step unfused and at each tile count and keeps the shortest, then the one moving the fewest DRAM bytes
(the unfused step on a tie), as compile keeps a split plan only when it is shorter. The schedule records
the count it used (`options.fusion`; "off" when auto kept the unfused step).

A fused step is the schedule of the rewritten graph: its source records the fusion pass like any pass
optimize applied, so `check` and `simulate` rebuild the fused graph from a zoo model's schedule.
"""
from __future__ import annotations

from typing import Callable

from accelsim.errors import AccelsimError, MemoryFitError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.passes.fuse_chains import plan_fusion
from accelsim.passes.fuse_layers import FUSION_TILES, pass_name
from accelsim.passes.kind import training_node
from accelsim.passes.manager import optimize_with_log
from accelsim.schedule.levels import chip_list, memory_of
from accelsim.schedule.plan import Schedule
from accelsim.schedule.options import StepOptions
from accelsim.schedule.traffic import placed_io, task_loads

CompileStep = Callable[[Graph, StepOptions], Schedule]
"""compile itself on another graph with other options (the fusion loop compiles each candidate)."""


def dram_bytes(schedule: Schedule, hw: HwSpec) -> int:
    """Bytes the step's tasks move through the ports of DRAM-kind memories (weights, spills, inputs and
    outputs that live off chip), as the validator and the simulator meter them (schedule/traffic.py)."""
    chips = chip_list(hw)
    total = 0
    for t, loads in zip(schedule.tasks, task_loads(schedule, hw, placed_io(schedule, hw))):
        for memory, nbytes in loads.items():
            level = memory_of(chips[t.chip], memory)
            if level is not None and level.kind == "dram":
                total += nbytes
    return total


def fused(graph: Graph, hw: HwSpec | None, tiles: int) -> tuple[Graph | None, str, tuple[str, ...]]:
    """`graph` with every chain fused into `tiles` tiles by the verified pass (the numeric check on when
    `hw` is given: compiling; off when replaying a schedule's choice), or None and why not; and the pass's
    rewrite lines (the fusion groups)."""
    later = training_node(graph)
    if later is not None:
        return None, (f"layer fusion applies to inference graphs, and {graph.name!r} has {later.phase} node "
                      f"%{later.id} {later.name!r}: the backward pass reads the intermediates fusion keeps on "
                      "chip"), ()
    plan = plan_fusion(graph, tiles)
    if not plan.chains:
        why = "; ".join(plan.refused[:3]) + (f"; and {len(plan.refused) - 3} more" if len(plan.refused) > 3 else "")
        return None, f"no chain of {graph.name!r} fuses into {tiles} tiles ({why or 'it has no conv or pool chain'})", ()
    try:
        out, log = optimize_with_log(graph, [pass_name(tiles)], hw=hw, verify=hw is not None)
    except AccelsimError as e:
        return None, str(e), ()
    record = log.records[0]
    if record.status != "applied":
        return None, f"{record.label} {record.status}: {record.reason or 'nothing matched'}", ()
    return out, "", record.rewrites


def step_graph(graph: Graph, schedule: Schedule) -> tuple[Graph, tuple[str, ...]]:
    """The graph `schedule` was compiled from, given the graph handed to compile: fused as the schedule's
    resolved `fusion` says (the same deterministic pass), and the fusion groups (one line per chain)."""
    tiles = schedule.options.fusion
    if tiles == "off":
        return graph, ()
    out, why, groups = fused(graph, None, tiles)
    if out is None:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} was compiled with fusion={tiles}, which does "
                            f"not apply to graph {graph.name!r}: {why}")
    return out, groups


def compile_fusion(graph: Graph, hw: HwSpec, options: StepOptions, compile_step: CompileStep) -> Schedule:
    """The step under `options.fusion` (module docstring); `compile_step` compiles one candidate with fusion
    off. A tile count that fuses nothing, or a training graph, is refused naming why; `auto` also keeps a
    fused step where the unfused one does not fit memory."""
    unfused_options = options.model_copy(update={"fusion": "off"})
    compile_step = _task_level(compile_step)
    if options.fusion != "auto":
        graph_fused, why, _ = fused(graph, hw, options.fusion)
        if graph_fused is None:
            raise ScheduleError(f"fusion={options.fusion}: {why}; compile with fusion='off'")
        return _recorded(compile_step(graph_fused, unfused_options), options.fusion)
    if training_node(graph) is not None:
        return compile_step(graph, unfused_options)
    try:
        best: Schedule | None = compile_step(graph, unfused_options)
        best_key = (best.makespan_cycles, dram_bytes(best, hw))
    except MemoryFitError as e:  # fused tiles may fit where the whole layers do not
        best, best_key, unfused_error = None, None, e
    for tiles in FUSION_TILES:
        graph_fused, _, _ = fused(graph, hw, tiles)
        if graph_fused is None:
            continue
        try:
            candidate = compile_step(graph_fused, unfused_options)
        except AccelsimError:  # a fused step that does not fit or compile is not a candidate
            continue
        key = (candidate.makespan_cycles, dram_bytes(candidate, hw))
        if best_key is None or key < best_key:
            best, best_key = _recorded(candidate, tiles), key
    if best is None:
        raise unfused_error
    return best


def _task_level(compile_step: CompileStep) -> CompileStep:
    """`compile_step` refusing a step compiled at stage granularity, whose tasks (and DRAM bytes) are not
    scheduled one by one."""
    def run(graph: Graph, options: StepOptions) -> Schedule:
        out = compile_step(graph, options)
        if not isinstance(out, Schedule):
            raise ScheduleError(f"layer fusion compiles {graph.name!r} at stage granularity, where "
                                "fused tiles are not scheduled as tasks; compile with granularity='task' or "
                                "fusion='off'")
        return out
    return run


def _recorded(schedule: Schedule, tiles: int) -> Schedule:
    """`schedule` (compiled with fusion off) recording the tile count its graph was fused with, as compile
    records options it resolved (`auto` becomes the count kept, or "off": then the schedule is the unfused
    one, byte for byte)."""
    return schedule.model_copy(update={"options": schedule.options.model_copy(update={"fusion": tiles})})
