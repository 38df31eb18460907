"""Static memory placement: blocks in a memory's address space over time intervals (first fit)."""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

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
    kept sorted by end, so a query at time t only looks at blocks still alive after t; their address
    ranges sit in numpy arrays in the same order, so first fit is a vectorized scan (a graph keeps
    hundreds of tensors alive at once, and the planner asks thousands of times)."""

    def __init__(self, name: tuple[int, str], capacity_bytes: int) -> None:
        """`name`: (chip, memory)."""
        self.name = name
        self.capacity_bytes = capacity_bytes
        self.blocks: list[Block] = []
        self._open: dict[int, Block] = {}
        self._closed_ends: list[tuple[float, int]] = []
        self._closed: list[Block] = []
        self._closed_lo = np.zeros(0, np.int64)
        self._closed_hi = np.zeros(0, np.int64)
        self._open_seqs: list[int] = []  # open blocks' address ranges, in these arrays' order
        self._open_lo = np.zeros(0, np.int64)
        self._open_hi = np.zeros(0, np.int64)

    def _offset(self, size: int, start: int) -> int | None:
        """The lowest offset where `size` bytes overlap no block alive after `start`: sorted by low
        address, the first block that starts at least `size` above every earlier block's end."""
        i = bisect.bisect_right(self._closed_ends, (start, math.inf))
        lo = np.concatenate((self._open_lo, self._closed_lo[i:]))
        hi = np.concatenate((self._open_hi, self._closed_hi[i:]))
        offset = 0
        if lo.size:
            order = np.argsort(lo, kind="stable")
            reach = np.maximum.accumulate(hi[order])
            before = np.concatenate(([0], reach[:-1]))
            gaps = np.flatnonzero(lo[order] >= before + size)
            offset = int(before[gaps[0]]) if gaps.size else int(reach[-1])
        return offset if offset + size <= self.capacity_bytes else None

    def fits(self, size_bytes: int, start: int) -> bool:
        return self._offset(aligned(size_bytes), start) is not None

    def earliest_fit(self, size_bytes: int, start: int, horizon: float | None = None) -> int | None:
        """The first time >= start at which the tensor fits (a known free time), or None."""
        size = aligned(size_bytes)
        i = bisect.bisect_right(self._closed_ends, (start, math.inf))
        for t in sorted({int(end) for end, _ in self._closed_ends[i:]}):
            if horizon is not None and t > horizon:
                return None
            if self._offset(size, t) is not None:
                return t
        return None

    def allocate(self, key: tuple, size_bytes: int, start: int) -> Block | None:
        """The lowest aligned offset free from `start` on, or None if the tensor does not fit."""
        size = aligned(size_bytes)
        offset = self._offset(size, start)
        if offset is None:
            return None
        block = Block(key, offset, size, start, OPEN, seq=len(self.blocks))
        self.blocks.append(block)
        self._open[block.seq] = block
        self._open_seqs.append(block.seq)
        self._open_lo = np.append(self._open_lo, offset)
        self._open_hi = np.append(self._open_hi, offset + size)
        return block

    def close(self, block: Block, end: int) -> None:
        """The block's last reader is scheduled: it is free from `end` on."""
        del self._open[block.seq]
        j = self._open_seqs.index(block.seq)
        del self._open_seqs[j]
        self._open_lo, self._open_hi = np.delete(self._open_lo, j), np.delete(self._open_hi, j)
        block.end = end
        i = bisect.bisect_right(self._closed_ends, (end, block.seq))
        self._closed_ends.insert(i, (end, block.seq))
        self._closed.insert(i, block)
        self._closed_lo = np.insert(self._closed_lo, i, block.offset)
        self._closed_hi = np.insert(self._closed_hi, i, block.offset + block.size_bytes)

    def live_bytes_at(self, t: int) -> int:
        return sum(b.size_bytes for b in self.blocks if b.start <= t < b.end)


def aligned(size_bytes: int) -> int:
    return max(ALIGN_BYTES, -(-size_bytes // ALIGN_BYTES) * ALIGN_BYTES)
