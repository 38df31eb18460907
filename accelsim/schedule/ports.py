"""Memory ports as cumulative resources: the simulator's bandwidth model, for the scheduler.

A task streaming `bytes_moved` through a port for `cycles` holds `port_rate(...)` milli-bytes per
cycle of it for that whole time; tasks overlap on a port only while their rates fit its capacity.
The static simulator meters ports the same way, so a schedule booked here replays without port stalls.
"""
from __future__ import annotations

import bisect
import math

from accelsim.hw.placement import streams_of
from accelsim.hw.spec import Chip, HwSpec

MILLI = 1000
"""Ports are metered in integer milli-bytes per cycle: sums are exact, so a release never overfills."""


def port_capacity(bytes_per_cycle: float) -> int:
    """A port's capacity in milli-bytes per cycle (at least 1, so a port always makes progress)."""
    return max(1, int(bytes_per_cycle * MILLI))


def port_rate(bytes_moved: int, cycles: int, capacity: int) -> int:
    """Milli-bytes per cycle a task holds: its bytes spread evenly over its cycles (rounded up so the
    bytes are covered), at most the whole port. 0 for a task that moves nothing or takes no time."""
    if not bytes_moved or not cycles:
        return 0
    return min(-(-bytes_moved * MILLI // cycles), capacity)


Port = tuple[int, str]
"""A memory port: (chip, memory name)."""


def port_capacities(hw: HwSpec, chips: list[Chip]) -> dict[Port, int]:
    """(chip, memory) -> capacity, for every memory of every chip instance."""
    return {(c, m.name): port_capacity(m.bytes_per_cycle(hw.clock_hz))
            for c, chip in enumerate(chips) for m in chip.memories}


def unit_ports(chips: list[Chip]) -> dict[tuple[int, str], Port]:
    """(chip, unit) -> the port a unit streams its operands through: its first `reads` memory; and (chip, DMA
    engine) -> the buffer a streamed placement class's engine writes (hw/placement.py): a prefetch writes its
    staged bytes through the buffer's port and reads them through the class's memory's."""
    ports = {(c, u.name): (c, u.reads[0]) for c, chip in enumerate(chips) for u in chip.units}
    for c, chip in enumerate(chips):
        for resource, (_, where) in streams_of(chip).items():
            ports[(c, resource)] = (c, where.stream.buffer)
    return ports


class PortProfile:
    """Reserved bandwidth of one port over time, a step function: `level[i]` milli-bytes per cycle
    are held over [at[i], at[i + 1]) (the last level, 0, holds forever). Adjacent equal levels are
    merged, so the lists stay as short as the profile's real changes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.at: list[int] = [0]
        self.level: list[int] = [0]

    def earliest(self, t0: int, cycles: int, rate: int) -> int:
        """The first t >= t0 with reserved + rate <= capacity over all of [t, t + cycles)."""
        if not rate or not cycles:
            return t0
        room = self.capacity - rate
        at, level = self.at, self.level
        i = bisect.bisect_right(at, t0) - 1
        t = t0
        while True:
            if level[i] > room:  # the last level is 0, so a free run always comes
                i += 1
                t = at[i]
                continue
            seg_end = at[i + 1] if i + 1 < len(at) else math.inf
            if seg_end >= t + cycles:
                return t
            i += 1

    def book(self, start: int, end: int, rate: int) -> None:
        """Hold `rate` over [start, end); the caller found the room with `earliest`."""
        if not rate or start >= end:
            return
        i, j = self._split(start), self._split(end)
        for k in range(i, j):
            self.level[k] += rate
            assert self.level[k] <= self.capacity, "port booked beyond its capacity"
        for k in (j, i):  # merge from the right so index i stays valid
            if 0 < k < len(self.at) and self.level[k] == self.level[k - 1]:
                del self.at[k], self.level[k]

    def _split(self, t: int) -> int:
        """Index of the segment starting at t, splitting the one that contains t if needed."""
        i = bisect.bisect_right(self.at, t) - 1
        if self.at[i] == t:
            return i
        self.at.insert(i + 1, t)
        self.level.insert(i + 1, self.level[i])
        return i + 1
