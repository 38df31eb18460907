"""Peak memory per chip split as a training-systems user reads it ((Schedule, training Graph) -> ChipMemory per
chip): at the chip's peak, how many bytes are parameters, gradients, optimizer state and activations."""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.model_states import model_state_kinds
from accelsim.schedule.plan import Schedule, graph_hash, live_by_column

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations")
"""The four parts of a chip's peak, in the order records, JSON and the terminal list them."""

MEMORY_SPLIT_DEFINITION = (
    "per chip (label 'chip<c>', all its memories together): peak_bytes = the most bytes its tensors hold at once "
    "(placed sizes over live intervals, as peak_memory_bytes counts each memory), and the parts of that moment "
    "(the first time the peak is reached), which add up to it: parameters (trainable parameter leaves, every copy, "
    "and their updated values '<param>.new'), gradients (every tensor of a gradient node: per micro-batch, "
    "accumulated, all-reduced, transferred), optimizer_state (the optimizer's state leaves, their updated values "
    "and the update's temporaries), activations (everything else: inputs, forward and backward values, "
    "recomputed values, constants)")
"""How the split is counted; run_summary returns it beside the figures."""

_STATE = {"param": "parameters", "gradient": "gradients", "optimizer_state": "optimizer_state"}


@dataclass(frozen=True, slots=True)
class ChipMemory:
    """One chip's peak bytes and its parts at that moment (MEMORY_SPLIT_DEFINITION); the parts sum to the peak."""

    chip: int
    peak_bytes: int
    parameter_bytes: int
    gradient_bytes: int
    optimizer_state_bytes: int
    activation_bytes: int
    peak_cycle: int
    """The first cycle at which the chip holds peak_bytes."""

    @property
    def label(self) -> str:
        """"chip<c>", the key of the JSON's per-chip figures."""
        return f"chip{self.chip}"

    def parts(self) -> dict[str, int]:
        """CATEGORIES -> bytes at the peak."""
        return dict(zip(CATEGORIES, (self.parameter_bytes, self.gradient_bytes, self.optimizer_state_bytes,
                                     self.activation_bytes)))


def node_categories(graph: Graph) -> dict[int, str]:
    """Node id -> its CATEGORIES entry for every node of a training graph (MEMORY_SPLIT_DEFINITION)."""
    kinds = model_state_kinds(graph)
    out = {i: _STATE[k] for i, k in kinds.items()}
    by_name = {n.name: n.id for n in graph.params}
    for name, node in graph.outputs.items():
        base = by_name.get(name[: -len(".new")]) if name.endswith(".new") else None
        if base is not None and base in kinds and kinds[base] != "gradient":
            out.setdefault(node, _STATE[kinds[base]])
    for n in graph.nodes:
        if n.id not in out:
            out[n.id] = "optimizer_state" if n.phase == "update" else "activations"
    return out


def chip_memory(schedule: Schedule, graph: Graph) -> tuple[ChipMemory, ...]:
    """Each chip of schedule.memories (ascending) at its peak, split by CATEGORIES; zeros for a chip that
    holds nothing. `graph`: the training graph the schedule was compiled from."""
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"chip_memory: the schedule of {schedule.graph_name!r} was compiled for another graph "
                            f"than {graph.name!r} (graph hashes differ); pass the graph it was compiled from")
    category = node_categories(graph)
    column = {c: i for i, c in enumerate(CATEGORIES)}
    events: dict[int, list[tuple[int, int, int]]] = {m.chip: [] for m in schedule.memories}
    for x in schedule.tensors:
        col = column[category[x.node]]
        events.setdefault(x.chip, []).extend(((x.start, col, x.size_bytes), (x.end, col, -x.size_bytes)))
    return tuple(_at_peak(chip, evs) for chip, evs in sorted(events.items()))


def _at_peak(chip: int, events: list[tuple[int, int, int]]) -> ChipMemory:
    """Sweep (cycle, category column, +-bytes) in time order (schedule.plan.live_by_column)."""
    best, best_cycle, peak = [0] * len(CATEGORIES), 0, 0
    for cycle, live in live_by_column(events, len(CATEGORIES)):
        if sum(live) > peak:
            peak, best, best_cycle = sum(live), list(live), cycle
    return ChipMemory(chip, peak, *best, peak_cycle=best_cycle)
