"""The `fusion` step option (Graph, HwSpec, StepOptions -> the step compiled fused or not): a tile count
fuses every chain of the inference graph into that many tiles (passes/fuse_layers.py); `auto` chooses per
chain: it compiles the step unfused, prices each chain unfused and at each tile count from that schedule
(compiler/fusion_choice.py), fuses each chain whose estimate is cheaper with its cheapest count, compiles that
step and keeps it when it is shorter, then moves fewer DRAM bytes (the unfused step on a tie), as compile
keeps a split plan only when it is shorter. The estimate ranks chains better than it judges them: the half of
the chosen chains with the largest estimated savings is compiled too, and so on down to the best chain alone
(1 + log2(chains) compiles), then the best chain alone at each other count it estimates cheaper than unfused
(the estimate can misjudge where a tile's values fit); then, in the estimate's order, each chosen chain the
shortest step so far leaves unfused is added to it and kept where the step gets shorter (at most one compile per
chain: the estimate prices each chain alone, and chains fused together compete for the on-chip memory, so a
chain worth fusing alone can lengthen the step beside others). The shortest step of them all is kept. Where the
unfused step does not fit memory, `auto` compiles every tile count instead and keeps the shortest that fits; a
graph fused already is left as it is. The schedule records what it used (`options.fusion`: a tile count when
every chain was fused with it, "auto" with `options.fusion_chains` for a per-chain choice, "off" when auto kept
the unfused step).

A fused chain stages each weight once for its tiles (passes/fuse_layers.py); those copies live across the
group's tiles, and where the fused step then does not fit memory (MemoryFitError), every candidate (a tile count,
the chains given, each of auto's) is compiled again with each tile reading the weights itself (the
`fuse_layers_t<T>_unstaged` passes): deterministic, recorded in the schedule's source passes, and said by
`step_graph`'s lines ("weights re-read per tile: staged copies did not fit").

A fused step is the schedule of the rewritten graph: its source records the fusion passes like any pass
optimize applied (one per run of chains sharing a tile count, each naming its chains' first layers), so
`check` and `simulate` rebuild the fused graph from a zoo model's schedule.
"""
from __future__ import annotations

from typing import Callable

from accelsim.errors import AccelsimError, MemoryFitError, ScheduleError
from accelsim.compiler.fusion_choice import ChainChoice, choose_chains, fusion_passes, ranked_pairs
from accelsim.fusion_groups import fusion_groups
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.hw.precision import at_precision
from accelsim.hw.spec import HwSpec
from accelsim.layer_names import layer_names
from accelsim.mapping.errors import MappingSpecError
from accelsim.passes.fuse_chains import plan_fusion
from accelsim.passes.fuse_layers import FUSION_TILES, pass_name
from accelsim.passes.kind import training_node
from accelsim.passes.manager import optimize_with_log
from accelsim.schedule.levels import chip_list, memory_of
from accelsim.schedule.plan import Schedule, graph_hash
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


Fused = tuple[Graph | None, str, tuple[str, ...]]
"""A fused graph (None: not fused, and why), and the fusion passes' rewrite lines (one per fusion group)."""

UNSTAGED_NOTE = "staged copies did not fit"
"""What `step_graph` adds to each fusion group's line of a step compiled by the fallback (module docstring)."""


def fused(graph: Graph, hw: HwSpec | None, tiles: int, stage_weights: bool = True) -> Fused:
    """`graph` with every chain fused into `tiles` tiles by the verified pass (the numeric check on when
    `hw` is given: compiling; off when replaying a schedule's choice), each weight staged once or read by
    every tile, or None and why not; and the pass's rewrite lines (the fusion groups)."""
    why = _refused(graph)
    if why:
        return None, why, ()
    plan = plan_fusion(graph, tiles)
    if not plan.chains:
        why = "; ".join(plan.refused[:3]) + (f"; and {len(plan.refused) - 3} more" if len(plan.refused) > 3 else "")
        return None, f"no chain of {graph.name!r} fuses into {tiles} tiles ({why or 'it has no conv or pool chain'})", ()
    return fused_by(graph, hw, (AppliedPass(pass_name(tiles, stage_weights)),))


def _refused(graph: Graph) -> str:
    """Why `graph` cannot be fused ("" if it can: an inference graph)."""
    first = training_node(graph)
    if first is None:
        return ""
    # named by its first computed node and that node's layer (a constant the gradient rules made says little)
    later = next((n for n in graph.nodes if n.phase != "forward" and not n.is_leaf), first)
    return (f"layer fusion applies to inference graphs, and {graph.name!r} has a {later.phase} pass (its first "
            f"node %{later.id} {later.op} in layer {layer_names(graph)[later.id]!r}): the backward pass reads the "
            f"intermediates fusion keeps on chip")


