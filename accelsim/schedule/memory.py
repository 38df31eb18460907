"""Static memory placement: blocks in a memory's address space over time intervals (first fit)."""
from __future__ import annotations

import math
from dataclasses import dataclass

ALIGN_BYTES = 64
OPEN = math.inf  # the end of a tensor whose last reader is not scheduled yet


@dataclass
class Block:
    key: tuple
    offset: int
    size_bytes: int
    start: int
    end: float


class Arena:
    """One memory instance. A block conflicts with another when their time intervals and address
    ranges both overlap; an open end conflicts with everything after its start."""

    def __init__(self, name: str, capacity_bytes: int) -> None:
        self.name = name
        self.capacity_bytes = capacity_bytes
        self.blocks: list[Block] = []

    def _offset(self, size: int, start: int) -> int | None:
        busy = sorted((b.offset, b.offset + b.size_bytes) for b in self.blocks if b.end > start)
        offset = 0
        for lo, hi in busy:
            if lo >= offset + size:
                break
            offset = max(offset, hi)
        return offset if offset + size <= self.capacity_bytes else None

    def fits(self, size_bytes: int, start: int) -> bool:
        return self._offset(_aligned(size_bytes), start) is not None

    def earliest_fit(self, size_bytes: int, start: int, horizon: float | None = None) -> int | None:
        """The first time >= start at which the tensor fits (a known free time), or None."""
        size = _aligned(size_bytes)
        for t in sorted({int(b.end) for b in self.blocks if start < b.end < OPEN}):
            if horizon is not None and t > horizon:
                return None
            if self._offset(size, t) is not None:
                return t
        return None

    def allocate(self, key: tuple, size_bytes: int, start: int) -> Block | None:
        """The lowest aligned offset free from `start` on, or None if the tensor does not fit."""
        size = _aligned(size_bytes)
        offset = self._offset(size, start)
        if offset is None:
            return None
        block = Block(key, offset, size, start, OPEN)
        self.blocks.append(block)
        return block

    def live_bytes_at(self, t: int) -> int:
        return sum(b.size_bytes for b in self.blocks if b.start <= t < b.end)


def _aligned(size_bytes: int) -> int:
    return max(ALIGN_BYTES, -(-size_bytes // ALIGN_BYTES) * ALIGN_BYTES)
