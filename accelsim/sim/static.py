"""Static replay of a compiled schedule (Schedule, HwSpec -> Result): its own order and placement,
time-triggered. Each task waits for its compiled start, its inputs, what it holds (its turn on its
unit instance or link, in compiled order; or every member of its collective), its turn on every
physical link it crosses (hw/topology.py; a collective's members take theirs together), space for its
output in its memory and bandwidth on its memory port, then runs for its compiled duration. Ports are
metered as the scheduler books them (schedule/ports.py), so replaying a schedule on the hardware it
was compiled for reproduces the compiled timeline."""
from __future__ import annotations

from collections import defaultdict

import simpy

from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import Topology, topology_of
from accelsim.schedule.collectives import links_of_schedule
from accelsim.schedule.identity import identity_of
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.plan import Schedule, Task, Tensor, memory_label, resource_label
from accelsim.schedule.traffic import placed_io, task_loads
from accelsim.sim.machine import ChannelKey, Memories, deadlock, memory_ports, result, run_to_end, take_bandwidth
from accelsim.sim.trace import Result, Span


class Turns:
    """Each unit instance and each link serves its tasks one at a time in their compiled order: a
    task's turn comes when the task before it there has finished."""

    def __init__(self, env: simpy.Environment, tasks: tuple[Task, ...]) -> None:
        order: dict[tuple[int, str, int, int], list[int]] = defaultdict(list)
        for t in sorted(tasks, key=lambda t: (t.start, t.id)):
            if not TASK_KINDS[t.kind].together:
                order[(t.chip, t.resource, t.out_chip, t.instance)].append(t.id)
        self.before: dict[int, simpy.Event] = {}
        self.finished: dict[int, simpy.Event] = {}
        for ids in order.values():
            for i, tid in enumerate(ids):
                self.finished[tid] = env.event()
                if i:
                    self.before[tid] = self.finished[ids[i - 1]]


class LinkTurns:
    """Each physical link serves its holders (a transfer, or one collective's members together) one at a
    time in compiled order: a holder's turn comes when every holder before it on each of its links has
    finished; a collective has finished when its last member has."""

    def __init__(self, env: simpy.Environment, schedule: Schedule, topo: Topology | None) -> None:
        tasks = schedule.tasks
        holders = sorted(links_of_schedule(schedule, topo), key=lambda h: (tasks[h.tasks[0]].start, h.tasks[0]))
        self.holder_of: dict[int, int] = {}  # task id -> index of its holder
        self.left: list[int] = []  # members still running per holder
        self.finished: list[simpy.Event] = []
        self.before: dict[int, list[tuple[str, simpy.Event]]] = defaultdict(list)  # holder -> (link, event)
        last: dict[object, int] = {}
        for i, h in enumerate(holders):
            for tid in h.tasks:
                self.holder_of[tid] = i
            self.left.append(len(h.tasks))
            self.finished.append(env.event())
            for link in h.links:
                if link in last:
                    self.before[i].append((topo.label(link), self.finished[last[link]]))
                last[link] = i

    def wait(self, task_id: int) -> list[tuple[str, simpy.Event]]:
        """(link label, event) for each link on which task `task_id`'s holder waits for an earlier one."""
        i = self.holder_of.get(task_id)
        return [] if i is None else self.before[i]

    def done(self, task_id: int) -> None:
        i = self.holder_of.get(task_id)
        if i is not None:
            self.left[i] -= 1
            if not self.left[i]:
                self.finished[i].succeed()


class Barriers:
    """The members of one collective (its `group`) start together, once every member has arrived."""

    def __init__(self, env: simpy.Environment, tasks: tuple[Task, ...]) -> None:
        self.size: dict[int, int] = defaultdict(int)
        for t in tasks:
            if TASK_KINDS[t.kind].together:
                self.size[t.group] += 1
        self.arrived = dict.fromkeys(self.size, 0)
        self.ready = {g: env.event() for g in self.size}


