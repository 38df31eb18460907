"""memory._by_start keeps its free gaps sorted by size; its placements must equal the plain best-fit scan
over every live block that it replaced (the oracle below), so schedules keep their bytes."""
from __future__ import annotations

import bisect
import heapq
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.compiler.timing.memory import Block, _by_start, pack


def scan_best_fit(blocks: list[Block]) -> tuple[int, list[int]]:
    """Start order; each block into the smallest gap between the blocks live then (lowest on a tie),
    else on top of the highest one: O(live blocks) per block."""
    order = sorted(range(len(blocks)), key=lambda k: (blocks[k].start, -blocks[k].size_bytes, k))
    offsets, live, ends, top = [0] * len(blocks), [], [], 0
    for k in order:
        b = blocks[k]
        while ends and ends[0][0] <= b.start:
            _, off, j = heapq.heappop(ends)
            del live[bisect.bisect_left(live, (off, blocks[j].size_bytes, j))]
        best, best_gap, prev = None, math.inf, 0
        for off, size, _ in live:
            if b.size_bytes <= off - prev < best_gap:
                best, best_gap = prev, off - prev
            prev = max(prev, off + size)
        offsets[k] = prev if best is None else best
        top = max(top, offsets[k] + b.size_bytes)
        bisect.insort(live, (offsets[k], b.size_bytes, k))
        heapq.heappush(ends, (b.end, offsets[k], k))
    return top, offsets


block = st.tuples(st.integers(0, 60), st.one_of(st.integers(1, 40), st.just(None)),
                  st.sampled_from([64, 128, 192, 256, 512, 320, 1024]))


@settings(max_examples=300)
@given(st.lists(block, min_size=1, max_size=80))
def test_gap_index_places_like_the_scan(specs):
    blocks = [Block(("b", i), -1, size, start, math.inf if length is None else start + length)
              for i, (start, length, size) in enumerate(specs)]
    assert _by_start(blocks) == scan_best_fit(blocks)


def test_freed_neighbours_merge_into_one_gap():
    # a [0, 64) b [64, 128) c [128, 192) live; a and b end; a 128-byte block fits exactly at 0
    blocks = [Block(("a",), -1, 64, 0, 5), Block(("b",), -1, 64, 0, 5), Block(("c",), -1, 64, 0, 50),
              Block(("d",), -1, 128, 10, 20)]
    assert pack(blocks, 10**6) == 192
    assert [b.offset for b in blocks] == [0, 64, 128, 0]
