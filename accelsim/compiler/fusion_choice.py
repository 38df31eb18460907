"""Layer fusion chosen per chain (Graph, HwSpec, the unfused schedule -> a tile count or none for each chain,
and the fusion passes that apply the choice).

Compiling the step once per chain and tile count is too slow for a network with dozens of chains, so each
chain is priced alone, from numbers the compiler has anyway: the unfused schedule says which of the chain's
intermediates it placed in DRAM (fusion saves writing and reading them back) and which of its weights live
there (a fused chain stages each weight once for its tiles; where the staged weights do not fit the on-chip
memory, every tile reads them again), and an expansion of the graph fused at each tile count prices every tile
task on its cheapest unit (the halo rows recomputed, the slices, padding blocks and concat that cut and join
the tiles). Unfused, the chain's layers and spills follow one another: the estimate is their sum. Fused, the
tiles in flight overlap on different units and on a unit's instances: the busiest unit's cycles (divided by
the instances the tiles in flight keep busy), plus the DRAM bytes fusion adds (the
weights re-read where their staged copies find no room, the slices of an off-chip input, the concat's round trip of an off-chip output) at DRAM's
bandwidth. A tile's intermediates are taken to stay on chip when TILES_IN_FLIGHT of the largest fit, beside the
staged weights, the on-chip memory their units write first; otherwise every one of them is charged the DRAM round
trip. That memory, not the one the unfused step put activations in: the planner keeps a group's internal values
(its tiles' intermediates and staged weights) there whatever the activations placement says
(hw/placement.GROUP_INTERNAL), and sizes them at the activations' width, as the estimate does. (Taking it from the
unfused step charged every chain on a chip whose placement sends activations to the DRAM, Stream's, its staged
weights re-read per tile and its intermediates' round trips: ResNet-18's layer2.1 block was left unfused there,
which Stream fuses and which shortens the compiled step.)
A ranking, not a makespan: compiler/fusion.py compiles the chosen chains (the halves ranked best by estimated
saving, then each other chain added to the best) and keeps a fused step only when it is shorter than the unfused
one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from accelsim.compiler.planning.expand import expand
from accelsim.compiler.planning.prefetch import Prefetcher
from accelsim.compiler.planning.tile_order import TILES_IN_FLIGHT, tiles_in_flight
from accelsim.fusion_groups import fusion_groups
from accelsim.errors import AccelsimError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.hw.spec import HwSpec
from accelsim.layer_names import layer_names
from accelsim.limits import FUSION_TILES
from accelsim.passes.fuse_chains import Chain, plan_fusion
from accelsim.passes.fuse_layers import fuse_layers, pass_name
from accelsim.schedule.levels import chip_list, memory_of, preferred_memory
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import Schedule

OFF_CHIP = ("dram", "hbm")
"""Memory kinds whose bytes a fused chain saves (or re-reads)."""


@dataclass(frozen=True)
class ChainChoice:
    """One chain of the unfused graph: its first and last layer's ids, its layers ("first .. last"), the
    estimated serial cycles unfused and per tile count that fuses it, and the tile count chosen (None:
    left unfused, no count being cheaper)."""

    anchor: int
    last: int
    label: str
    unfused_cycles: int
    fused_cycles: tuple[tuple[int, int], ...]
    tiles: int | None

    def describe(self) -> str:
        """One line: the layers, the choice and the estimates it was made from."""
        est = ", ".join(f"T={t} {c:,}" for t, c in self.fused_cycles)
        kept = f"{self.tiles} tiles" if self.tiles else "unfused"
        return f"layers {self.label}: {kept} (estimated cycles: unfused {self.unfused_cycles:,}; {est})"


def _dram_bandwidth(hw: HwSpec) -> float:
    """Bytes per cycle of the first off-chip memory of the first chip (0: none, nothing is charged)."""
    for m in chip_list(hw)[0].memories:
        if m.kind in OFF_CHIP:
            return m.bytes_per_cycle(hw.clock_hz)
    return 0.0


def _group_memory_bytes(schedule: Schedule, hw: HwSpec) -> int:
    """Capacity of the on-chip memory where a fusion group's tiles' intermediates and staged weights would live:
    they are placed as without a placement (hw/placement.GROUP_INTERNAL), in the memory their unit writes first
    (levels.preferred_memory), whatever memory a placement sends the step's activations to. Of those memories of
    `schedule`'s node tasks, the one their outputs would fill most (a weight FIFO holds only the weights staged
    into it, and no unit writes it); 0 when it is off chip (then every fused chain is charged its spills)."""
    chips = chip_list(hw)
    held: dict[tuple[int, str], int] = {}
    for t in schedule.tasks:
        if t.kind == "node":
            key = (t.chip, preferred_memory(chips[t.chip], t.resource))
            held[key] = held.get(key, 0) + t.out_bytes
    if not held:
        return 0
    chip, memory = max(held, key=lambda k: (held[k], k))
    level = memory_of(chips[chip], memory)
    return level.capacity_bytes if level is not None and level.kind not in OFF_CHIP else 0


def _off_chip_bytes(schedule: Schedule, hw: HwSpec) -> dict[int, int]:
    """Node id -> bytes of its tensors (outputs and leaves) that `schedule` placed off chip."""
    chips = chip_list(hw)
    out: dict[int, int] = {}
    for x in schedule.tensors:
        level = memory_of(chips[x.chip], x.memory)
        if level is not None and level.kind in OFF_CHIP:
            out[x.node] = out.get(x.node, 0) + x.size_bytes
    return out


def _task_cycles(candidates: list[tuple[tuple[str, int, int], ...]], nodes: list[int],
                 tiles: int = 1) -> dict[int, dict[str, float]]:
    """Node id -> the cycles of its tasks per resource, each task on its cheapest candidate, divided by the
    instances that `tiles` tiles keep busy at once (at most tile_order.tiles_in_flight of them)."""
    out: dict[int, dict[str, float]] = {}
    for node, options in zip(nodes, candidates):
        resource, instances, cycles = min(options, key=lambda o: (o[2], o[0]))
        per = out.setdefault(node, {})
        share = min(instances, tiles, tiles_in_flight(instances))
        per[resource] = per.get(resource, 0) + cycles / share
    return out


def _schedule_cycles(schedule: Schedule) -> dict[int, dict[str, float]]:
    tasks = [t for t in schedule.tasks if t.kind == "node"]
    table = [tuple((c.resource, c.instances, c.cycles) for c in schedule.candidates[t.candidates]) for t in tasks]
    return _task_cycles(table, [t.node for t in tasks])


def _plan_cycles(graph: Graph, hw: HwSpec, options: StepOptions, tiles: int) -> dict[int, dict[str, float]]:
    tasks = [t for t in expand(graph, hw, options).tasks if t.kind == "node"]
    return _task_cycles([t.options for t in tasks], [t.node for t in tasks], tiles)


def _busiest(cycles: dict[int, dict[str, float]], nodes: tuple[int, ...]) -> float:
    """The cycles of the busiest resource over `nodes`' tasks: tiles in flight overlap on different units (and
    instances), so the busiest one sets the pace."""
    per: dict[str, float] = {}
    for i in nodes:
        for resource, c in cycles.get(i, {}).items():
            per[resource] = per.get(resource, 0) + c
    return max(per.values(), default=0)


def _stored_bytes(fused: Graph, hw: HwSpec) -> Callable[[int], int]:
    """Node id of `fused` -> the bytes its value is stored as on the first chip: at the width of its placement
    class (a group's internal values at the activations' width, hw/placement.GROUP_INTERNAL), as the memory
    planner sizes it (planning/prefetch.Prefetcher.stored_bytes); the step's width without a placement."""
    sizer = Prefetcher(fused, hw, chip_list(hw))
    results = set(fused.outputs.values())
    return lambda i: sizer.stored_bytes(0, fused.nodes[i], i in results)