class StaticReplay:
    """One replay. Its state is explicit: the environment, memories and ports, a `done` event per task,
    the turns and barriers, the readers each output still has, and the record of what ran (spans,
    bytes moved per port and link, and what each blocked task is waiting for)."""

    def __init__(self, schedule: Schedule, hw: HwSpec, port_contention: bool) -> None:
        self.env = env = simpy.Environment()
        self.schedule, self.hw, self.port_contention = schedule, hw, port_contention
        self.tasks = schedule.tasks
        self.memories = Memories(env, schedule)
        self.ports = memory_ports(env, hw)
        self.loads = task_loads(schedule, hw, placed_io(schedule, hw))
        self.done = [env.event() for _ in self.tasks]
        self.out_tensor = {x.task: x for x in schedule.tensors if x.task >= 0}
        self.readers_left: dict[int, int] = defaultdict(int)
        for t in self.tasks:
            for d in t.deps:
                self.readers_left[d] += 1
        self.turns = Turns(env, self.tasks)
        self.links = LinkTurns(env, schedule, topology_of(hw))
        self.barriers = Barriers(env, self.tasks)
        # per task: whether it takes what it holds at its collective's gate, else in its turn there
        self.together = [TASK_KINDS[t.kind].together for t in self.tasks]
        self.spans: list[Span | None] = [None] * len(self.tasks)
        self.waiting: dict[int, str] = {}
        self.moved: dict[ChannelKey, int] = defaultdict(int)

    def run(self) -> Result:
        for x in self.schedule.tensors:
            if x.task < 0:
                self.env.process(self.leaf(x))
        for t in self.tasks:
            self.env.process(self.task(t))
        events = run_to_end(self.env)
        if self.waiting:
            raise deadlock(self.schedule, self.waiting)
        return result("static", self.schedule, self.hw, self.spans, self.memories, self.moved, events)

    def leaf(self, x: Tensor):
        """A leaf holds its bytes over its placed interval (for good if it lives to the end)."""
        yield self.env.timeout(x.start)
        yield from self.memories.take((x.chip, x.memory), x.size_bytes)
        if x.end < self.schedule.makespan_cycles:
            yield self.env.timeout(x.end - x.start)
            self.memories.give((x.chip, x.memory), x.size_bytes)

    def take_turn(self, t: Task) -> simpy.Event | None:
        """The event of the previous task on t's unit instance or link finishing (None: t is first)."""
        before = self.turns.before.get(t.id)
        if before is not None:
            where = f"{resource_label(t.resource, t.chip, t.out_chip)}[{t.instance}] of chip{t.chip}"
            self.waiting[t.id] = f"its turn on {where}"
        return before

    def join_collective(self, t: Task) -> simpy.Event:
        """Arrive at t's collective; the event of every member having arrived."""
        b = self.barriers
        b.arrived[t.group] += 1
        if b.arrived[t.group] == b.size[t.group]:
            b.ready[t.group].succeed()
        self.waiting[t.id] = f"the other {b.size[t.group] - 1} member(s) of its {t.kind}"
        return b.ready[t.group]

    def task(self, t: Task):
        """One task: compiled start, inputs, what it holds, output space, port bandwidth; then it runs."""
        env, waiting = self.env, self.waiting
        planned, duration = t.start, t.end - t.start
        if env.now < planned:
            yield env.timeout(planned - env.now)
        waiting[t.id] = "its inputs"
        yield env.all_of([self.done[d] for d in t.deps + t.after])
        t_data = env.now
        held = self.join_collective(t) if self.together[t.id] else self.take_turn(t)
        if held is not None:
            yield held
        for label, before in self.links.wait(t.id):
            if not before.processed:
                waiting[t.id] = f"its turn on {label}"
                yield before
        t_unit = env.now
        x = self.out_tensor.get(t.id)
        if x is not None:
            mem = (x.chip, x.memory)
            waiting[t.id] = f"{x.size_bytes} B of space in {memory_label(*mem)} ({self.memories.used(mem)} of " \
                            f"{self.memories.capacity[mem]} B in use)"
            yield from self.memories.take(mem, x.size_bytes)
        t_space = env.now
        held_rates = yield from take_bandwidth(self.ports, t.chip, self.loads[t.id], duration, waiting, t.id,
                                               self.port_contention)  # its port, and memories it reads or writes
        t_port = env.now
        del waiting[t.id]
        yield env.timeout(duration)
        for port, rate in held_rates:
            port.put(rate)
        for memory, nbytes in self.loads[t.id].items():
            self.moved[(t.chip, t.out_chip, memory)] += nbytes
        if t.bytes_moved and not self.loads[t.id] and not self.together[t.id]:
            self.moved[(t.chip, t.out_chip, t.port)] += t.bytes_moved  # a link's bytes
        stalls = (("data", t_data - planned), ("unit", t_unit - max(t_data, planned)),
                  ("buffer_space", t_space - max(t_unit, planned)), ("memory_port", t_port - max(t_space, planned)))
        self.spans[t.id] = Span(**identity_of(t), task=t.id, resource=resource_label(t.resource, t.chip, t.out_chip),
                                instance=t.instance, ready=t_data, start=t_port, end=int(env.now),
                                planned_start=planned, stalls=tuple((c, int(v)) for c, v in stalls if v > 0))
        self.done[t.id].succeed()
        finished = self.turns.finished.get(t.id)
        if finished is not None:
            finished.succeed()
        self.links.done(t.id)
        if not self.readers_left[t.id]:
            self.release_output(t.id)  # nobody reads it: free once written, as the scheduler placed it
        for d in t.deps:
            self.readers_left[d] -= 1
            if not self.readers_left[d]:
                self.release_output(d)

    def release_output(self, task_id: int) -> None:
        """Give back a task's output once nothing will read it; a step result stays to the end."""
        x = self.out_tensor.get(task_id)
        if x is not None and not self.tasks[task_id].keep:
            self.memories.give((x.chip, x.memory), x.size_bytes)


def replay(schedule: Schedule, hw: HwSpec, port_contention: bool = True) -> Result:
    return StaticReplay(schedule, hw, port_contention).run()
