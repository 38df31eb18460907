"""FLOPs of a compiled training step as training-systems papers count them (Schedule -> StepFlops): model
FLOPs (what the model needs, the numerator of MFU), hardware FLOPs (what the machine executed, with
recomputation), and the GPT formulas of Megatron-LM they agree with on gpt2."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from accelsim.cost.model import peak_ops_per_cycle
from accelsim.errors import ModelError
from accelsim.hw.precision import peak_flops_per_s
from accelsim.hw.spec import HwSpec, Unit
from accelsim.ops.registry import OPS, get_op
from accelsim.schedule.levels import chip_list
from accelsim.schedule.plan import Schedule

FLOPS_DEFINITION = (
    "model_flops_per_step = 3 x the FLOPs of the forward pass's tensor ops (matmul, conv and their fused forms: "
    "the op registry's 'tensor' category, 2 FLOPs per multiply-accumulate) over every (micro-batch, replica) "
    "of the step, a node replicated on tensor-parallel ranks counted once: the backward pass of a tensor op costs "
    "twice its forward (one product for the input's gradient, one for the weight's: the convention, kept where "
    "a first layer's input needs no gradient and only one product runs), recomputation and elementwise work are "
    "left out. For GPT models this is 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) (Korthikanti "
    "et al. 2022, B global batch, s sequence, l layers, h hidden size, V vocabulary). Megatron-LM's "
    "96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (Narayanan et al., SC21, eq. 3) also counts full activation "
    "recomputation (one more forward pass of every transformer layer, not of the LM head), so it equals the "
    "model FLOPs plus 24 B s l h^2 + 4 B s^2 l h: Megatron's published TFLOP/s use it. "
    "hardware_flops_per_step = the FLOPs of every tensor-op task the schedule executes: forward, backward, "
    "recomputation and every tensor-parallel rank's copy of a replicated node. TFLOP/s per chip = FLOPs / "
    "makespan_s / chips in use / 1e12; mfu = model TFLOP/s per chip / peak_tflops_per_chip, the peak of the "
    "chip's units that run tensor ops at the step's precision (the peak a unit declares for it under --precision; "
    "otherwise its compute model's, arrays: 2 x rows x cols per cycle per instance)")
"""How the step's FLOP figures are counted; run_summary returns it beside them."""

TENSOR = "tensor"
"""The op registry's category of the ops whose FLOPs training-systems papers count (matmul, conv)."""

BACKWARD_PER_FORWARD = 2
"""A tensor op's backward pass computes two products of the forward's size: the input's gradient and the
weight's (Narayanan et al. section 5.1; the op registry's gradient rules emit exactly these)."""


@dataclass(frozen=True, slots=True)
class StepFlops:
    """A step's model and hardware FLOPs (FLOPS_DEFINITION)."""

    model_flops: int
    hardware_flops: int
    forward_tensor_flops: int
    """The forward pass's tensor-op FLOPs over the step's inputs, each node once: model_flops / 3."""


def _is_tensor_op(op: str) -> bool:
    return op in OPS and get_op(op).category == TENSOR


def step_flops(schedule: Schedule) -> StepFlops:
    """Model and hardware FLOPs of one compiled step (FLOPS_DEFINITION), read from its node tasks.

    A task's identity (node, micro-batch, replica, part) names one piece of the model's work; a replicated
    node (graph rank -1) runs once on every tensor-parallel rank under the same identity, so the model counts
    it once and the hardware every time. Recomputed values are backward-phase nodes (remat/rewrite.py), so
    they count as hardware FLOPs only."""
    forward: dict[tuple[int, int, int, int], int] = {}
    hardware = 0
    for t in schedule.tasks:
        if t.kind != "node" or not _is_tensor_op(t.op):
            continue
        hardware += t.flops
        if t.phase == "forward":
            forward[(t.node, t.microbatch, t.replica, t.part)] = t.flops
    fwd = sum(forward.values())
    return StepFlops(model_flops=(1 + BACKWARD_PER_FORWARD) * fwd, hardware_flops=hardware,
                     forward_tensor_flops=fwd)


def runs_tensor_ops(unit: Unit) -> bool:
    """Whether a unit kind runs tensor ops (by category or by name) and has an arithmetic peak."""
    named = any(_is_tensor_op(op) for op in unit.ops)
    return (TENSOR in unit.categories or named) and peak_ops_per_cycle(unit) > 0


def tensor_peak_flops_per_s(hw: HwSpec, chips_used: Iterable[int]) -> float:
    """Peak FLOP/s of the units that run tensor ops, summed over the chips in use (every instance: a gang's
    instances work together on each node); MFU's denominator. For `hw` resolved at a step precision
    (hw/precision.at_precision), each unit's peak at that precision (hw/precision.peak_flops_per_s)."""
    chips = chip_list(hw)
    units = [u for c in sorted(set(chips_used)) for u in chips[c].units if runs_tensor_ops(u)]
    if hw.step_precision is not None:
        return sum(peak_flops_per_s(hw, u) for u in units)
    return sum(peak_ops_per_cycle(u) * u.count for u in units) * hw.clock_hz  # bit for bit as before --precision


def _positive(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ModelError(f"GPT FLOPs formula: {what}={value!r} is invalid; expected an integer >= 1")
    return value


def gpt_model_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> int:
    """72 B s l h^2 (1 + s/(6h) + V/(12 l h)) = 72 B s l h^2 + 12 B s^2 l h + 6 B s h V: a GPT step's model
    FLOPs (forward and backward of every matmul once, no recomputation), exact in integers."""
    b, s, n, h, v = (_positive(k, x) for k, x in (("batch", batch), ("seq", seq), ("layers", layers),
                                                   ("hidden", hidden), ("vocab", vocab)))
    return 72 * b * s * n * h * h + 12 * b * s * s * n * h + 6 * b * s * h * v


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> int:
    """Megatron-LM's 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) = 96 B s l h^2 + 16 B s^2 l h + 6 B s h V
    (Narayanan et al., SC21, eq. 3: with full activation recomputation), exact in integers."""
    b, s, n, h, v = (_positive(k, x) for k, x in (("batch", batch), ("seq", seq), ("layers", layers),
                                                   ("hidden", hidden), ("vocab", vocab)))
    return 96 * b * s * n * h * h + 16 * b * s * s * n * h + 6 * b * s * h * v