def _params(graph: Graph, chain: Chain) -> set[int]:
    return {i for m in chain.members for i in m.node.inputs if graph.nodes[i].op == "param"}


def choose_chains(graph: Graph, hw: HwSpec, options: StepOptions, unfused: Schedule) -> tuple[ChainChoice, ...]:
    """Each fusible chain of `graph` (in anchor order) with its estimated cycles and the tile count of the
    lowest estimate below the unfused one (module docstring). `hw` at the step's precision; `unfused`: the
    step compiled without fusion, whose placements say what spills. A tile count whose tiles no unit can run
    (a chip of fixed-function units with none for the slices, padding or concat that cut and join them) gets no
    estimate, so it is never chosen: `auto` keeps the step it can compile rather than refusing it."""
    bandwidth, on_chip = _dram_bandwidth(hw), _group_memory_bytes(unfused, hw)
    off_chip = _off_chip_bytes(unfused, hw)
    cycles = _schedule_cycles(unfused)
    round_trip = (lambda nbytes: 2 * nbytes / bandwidth) if bandwidth else (lambda nbytes: 0.0)
    once = (lambda nbytes: nbytes / bandwidth) if bandwidth else (lambda nbytes: 0.0)
    chains = {c.anchor: c for c in plan_fusion(graph, min(FUSION_TILES)).chains}
    fused_at: dict[int, dict[int, int]] = {a: {} for a in chains}
    for tiles in FUSION_TILES:
        fusible = sorted(plan_fusion(graph, tiles).chains, key=lambda c: c.last.id)
        if not fusible:
            continue
        fused = fuse_layers(graph, tiles).graph
        groups = fusion_groups(fused)
        assert len(groups) == len(fusible), (tiles, len(groups), len(fusible))
        try:
            tile_cycles = _plan_cycles(fused, hw, options, tiles)
        except AccelsimError:  # no unit runs a tile's slices, padding or concat: no estimate, so not chosen
            continue
        nbytes = _stored_bytes(fused, hw)
        for chain, group in zip(fusible, groups):
            inner = [i for tile in group.tiles for i in tile[:-1]]
            largest = max((nbytes(i) for i in inner), default=0)
            staged = sum(nbytes(i) for i in group.staged)
            kept = staged <= on_chip  # the staged weights are placed first, before any tile's values
            spills = TILES_IN_FLIGHT * largest + (staged if kept else 0) > on_chip
            inter = sum(nbytes(i) for i in inner)
            weights = sum(off_chip.get(p, 0) for p in _params(graph, chain))
            # the tiles' slices read the chain's input again where it is off chip (a residual's rows too), and
            # where its output is, the concat reads every tile's output back and writes the whole again
            slices = sum(nbytes(i) for tile in group.tiles for i in tile if fused.nodes[i].op == "slice")
            source = chain.members[0].node.inputs[0]
            out_bytes = nbytes(group.concat)
            joins = 2 * out_bytes if off_chip.get(chain.last.id) or 2 * out_bytes > on_chip else 0
            # off-chip weights are read once to stage them (as unfused); a copy with no room on chip is written
            # off chip too and read again by every tile
            dram = ((0 if kept else (tiles + 1) * weights) + (slices if off_chip.get(source) else 0) + joins
                    + (2 * inter if spills else 0))
            # DRAM's port is not overlapped: a tile waits for its slices, the concat for every tile
            fused_at[chain.anchor][tiles] = round(_busiest(tile_cycles, group.nodes()) + once(dram))
    names = layer_names(graph)
    out = []
    for anchor, chain in chains.items():
        inter = sum(off_chip.get(m.node.id, 0) for m in chain.members[:-1])
        # layer after layer: no two of the chain's tasks overlap, nor do its spills
        unfused_cycles = round(sum(sum(cycles.get(m.node.id, {}).values()) for m in chain.members) + round_trip(inter))
        estimates = tuple(sorted(fused_at[anchor].items()))
        best = min(estimates, key=lambda e: (e[1], e[0]), default=None)
        tiles = best[0] if best is not None and best[1] < unfused_cycles else None
        out.append(ChainChoice(anchor, chain.last.id, f"{names[anchor]} .. {names[chain.last.id]}", unfused_cycles,
                               estimates, tiles))
    return tuple(out)


