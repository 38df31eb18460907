"""Pipeline model parallelism: partition a graph into stages, one chip each (Graph, node cycles, step
options, the stages' chips -> Partition).

The unit is a layer (layers.py): its forward, backward (recomputation included) and update work all
go to one stage, the stage of its forward layer. Stages are contiguous runs of layers: as the user set
them (`stage_layers`, `stage_boundaries`), else the split whose slowest stage has the fewest cycles
per step with every stage within its chip's memory (balance.py). A graph with fewer layers than
stages is split the same way with every forward node a unit of its own. A tensor-parallel rank-k node
goes where its rank-0 twin goes (rank_twins.py), so a layer's ranks are never split between stages.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Sequence

from accelsim.compiler.planning.balance import StageLimits, Units, balanced_split
from accelsim.compiler.planning.glue import glue_home
from accelsim.compiler.planning.layers import NO_LAYER, Layers, find_layers, node_units
from accelsim.compiler.planning.rank_twins import rank_twins
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.precision import tensor_bytes
from accelsim.hw.spec import Chip, HwSpec, Memory
from accelsim.schedule.options import StepOptions


@dataclass(frozen=True, slots=True)
class LayerCost:
    """One unit of the partition on its stage's chip (tensor-parallel rank 0's share)."""

    name: str
    forward_cycles: int
    """Per micro-batch."""
    backward_cycles: int
    """Per micro-batch, recomputation included."""
    update_cycles: int
    """Per step."""
    fixed_bytes: int
    """Held all step: parameters, their gradients and optimizer state (ZeRO's shares where sharded)."""
    stash_bytes: int
    """Activations kept from the forward pass for the backward pass, per micro-batch in flight."""

    def step_cycles(self, microbatches: int) -> int:
        """What the layer costs its stage per step: every micro-batch's forward and backward, one update."""
        return microbatches * (self.forward_cycles + self.backward_cycles) + self.update_cycles


@dataclass(frozen=True, slots=True)
class StagePart:
    """One stage: layers [first, stop) of the partition's layers, its cycles per step and its memory."""

    stage: int
    first: int
    stop: int
    cycles: int
    memory_bytes: int
    """Fixed bytes plus `in_flight` micro-batches' stashed activations."""
    in_flight: int
    capacity_bytes: int
    """The largest memory of the stage's chip."""


@dataclass(frozen=True, slots=True)
class Partition:
    """Which stage runs every node, and the layers and stages that decided it."""

    stage_of: tuple[int, ...]
    """For every node id, its stage."""
    layers: tuple[LayerCost, ...]
    stages: tuple[StagePart, ...]
    by: str
    """How the split was chosen: "balanced", "stage_layers", "stage_boundaries" or "one stage"."""
    unit: str
    """"layer", or "node" for a graph with fewer layers than stages."""
    microbatches: int

    def stage_layers(self, stage: int) -> tuple[str, ...]:
        """The names of the layers on `stage`, in forward order."""
        part = self.stages[stage]
        return tuple(lay.name for lay in self.layers[part.first:part.stop])

    def slowest_cycles(self) -> int:
        """The cycles per step of the costliest stage."""
        return max((s.cycles for s in self.stages), default=0)

    def text(self) -> str:
        """The partition as a few lines: how it was chosen, then per stage its layers, cycles and memory."""
        units = f"{len(self.layers)} {self.unit}s"
        how = {"balanced": f"{units} balanced by cycles per step", "stage_layers": f"{units} by stage_layers",
               "stage_boundaries": f"{units} by stage_boundaries", "one stage": units}[self.by]
        lines = [f"stage partition: {how} ({self.microbatches} x (forward + backward) + update)"]
        for s in self.stages:
            names = self.stage_layers(s.stage)
            listed = _listing(names) if names else "nothing"
            lines.append(f"  stage {s.stage}: {listed} ({len(names)} {self.unit}{'s' * (len(names) != 1)}), "
                         f"{s.cycles:,} cycles, {_mib(s.memory_bytes)} of {_mib(s.capacity_bytes)}")
        return "\n".join(lines)


def _mib(n: int) -> str:
    return f"{n / 2 ** 20:,.1f} MiB"


def _listing(names: Sequence[str]) -> str:
    """Names as `a, b, c` or, for more than three, `a .. z`."""
    return ", ".join(names) if len(names) <= 3 else f"{names[0]} .. {names[-1]}"


def _listing_all(names: Sequence[str], limit: int = 12) -> str:
    """Names for an error message: all of them up to `limit`, else the first and last few."""
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join([*names[:limit - 3], "...", *names[-2:]])


def largest_memory(chip: Chip) -> Memory:
    """The chip's memory of most capacity (the first in the hardware file on a tie)."""
    return max(chip.memories, key=lambda m: m.capacity_bytes)


def partition(graph: Graph, node_cycles: dict[int, int], options: StepOptions, hw: HwSpec,
              stage_chips: Sequence[Chip]) -> Partition:
    """Every node's stage (see the module docstring). `node_cycles`: each compute node's cycles on its
    fastest unit; `stage_chips`: the chip of each stage (replica 0, rank 0)."""
    p = options.pipeline_stages
    if len(stage_chips) != p:
        raise ValueError(f"internal: {len(stage_chips)} chips for {p} stages")
    consumers = graph.consumers()
    layers = find_layers(graph, consumers)
    user = options.stage_layers is not None or options.stage_boundaries is not None
    unit = "layer" if layers.names and (user or len(layers.names) >= p or p == 1) else "node"
    if unit == "node":
        layers = node_units(graph, consumers)
    costs = _layer_costs(graph, layers, consumers, node_cycles, hw, options)
    starts, by, stages = split_layers(graph.name, layers.names, costs, options, stage_chips, unit)
    stage_of_unit = [s for s in range(p) for _ in range(starts[s], starts[s + 1])]
    return Partition(_node_stages(graph, layers, consumers, stage_of_unit), tuple(costs), stages, by, unit,
                     options.microbatches)


def split_layers(graph_name: str, names: Sequence[str], costs: Sequence[LayerCost], options: StepOptions,
                 stage_chips: Sequence[Chip], unit: str = "layer") -> tuple[tuple[int, ...], str, tuple[StagePart, ...]]:
    """The stage starts (p + 1 positions), how they were chosen and the stages, for units `names` of
    costs `costs` (partition's split, also used by a caller that has the units' costs without their graph:
    hierarchy/layer_templates.py). ScheduleError naming `graph_name` where no split fits or the user's does not."""
    p = options.pipeline_stages
    user = options.stage_layers is not None or options.stage_boundaries is not None
    m = options.microbatches
    units = Units(tuple(c.step_cycles(m) for c in costs), tuple(c.fixed_bytes for c in costs),
                  tuple(c.stash_bytes for c in costs))
    limits = [StageLimits(largest_memory(chip).capacity_bytes, _in_flight(options, s))
              for s, chip in enumerate(stage_chips)]
    if user:
        starts, by = _user_starts(graph_name, names, options), ("stage_layers" if options.stage_layers is not None
                                                                else "stage_boundaries")
        if p > 1:
            _check_memory(graph_name, names, units, limits, starts, by, stage_chips)
    elif p == 1:
        starts, by = (0, len(costs)), "one stage"
    else:
        split = balanced_split(units, limits, nonempty=len(units) >= p)
        if split is None:
            raise ScheduleError(_no_fit(graph_name, names, unit, units, limits, stage_chips))
        starts, by = split, "balanced"
    stages = tuple(StagePart(s, starts[s], starts[s + 1], sum(units.cycles[starts[s]:starts[s + 1]]),
                             _need(units, limits, s, starts[s], starts[s + 1]), limits[s].in_flight,
                             limits[s].capacity_bytes) for s in range(p))
    return starts, by, stages


def _in_flight(options: StepOptions, stage: int) -> int:
    """Micro-batches whose stashed activations stage `stage` must hold at once: all of them under GPipe,
    up to p - stage under 1F1B and its variants (the first stage starts p before its first backward), at
    least one under the list scheduler's own order, whose window compile fits to the memory."""
    m, p = options.microbatches, options.pipeline_stages
    if options.pipeline_schedule is None:
        return 1
    held = m if options.pipeline_schedule == "gpipe" else min(m, p - stage)
    return max(1, min(held, options.max_in_flight or held))


def _layer_costs(graph: Graph, layers: Layers, consumers: list[list[int]], node_cycles: dict[int, int], hw: HwSpec,
                 options: StepOptions) -> list[LayerCost]:
    """Cycles and bytes of every unit, counting replicated nodes and rank 0's (rank k's are its copies)."""
    n = len(layers.names)
    cycles = {phase: [0] * n for phase in ("forward", "backward", "update")}
    fixed, stash = [0] * n, [0] * n
    d = options.data_parallel
    share = {  # ZeRO: the part of each class of state one replica holds
        "param": d if options.zero >= 3 else 1, "grad": d if options.zero >= 2 else 1,
        "state": d if options.zero >= 1 else 1}
    training = any(v.phase == "backward" for v in graph.nodes)
    stashed = {i for v in graph.nodes if v.phase == "backward" for i in v.inputs}
    def nbytes(v: Node) -> int:
        return tensor_bytes(graph, v, hw)

    for v in graph.nodes:
        if v.rank > 0:
            continue
        if not v.is_leaf:
            lay = layers.layer_of[v.id]
            if lay != NO_LAYER and v.phase in cycles:
                cycles[v.phase][lay] += node_cycles.get(v.id, 0)
            if lay != NO_LAYER and v.phase == "forward" and v.id in stashed:
                stash[lay] += nbytes(v)
        elif v.op == "param":
            readers = [layers.layer_of[c] for c in consumers[v.id] if layers.layer_of[c] != NO_LAYER]
            if not readers:
                continue
            if v.phase == "forward":
                fixed[readers[0]] += -(-nbytes(v) // share["param"])
                if v.trainable and training:
                    fixed[readers[0]] += -(-nbytes(v) // share["grad"])
            else:  # optimizer state
                fixed[readers[0]] += -(-nbytes(v) // share["state"])
    return [LayerCost(name, cycles["forward"][i], cycles["backward"][i], cycles["update"][i], fixed[i], stash[i])
            for i, name in enumerate(layers.names)]


def _user_starts(graph_name: str, names: Sequence[str], options: StepOptions) -> tuple[int, ...]:
    """Stage starts from `stage_layers` or `stage_boundaries`; ScheduleError naming the value and what was
    expected where they do not describe a split of this graph's layers over the step's stages."""
    p = options.pipeline_stages
    if options.stage_layers is not None and options.stage_boundaries is not None:
        raise ScheduleError(f"stage_layers={list(options.stage_layers)} and stage_boundaries="
                            f"{list(options.stage_boundaries)} both set the stages; give one of them")
    known = f"graph {graph_name!r} has {len(names)} layers: {_listing_all(names)}"
    if not names:
        what = "stage_layers" if options.stage_layers is not None else "stage_boundaries"
        raise ScheduleError(f"{what}: graph {graph_name!r} has no layers (no forward node reads a parameter, "
                            "whose name scopes a layer); leave it unset to balance the stages node by node")
    if options.stage_layers is not None:
        counts = list(options.stage_layers)
        if len(counts) != p:
            raise ScheduleError(f"stage_layers={counts} gives {len(counts)} count(s), but pipeline_stages={p}: "
                                "expected one count of layers per stage")
        bad = [(s, c) for s, c in enumerate(counts) if c < 1]
        if bad:
            raise ScheduleError(f"stage_layers={counts}: stage {bad[0][0]} gets {bad[0][1]} layers; expected "
                                "at least 1 layer per stage")
        if sum(counts) != len(names):
            raise ScheduleError(f"stage_layers={counts} sums to {sum(counts)}, but {known}; expected counts "
                                f"summing to {len(names)}")
        starts = [0]
        for c in counts:
            starts.append(starts[-1] + c)
        return tuple(starts)
    boundaries = list(options.stage_boundaries or ())
    if len(boundaries) != p - 1:
        raise ScheduleError(f"stage_boundaries={boundaries} names {len(boundaries)} layer(s), but "
                            f"pipeline_stages={p}: expected {p - 1}, the layers that start stages 1 .. {p - 1}")
    index = {name: i for i, name in enumerate(names)}
    starts = [0]
    for name in boundaries:
        if name not in index:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ScheduleError(f"stage_boundaries: no layer named {name!r}{hint}; {known}")
        if index[name] <= starts[-1]:
            where = "the first layer" if index[name] == 0 else f"not after {names[starts[-1]]!r}"
            raise ScheduleError(f"stage_boundaries={boundaries}: {name!r} is {where}; expected layers in "
                                f"forward order, each after the one before and none the first ({names[0]!r}), "
                                "so that every stage gets a layer")
        starts.append(index[name])
    return tuple(starts + [len(names)])


def _need(units: Units, limits: Sequence[StageLimits], s: int, a: int, b: int) -> int:
    """Bytes units [a, b) take on stage s: fixed bytes and the stashes of its micro-batches in flight."""
    return sum(units.fixed_bytes[a:b]) + limits[s].in_flight * sum(units.stash_bytes[a:b])


def _chip_memory(chip: Chip) -> str:
    m = largest_memory(chip)
    return f"chip {chip.name!r}'s largest memory {m.name!r} holds {m.capacity_bytes:,} bytes"


def _check_memory(graph_name: str, names: Sequence[str], units: Units, limits: Sequence[StageLimits],
                  starts: Sequence[int], by: str, stage_chips: Sequence[Chip]) -> None:
    """A split set by the user must fit each stage's chip."""
    for s, lim in enumerate(limits):
        need = _need(units, limits, s, starts[s], starts[s + 1])
        if need > lim.capacity_bytes:
            raise ScheduleError(
                f"{by}: stage {s} of graph {graph_name!r} ({_listing(names[starts[s]:starts[s + 1]])}) "
                f"needs {need:,} bytes (parameters, gradients, optimizer state and {lim.in_flight} micro-batch(es) "
                f"of stashed activations), but {_chip_memory(stage_chips[s])}; move layers to other stages")


def _no_fit(graph_name: str, names: Sequence[str], unit: str, units: Units, limits: Sequence[StageLimits],
            stage_chips: Sequence[Chip]) -> str:
    """Why no split fits: the costliest unit in memory and the whole graph against the chips' capacity."""
    needs = [units.fixed_bytes[i] + units.stash_bytes[i] for i in range(len(units))]
    worst = max(range(len(units)), key=lambda i: needs[i])
    total = sum(units.fixed_bytes) + sum(units.stash_bytes)
    room = sum(lim.capacity_bytes for lim in limits)
    return (f"no split of graph {graph_name!r}'s {len(units)} {unit}s over {len(limits)} pipeline stages fits the "
            f"chips' memory: a stage holds its {unit}s' parameters, gradients and optimizer state and the stashed "
            f"activations of the micro-batches in flight; the largest {unit}, {names[worst]!r}, needs "
            f"{needs[worst]:,} bytes for one micro-batch and all of them {total:,} bytes, while the {len(limits)} "
            f"stages' chips hold {room:,} bytes ({_chip_memory(stage_chips[0])}); use more pipeline stages, "
            "ZeRO, rematerialization or a hardware description with more memory")


def _node_stages(graph: Graph, layers: Layers, consumers: list[list[int]],
                 stage_of_unit: Sequence[int]) -> tuple[int, ...]:
    """Compute nodes on their unit's stage, gradient glue on the stage it connects (glue.py); a leaf on its
    first reader's (a parameter where its layer runs, optimizer state where its update runs); constants,
    copied to every chip that reads them, on stage 0 by convention; rank-k nodes on their rank-0 twin's
    stage."""
    stage = [0] * len(graph.nodes)
    for v in graph.nodes:
        if not v.is_leaf and layers.layer_of[v.id] != NO_LAYER:
            stage[v.id] = stage_of_unit[layers.layer_of[v.id]]
    stage = glue_home(graph, consumers, stage)  # rematerialization's glue with the gradient it reads
    for v in graph.nodes:
        if v.is_leaf and v.op != "const" and consumers[v.id]:
            stage[v.id] = stage[consumers[v.id][0]]
    for twins in (rank_twins(graph)[1:] if graph.tensor_parallel > 1 else ()):
        for node, twin in twins.items():
            stage[node] = stage[twin]
    return tuple(stage)