def fused_by(graph: Graph, hw: HwSpec | None, passes: tuple[AppliedPass, ...]) -> tuple[Graph | None, str,
                                                                                          tuple[str, ...]]:
    """`graph` rewritten by the fusion `passes` in order (numerically checked when `hw` is given), or None and
    why not; and the passes' rewrite lines (the fusion groups)."""
    try:
        out, log = optimize_with_log(graph, list(passes), hw=hw, verify=hw is not None)
    except AccelsimError as e:
        return None, str(e), ()
    for record in log.records:
        if record.status != "applied":
            return None, f"{record.label} {record.status}: {record.reason or 'nothing matched'}", ()
    return out, "", tuple(line for record in log.records for line in record.rewrites)


def step_graph(graph: Graph, schedule: Schedule) -> tuple[Graph, tuple[str, ...]]:
    """The graph `schedule` was compiled from, given the graph handed to compile: fused as the schedule's
    resolved `fusion` says (the same deterministic passes: for a per-chain choice, those its source records
    after the graph's own), and the fusion groups (one line per chain)."""
    tiles = schedule.options.fusion
    if tiles == "off":
        return graph, ()
    if tiles == "auto":
        out, why, groups = _per_chain(graph, schedule)
    else:
        out, why, groups = _matching(schedule, lambda staged: fused(graph, None, tiles, staged),
                                     f"fusing it into {tiles} tiles")
    if out is None:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} was compiled with fusion={tiles}, which does "
                            f"not apply to graph {graph.name!r}: {why}")
    return out, groups


def _per_chain(graph: Graph, schedule: Schedule) -> tuple[Graph | None, str, tuple[str, ...]]:
    """`graph` fused per chain as `schedule`'s options.fusion_chains record, checked against its graph hash."""
    chains = schedule.options.fusion_chains
    if not chains:
        return None, "it records no chains fused (options.fusion_chains)", ()
    try:
        passes = fusion_passes(graph, chains)
    except ScheduleError as e:
        return None, str(e), ()
    return _matching(schedule, lambda staged: fused_by(graph, None, passes if staged else
                                                       fusion_passes(graph, chains, stage_weights=False)),
                     f"fusing its chains {list(chains)}")


def _matching(schedule: Schedule, fuse: Callable[[bool], Fused], what: str) -> Fused:
    """The fused graph `schedule` was compiled from: `fuse(True)` (weights staged) or, where that is another
    graph than the one compiled (graph hash), `fuse(False)`, the fallback's, its lines saying so; None and why
    when neither is (`what`: the fusion, for the message)."""
    out, why, groups = fuse(True)
    if out is None or graph_hash(out) == schedule.graph_hash:
        return out, why, groups
    out, why, groups = fuse(False)
    if out is None:
        return None, why, ()
    if graph_hash(out) != schedule.graph_hash:
        return None, f"{what} gives another graph than the one compiled, its weights staged or not", ()
    return out, why, tuple(f"{line}: {UNSTAGED_NOTE}" for line in groups)


def compile_fusion(graph: Graph, hw: HwSpec, options: StepOptions, compile_step: CompileStep) -> Schedule:
    """The step under `options.fusion` (module docstring); `compile_step` compiles one candidate with fusion
    off. A tile count that fuses nothing, or a training graph, is refused naming why; `auto` also keeps a
    fused step where the unfused one does not fit memory."""
    unfused_options = options.model_copy(update={"fusion": "off", "fusion_chains": None})
    compile_step = _task_level(compile_step)
    if options.fusion != "auto":
        tiles = options.fusion
        schedule = _compile_fused(lambda staged: fused(graph, hw, tiles, staged), unfused_options, compile_step,
                                  f"fusion={tiles}", "; compile with fusion='off'")
        return _recorded(schedule, tiles)
    if _refused(graph):
        if options.fusion_chains:
            raise ScheduleError(f"fusion_chains: {_refused(graph)}")
        return compile_step(graph, unfused_options)
    if options.fusion_chains:  # the chains given: fused as they are, nothing chosen
        return _fused_chains(graph, hw, options.fusion_chains, unfused_options, compile_step)
    if fusion_groups(graph):  # fused already (A.optimize with a fuse_layers pass): its tiles are the choice
        return compile_step(graph, unfused_options)
    try:
        unfused = compile_step(graph, unfused_options)
    except MemoryFitError as e:  # fused tiles may fit where the whole layers do not
        return _fitting(graph, hw, unfused_options, compile_step, e)
    choices = chain_choices(graph, hw, options, unfused)
    ranked = ranked_pairs(choices)
    best, best_key, best_chosen = unfused, (unfused.makespan_cycles, dram_bytes(unfused, hw)), ()
    tried: set[tuple[tuple[int, int], ...]] = set()

    def consider(chosen: tuple[tuple[int, int], ...]) -> None:
        """Compile the step with `chosen` fused (once per set); keep it when it beats the best so far."""
        nonlocal best, best_key, best_chosen
        if chosen in tried:
            return
        tried.add(chosen)
        try:
            candidate = _fused_chains(graph, hw, chosen, unfused_options, compile_step)
        except AccelsimError:  # a fused step that does not fit or compile is not a candidate
            return
        key = (candidate.makespan_cycles, dram_bytes(candidate, hw))
        if key < best_key:
            best, best_key, best_chosen = candidate, key, chosen

    candidates = [tuple(sorted(ranked[:keep])) for keep in _halvings(len(ranked))]
    if ranked:  # the best chain's other promising counts: the estimate can misjudge where a tile's values fit
        top = next(c for c in choices if c.anchor == ranked[0][0])
        candidates += [((top.anchor, t),) for t, cycles in sorted(top.fused_cycles, key=lambda tc: (tc[1], tc[0]))
                       if t != top.tiles and cycles < top.unfused_cycles]
    for chosen in candidates:
        consider(chosen)
    for pair in ranked:  # each chosen chain the best step leaves unfused, added where the step gets shorter
        if pair[0] not in {a for a, _ in best_chosen}:
            consider(tuple(sorted(best_chosen + (pair,))))
    return best


