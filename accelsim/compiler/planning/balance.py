"""The contiguous split of a sequence of units into stages that minimises the slowest stage under each
stage's memory (unit cycles and bytes, stage capacities -> stage starts).

Exact: a binary search over the slowest stage's cycles T, each probe a reachability sweep over the units
(the positions at which stage s can end, given that stages 0 .. s - 1 ended somewhere with every stage
within T and its memory). A stage's sums only shrink when it loses a unit, so the units a stage may start
at, for a given end, form an interval found by a binary search on prefix sums: a probe costs O(p n log n).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True, slots=True)
class StageLimits:
    """What one stage may hold: `capacity_bytes` of fixed bytes (parameters and their state) plus
    `in_flight` micro-batches' stashed activations."""

    capacity_bytes: int
    in_flight: int


@dataclass(frozen=True, slots=True)
class Units:
    """The units in order: cycles each, bytes held once per step, bytes stashed per micro-batch."""

    cycles: tuple[int, ...]
    fixed_bytes: tuple[int, ...]
    stash_bytes: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.cycles)


def _prefix(values: Sequence[int]) -> np.ndarray:
    # Python integers: byte counts times micro-batches can pass int64 only for absurd inputs, which the
    # step-size limits refuse before any partition is made
    return np.concatenate(([0], np.cumsum(np.asarray(values, dtype=np.int64))))


class _Search:
    """The reachability sweep for one sequence of units and stages."""

    def __init__(self, units: Units, limits: Sequence[StageLimits], nonempty: bool) -> None:
        self.n, self.p, self.nonempty = len(units), len(limits), nonempty
        self.cycles = _prefix(units.cycles)
        fixed, stash = _prefix(units.fixed_bytes), _prefix(units.stash_bytes)
        ends = np.arange(1 if nonempty else 0, self.n + 1)
        self.ends = ends
        # per stage: the first unit a stage ending at each end may start at within its memory
        self.memory_start = [np.searchsorted(fixed + lim.in_flight * stash,
                                             (fixed + lim.in_flight * stash)[ends] - lim.capacity_bytes, "left")
                             for lim in limits]

    def reach(self, slowest_cycles: int) -> list[np.ndarray] | None:
        """For each stage s, which positions stages 0 .. s can end at (s + 1 rows of n + 1); None if the last
        stage cannot end at the last unit."""
        start = np.searchsorted(self.cycles, self.cycles[self.ends] - slowest_cycles, "left")
        rows = []
        prev = np.zeros(self.n + 1, dtype=bool)
        prev[0] = True
        for s in range(self.p):
            lo = np.maximum(start, self.memory_start[s])
            hi = self.ends - 1 if self.nonempty else self.ends  # the latest start: a stage of >= 1 unit
            counts = np.concatenate(([0], np.cumsum(prev)))  # counts[i]: reachable positions < i
            ok = (lo <= hi) & (counts[np.maximum(hi + 1, 0)] - counts[np.minimum(lo, self.n + 1)] > 0)
            row = np.zeros(self.n + 1, dtype=bool)
            row[self.ends] = ok
            rows.append(prev)
            prev = row
        rows.append(prev)
        return rows if prev[self.n] else None

    def starts(self, rows: list[np.ndarray], slowest_cycles: int) -> tuple[int, ...]:
        """Stage starts (p + 1 positions from 0 to n) of a split within `slowest_cycles`: walking back from
        the last stage, each stage starts as early as it can, so later stages take the most work and the
        first stages, which hold the most micro-batches in flight under 1F1B, the least."""
        bounds = [self.n]
        end = self.n
        for s in range(self.p - 1, -1, -1):
            j = end - (1 if self.nonempty else 0)
            lo = max(int(np.searchsorted(self.cycles, self.cycles[end] - slowest_cycles, "left")),
                     int(self.memory_start[s][j]))
            hi = end - 1 if self.nonempty else end
            i = next(i for i in range(lo, hi + 1) if rows[s][i])
            bounds.append(i)
            end = i
        assert end == 0, "internal: a reachable split starts at unit 0"
        return tuple(reversed(bounds))


def balanced_split(units: Units, limits: Sequence[StageLimits], nonempty: bool = True) -> tuple[int, ...] | None:
    """Stage starts (len(limits) + 1 positions, 0 first and len(units) last) of the contiguous split whose
    slowest stage has the fewest cycles, every stage within its limits; `nonempty`: every stage gets at
    least one unit (needs at least as many units as stages). None if no split fits the limits."""
    if nonempty and len(units) < len(limits):
        raise ValueError(f"internal: {len(units)} units cannot fill {len(limits)} stages")
    search = _Search(units, limits, nonempty)
    total = int(search.cycles[-1])
    if search.reach(total) is None:
        return None
    lo, hi = max(units.cycles, default=0), total  # the slowest stage holds at least the costliest unit
    while lo < hi:
        mid = (lo + hi) // 2
        if search.reach(mid) is None:
            lo = mid + 1
        else:
            hi = mid
    rows = search.reach(lo)
    assert rows is not None
    return search.starts(rows, lo)


def slowest_cycles(units: Units, starts: Sequence[int]) -> int:
    """The cycles of the costliest stage of a split given by its starts."""
    return max((sum(units.cycles[a:b]) for a, b in zip(starts, starts[1:])), default=0)
