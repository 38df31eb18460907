"""Static list scheduling of an expanded step (Plan -> timed tasks and placed tensors).

Ready tasks are taken in the order of a priority rule (priorities.py: the upward rank, micro-batch
first, and others) or of an explicit order; `compile` searches over rules and orders (improve.py) and
keeps the shortest schedule.
Each ready task goes to the candidate resource instance on which it finishes earliest, filling
idle gaps (insertion), at a time its memory port has the bandwidth for it (ports.py) and every physical
link it holds is free (a transfer: its route's; a collective: every link its algorithm crosses,
schedule/collectives.py), so tasks sharing a link serialize on it. Every tensor is placed when its
producer starts, by the memory planner's rules (memory_planner.PLACEMENT_RULES): a later start where
its output waits for room, or extra cycles where it is written to a slower memory. Ties break by task
id, so the result is deterministic.
"""
from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass

from accelsim.errors import MemoryFitError, ScheduleError
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import Link, topology_of
from accelsim.schedule.collectives import collective_links
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.schedule.kinds import staged_bytes
from accelsim.hw.placement import output_home
from accelsim.schedule.levels import ALIGN_BYTES, is_result, leaf_home, port_loads, preferred_memory, read_cycles
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.compiler.timing.pipeline_order import ItemGates
from accelsim.schedule.plan import COLLECTIVE, COLLECTIVES, PER_STEP, memory_label
from accelsim.compiler.timing.priorities import PRIORITIES, RULES, priority_keys, upward_ranks
from accelsim.schedule.ports import PortProfile, port_capacities, port_rate, unit_ports
from accelsim.schedule.traffic import input_read_bytes, read_bytes

STREAM = "stream"
"""The timeline key of a GPU-like chip's one compute stream, which every unit of the chip books."""


class Timeline:
    """Busy intervals of one resource instance, sorted; tasks may fill earlier idle gaps (the
    insertion policy of HEFT), so a late-ranked task does not wait behind work scheduled after it."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def earliest(self, ready: int, cycles: int) -> int:
        starts, ends = self.starts, self.ends
        i = max(bisect.bisect_right(ends, ready) - 1, 0)
        t = ready
        for i in range(i, len(starts)):  # by index: slicing would copy the whole tail on every call
            if t + cycles <= starts[i]:
                return t
            if ends[i] > t:
                t = ends[i]
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


PACK_TRIES = 4
"""Schedules of one plan tried with less room where the first one's tensors did not pack into a memory."""


