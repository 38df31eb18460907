"""Model-state memory as ZeRO accounts it (Rajbhandari et al., SC'20): (coefficients, Psi, N_d, stage) ->
bytes per device; (training Graph, HwSpec) -> the coefficients; (Schedule, Graph) -> each chip's live bytes
split into model states (parameters, gradients, optimizer state) and everything else."""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from fractions import Fraction
from numbers import Integral, Real

from accelsim.errors import GraphError, ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.precision import at_precision, compute_elem_bytes, tensor_elem_bytes
from accelsim.hw.spec import HwSpec
from accelsim.ops.registry import numel
from accelsim.schedule.plan import Schedule, graph_hash, live_by_column

STAGES = ("baseline", "P_os", "P_os+g", "P_os+g+p")
"""ZeRO stage k's name in the paper: 0 nothing sharded, 1 optimizer state, 2 + gradients, 3 + parameters."""
KINDS = ("param", "gradient", "optimizer_state")
"""The model states; every other tensor (inputs, activations, temporaries, constants, update results) is "other"."""


def _real(what: str, value: object) -> Fraction:
    """A finite number >= 0 (bools refused) as an exact fraction."""
    if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
        return Fraction(value)
    raise ScheduleError(f"{what}={value!r} is invalid; expected a finite number of bytes >= 0 (not a bool, NaN "
                        "or infinity)")


def _int(what: str, value: object, low: int) -> int:
    if isinstance(value, Integral) and not isinstance(value, bool) and value >= low:
        return int(value)
    raise ScheduleError(f"{what}={value!r} is invalid; expected an integer >= {low} (an int: not a bool, a float "
                        "or a string; write int(7.5e9) for 7.5e9)")


@dataclass(frozen=True, slots=True)
class ModelStateBytes:
    """Bytes each trainable parameter element costs in each model state: ZeRO's 2 + 2 + K for
    mixed-precision Adam (fp16 parameter, fp16 gradient, K = 12: fp32 master weight, momentum, variance)."""

    param_bytes: float
    grad_bytes: float
    optimizer_bytes: float  # ZeRO's K

    def __post_init__(self) -> None:
        for f in fields(self):
            _real(f"ModelStateBytes.{f.name}", getattr(self, f.name))

    @classmethod
    def mixed_precision_adam(cls) -> ModelStateBytes:
        """The paper's coefficients: 2 + 2 + 12 bytes per parameter."""
        return cls(param_bytes=2, grad_bytes=2, optimizer_bytes=12)

    @classmethod
    def of_training(cls, graph: Graph, hw: HwSpec, precision: str | None = None) -> ModelStateBytes:
        """The coefficients of an accelsim training graph stored at `hw`'s bytes per element, or at the step
        precision `precision` (hw/precision.py): each model state's bytes (model_state_kinds) over Psi
        (trainable_elements). fp32 Adam on a machine storing float32 in 4 bytes is 4 + 4 + 8 (two state
        tensors, no master copy); at bf16 it is ZeRO's 2 + 2 + 12, the fp32 master copy counted in K as the
        paper counts it; SGD's K is 0 (4 at bf16: the master). A coefficient is an int when the division is
        exact (every parameter has a gradient and the same state)."""
        if not isinstance(hw, HwSpec):
            raise ScheduleError(f"ModelStateBytes.of_training needs a HwSpec (from load_hw), got {type(hw).__name__}")
        hw = at_precision(hw, precision)
        psi = trainable_elements(graph)
        if psi == 0:
            raise GraphError(f"graph {graph.name!r} has no trainable parameters: Psi is 0, so bytes per parameter "
                             "are undefined")
        totals = dict.fromkeys(KINDS, 0)
        for node_id, kind in model_state_kinds(graph).items():
            n = graph.nodes[node_id]
            elem = tensor_elem_bytes(graph, n, hw)
            if kind == "param":  # a parameter's tensor beyond its working copy is its fp32 master: optimizer state
                copy = compute_elem_bytes(hw, n)
                totals["optimizer_state"] += numel(n.shape) * (elem - copy)
                elem = copy
            totals[kind] += numel(n.shape) * elem
        per = {k: Fraction(v, psi) for k, v in totals.items()}
        plain = {k: int(v) if v.denominator == 1 else float(v) for k, v in per.items()}
        return cls(param_bytes=plain["param"], grad_bytes=plain["gradient"], optimizer_bytes=plain["optimizer_state"])


