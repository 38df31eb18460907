"""A step's precision applied to a machine (HwSpec, StepOptions.precision -> HwSpec resolved for it): which
tensors are stored in how many bytes, and how fast each unit computes at that precision.

Mixed precision as AMP and Megatron-LM train (Micikevicius et al., ICLR 2018), for a step at precision p
(bf16, fp16, fp8; fp32 and tf32 keep every tensor in 4 bytes and have no separate master copy):
- in p: every forward and backward tensor (activations, the gradients of activations and of parameters,
  inputs, constants) and the weights the forward and backward nodes read (the working copy);
- in fp32 (MASTER_BYTES): each trainable parameter's master weight, the optimizer state (momentum, Adam's
  m and v) and every update node (the optimizer's arithmetic runs on the fp32 master);
- explicit in the step's bytes: a trainable parameter's tensor holds its fp32 master and its p working copy
  (4 + 2 bytes per element at bf16), and the update node that writes `<param>.new` writes both (the new
  master and its cast to p), so the cast is charged where the optimizer writes the weights.
Under Adam at bf16 that is ZeRO's 2 + 2 + 12 bytes per parameter (model_states.ModelStateBytes.of_training):
working copy 2, gradient 2, master 4 + m 4 + v 4. A graph without an optimizer (inference) keeps every
float tensor in p. Integer tensors (token ids) keep the hardware's bytes.

Units: a compute model's cycles describe its datapath at the unit's own precision (HwSpec.precision); at
step precision p they scale by peaks[own] / peaks[p] (hw/peaks.UnitPeaks; the compute model's own peak
when the unit declares none for its own precision). A unit with no peak for p is refused by at_precision,
unless p is its own precision.
"""
from __future__ import annotations

import math
import weakref

from accelsim.errors import HwConfigError
from accelsim.graph.ir import FLOAT_DTYPES, Graph, Node
from accelsim.hw.peaks import MASTER_BYTES, STEP_PRECISIONS, STORAGE_BYTES
from accelsim.hw.spec import HwSpec, Unit


def at_precision(hw: HwSpec, precision: str | None) -> HwSpec:
    """`hw` resolved for a step at `precision` (None: `hw` itself, its bytes_per_element alone). Refuses, in
    one paragraph naming every unit, a machine whose arithmetic units cannot run `precision`."""
    if precision is None or hw.step_precision == precision:
        return hw
    if precision not in STEP_PRECISIONS:
        raise HwConfigError(f"precision {precision!r} is not a step precision; expected one of "
                            f"{', '.join(STEP_PRECISIONS)}")
    problems = [_refusal(hw, chip.name, u, precision) for chip in hw.chips for u in chip.units]
    problems = [p for p in problems if p]
    if problems:
        raise HwConfigError(f"{hw.name} cannot run a step at precision {precision}: " + "; ".join(problems)
                            + f". Add `peaks: {{{precision}: <TFLOP/s>}}` to the unit (dense peak of all its "
                              f"instances, from its datasheet) or choose a precision it declares")
    resolved = hw.model_copy()
    resolved._step_precision = precision
    return resolved


def _refusal(hw: HwSpec, chip: str, unit: Unit, precision: str) -> str:
    """Why `unit` cannot run `precision` ('' where it can): no peak for it, or no rate to scale from."""
    if not unit.model.has_datapath:
        return ""  # moves bytes: its rate is in bytes, whatever they hold
    own = hw.precision(unit)
    if own == precision:
        return ""
    where = f"unit {unit.name!r} on chip {chip!r} (precision {own or 'unstated'})"
    if unit.peaks is None or unit.peaks.at(precision) is None:
        declared = ", ".join(unit.peaks.declared()) if unit.peaks is not None else ""
        return f"{where} declares no peak for {precision} ({'peaks for ' + declared if declared else 'no peaks'})"
    if _reference_tflops(hw, unit) is None:
        return (f"{where} declares no peak for its own precision and its compute model states no ops per "
                f"cycle, so its cycles cannot be scaled to {precision}; add peaks.{own}")
    return ""


def _reference_tflops(hw: HwSpec, unit: Unit) -> float | None:
    """The TFLOP/s the unit's compute model stands for: its declared peak at its own precision, else the
    model's own peak (ops per cycle x instances x clock); None when neither is known."""
    own = hw.precision(unit)
    if unit.peaks is not None and own in STEP_PRECISIONS and unit.peaks.at(own) is not None:
        return unit.peaks.at(own)
    modelled = unit.model.peak_ops_per_cycle() * unit.count * hw.clock_hz / 1e12
    return modelled or None


