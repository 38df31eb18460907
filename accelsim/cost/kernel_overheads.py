"""What a GPU-like chip adds to a node's cycles (hw/gpu_overheads.py): (GpuOverheads, clock, cycles) -> cycles.

Every node runs as one kernel. Its memory traffic to an `hbm` memory streams at the achievable fraction of
the datasheet bandwidth; then the kernel pays its tail latency, and lasts at least its launch latency, since
the host issues kernels one at a time ahead of the GPU (a short kernel waits for the next launch, a long one
hides it). Fusing a chain of nodes into one therefore saves their launches and tails as well as their bytes.
An op that must reduce over a span of its input before producing any output (ops/registry.py Passes) reads the
span again in each later phase when the span exceeds the chip's `phase_memory` (its L2): the bytes go to HBM.
"""
from __future__ import annotations

from accelsim.hw.gpu_overheads import GpuOverheads
from accelsim.hw.spec import Chip, Memory
from accelsim.ops.registry import Passes


def streaming_bytes_per_cycle(overheads: GpuOverheads | None, memory: Memory, clock_hz: float) -> float:
    """The rate a kernel streams from (or to) `memory`: the datasheet figure, scaled for an HBM of a GPU-like
    chip by the achievable fraction."""
    rate = memory.bytes_per_cycle(clock_hz)
    if overheads is not None and memory.kind == "hbm":
        return rate * overheads.hbm_fraction
    return rate


def kernel_cycles(overheads: GpuOverheads | None, clock_hz: float, work_cycles: int) -> int:
    """A node's cycles as a kernel: its work plus the tail, at least the launch; `work_cycles` unchanged on a
    chip without GPU overheads."""
    if overheads is None:
        return work_cycles
    return max(overheads.launch_cycles(clock_hz), work_cycles + overheads.tail_cycles(clock_hz))


def reread_bytes(chip: Chip, passes: Passes | None, elem_bytes: int) -> int:
    """Bytes a multi-phase node reads beyond its one pass: every phase after the first reads its span again when
    the span is larger than the capacity of the chip's `gpu_overheads.phase_memory` (an A100's 40 MB L2 holds a
    batch norm's input between statistics and normalize only if it fits). 0 for a one-pass op (passes None), a
    span that fits, or a chip that declares no such memory (a dataflow chip's unit memory holds the tensor)."""
    overheads = chip.gpu_overheads
    if passes is None or overheads is None or overheads.phase_memory is None:
        return 0
    if passes.span_elems * elem_bytes <= chip.memory(overheads.phase_memory).capacity_bytes:
        return 0
    return (passes.phases - 1) * passes.reread_elems * elem_bytes