def _training(graph: object) -> Graph:
    if not isinstance(graph, Graph):
        raise GraphError(f"expected a training Graph (from A.training_graph), got {type(graph).__name__}")
    if graph.optimizer is None:
        raise GraphError(f"graph {graph.name!r} is not a training graph (it has no optimizer update); model states "
                         "are counted on A.training_graph(...)'s result")
    return graph


def trainable_elements(graph: Graph) -> int:
    """ZeRO's Psi: the elements of the trainable parameters (tensor-parallel shards summed)."""
    return sum(numel(n.shape) for n in _training(graph).params if n.trainable)


def model_state_kinds(graph: Graph) -> dict[int, str]:
    """Node id -> "param", "gradient" or "optimizer_state" for the model-state nodes of a training graph.

    - param: a trainable parameter leaf.
    - gradient: a gradient node (graph.gradient_nodes(): a backward node an update reads).
    - optimizer_state: a non-trainable parameter leaf the step updates (an output `<name>.new`):
      momentum's `<param>.momentum`, Adam's `<param>.adam_m` and `<param>.adam_v`.
    Not model states: the update's results (`<param>.new`, `<state>.new`) and its temporaries. accelsim
    writes them as new tensors instead of updating in place; they are the next step's model states."""
    g = _training(graph)
    kinds = {n.id: "param" for n in g.params if n.trainable}
    kinds.update({n.id: "optimizer_state" for n in g.params if not n.trainable and f"{n.name}.new" in g.outputs})
    kinds.update(dict.fromkeys(g.gradient_nodes(), "gradient"))
    return kinds


# ---- ZeRO's formula ------------------------------------------------------------------------------


def zero_bytes(coeffs: ModelStateBytes, psi: int, n_d: int, stage: int) -> int:
    """Model-state bytes per device at ZeRO `stage` (0..3) over `n_d` data-parallel replicas, Psi = `psi`:
    (p + g + K) Psi; p Psi + g Psi + K Psi / N_d; p Psi + (g + K) Psi / N_d; (p + g + K) Psi / N_d.
    Exact, rounded up to a whole byte where N_d does not divide."""
    if not isinstance(coeffs, ModelStateBytes):
        raise ScheduleError(f"zero_bytes needs a ModelStateBytes, got {type(coeffs).__name__}")
    psi, n_d = _int("psi", psi, 0), _int("n_d", n_d, 1)
    if isinstance(stage, bool) or not isinstance(stage, Integral) or not 0 <= stage < len(STAGES):
        raise ScheduleError(f"ZeRO stage={stage!r} is invalid; expected 0 (baseline), 1 (P_os: optimizer state "
                            "sharded), 2 (P_os+g: + gradients) or 3 (P_os+g+p: + parameters)")
    p, g, k = (Fraction(c) for c in (coeffs.param_bytes, coeffs.grad_bytes, coeffs.optimizer_bytes))
    replicated = (p + g + k, p + g, p, Fraction(0))[stage]
    return math.ceil(replicated * psi + (p + g + k - replicated) * psi / n_d)


@dataclass(frozen=True, slots=True)
class ZeroRow:
    """One row of ZeRO's Figure 1 table: a stage, its formula, its bytes per device."""

    stage: int
    name: str  # "baseline", "P_os", "P_os+g", "P_os+g+p"
    formula: str
    bytes_per_device: int

    @property
    def gb(self) -> float:
        """Decimal gigabytes (10**9 bytes), as the paper's table."""
        return self.bytes_per_device / 1e9


