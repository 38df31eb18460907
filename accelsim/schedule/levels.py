"""Memory levels: the order in which a chip's memories take a tensor and what writing one elsewhere
costs. The scheduler, the validator and the simulator's dynamic runtime apply the same rules."""
from __future__ import annotations

import math

from accelsim.hw.placement import placement_of, streams_of
from accelsim.hw.spec import Chip, HwSpec, Memory

ALIGN_BYTES = 64
"""Every tensor's placed size is a multiple of this (and at least this)."""
LEVEL = {"sram": 0, "cache": 1, "hbm": 2, "dram": 3}
"""Fastest first: a tensor goes to the lowest level with room."""


def chip_list(hw: HwSpec) -> list[Chip]:
    """Every chip instance, in order: a chip kind with count 4 appears four times."""
    return [c for c in hw.chips for _ in range(c.count)]


_ORDER: dict[int, tuple[Chip, tuple[Memory, ...]]] = {}
"""memory_order's answers by chip object (bounds and placement ask it once per task)."""


def memory_order(chip: Chip) -> list[Memory]:
    """A chip's memories, fastest level first (ties: the order of the hardware file)."""
    hit = _ORDER.get(id(chip))
    if hit is None or hit[0] is not chip:
        if len(_ORDER) > 256:  # a sweep makes many machines: keep the cache small
            _ORDER.clear()
        ranked = sorted(enumerate(chip.memories), key=lambda im: (LEVEL[im[1].kind], im[0]))
        hit = _ORDER[id(chip)] = (chip, tuple(m for _, m in ranked))
    return list(hit[1])


def preferred_memory(chip: Chip, resource: str) -> str:
    """Where a task's output goes first: its unit's first `writes` memory, a DMA engine's buffer, or for a
    link or a collective (no unit) the chip's fastest memory that is no DMA buffer."""
    for u in chip.units:
        if u.name == resource:
            return u.writes[0]
    streams = streams_of(chip)
    if resource in streams:
        return streams[resource][1].stream.buffer
    buffers = dma_buffers(chip)
    return next(m.name for m in memory_order(chip) if m.name not in buffers)


def dma_buffers(chip: Chip) -> dict[str, str]:
    """Buffer memory -> the DMA engine (resource) whose prefetches alone it holds (hw/placement.py)."""
    return {where.stream.buffer: resource for resource, (_, where) in streams_of(chip).items()}


def leaf_home(chip: Chip, leaf_class: str | None) -> str | None:
    """The memory a placement puts a leaf of `leaf_class` in (None: no placement for it, the fastest with room)."""
    where = placement_of(chip).get(leaf_class) if leaf_class is not None else None
    return None if where is None else where.memory


def spill_cycles(mem: Memory, nbytes: int, clock_hz: float) -> int:
    """Extra cycles of writing `nbytes` to `mem` instead of the preferred memory."""
    return math.ceil(nbytes / mem.bytes_per_cycle(clock_hz))


def memory_of(chip: Chip, name: str) -> Memory | None:
    return next((m for m in chip.memories if m.name == name), None)


def is_result(keep: bool, phase: str) -> bool:
    """A step result: an output kept to the step's end that is not a parameter or optimizer update."""
    return keep and phase != "update"


def first_memory(chip: Chip, resource: str, result: bool) -> str:
    """Where an output is placed first: a step result in the chip's backing memory (its last level:
    results leave the fast memories, as an accelerator streams them out, instead of filling them a
    micro-batch at a time), anything else in the memory its unit writes."""
    return memory_order(chip)[-1].name if result else preferred_memory(chip, resource)


def write_cycles(chip: Chip, resource: str, memory: str, nbytes: int, clock_hz: float) -> int:
    """Extra cycles of writing an output of `nbytes` to `memory`: none in its unit's own memory (nor by a DMA
    engine in the memory its class streams from: the engine's bandwidth is its task's time), else its
    transfer time there."""
    if memory == preferred_memory(chip, resource):
        return 0
    stream = streams_of(chip).get(resource)
    if stream is not None and stream[1].memory == memory:
        return 0
    return spill_cycles(memory_of(chip, memory), nbytes, clock_hz)


def elsewhere(port: str | None, inputs: list[tuple[str, int]]) -> dict[str, int]:
    """Bytes of a unit task's inputs ((memory, bytes) each) per memory other than its port `port`
    (None: a link or a collective, which streams nothing through a memory port)."""
    per: dict[str, int] = {}
    if port is not None:
        for memory, nbytes in inputs:
            if memory != port:
                per[memory] = per.get(memory, 0) + nbytes
    return per


def read_cycles(chip: Chip, port: str | None, inputs: list[tuple[str, int]], clock_hz: float) -> int:
    """Cycles a unit whose operands stream through memory `port` needs for inputs that live in other
    memories ((memory, bytes) each): every other memory streams its share at its own bandwidth, in
    parallel, so the slowest stream counts. A task lasts max(its cycles, this) plus its write cost:
    a weight or a spilled activation read back from DRAM costs DRAM's bandwidth."""
    per = elsewhere(port, inputs)
    return max((spill_cycles(memory_of(chip, m), b, clock_hz) for m, b in per.items()), default=0)


def port_loads(port: str | None, bytes_moved: int, inputs: list[tuple[str, int]],
               output: tuple[str, int] | None, own: str | None) -> dict[str, int]:
    """Bytes a unit task moves through each memory port of its chip over its duration: its operands
    through its port (`bytes_moved`, the cost model's traffic), plus the inputs that live in other
    memories through theirs, plus its output (memory, bytes) when written outside its unit's own
    memory `own`. The scheduler books, the validator checks and the simulator meters these loads,
    each at bytes / duration (ports.port_rate), so DRAM traffic of weights and spills contends for
    DRAM's bandwidth. A link or a collective (port None) loads no memory port."""
    if port is None:
        return {}
    loads = elsewhere(port, inputs)
    if output is not None and output[0] != own:
        loads[output[0]] = loads.get(output[0], 0) + output[1]
    if bytes_moved:
        loads[port] = loads.get(port, 0) + bytes_moved
    return {m: b for m, b in sorted(loads.items()) if b}


def aligned(size_bytes: int) -> int:
    """The bytes a tensor of `size_bytes` occupies in memory."""
    return max(ALIGN_BYTES, -(-size_bytes // ALIGN_BYTES) * ALIGN_BYTES)