def compute_scale(hw: HwSpec, unit: Unit) -> float:
    """How many times longer `unit`'s compute takes at the step precision than its compute model says
    (1.0 without a step precision, at the unit's own precision, or for a unit without a datapath)."""
    p = hw.step_precision
    if p is None or not unit.model.has_datapath or hw.precision(unit) == p:
        return 1.0
    return _reference_tflops(hw, unit) / unit.peaks.at(p)  # at_precision refused the units where these are None


def peak_flops_per_s(hw: HwSpec, unit: Unit) -> float:
    """Peak FLOP/s of all of `unit`'s instances on one chip at the step precision, the denominator of MFU and
    of "% of peak": the peak the unit declares for that precision (its datasheet's), else its compute
    model's peak (ops per cycle x instances x clock) at the rate compute_scale runs it; 0.0 without a datapath."""
    p = hw.step_precision
    if p is not None and unit.model.has_datapath and unit.peaks is not None and unit.peaks.at(p) is not None:
        return unit.peaks.at(p) * 1e12
    return unit.model.peak_ops_per_cycle() * unit.count * hw.clock_hz / compute_scale(hw, unit)


def scaled_cycles(hw: HwSpec, unit: Unit, cycles: int) -> int:
    """Compute cycles at the step precision: `cycles` x compute_scale, rounded up."""
    scale = compute_scale(hw, unit)
    return cycles if scale == 1.0 else math.ceil(cycles * scale)


def _low(hw: HwSpec, node: Node) -> int | None:
    """Bytes of the step precision for a float node, None where the hardware's bytes apply."""
    if hw.step_precision is None or node.dtype not in FLOAT_DTYPES:
        return None
    return STORAGE_BYTES[hw.step_precision]


def compute_elem_bytes(hw: HwSpec, node: Node) -> int:
    """Bytes per element a node's work reads and writes: fp32 for an update node under mixed precision,
    the step precision for the rest (what node costs charge; the node alone decides)."""
    low = _low(hw, node)
    if low is None:
        return hw.elem_bytes(node.dtype)
    return MASTER_BYTES if node.phase == "update" and low < MASTER_BYTES else low


def tensor_elem_bytes(graph: Graph, node: Node, hw: HwSpec) -> int:
    """Bytes per element of `node`'s tensor in memory under the step precision (see the module docstring)."""
    low = _low(hw, node)
    if low is None:
        return hw.elem_bytes(node.dtype)
    if low >= MASTER_BYTES:
        return low
    if node.phase == "update":  # (in a part of an update node, cut from its graph, the cast is not seen)
        return MASTER_BYTES + low if node.id in _new_weights(graph) else MASTER_BYTES
    if graph.optimizer is None or node.op != "param":
        return low
    if node.trainable:
        return MASTER_BYTES + low  # the fp32 master and its working copy
    return MASTER_BYTES if f"{node.name}.new" in graph.outputs else low  # optimizer state, or a frozen weight


def master_split(graph: Graph, node: Node, hw: HwSpec) -> tuple[int, int] | None:
    """(working-copy bytes, master bytes) per element of a tensor that holds an fp32 master beside its
    low-precision working copy (a trainable parameter, or the update writing its `<name>.new`, under mixed
    precision); None for every other tensor. ZeRO 1-2 shard the master with the optimizer state and keep
    only the working copy whole (compiler/planning/zero.py)."""
    low = _low(hw, node)
    if low is None or low >= MASTER_BYTES or tensor_elem_bytes(graph, node, hw) != MASTER_BYTES + low:
        return None
    return low, MASTER_BYTES


def tensor_bytes(graph: Graph, node: Node, hw: HwSpec) -> int:
    """Bytes of `node`'s whole tensor in memory under the step precision."""
    return math.prod(node.shape) * tensor_elem_bytes(graph, node, hw)


_NEW_WEIGHTS: dict[int, tuple[weakref.ref, frozenset[int]]] = {}


def _new_weights(graph: Graph) -> frozenset[int]:
    """Ids of the update nodes that are a trainable parameter's `<name>.new`, found once per graph (the
    cache holds the graph weakly, so an id reused by a later graph is not mistaken for it)."""
    hit = _NEW_WEIGHTS.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1]
    ids = frozenset(graph.outputs[f"{p.name}.new"] for p in graph.params
                    if p.trainable and f"{p.name}.new" in graph.outputs)
    key = id(graph)
    _NEW_WEIGHTS[key] = (weakref.ref(graph, lambda _: _NEW_WEIGHTS.pop(key, None)), ids)
    return ids