class ListScheduler:
    """One list-scheduling run over a Plan. Its state is explicit: the unit and link timelines, the
    memory planner, the port profiles, and per task the readers still to come."""

    def __init__(self, plan: Plan, hw: HwSpec, priority: str, perturb: int | None = None,
                 order: list[float] | None = None, capacities: dict[tuple[int, str], int] | None = None,
                 classes: list[int] | None = None, accumulations_first: bool = False) -> None:
        if priority not in RULES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        self.plan, self.hw = plan, hw
        self.tasks = tasks = plan.tasks
        rank = upward_ranks(tasks)
        self.succ: list[list[int]] = [[] for _ in tasks]  # every waiter
        self.readers: list[list[int]] = [[] for _ in tasks]  # the waiters that read its output
        # a prefetch is timed with its reader (schedule_one), never on its own: it is not a waiter's
        # predecessor here, so a reader is ready when its other predecessors are
        self.staging = [TASK_KINDS[t.kind].stages for t in tasks]
        self.prefetches: dict[int, list[int]] = defaultdict(list)
        for t in tasks:
            for d in set(t.preds):
                if self.staging[d]:
                    self.prefetches[t.id].append(d)
        # a prefetch timed with its reader is released by it, not by its own predecessors (a write-back's copy)
        with_reader = {p for ps in self.prefetches.values() for p in ps}
        for t in tasks:
            for d in set(t.preds):
                if not self.staging[d] and t.id not in with_reader:
                    self.succ[d].append(t.id)
            for d in set(t.deps):
                self.readers[d].append(t.id)
        self.waiting = [len({d for d in t.preds if not self.staging[d]}) for t in tasks]
        self.any_staging = any(self.staging)
        # (chip, DMA engine) -> when its next prefetch may start: its last one ended
        self.dma_queue: dict[tuple[int, str], int] = {}
        self.leaf_readers: dict[tuple, list[int]] = defaultdict(list)
        for t in tasks:
            for r in t.reads:
                self.leaf_readers[(*r, t.replica, t.chip)].append(t.id)
        self.lines: dict[tuple[int, str, int], Timeline] = defaultdict(Timeline)
        self.timed: list[Timed | None] = [None] * len(tasks)
        self.mem = MemoryPlanner(hw, plan, capacities)
        self.overflow: dict[tuple[int, str], int] = {}
        self.port_of = unit_ports(plan.chips)  # links and all-reduces have no memory port
        self.profiles = {p: PortProfile(cap) for p, cap in port_capacities(hw, plan.chips).items()}
        self.pending_readers = [len(r) for r in self.readers]
        self.leaf_left = {k: len(v) for k, v in self.leaf_readers.items()}
        if order is not None:  # an explicit priority per task, lowest first (forward-backward improvement)
            self.prio: list[tuple] = [(classes[t.id] if classes is not None else 0, order[t.id], t.id) for t in tasks]
        else:  # a rule of priorities.py; `perturb` seeds iterated list scheduling
            self.prio = priority_keys(RULES[priority], tasks, rank, perturb, classes, accumulations_first)
        self.gates = None if classes is None else ItemGates(tasks, classes)
        self.groups: dict[int, list[TaskSpec]] = defaultdict(list)
        for t in tasks:
            if t.group >= 0:
                self.groups[t.group].append(t)
        self.links = self.physical_links()
        self.link_lines: dict[Link, Timeline] = defaultdict(Timeline)
        # a GPU-like chip (hw/gpu_overheads.py) runs its units' kernels one at a time, as one compute stream
        self.streamed = {c: {u.name for u in chip.units} for c, chip in enumerate(plan.chips)
                         if chip.gpu_overheads is not None}

    def physical_links(self) -> dict[int, tuple[Link, ...]]:
        """Task id (a transfer, or a collective's first member for its group) -> the links it holds."""
        topo = topology_of(self.hw)
        if topo is None:
            return {}
        links = {t.id: topo.route(t.chip, t.out_chip).links for t in self.tasks if TASK_KINDS[t.kind].holds is Holds.LINK}
        for members in self.groups.values():
            resource = members[0].options[0][0]
            if resource in COLLECTIVES:
                links[members[0].id] = collective_links(topo, resource, members[0].span or [m.chip for m in members])
        return links

    def finish_reads(self, t: TaskSpec) -> None:
        """Free what `t` was the last reader of: outputs of its dependences, and per-input leaves
        (parameters and constants stay for the step)."""
        tasks, timed = self.tasks, self.timed
        for d in set(t.deps):
            self.pending_readers[d] -= 1
            if self.pending_readers[d] == 0 and ("out", d) in self.mem.home and not tasks[d].keep:
                self.mem.free(("out", d), max(timed[s].end for s in self.readers[d]))
        for r in t.reads:
            k = (*r, t.replica, t.chip)
            self.leaf_left[k] -= 1
            if self.leaf_left[k] == 0 and r[1] != PER_STEP:
                self.mem.free(("leaf",) + k, max(timed[s].end for s in self.leaf_readers[k]))

    def place(self, t: TaskSpec, resource: str, start: int) -> tuple[int, int]:
        """Place the tensors a task touches, first at `start`. Returns (start, extra): a later start
        if its output waits for room, or extra cycles if it spills. A later start only lengthens a
        tensor's life, so placing early stays valid."""
        plan = self.plan
        for node, mb in t.reads:
            key = ("leaf", node, mb, t.replica, t.chip)
            if key not in self.mem.home:  # params/constants live the whole step; inputs from first use
                at = 0 if mb == PER_STEP else start
                home = leaf_home(plan.chips[t.chip], plan.leaf_class.get(node)) if plan.leaf_class else None
                self.mem.place(key, t.chip, None, False, plan.leaf_size(node, t.replica), at,
                               f"leaf %{node} {plan.node_names[node]!r} (mb {mb}, replica {t.replica})", home=home)
        if not t.out_bytes:
            return start, 0
        result = is_result(t.keep, t.phase)
        kind = TASK_KINDS[t.kind]  # a prefetch's tile goes to its buffer, a write-back's copy to its class's memory
        home = (output_home(plan.chips[t.out_chip], plan.out_class.get(t.node), result, kind.writes_back)
                if plan.out_class and not kind.stages else None)
        return self.mem.place(("out", t.id), t.out_chip, resource, result, t.out_bytes, start,
                              f"the output of {t.kind} {t.op} %{t.node} {plan.node_names[t.node]!r} "
                              f"(mb {t.microbatch}, replica {t.replica})", home=home)

    def inputs(self, t: TaskSpec) -> list[tuple[str, int]]:
        """(memory, bytes) of the task's inputs placed so far: its dependences' outputs and its leaves (of a
        streamed leaf, what it reads where the leaf lives: traffic.input_read_bytes)."""
        mem = self.mem
        if not self.any_staging:  # the common case, kept as cheap as before placements existed
            keys = [("out", d) for d in set(t.deps)] + [("leaf", *r, t.replica, t.chip) for r in set(t.reads)]
            if t.partial_reads:  # a slice reads its window of the input where it lives (traffic.read_bytes)
                return [(mem.where[k][1], read_bytes(t.partial_reads, k[1] if k[0] == "leaf" else self.tasks[k[1]].node,
                                                     mem.home[k].size_bytes)) for k in keys if k in mem.where]
            return [(mem.where[k][1], mem.home[k].size_bytes) for k in keys if k in mem.where]
        staging = self.prefetches.get(t.id, [])  # read in their buffer, though not dependences
        tasks = self.tasks
        deps = [("out", d) for d in set(t.deps)]
        staged = staged_bytes((tasks[d].kind, tasks[d].node, tasks[d].port_bytes) for d in staging)
        me = (t.kind, t.node, t.port_bytes, t.partial_reads)  # of a streamed output, the head is read in the buffer
        placed = [(mem.where[k][1], input_read_bytes(me, tasks[k[1]].node, mem.home[k].size_bytes, staged))
                  for k in deps if k in mem.where]
        placed += [(mem.where[("out", p)][1], tasks[p].port_bytes) for p in staging if ("out", p) in mem.where]
        for r in set(t.reads):
            k = ("leaf", *r, t.replica, t.chip)
            if k in mem.where:
                placed.append((mem.where[k][1], input_read_bytes(me, r[0], mem.home[k].size_bytes, staged)))
        return [p for p in placed if p[1]]

    def read_cycles(self, t: TaskSpec, resource: str, inputs: list[tuple[str, int]]) -> int:
        """Cycles to stream `inputs` (self.inputs) that live outside the unit's port memory."""
        port = self.port_of.get((t.chip, resource))
        if port is None:
            return 0
        return read_cycles(self.plan.chips[t.chip], port[1], inputs, self.hw.clock_hz)

    def loads(self, t: TaskSpec, resource: str, cycles: int,
              inputs: list[tuple[str, int]]) -> list[tuple[PortProfile, int]]:
        """The port profiles the task streams through on `resource` and the rate it holds on each for
        `cycles` (levels.port_loads: its port, `inputs` in other memories, an output written elsewhere)."""
        port = self.port_of.get((t.chip, resource))
        if port is None:
            return []
        where = self.mem.where.get(("out", t.id))
        output = (where[1], t.out_bytes) if where is not None else None
        own = preferred_memory(self.plan.chips[t.chip], resource)
        loads = port_loads(port[1], t.port_bytes, inputs, output, own)
        profiles = [self.profiles[(t.chip, m)] for m in loads]
        return [(p, port_rate(b, cycles, p.capacity)) for p, b in zip(profiles, loads.values())]

    def line(self, t: TaskSpec, resource: str, instance: int) -> Timeline:
        """A unit instance on the task's chip (every unit of a GPU-like chip: its one compute stream), the link
        from its chip to its out_chip, or its chip's share of collectives (one at a time per chip, whatever the
        algorithm)."""
        if resource in COLLECTIVES:
            return self.lines[(t.chip, COLLECTIVE, 0)]
        if resource in self.streamed.get(t.chip, ()):
            return self.lines[(t.chip, STREAM, 0)]
        return self.lines[(t.chip, resource if resource != "link" else f"link>{t.out_chip}", instance)]

    def blocked_stream(self, t: TaskSpec) -> list[Timeline]:
        """The compute stream a collective member also holds: its GPU-like chip's, when its kind blocks the
        stream (kinds.py blocks_stream: a synchronous all-reduce), else none."""
        if TASK_KINDS[t.kind].blocks_stream and t.chip in self.streamed:
            return [self.lines[(t.chip, STREAM, 0)]]
        return []

    def fit(self, t: TaskSpec, resource: str, instance: int, ready_at: int, cycles: int,
            loads: list[tuple[PortProfile, int]]) -> int:
        """The first start >= ready_at at which the unit instance and every physical link the task holds
        are idle and every port in `loads` (the task's, self.loads) has room for `cycles`: each answer is a
        valid start for its own resource and never earlier than its question, so alternating them climbs
        to the first time all accept."""
        line = self.line(t, resource, instance)
        start = line.earliest(ready_at, cycles)
        held = self.links.get(t.id)
        links = [self.link_lines[k] for k in held] if held else []
        while loads or links:
            later = start
            for link in links:
                later = link.earliest(later, cycles)
            if loads:
                later = max(profile.earliest(later, cycles, rate) for profile, rate in loads)
            if later == start:  # every link and port accepted `start` unchanged, and the unit gave it
                break
            start = line.earliest(later, cycles)
        return start

    def book(self, t: TaskSpec, resource: str, instance: int, start: int, end: int,
             loads: list[tuple[PortProfile, int]]) -> None:
        """`loads`: the task's rates over its final duration (self.loads), as the simulator replays them."""
        self.timed[t.id] = Timed(resource, instance, start, end)
        self.line(t, resource, instance).book(start, end)
        for stream in self.blocked_stream(t):
            stream.book(start, end)
        for profile, rate in loads:
            profile.book(start, end, rate)
        for link in self.links.get(t.id, ()):  # a collective's links are under its first member only
            self.link_lines[link].book(start, end)

    def group_start(self, group: list[TaskSpec], resource: str, ready_at: int, cycles: int) -> int:
        """The first time every participant's collective share and every link the collective crosses
        are idle for the whole collective."""
        lines = [self.line(x, resource, 0) for x in group] + [s for x in group for s in self.blocked_stream(x)]
        lines += [self.link_lines[k] for k in self.links.get(group[0].id, ())]
        start = ready_at
        while True:
            nxt = max(line.earliest(start, cycles) for line in lines)
            if nxt == start:
                return start
            start = nxt

    def schedule_group(self, group: list[TaskSpec]) -> None:
        """All members of a collective start and end together, once every member's inputs are ready."""
        data_ready = max((self.timed[d].end + x.lag.get(d, 0) for x in group for d in x.preds), default=0)
        if self.gates is not None:
            data_ready = max([data_ready] + [self.gates.earliest(x.id) for x in group])
        resource, _, cycles = group[0].options[0]
        start = self.group_start(group, resource, data_ready, cycles)
        placed = [self.place(x, resource, start) for x in group]
        extra = max(e for _, e in placed)
        start = self.group_start(group, resource, max(s for s, _ in placed), cycles + extra)
        for x in group:
            self.book(x, resource, 0, start, start + cycles + extra, [])  # a collective streams through no port

    def schedule_one(self, t: TaskSpec) -> None:
        """Earliest finish over every candidate resource instance (reading the inputs where they are
        placed), then placement of its leaves and output, and the start and length these allow. Its
        prefetches are timed first: each as early as its DMA engine and its buffer's room allow."""
        for p in self.prefetches.get(t.id, ()):
            self.schedule_single(self.tasks[p])
            self.dma_queue[(t.chip, self.timed[p].resource)] = self.timed[p].end
        self.schedule_single(t)

    def schedule_single(self, t: TaskSpec) -> None:
        data_ready = max((self.timed[d].end + t.lag.get(d, 0) for d in t.preds), default=0)
        if self.staging[t.id]:
            # a DMA engine serves its requests in the order they are issued (a queue): a prefetch never slips
            # into an earlier gap. Its buffer's slots are equal blocks, so they always pack.
            data_ready = max(data_ready, self.dma_queue.get((t.chip, t.options[0][0]), 0))
        if self.gates is not None:
            data_ready = max(data_ready, self.gates.earliest(t.id))
        for node, mb in t.reads:  # an input placed for an earlier reader is there from that reader's start on:
            # a later-placed reader filling an earlier gap must not read it before (a no-op in a valid schedule)
            block = self.mem.home.get(("leaf", node, mb, t.replica, t.chip)) if mb != PER_STEP else None
            if block is not None:
                data_ready = max(data_ready, block.start)
        best = None
        inputs = self.inputs(t)
        for resource, instances, cycles in t.options:
            length = max(cycles, self.read_cycles(t, resource, inputs), t.stream_cycles)
            loads = self.loads(t, resource, length, inputs)  # the same on every instance
            for i in range(instances):
                start = self.fit(t, resource, i, data_ready, length, loads)
                cand = (start + length, start, resource, i, cycles)
                if best is None or cand[:2] < best[:2]:
                    best = cand
        _, start, resource, instance, cycles = best
        placed_at, extra = self.place(t, resource, start)
        inputs = self.inputs(t)  # with the leaves placed just now, which may be far
        total = max(cycles, self.read_cycles(t, resource, inputs), t.stream_cycles) + extra
        loads = self.loads(t, resource, total, inputs)  # now with its output's stream too
        start = self.fit(t, resource, instance, placed_at, total, loads)
        self.book(t, resource, instance, start, start + total, loads)

    def run(self) -> tuple[list[Timed], MemoryPlanner]:
        gates = self.gates
        ready = [self.prio[t.id] for t in self.tasks
                 if self.waiting[t.id] == 0 and not self.staging[t.id] and (gates is None or gates.admit(t.id))]
        heapq.heapify(ready)
        while ready or (gates is not None and gates.held):
            if not ready:
                ready = [self.prio[h] for h in gates.unblock()]
                heapq.heapify(ready)
            *_, tid = heapq.heappop(ready)
            if self.timed[tid] is not None:
                continue  # a collective member, scheduled with its group
            t = self.tasks[tid]
            group = self.groups[t.group] if t.group >= 0 else [*(self.tasks[p] for p in self.prefetches[t.id]), t]
            if t.group >= 0:
                self.schedule_group(group)
            else:
                self.schedule_one(t)
            for x in group:
                for h in gates.taken(x.id, self.timed[x.id].start) if gates is not None else ():
                    heapq.heappush(ready, self.prio[h])
                self.finish_reads(x)
                if self.staging[x.id]:  # its reader consumes the staged head first
                    if ("out", x.id) in self.mem.home:
                        self.mem.free(("out", x.id), max(self.timed[t.id].start, self.timed[x.id].end))
                elif not self.readers[x.id] and ("out", x.id) in self.mem.home and not x.keep:
                    self.mem.free(("out", x.id), self.timed[x.id].end)  # nobody reads it: free once written
                for s in self.succ[x.id]:
                    self.waiting[s] -= 1
                    if self.waiting[s] == 0 and (gates is None or gates.admit(s)):
                        heapq.heappush(ready, self.prio[s])
        if any(x is None for x in self.timed):
            raise ScheduleError("internal: some tasks were never ready (a cycle in the task graph)")
        makespan = max((x.end for x in self.timed), default=0)
        self.overflow = self.mem.pack(makespan)
        return self.timed, self.mem


