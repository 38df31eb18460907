"""A compiled schedule's per-chip model-state memory next to ZeRO's formula (Schedule, Graph, HwSpec ->
ZeroMemory per chip), counted as the paper counts: the model states a replica holds across the step, with
the transient communication buffers (the paper's residual states: temporary buffers) shown apart.

Counted as model states (model_states.model_state_kinds), at their placed sizes: every parameter and
optimizer-state leaf (whole, or the replica's shard), and every gradient tensor: per micro-batch, their
accumulations, all-reduce outputs and reduce-scatter shards. Transient, and shown apart:
  - stage 3's all-gathered parameters, each live from its all-gather to the last reader of that phase;
  - at stages 2-3, a micro-batch's full gradient of a reduce-scattered parameter, live from its backward
    node until its reduce-scatter ends: the bucket DeepSpeed reduces during backward and frees.
At stages 0-1 a full gradient is the stored gradient the formula counts, so it is not transient.

`held_bytes` counts each model state once, as the formula does: a peak also holds a gradient twice while a
collective writes its result beside its input (the paper's temporary buffers), and `held_bytes` does not.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.kinds import TASK_KINDS, Reads
from accelsim.model_states import ModelStateBytes, model_state_kinds, trainable_elements, zero_bytes
from accelsim.schedule.plan import Schedule, Tensor, graph_hash, peak_bytes


COLUMNS = ("kept", "gathered", "bucket")
"""How a model-state tensor counts: held across the step, a stage-3 all-gathered parameter, a gradient bucket."""


@dataclass(frozen=True, slots=True)
class ZeroMemory:
    """One chip's peaks of bytes live at once: its model states (transients left out), its all-gathered
    parameters, its gradient buckets, all three together; and ZeRO's formula for the schedule's stage and
    replicas."""

    chip: int
    model_state_peak_bytes: int
    gathered_peak_bytes: int
    bucket_peak_bytes: int
    with_transients_peak_bytes: int
    formula_bytes: int
    held_bytes: int
    """Each model state the chip holds, counted once at the largest size it is kept in (transients left out):
    every parameter and optimizer-state leaf as placed (whole, its shard, or a working copy beside its
    master's shard) and every gradient (whole at stages 0-1, the reduced shard at 2-3). What the formula
    counts, so equal to formula_bytes when every tensor fills its 64-byte alignment."""

    @property
    def ratio(self) -> float:
        """Measured over formula (1.0: exactly the formula)."""
        return self.model_state_peak_bytes / max(self.formula_bytes, 1)


def _column(schedule: Schedule, graph: Graph, x: Tensor, scattered: set[int]) -> str:
    """How model-state tensor `x` counts (see the module docstring)."""
    if x.task < 0:
        return "kept"
    t = schedule.tasks[x.task]
    kind = TASK_KINDS[t.kind]
    if kind.reads is Reads.GATHER and graph.nodes[x.node].is_leaf:
        return "gathered"
    if schedule.options.zero >= 2 and x.node in scattered and kind.computes_node and not t.is_part:
        return "bucket"
    return "kept"


def zero_memory(schedule: Schedule, graph: Graph, hw: HwSpec) -> tuple[ZeroMemory, ...]:
    """Per chip that holds model states (ascending): measured model-state peaks and ZeRO's formula with
    this step's coefficients (ModelStateBytes.of_training) at Psi = the trainable elements, N_d = the
    schedule's data_parallel and its ZeRO stage."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"zero_memory needs a Schedule, got {type(schedule).__name__}")
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} was compiled for another graph than "
                            f"{graph.name!r}; pass the graph it was compiled from")
    kinds = model_state_kinds(graph)
    o = schedule.options
    coeffs = ModelStateBytes.of_training(graph, hw, o.precision)
    formula = zero_bytes(coeffs, trainable_elements(graph), o.data_parallel, o.zero)
    scattered = {t.node for t in schedule.tasks if TASK_KINDS[t.kind].reads is Reads.SCATTER}
    live: dict[int, dict[str, list[tuple[int, int, int]]]] = {}
    held: dict[int, dict[int, int]] = {}  # chip -> model-state node -> the largest tensor kept of it
    for x in schedule.tensors:
        if x.node in kinds:
            chip = live.setdefault(x.chip, {c: [] for c in COLUMNS})
            column = _column(schedule, graph, x, scattered)
            chip[column].append((x.start, x.end, x.size_bytes))
            if column == "kept":
                mine = held.setdefault(x.chip, {})
                mine[x.node] = max(mine.get(x.node, 0), x.size_bytes)
    return tuple(ZeroMemory(chip, *(peak_bytes(c[k]) for k in COLUMNS), peak_bytes([i for k in COLUMNS for i in c[k]]),
                            formula, sum(held.get(chip, {}).values())) for chip, c in sorted(live.items()))
