"""Where a static schedule's tensors live (HwSpec, Plan -> per-memory arenas of blocks): the memory planner the
list scheduler (list_sched.py) asks, when a producer starts, for a memory with room for its output, the time it can
have it and the write cost it pays there. The rules it places a tensor by are PLACEMENT_RULES, tried in order, each
with its reason; `pack` gives every block its offset at the end and reports memories whose blocks did not fit, so
the list scheduler retries with less room there.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, NamedTuple

from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.memory import OPEN, Arena, Block, pack, refusal
from accelsim.errors import HwConfigError
from accelsim.hw.spec import HwSpec, Memory
from accelsim.schedule.levels import (aligned, dma_buffers, first_memory, memory_order, write_cycles)
from accelsim.schedule.plan import memory_label


class Choice(NamedTuple):
    """Where a tensor goes: the arena, the cycle its bytes are held from, and the extra cycles of writing it there
    (levels.write_cycles)."""
    arena: Arena
    at: int
    write_cycles: int


@dataclass
class Want:
    """One tensor asking for memory: `size` bytes from cycle `start`, in the memories of `ranked` (first choice
    first, each with its arena), `cost` giving the write cycles of each. A leaf (loaded before the step) cannot wait
    for room: its readers are placed from `start` on whatever it does."""
    size: int
    start: int
    leaf: bool
    ranked: list[tuple[Memory, Arena]]
    cost: Callable[[Memory], int]

    @cached_property
    def spill(self) -> Choice | None:
        """The first memory after the first choice with room from `start` on (None: none has)."""
        return next((Choice(arena, self.start, self.cost(mem)) for mem, arena in self.ranked[1:]
                     if arena.fits(self.size, self.start)), None)


def _now(w: Want) -> Choice | None:
    mem, arena = w.ranked[0]
    return Choice(arena, w.start, w.cost(mem)) if arena.fits(w.size, w.start) else None


def _wait(w: Want) -> Choice | None:
    if w.leaf:
        return None
    mem, arena = w.ranked[0]
    horizon = None if w.spill is None else w.start + w.spill.write_cycles - w.cost(mem)
    at = arena.earliest_fit(w.size, w.start, horizon)
    return None if at is None else Choice(arena, at, w.cost(mem))


def _spill(w: Want) -> Choice | None:
    return w.spill


def _later(w: Want) -> Choice | None:
    if w.leaf:
        return None
    best = None
    for mem, arena in w.ranked[1:]:
        at = arena.earliest_fit(w.size, w.start)
        if at is not None and (best is None or at + w.cost(mem) < best.at + best.write_cycles):
            best = Choice(arena, at, w.cost(mem))
    return best


@dataclass(frozen=True)
class PlacementRule:
    """One way a tensor is placed: `choose` gives where, or None where the rule does not apply."""
    name: str
    why: str
    choose: Callable[[Want], Choice | None]


PLACEMENT_RULES: tuple[PlacementRule, ...] = (
    PlacementRule("now", "the first-choice memory has room from the start on: the tensor goes there, paying its "
                  "write cost (none in the memory its unit writes)", _now),
    PlacementRule("wait", "the first choice has room for good later, and the task finishes no later by waiting "
                  "for it than by spilling now to the next level with room (paying its write cost): the "
                  "scheduler delays work rather than paying for slow memory when that is cheaper. Not a leaf, "
                  "which cannot wait", _wait),
    PlacementRule("spill", "the next memory after the first choice with room from the start on, paying the extra "
                  "cycles of writing there", _spill),
    PlacementRule("later", "no memory has room now and the first choice never will: the task waits for room in "
                  "the level after it where it finishes being written earliest (the earlier level on a tie), as "
                  "the dynamic runtime waits in its last level, rather than the step being refused while that "
                  "level frees room. Not a leaf", _later),
)
"""The rules a tensor's placement is chosen by, tried in this order; the first that applies places it. Where none
does, no memory ever has room for the tensor beside what stays live (or, for a leaf, none from its start on), and
the step is refused (memory.refusal, stating each memory's peak)."""


def choose(want: Want) -> tuple[PlacementRule, Choice] | None:
    """The first rule of PLACEMENT_RULES that places `want`, and where; None: no memory can hold it."""
    for rule in PLACEMENT_RULES:
        choice = rule.choose(want)
        if choice is not None:
            return rule, choice
    return None


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
        """Allocate `key` for a task on `resource` (None: a leaf, loaded before the step) wanting to start at
        `start`, by the first of PLACEMENT_RULES that applies among the memories `candidates` allows. Returns
        (start, extra): the cycle it is held from and the write cycles of the memory chosen. Refused
        (memory.refusal) where no rule applies."""
        spec = self.chips[chip]

        def cost(mem: Memory) -> int:
            return 0 if resource is None else write_cycles(spec, resource, mem.name, size, self.hw.clock_hz)

        want = Want(size, start, resource is None, self.candidates(chip, resource, result, size, home, what), cost)
        chosen = choose(want)
        if chosen is None:
            raise refusal(what, size, start, [a for _, a in self.order[chip]], leaf=resource is None,
                          only=None if home is None else memory_label(chip, home))
        arena, at, extra = chosen[1]
        return self._keep(key, arena, arena.hold(key, size, at)), extra

    def candidates(self, chip: int, resource: str | None, result: bool, size: int, home: str | None,
                   what: str = "a tensor") -> list[tuple[Memory, Arena]]:
        """The memories a tensor may go to, first choice first. `home`: the one memory a placement puts a leaf in
        (hw/placement.py). A DMA buffer holds its engine's prefetches only, and they wait for room there
        (levels.dma_buffers). Otherwise the unit's first choice (levels.first_memory), then the chip's other
        memories but DMA buffers, fastest first; a step result that its first choice (the backing memory) can
        hold goes there alone, waiting for room if need be."""
        row = self.order[chip]
        buffers = self.buffers[chip]
        if home is not None:
            ranked = [ma for ma in row if ma[0].name == home]
        elif resource is not None and resource in buffers.values():
            ranked = [ma for ma in row if buffers.get(ma[0].name) == resource]
        else:
            target = None if resource is None else first_memory(self.chips[chip], resource, result)
            ranked = [ma for _, ma in sorted(enumerate(row), key=lambda im: (im[1][0].name != target, im[0]))
                      if ma[0].name not in buffers]
        if not ranked:  # the hardware check lets every memory of a chip be another class's prefetch buffer
            raise HwConfigError(
                f"{self.hw.name}: chip{chip}'s memories ({', '.join(m.name for m, _ in row)}) are all prefetch buffers "
                f"of its placement's streams ({', '.join(f'{b} for {r}' for b, r in sorted(buffers.items()))}), which "
                f"hold those streams' tiles only, so no memory is left for {what}; "
                "expected at least one memory that is no stream's buffer")
        if result and aligned(size) <= ranked[0][1].capacity_bytes:
            ranked = ranked[:1]
        return ranked

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
