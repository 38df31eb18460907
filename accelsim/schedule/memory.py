"""Static memory placement: blocks in a memory's address space over time intervals (first fit)."""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

ALIGN_BYTES = 64
OPEN = math.inf  # the end of a tensor whose last reader is not scheduled yet


@dataclass
class Block:
    key: tuple
    offset: int
    size_bytes: int
    start: int
    end: float
    seq: int = field(default=0, compare=False)


class Arena:
    """One memory instance. A block conflicts with another when their time intervals and address
    ranges both overlap; an open end conflicts with everything after its start. Closed blocks are
    kept sorted by end, so a query at time t only looks at blocks still alive after t."""

    def __init__(self, name: str, capacity_bytes: int) -> None:
        self.name = name
        self.capacity_bytes = capacity_bytes
        self.blocks: list[Block] = []
        self._open: dict[int, Block] = {}
        self._closed_ends: list[tuple[float, int]] = []
        self._closed: list[Block] = []

    def _alive_after(self, t: int) -> list[Block]:
        i = bisect.bisect_right(self._closed_ends, (t, math.inf))
        return list(self._open.values()) + self._closed[i:]

    def _offset(self, size: int, start: int) -> int | None:
        offset = 0
        for lo, hi in sorted((b.offset, b.offset + b.size_bytes) for b in self._alive_after(start)):
            if lo >= offset + size:
                break
            offset = max(offset, hi)
        return offset if offset + size <= self.capacity_bytes else None

    def fits(self, size_bytes: int, start: int) -> bool:
        return self._offset(_aligned(size_bytes), start) is not None

    def earliest_fit(self, size_bytes: int, start: int, horizon: float | None = None) -> int | None:
        """The first time >= start at which the tensor fits (a known free time), or None."""
        size = _aligned(size_bytes)
        i = bisect.bisect_right(self._closed_ends, (start, math.inf))
        for t in sorted({int(end) for end, _ in self._closed_ends[i:]}):
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
        block = Block(key, offset, size, start, OPEN, seq=len(self.blocks))
        self.blocks.append(block)
        self._open[block.seq] = block
        return block

    def close(self, block: Block, end: int) -> None:
        """The block's last reader is scheduled: it is free from `end` on."""
        del self._open[block.seq]
        block.end = end
        i = bisect.bisect_right(self._closed_ends, (end, block.seq))
        self._closed_ends.insert(i, (end, block.seq))
        self._closed.insert(i, block)

    def live_bytes_at(self, t: int) -> int:
        return sum(b.size_bytes for b in self.blocks if b.start <= t < b.end)


def _aligned(size_bytes: int) -> int:
    return max(ALIGN_BYTES, -(-size_bytes // ALIGN_BYTES) * ALIGN_BYTES)
