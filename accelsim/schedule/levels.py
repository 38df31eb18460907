"""Memory levels: the order in which a chip's memories take a tensor and what writing one elsewhere
costs. The scheduler, the validator and the simulator's dynamic runtime apply the same rules."""
from __future__ import annotations

import math

from accelsim.hw.spec import Chip, HwSpec, Memory

LEVEL = {"sram": 0, "cache": 1, "hbm": 2, "dram": 3}
"""Fastest first: a tensor goes to the lowest level with room."""


def chip_list(hw: HwSpec) -> list[Chip]:
    """Every chip instance, in order: a chip kind with count 4 appears four times."""
    return [c for c in hw.chips for _ in range(c.count)]


def memory_order(chip: Chip) -> list[Memory]:
    """A chip's memories, fastest level first (ties: the order of the hardware file)."""
    return sorted(chip.memories, key=lambda m: (LEVEL[m.kind], chip.memories.index(m)))


def preferred_memory(chip: Chip, resource: str) -> str:
    """Where a task's output goes first: its unit's first `writes` memory, or for a link or a
    collective (no unit) the chip's fastest memory."""
    for u in chip.units:
        if u.name == resource:
            return u.writes[0]
    return memory_order(chip)[0].name


def spill_cycles(mem: Memory, nbytes: int, clock_hz: float) -> int:
    """Extra cycles of writing `nbytes` to `mem` instead of the preferred memory."""
    return math.ceil(nbytes / mem.bytes_per_cycle(clock_hz))


def memory_of(chip: Chip, name: str) -> Memory | None:
    return next((m for m in chip.memories if m.name == name), None)
