"""The per-kernel overheads of a GPU-like chip (a chip's `gpu_overheads:` key): what a dataflow chip with a
static schedule does not pay and a GPU running one kernel per node does. cost/kernel_overheads.py charges them,
and the list scheduler runs such a chip's kernels one at a time, whatever unit they use: one compute stream.

- launch_latency_us: the host's time to issue one kernel (framework dispatch + cudaLaunchKernel). Launches run
  ahead of the GPU, so a long kernel hides the next launch; a kernel shorter than this leaves the GPU waiting,
  so every kernel lasts at least this long.
- tail_latency_us: the device-side gap of every kernel: its last wave draining and the next kernel's first
  thread blocks starting, paid even when launches are queued ahead.
- hbm_fraction: the share of the HBM's datasheet bandwidth that a streaming kernel reaches.
- phase_memory (optional): the on-chip memory (the L2 cache) that holds a multi-phase kernel's input between
  its phases (ops/registry.py Passes: batch norm's statistics, then its normalize pass). Where the span a phase
  must keep exceeds that memory's capacity, every later phase reads it from HBM again; absent, no chip memory
  is declared to hold it and every op is charged one pass, as on a dataflow chip whose unit memory holds it.
"""
from __future__ import annotations

import math
from typing import Annotated

from pydantic import BeforeValidator, Field, WithJsonSchema

from accelsim.hw.fields import Spec
from accelsim.hw.ranges import Problem, Range, check_name, in_range

LATENCY_US = Range(0, 10_000, "us", min_nonzero=1e-6, why=(
    "0 to 10 ms per kernel, 1,000x a framework's dispatch of one op (~5-25 us); a nonzero latency below 1 ps "
    "is a typo or a denormal"))
HBM_FRACTION = Range(0.01, 1, "of the datasheet bandwidth", why=(
    "a streaming kernel reaches a share of the peak: 1 is the datasheet figure, below 1% is no memory system"))


def _schema(rng: Range) -> WithJsonSchema:
    return WithJsonSchema({"type": "number", "minimum": rng.lo, "maximum": rng.hi, "description": rng.describe()})


LatencyUs = Annotated[float, BeforeValidator(in_range(LATENCY_US)), _schema(LATENCY_US)]
Fraction = Annotated[float, BeforeValidator(in_range(HBM_FRACTION)), _schema(HBM_FRACTION)]
MemoryName = Annotated[str, BeforeValidator(check_name), WithJsonSchema({"type": "string"})]
ON_CHIP_KINDS = ("sram", "cache")  # what may hold a span between phases: off-chip memory is where it came from


class GpuOverheads(Spec):
    """Per-kernel launch and tail latency and the achievable HBM bandwidth of a GPU-like chip: every node
    is one kernel (a fused elementwise chain is one node, so it pays one launch)."""

    launch_latency_us: LatencyUs = Field(description=(
        "host time to issue one kernel, in us; a kernel lasts at least this long (launches run ahead)"))
    tail_latency_us: LatencyUs = Field(description=(
        "device gap added to every kernel, in us: its last wave drains, the next kernel's blocks start"))
    hbm_fraction: Fraction = Field(description=(
        "share of an hbm memory's datasheet bandwidth a streaming kernel reaches (0.01 to 1)"))
    # left out of the dump when absent, so the hardware hashes of schedules compiled before the key hold
    phase_memory: MemoryName | None = Field(None, exclude_if=lambda v: v is None, description=(
        "the on-chip memory (sram or cache, e.g. the L2) that holds a multi-phase kernel's input between its "
        "phases; a span larger than its capacity is read again from HBM by every later phase"))

    def launch_cycles(self, clock_hz: float) -> int:
        """The launch latency in whole cycles of the machine's clock (rounded up)."""
        return math.ceil(self.launch_latency_us * 1e-6 * clock_hz)

    def tail_cycles(self, clock_hz: float) -> int:
        """The tail latency in whole cycles of the machine's clock (rounded up)."""
        return math.ceil(self.tail_latency_us * 1e-6 * clock_hz)


def phase_memory_problems(overheads: GpuOverheads | None, memory_kinds: dict[str, str], chip: str) -> list[Problem]:
    """What is wrong with `phase_memory` on a chip whose memories are `memory_kinds` (name -> kind): it must name
    one of them, and an on-chip one, since holding a span in the memory it streams from saves no pass."""
    name = overheads.phase_memory if overheads is not None else None
    if name is None:
        return []
    path = ("gpu_overheads", "phase_memory")
    if name not in memory_kinds:
        return [(path, f"chip {chip!r} has no memory {name!r} (memories: {', '.join(sorted(memory_kinds))})", name)]
    if memory_kinds[name] not in ON_CHIP_KINDS:
        return [(path, f"memory {name!r} of chip {chip!r} is of kind {memory_kinds[name]}, off chip: the memory that "
                 f"holds a span between phases must be of kind {' or '.join(ON_CHIP_KINDS)} (an L2 cache, an SRAM)",
                 name)]
    return []
