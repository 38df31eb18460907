"""Static list scheduling of an expanded step (Plan -> timed tasks and placed tensors).

Priority is either the micro-batch (earlier ones first, so a pipeline fills in order), then the upward
rank (the longest remaining path to the end of the step, by cost); or the rank alone, which lets
micro-batches interleave (it wins where a shared memory port, not the pipeline, limits the step).
`compile` runs both and keeps the shorter schedule.
Each ready task goes to the candidate resource instance on which it finishes earliest, filling
idle gaps (insertion), at a time its memory port has the bandwidth for it (ports.py). A task whose
output does not fit in its unit's memory either waits until enough of it is freed or spills to the
next level, whichever finishes first: the scheduler delays work rather than paying for slow memory
when that is cheaper. Every tensor is placed when its producer starts: in the producing unit's
memory, or the next level that fits, paying the extra transfer time there. Ties break by task id,
so the result is deterministic.
"""
from __future__ import annotations

import bisect
import heapq
import math
from collections import defaultdict
from dataclasses import dataclass

from accelsim.errors import ScheduleError
from accelsim.hw.spec import HwSpec, Memory
from accelsim.schedule.expand import Plan, TaskSpec
from accelsim.schedule.memory import OPEN, Arena, Block
from accelsim.schedule.plan import PER_STEP
from accelsim.schedule.ports import PortProfile, port_capacities, port_rate, unit_ports

_LEVEL = {"sram": 0, "cache": 1, "hbm": 2, "dram": 3}


