"""Where a static schedule's tensors live (HwSpec, Plan -> per-memory arenas of blocks): the memory planner the
list scheduler (list_sched.py) asks, when a producer starts, for a memory with room for its output, the time it can
have it and the write cost it pays there.

A tensor goes to its unit's first-choice memory now, or later when that memory has room then, or to another memory
with room now, whichever finishes first; where no memory has room yet and the first choice never will, it waits for
room in the next level that gets some first (as the dynamic runtime waits in its last level). A leaf, which cannot
wait, is refused where no memory has room for it from the step's start; the refusal (memory.refusal) states each
memory's peak. `pack` gives every block its offset at the end and reports memories whose blocks did not fit, so the
list scheduler retries with less room there.
"""
from __future__ import annotations

from typing import Callable

from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.memory import OPEN, Arena, Block, pack, refusal
from accelsim.hw.spec import HwSpec, Memory
from accelsim.schedule.levels import (aligned, dma_buffers, first_memory, memory_order, write_cycles)


class MemoryPlanner:
    """Arenas for every memory of every chip, in the order a producer tries them."""

    def __init__(self, hw: HwSpec, plan: Plan, capacities: dict[tuple[int, str], int] | None = None) -> None:
        """`capacities`: bytes the scheduler may fill per (chip, memory), below the real capacity when
        a first try's tensors did not pack into it (see list_schedule)."""
        self.hw = hw
        self.chips = plan.chips
        self.arenas: dict[tuple[int, str], Arena] = {}
        self.order: list[list[tuple[Memory, Arena]]] = []
        for c, chip in enumerate(plan.chips):
            row = []
            for mem in memory_order(chip):
                arena = Arena((c, mem.name), int(mem.capacity_bytes), (capacities or {}).get((c, mem.name)))
                self.arenas[arena.name] = arena
                row.append((mem, arena))
            self.order.append(row)
        self.home: dict[tuple, Block] = {}
        self.where: dict[tuple, tuple[int, str]] = {}
        self.buffers = [dma_buffers(chip) for chip in plan.chips]  # per chip: DMA buffer -> its engine

    def place(self, key: tuple, chip: int, resource: str | None, result: bool, size: int, start: int,
              what: str, home: str | None = None) -> tuple[int, int]:
        """Allocate `key` for a task on `resource` (None: a leaf, loaded before the step) wanting to start
        at `start`. Returns (start, extra): the first-choice memory (levels.first_memory) now, or later
        when it has room then, or another memory with room now, whichever finishes first, else (no room
        anywhere now, none ever in the first) another memory later (_later); `extra` is the write cost of
        the memory chosen (levels.write_cycles). Refused (memory.refusal) only where no memory ever has room
        for the tensor beside what stays live, or for a leaf, which cannot wait, none from `start` on.
        `home`: the one memory a placement puts a leaf in (hw/placement.py). A DMA buffer holds its engine's
        prefetches only, and they wait for room there (levels.dma_buffers)."""
        row = self.order[chip]
        spec = self.chips[chip]
        buffers = self.buffers[chip]
        if home is not None:
            ranked = [ma for ma in row if ma[0].name == home]
        elif resource is not None and resource in buffers.values():
            ranked = [ma for ma in row if buffers.get(ma[0].name) == resource]
        else:
            target = None if resource is None else first_memory(spec, resource, result)
            ranked = [ma for _, ma in sorted(enumerate(row), key=lambda im: (im[1][0].name != target, im[0]))
                      if ma[0].name not in buffers]
        if result and aligned(size) <= ranked[0][1].capacity_bytes:
            ranked = ranked[:1]  # a result goes to the backing memory, waiting for room there if need be

        def cost(mem: Memory) -> int:
            return 0 if resource is None else write_cycles(spec, resource, mem.name, size, self.hw.clock_hz)

        mem0, first = ranked[0]
        block = first.allocate(key, size, start)
        if block is not None:
            return self._keep(key, first, block), cost(mem0)
        spill = next(((arena, cost(mem)) for mem, arena in ranked[1:] if arena.fits(size, start)), None)
        # a leaf cannot wait for room: its readers are placed from `start` on whatever it does
        wait = None if resource is None else first.earliest_fit(
            size, start, horizon=start + spill[1] - cost(mem0) if spill else None)
        if wait is not None and (spill is None or wait + cost(mem0) <= start + spill[1]):
            return self._keep(key, first, first.allocate(key, size, wait)), cost(mem0)
        if spill is not None:
            return self._keep(key, spill[0], spill[0].allocate(key, size, start)), spill[1]
        later = None if resource is None else self._later(ranked[1:], size, start, cost)
        if later is not None:  # no room anywhere now, none ever in the first: wait for the next level's
            arena, at, extra = later
            return self._keep(key, arena, arena.allocate(key, size, at)), extra
        raise refusal(what, size, start, [a for _, a in row], leaf=resource is None)

    @staticmethod
    def _later(ranked: list[tuple[Memory, Arena]], size: int, start: int,
               cost: Callable[[Memory], int]) -> tuple[Arena, int, int] | None:
        """(arena, time, write cycles) of the memory among `ranked` (the levels after the first choice) where a
        tensor of `size` bytes wanted at `start` finishes being written earliest once it has room for good
        (the earlier level on a tie), or None where none ever has. Used only where the first choice can never
        hold it and no level has room at `start`: the task waits for room in a level that can (as the dynamic
        runtime waits in its last level), rather than the step being refused while that level frees room."""
        best = None
        for mem, arena in ranked:
            at = arena.earliest_fit(size, start)
            if at is not None and (best is None or at + cost(mem) < best[1] + best[2]):
                best = (arena, at, cost(mem))
        return best

    def _keep(self, key: tuple, arena: Arena, block: Block) -> int:
        self.home[key], self.where[key] = block, arena.name
        return block.start

    def free(self, key: tuple, end: int) -> None:
        self.arenas[self.where[key]].close(self.home[key], end)

    def pack(self, makespan: int) -> dict[tuple[int, str], int]:
        """Close what is still open at the end of the step and give every block its offset. Returns
        the memories whose blocks did not pack into their capacity, with the bytes they needed."""
        over = {}
        for name, arena in self.arenas.items():
            for block in arena.blocks:
                if block.end == OPEN:
                    block.end = makespan
            top = pack(arena.blocks, arena.capacity_bytes)
            if top > arena.capacity_bytes:
                over[name] = top
        return over