def list_schedule(plan: Plan, hw: HwSpec, priority: str = "microbatch", perturb: int | None = None,
                  order: list[float] | None = None, classes: list[int] | None = None,
                  accumulations_first: bool = False) -> tuple[list[Timed], MemoryPlanner]:
    """Time every task of `plan` and place every tensor (see the module docstring). `perturb`: a seed
    for iterated list scheduling: each task's score under the rule is scaled by a factor in [0.8, 1.2)
    drawn from it.
    `order`: an explicit priority per task (lowest first) instead of a rule. `classes`: a class per task,
    taken before the rule's or the order's priority (a pipeline schedule's order, pipeline_order.py).
    `accumulations_first`: a rule's run takes gradient accumulations as soon as they are ready
    (priorities.FIRST_CLASS: a memory-lean run)."""
    capacities: dict[tuple[int, str], int] = {}
    for attempt in range(PACK_TRIES):
        scheduler = ListScheduler(plan, hw, priority, perturb, order, capacities, classes, accumulations_first)
        timed, mem = scheduler.run()
        if not scheduler.overflow:
            return timed, mem
        for name, top in scheduler.overflow.items():  # leave the room packing lost, twice over, then more
            arena = mem.arenas[name]
            room = arena.usable_bytes - (top - arena.capacity_bytes) * 2 ** (attempt + 1)
            capacities[name] = max(0, room // ALIGN_BYTES * ALIGN_BYTES)
    worst = max(scheduler.overflow, key=lambda k: scheduler.overflow[k] / mem.arenas[k].capacity_bytes)
    raise MemoryFitError(f"the tensors of the step fit {memory_label(*worst)} in total at every moment but do not "
                         f"pack into its {mem.arenas[worst].capacity_bytes} bytes without overlapping after "
                         f"{PACK_TRIES} tries (they need {scheduler.overflow[worst]} bytes of address space); use "
                         "fewer micro-batches in flight or a hardware description with more memory")