class Timeline:
    """Busy intervals of one resource instance, sorted; tasks may fill earlier idle gaps (the
    insertion policy of HEFT), so a late-ranked task does not wait behind work scheduled after it."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def earliest(self, ready: int, cycles: int) -> int:
        i = max(bisect.bisect_right(self.ends, ready) - 1, 0)
        t = ready
        for s, e in zip(self.starts[i:], self.ends[i:]):
            if t + cycles <= s:
                return t
            t = max(t, e)
        return t

    def book(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)


@dataclass
class Timed:
    resource: str
    instance: int
    start: int
    end: int


def upward_ranks(tasks: list[TaskSpec]) -> list[int]:
    """rank[t] = min cost of t + max rank of its successors (ids are a topological order)."""
    rank = [min(c for _, _, c in t.options) for t in tasks]
    best_succ = [0] * len(tasks)
    for t in reversed(tasks):
        rank[t.id] += best_succ[t.id]
        for d in t.deps:
            best_succ[d] = max(best_succ[d], rank[t.id])
    return rank


def spill_cycles(mem: Memory, nbytes: int, clock_hz: float) -> int:
    """Extra cycles of writing `nbytes` to `mem` instead of the unit's own memory (the simulator's
    dynamic runtime charges the same)."""
    return math.ceil(nbytes / mem.bytes_per_cycle(clock_hz))


class MemoryPlanner:
    """Arenas for every memory of every chip, in the order a producer tries them."""

    def __init__(self, hw: HwSpec, plan: Plan) -> None:
        self.hw = hw
        self.arenas: dict[str, Arena] = {}
        self.order: list[list[tuple[Memory, Arena]]] = []
        for c, chip in enumerate(plan.chips):
            mems = sorted(chip.memories, key=lambda mem: (_LEVEL[mem.kind], chip.memories.index(mem)))
            row = []
            for mem in mems:
                arena = Arena(f"chip{c}:{mem.name}", int(mem.capacity_bytes))
                self.arenas[arena.name] = arena
                row.append((mem, arena))
            self.order.append(row)
        self.home: dict[tuple, Block] = {}
        self.where: dict[tuple, str] = {}

    def place(self, key: tuple, chip: int, preferred: str | None, size: int, start: int, cycles: int,
              what: str) -> tuple[int, int]:
        """Allocate `key` for a task of `cycles` wanting to start at `start`. Returns (start, extra):
        either a later start when the preferred memory has room, or the extra cycles of writing to
        a lower level now, whichever finishes first."""
        row = self.order[chip]
        ranked = sorted(row, key=lambda ma: (ma[0].name != preferred, row.index(ma)))
        _, first = ranked[0]
        block = first.allocate(key, size, start)
        if block is not None:
            return self._keep(key, first, block), 0
        spill = None
        for mem, arena in ranked[1:]:
            if arena.fits(size, start):
                spill = (arena, spill_cycles(mem, size, self.hw.clock_hz))
                break
        wait = first.earliest_fit(size, start, horizon=start + spill[1] if spill else None)
        if wait is not None and (spill is None or wait <= start + spill[1]):
            return self._keep(key, first, first.allocate(key, size, wait)), 0
        if spill is not None:
            return self._keep(key, spill[0], spill[0].allocate(key, size, start)), spill[1]
        caps = ", ".join(f"{a.name} {a.capacity_bytes} B (live at {start}: {a.live_bytes_at(start)} B)"
                         for _, a in row)
        raise ScheduleError(f"no memory can hold {what} ({size} bytes) from cycle {start}: {caps}; "
                            "use a hardware description with more memory, fewer micro-batches, or more stages")

    def _keep(self, key: tuple, arena: Arena, block: Block) -> int:
        self.home[key], self.where[key] = block, arena.name
        return block.start

    def free(self, key: tuple, end: int) -> None:
        self.arenas[self.where[key]].close(self.home[key], end)


PRIORITIES = ("microbatch", "rank")


def list_schedule(plan: Plan, hw: HwSpec, priority: str = "microbatch") -> tuple[list[Timed], MemoryPlanner]:
    tasks = plan.tasks
    rank = upward_ranks(tasks)
    succ: list[list[int]] = [[] for _ in tasks]
    for t in tasks:
        for d in t.deps:
            succ[d].append(t.id)
    waiting = [len(set(t.deps)) for t in tasks]
    leaf_readers: dict[tuple, list[int]] = {}
    for t in tasks:
        for r in t.reads:
            leaf_readers.setdefault((r, t.chip), []).append(t.id)
    lines: dict[tuple[int, str, int], Timeline] = defaultdict(Timeline)
    timed: list[Timed | None] = [None] * len(tasks)
    mem = MemoryPlanner(hw, plan)
    unit_writes = {(c, u.name): u.writes[0] for c, chip in enumerate(plan.chips) for u in chip.units}
    port_of = unit_ports(plan.chips)  # links and all-reduces have no memory port
    profiles = {p: PortProfile(cap) for p, cap in port_capacities(hw, plan.chips).items()}
    pending_readers = [len(s) for s in succ]
    leaf_left = {k: len(v) for k, v in leaf_readers.items()}
    if priority == "microbatch":
        prio = [(t.microbatch if t.microbatch != PER_STEP else len(tasks), -rank[t.id], t.id) for t in tasks]
    elif priority == "rank":
        prio = [(0, -rank[t.id], t.id) for t in tasks]
    else:
        raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
    ready = [prio[t.id] for t in tasks if waiting[t.id] == 0]
    heapq.heapify(ready)
    done_groups: set[int] = set()

    def finish_reads(t: TaskSpec, end: int) -> None:
        for d in set(t.deps):
            pending_readers[d] -= 1
            if pending_readers[d] == 0 and ("out", d) in mem.home and not tasks[d].keep:
                mem.free(("out", d), max(timed[s].end for s in succ[d]))
        for r in t.reads:
            k = (r, t.chip)
            leaf_left[k] -= 1
            if leaf_left[k] == 0 and r[1] != PER_STEP:  # parameters and constants stay for the step
                mem.free(("leaf",) + k, max(timed[s].end for s in leaf_readers[k]))

    def place(t: TaskSpec, resource: str, start: int, cycles: int) -> tuple[int, int]:
        """Place the tensors a task touches, first at `start`. Returns (start, extra): a later start
        if its output waits for room, or extra cycles if it spills. A later start only lengthens a
        tensor's life, so placing early stays valid."""
        for r in t.reads:
            key = ("leaf",) + (r, t.chip)
            if key not in mem.home:  # params/constants live the whole step; inputs from first use
                at = 0 if r[1] == PER_STEP else start
                mem.place(key, t.chip, None, plan.leaf_bytes[r[0]], at, 0,
                          f"leaf %{r[0]} {plan.node_names[r[0]]!r} (mb {r[1]}, replica {r[2]})")
        if not t.out_bytes:
            return start, 0
        return mem.place(("out", t.id), t.out_chip, unit_writes.get((t.out_chip, resource)), t.out_bytes,
                         start, cycles, f"the output of {t.kind} {t.op} %{t.node} {plan.node_names[t.node]!r} "
                         f"(mb {t.microbatch}, replica {t.replica})")

    def port(t: TaskSpec, resource: str, cycles: int) -> tuple[PortProfile | None, int]:
        """The port profile a task on `resource` streams through, and the rate it holds for `cycles`."""
        name = port_of.get((t.chip, resource))
        if name is None or not t.port_bytes:
            return None, 0
        return profiles[name], port_rate(t.port_bytes, cycles, profiles[name].capacity)

    def fit(t: TaskSpec, resource: str, instance: int, ready_at: int, cycles: int) -> int:
        """The first start >= ready_at at which the unit instance is idle and the port has room for
        `cycles`: each of the two answers is a valid start for its own resource and never earlier
        than its question, so alternating them climbs to the first time both accept."""
        line = lines[(t.chip, resource, instance)]
        profile, rate = port(t, resource, cycles)
        start = line.earliest(ready_at, cycles)
        while profile is not None:
            later = profile.earliest(start, cycles, rate)
            if later == start:
                break
            start = line.earliest(later, cycles)
        return start

    def book(t: TaskSpec, resource: str, instance: int, start: int, end: int) -> None:
        timed[t.id] = Timed(resource, instance, start, end)
        lines[(t.chip, resource, instance)].book(start, end)
        profile, rate = port(t, resource, end - start)  # the rate over the final duration, as replayed
        if profile is not None:
            profile.book(start, end, rate)

    def group_start(group: list[TaskSpec], resource: str, ready_at: int, cycles: int) -> int:
        """The first time every participant's link is idle for the whole collective."""
        start = ready_at
        while True:
            nxt = max(lines[(x.chip, resource, 0)].earliest(start, cycles) for x in group)
            if nxt == start:
                return start
            start = nxt

    while ready:
        *_, tid = heapq.heappop(ready)
        t = tasks[tid]
        group = [t] if t.group < 0 else [x for x in tasks[t.group:] if x.group == t.group]
        if t.group >= 0 and t.group in done_groups:
            continue
        data_ready = max((timed[d].end for x in group for d in x.deps), default=0)
        if t.group >= 0:
            resource, _, cycles = t.options[0]
            start = group_start(group, resource, data_ready, cycles)
            placed = [place(x, resource, start, cycles) for x in group]
            extra = max(e for _, e in placed)
            start = group_start(group, resource, max(s for s, _ in placed), cycles + extra)
            for x in group:
                book(x, resource, 0, start, start + cycles + extra)
            done_groups.add(t.group)
        else:
            best = None
            for resource, instances, cycles in t.options:
                for i in range(instances):
                    start = fit(t, resource, i, data_ready, cycles)
                    cand = (start + cycles, start, resource, i, cycles)
                    if best is None or cand[:2] < best[:2]:
                        best = cand
            _, start, resource, instance, cycles = best
            placed_at, extra = place(t, resource, start, cycles)
            if (placed_at, extra) != (start, 0):
                start = fit(t, resource, instance, placed_at, cycles + extra)
            book(t, resource, instance, start, start + cycles + extra)
        for x in group:
            finish_reads(x, timed[x.id].end)
            for s in succ[x.id]:
                waiting[s] -= 1
                if waiting[s] == 0:
                    heapq.heappush(ready, prio[s])
    if any(x is None for x in timed):
        raise ScheduleError("internal: some tasks were never ready (a cycle in the task graph)")
    makespan = max((x.end for x in timed), default=0)
    for block in (b for a in mem.arenas.values() for b in a.blocks):
        if block.end == OPEN:
            block.end = makespan
    return timed, mem