def ranked_pairs(choices: tuple[ChainChoice, ...]) -> tuple[tuple[int, int], ...]:
    """The chains chosen for fusion as (anchor, tile count) pairs (StepOptions.fusion_chains), the largest
    estimated saving first (ties: by anchor)."""
    chosen = [c for c in choices if c.tiles is not None]
    chosen.sort(key=lambda c: (dict(c.fused_cycles)[c.tiles] - c.unfused_cycles, c.anchor))
    return tuple((c.anchor, c.tiles) for c in chosen)


def fusion_passes(graph: Graph, chosen: tuple[tuple[int, int], ...],
                  stage_weights: bool = True) -> tuple[AppliedPass, ...]:
    """The fusion passes that fuse each chain of `chosen` ((anchor, tile count) pairs) with its tile count: one
    pass per run of chains sharing a count, last chain first, so that each pass's anchors (`only`) are ids of
    nodes before every chain rewritten so far, which keep their ids. One pass over every chain when they all
    share a count and every chain that count fuses is chosen. `stage_weights`: the passes that stage each
    weight once per group, or those whose tiles read the weights themselves. A pair naming no chain of `graph`
    fusible at its count is refused naming the chains there are."""
    for anchor, tiles in chosen:
        anchors = [c.anchor for c in plan_fusion(graph, tiles).chains]
        if anchor not in anchors:
            raise ScheduleError(f"fusion_chains: node {anchor} of {graph.name!r} is not the first layer of a chain "
                                f"fusible into {tiles} tiles (those are nodes {anchors or 'none'})")
    order = sorted(chosen, reverse=True)
    counts = {t for _, t in order}
    if len(counts) == 1:
        (tiles,) = counts
        if {a for a, _ in order} == {c.anchor for c in plan_fusion(graph, tiles).chains}:
            return (AppliedPass(pass_name(tiles, stage_weights)),)
    runs: list[tuple[int, list[int]]] = []
    for anchor, tiles in order:
        if runs and runs[-1][0] == tiles:
            runs[-1][1].append(anchor)
        else:
            runs.append((tiles, [anchor]))
    return tuple(AppliedPass(pass_name(t, stage_weights), tuple(sorted(anchors))) for t, anchors in runs)
