"""A unit's peak throughput per step precision (`peaks: {fp32: 19.5, bf16: 312}` in TFLOP/s), and the step
precisions with the bytes each stores an element in.

The compute models of hw/compute.py describe one datapath at one precision (the unit's own `precision`);
a step run at another precision (StepOptions.precision) runs that datapath at the rate `peaks` declares
for it, relative to the rate declared for the unit's own precision (hw/precision.py applies it).
"""
from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BeforeValidator, Field, WithJsonSchema

from accelsim.hw.fields import Spec
from accelsim.hw.ranges import Range, in_range

StepPrecision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
STEP_PRECISIONS: tuple[str, ...] = get_args(StepPrecision)
"""The precisions a step may name (StepOptions.precision, --precision)."""

STORAGE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes one element takes in memory at each step precision. tf32 is a Tensor Core input format: its
values are stored as fp32 and rounded to 10 mantissa bits only inside the multiplier."""

MASTER_BYTES = 4
"""Bytes of an fp32 master weight or optimizer-state element, whatever the step's precision."""

PEAK_RANGE = Range(1e-6, 1e6, "TFLOP/s", why=(
    "a unit kind's dense peak, all its instances on one chip together: 1 MFLOP/s to 1 EFLOP/s (an H100's "
    "dense FP8 peak is ~2,000 TFLOP/s)"))
TeraFlops = Annotated[float, BeforeValidator(in_range(PEAK_RANGE)), WithJsonSchema(
    {"type": "number", "minimum": PEAK_RANGE.lo, "maximum": PEAK_RANGE.hi,
     "description": PEAK_RANGE.describe().removeprefix("expected ")})]


class UnitPeaks(Spec):
    """Dense peak TFLOP/s of all of a unit kind's instances on one chip, per step precision (a datasheet's
    figures); a precision left out is one the unit cannot run, and a step at it is refused."""

    fp32: TeraFlops | None = Field(None, description="dense fp32 peak, TFLOP/s")
    tf32: TeraFlops | None = Field(None, description="dense tf32 peak (fp32 storage), TFLOP/s")
    bf16: TeraFlops | None = Field(None, description="dense bf16 peak, TFLOP/s")
    fp16: TeraFlops | None = Field(None, description="dense fp16 peak, TFLOP/s")
    fp8: TeraFlops | None = Field(None, description="dense fp8 peak, TFLOP/s")

    def at(self, precision: str) -> float | None:
        """The declared peak at `precision` (TFLOP/s), None where the unit declares none."""
        return getattr(self, precision)

    def declared(self) -> tuple[str, ...]:
        """The precisions with a peak, in STEP_PRECISIONS order."""
        return tuple(p for p in STEP_PRECISIONS if self.at(p) is not None)