def zero_table(coeffs: ModelStateBytes, psi: int, n_d: int) -> list[ZeroRow]:
    """ZeRO's memory table for every stage (the paper's Figure 1 for mixed_precision_adam(), 7.5e9, 64)."""
    if not isinstance(coeffs, ModelStateBytes):
        raise ScheduleError(f"zero_table needs a ModelStateBytes, got {type(coeffs).__name__}")
    p, g = (f"{c:g}" for c in (coeffs.param_bytes, coeffs.grad_bytes))
    formulas = (f"({p} + {g} + K) * Psi", f"{p}Psi + {g}Psi + K * Psi / N_d", f"{p}Psi + ({g} + K) * Psi / N_d",
                f"({p} + {g} + K) * Psi / N_d")
    return [ZeroRow(s, STAGES[s], formulas[s], zero_bytes(coeffs, psi, n_d, s)) for s in range(len(STAGES))]


# ---- a compiled schedule's model states ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChipModelStates:
    """One chip's live bytes over a step, all its memories together, at the tensors' placed sizes
    (Tensor.size_bytes: 64-byte aligned). Peaks are of bytes live at the same time.

    `levels`: (cycle, model-state bytes, other bytes) live from that cycle to the next entry's; the last
    entry holds to the step's end. `model_state_at_peak_bytes`: the model-state part of the first
    moment the chip's total reaches `peak_bytes`."""

    chip: int
    peak_bytes: int
    model_state_peak_bytes: int  # params + gradients + optimizer state live at once
    param_peak_bytes: int
    gradient_peak_bytes: int
    optimizer_state_peak_bytes: int
    other_peak_bytes: int  # inputs, activations, temporaries, constants, update results
    model_state_at_peak_bytes: int
    levels: tuple[tuple[int, int, int], ...]


def schedule_model_states(schedule: Schedule, graph: Graph) -> tuple[ChipModelStates, ...]:
    """Each chip's live bytes split into model states and the rest, for `schedule` compiled from `graph`.

    A tensor's kind is its node's (model_state_kinds), whatever made it, so a gradient is every tensor
    of a gradient node: each (micro-batch, replica)'s gradient, the accumulations across micro-batches,
    the all-reduce results and any transfer of one; a parameter is every copy of a parameter leaf (one
    per replica) and anything a later ZeRO schedule gathers of it. One entry per chip of
    schedule.memories, ascending; a chip with no tensors has zeros."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"schedule_model_states needs a Schedule, got {type(schedule).__name__}")
    kinds = model_state_kinds(graph)
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"the schedule of {schedule.graph_name!r} was compiled for another graph than "
                            f"{graph.name!r} (graph hashes differ); pass the graph it was compiled from")
    columns = KINDS + ("other",)
    events: dict[int, list[tuple[int, int, int]]] = {m.chip: [] for m in schedule.memories}
    for t in schedule.tensors:
        column = columns.index(kinds.get(t.node, "other"))
        events.setdefault(t.chip, []).extend([(t.start, column, t.size_bytes), (t.end, column, -t.size_bytes)])
    return tuple(_chip_states(chip, events[chip]) for chip in sorted(events))


def _chip_states(chip: int, events: list[tuple[int, int, int]]) -> ChipModelStates:
    """Sweep the chip's allocations and frees in time order; a tensor lives over [start, end), so one
    that ends when another starts never coexists with it (as plan.peak_bytes counts)."""
    peaks = [0] * (len(KINDS) + 1)
    levels: list[tuple[int, int, int]] = []
    peak = model_peak = model_at_peak = 0
    for cycle, live in live_by_column(events, len(peaks)):
        model, total = sum(live[:-1]), sum(live)
        peaks = [max(a, b) for a, b in zip(peaks, live)]
        model_peak = max(model_peak, model)
        if total > peak:
            peak, model_at_peak = total, model
        if not levels or levels[-1][1:] != (model, total - model):
            levels.append((cycle, model, total - model))
    return ChipModelStates(chip=chip, peak_bytes=peak, model_state_peak_bytes=model_peak, param_peak_bytes=peaks[0],
                           gradient_peak_bytes=peaks[1], optimizer_state_peak_bytes=peaks[2],
                           other_peak_bytes=peaks[3], model_state_at_peak_bytes=model_at_peak, levels=tuple(levels))