def _halvings(n: int) -> list[int]:
    """n, n // 2, n // 4, ..., 1 (none for n = 0): how many of the ranked chains each compiled candidate fuses."""
    out = []
    while n:
        out.append(n)
        n //= 2
    return out


def _fused_chains(graph: Graph, hw: HwSpec, chosen: tuple[tuple[int, int], ...], options: StepOptions,
                  compile_step: CompileStep) -> Schedule:
    """The step with the chains of `chosen` ((anchor, tile count) pairs) fused, recording the choice: the tile
    count when it is one pass over every chain, else auto with the pairs."""
    passes = fusion_passes(graph, chosen)
    schedule = _compile_fused(lambda staged: fused_by(graph, hw, passes if staged else
                                                      fusion_passes(graph, chosen, stage_weights=False)),
                              options, compile_step, f"fusion_chains {list(chosen)}", "")
    if len(passes) == 1 and passes[0].only is None:
        return _recorded(schedule, chosen[0][1])
    return schedule.model_copy(update={"options": schedule.options.model_copy(
        update={"fusion": "auto", "fusion_chains": tuple(chosen)})})


def chain_choices(graph: Graph, hw: HwSpec, options: StepOptions, unfused: Schedule) -> tuple[ChainChoice, ...]:
    """What `auto` estimates and chooses for each chain of `graph`, given its unfused schedule (the step's
    precision applied to `hw` as compile applies it)."""
    return choose_chains(graph, at_precision(hw, options.precision),
                         options.model_copy(update={"fusion": "off", "fusion_chains": None}), unfused)


def _fitting(graph: Graph, hw: HwSpec, options: StepOptions, compile_step: CompileStep,
             unfused_error: MemoryFitError) -> Schedule:
    """The shortest step fused at one tile count for every chain that fits memory (then the fewest DRAM bytes),
    or `unfused_error` when none does."""
    best, best_key = None, None
    for tiles in FUSION_TILES:
        try:
            candidate = _compile_fused(lambda staged: fused(graph, hw, tiles, staged), options, compile_step,
                                       f"fusion={tiles}", "")
        except AccelsimError:  # a fused step that does not fuse, fit or compile is not a candidate
            continue
        key = (candidate.makespan_cycles, dram_bytes(candidate, hw))
        if best_key is None or key < best_key:
            best, best_key = _recorded(candidate, tiles), key
    if best is None:
        raise unfused_error
    return best


def _compile_fused(fuse: Callable[[bool], Fused], options: StepOptions, compile_step: CompileStep, what: str,
                   hint: str) -> Schedule:
    """The step of `fuse(True)`'s graph (each weight staged once per group), or where it does not fit memory
    and has staged weights, of `fuse(False)`'s (every tile reading the weights itself: module docstring); the
    staged step's MemoryFitError when neither fits. A graph that does not fuse is refused as `what` with why."""
    graph_fused, why, _ = fuse(True)
    if graph_fused is None:
        raise ScheduleError(f"{what}: {why}{hint}")
    compile_fused = _naming_tiles(compile_step, what)
    try:
        return compile_fused(graph_fused, options)
    except MemoryFitError as staged_error:
        if not any(group.staged for group in fusion_groups(graph_fused)):
            raise
        unstaged, _, _ = fuse(False)
        if unstaged is None:
            raise
        try:
            return compile_fused(unstaged, options)
        except MemoryFitError:
            raise staged_error from None


def _naming_tiles(compile_step: CompileStep, what: str) -> CompileStep:
    """`compile_step` saying, where a mapping names a layer the fused graph has not, that fusion renamed it: the
    step's mappings name the fused graph's nodes, and "graph 'chain' has no layer 'conv2d2'" of the user's own
    graph, which has it, reads as a bug."""
    def run(graph: Graph, options: StepOptions) -> Schedule:
        try:
            return compile_step(graph, options)
        except MappingSpecError as e:
            if "has no layer" not in str(e):
                raise
            raise MappingSpecError(f"{what}: {e}. Fusion replaces each fused layer by its tiles (<layer>.t1 .. "
                                   "<layer>.t<T>), whose mappings the step names: give those (the fused step's "
                                   "--mapping-out writes them), or compile with fusion='off'") from None
    return run


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
    records options it resolved."""
    return schedule.model_copy(update={"options": schedule.options.model_copy(update={"fusion": tiles})})
