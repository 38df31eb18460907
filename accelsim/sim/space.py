"""Buffer space for the dynamic runtime (sim/dynamic.py): a task's output space, taken when a unit is about to run
it, and the space of leaves and collectives' outputs, which wait for it; granted so that the work queue's first-come
order within a micro-batch cannot take the space the compiler planned for that micro-batch's earlier outputs (the
deadlock of issue 28's fused conv chain)."""
from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

import simpy

from accelsim.schedule.plan import Task
from accelsim.schedule.ports import Port
from accelsim.sim.machine import Memories

Stream = tuple[int, int, int]
"""(chip the output lives on, micro-batch or PER_STEP, replica): one micro-batch's outputs on one chip."""


class _PrefixSums:
    """Sums of a prefix of positions under point updates, O(log n) each (a Fenwick tree)."""

    def __init__(self, values: list[int]) -> None:
        self.tree = [0] * (len(values) + 1)
        for i, v in enumerate(values):
            self.add(i, v)

    def add(self, i: int, delta: int) -> None:
        i += 1
        while i < len(self.tree):
            self.tree[i] += delta
            i += i & -i

    def before(self, i: int) -> int:
        """The sum over positions 0 .. i-1."""
        total = 0
        while i > 0:
            total += self.tree[i]
            i -= i & -i
        return total


@dataclass(order=True)
class Request:
    """`nbytes` wanted in `memory` by task `task`; `granted` succeeds when they are held."""
    key: tuple[int, int, int]  # (compiled start, task id, n-th request of the task): the order of service
    task: int = field(compare=False)
    memory: Port = field(compare=False)
    nbytes: int = field(compare=False)
    output: bool = field(compare=False)  # the task's output (kept to its micro-batch's order), not a leaf
    granted: simpy.Event | None = field(compare=False)  # None: a queued task's output, tried at dispatch


class SpaceGrants:
    """Grants memory space by two rules, both from the compiled order (start, id):

    - a task's output takes space only if what is left in that memory still holds every output its micro-batch's
      compiled order puts before it, that has no space yet and that may go there (its stream's unplaced bytes
      for that memory: `homes` says where each output may go). So a task that is ready early (a weight slice, a
      broadcast) runs ahead where memory is ample and waits its turn where it is not, and never takes the room of
      an output the compiler scheduled before it in its micro-batch;
    - waiting requests (leaves, collectives' outputs) are served in that order, and one that cannot be granted
      holds back the later requests and outputs in its memory (no task takes space an earlier-scheduled waiting
      task needs). A queued task's output is not a waiting request: it is granted or refused when a unit is free
      to run it (`try_take`), so the runtime holds no space for tasks that wait for a unit.

    Micro-batches are independent streams: the runtime ignores the compiled in-flight window, so it may still
    admit more micro-batches than fit (a dynamic hazard; the deadlock error then names the cycle)."""

    def __init__(self, env: simpy.Environment, memories: Memories, tasks: tuple[Task, ...],
                 homes: dict[int, frozenset[Port]]) -> None:
        """`homes`: for each task with an output, the memories the runtime may put it in."""
        self.env, self.memories, self.tasks, self.homes = env, memories, tasks, homes
        streams: dict[Stream, list[Task]] = defaultdict(list)
        for t in sorted(tasks, key=lambda t: (t.start, t.id)):
            if t.out_bytes:
                streams[self.stream_of(t)].append(t)
        self.position = {t.id: i for members in streams.values() for i, t in enumerate(members)}
        self.order = {s: [t.id for t in members] for s, members in streams.items()}
        # per (stream, memory): the bytes of the stream's outputs that may go there, by position, until placed
        self.unplaced: dict[tuple[Stream, Port], _PrefixSums] = {}
        for s, members in streams.items():
            for mem in sorted(set().union(*(homes[t.id] for t in members))):
                self.unplaced[(s, mem)] = _PrefixSums([t.out_bytes if mem in homes[t.id] else 0 for t in members])
        self.placed_outputs: set[int] = set()
        self.pending: list[Request] = []
        self.requests_of: dict[int, int] = defaultdict(int)
        self.refused: dict[int, Request] = {}  # a queued task's output, refused at its last try (for deadlocks)

    @staticmethod
    def stream_of(t: Task) -> Stream:
        return (t.out_chip, t.microbatch, t.replica)

    def kept_for_earlier(self, task_id: int, memory: Port) -> int:
        """Bytes of the outputs of the task's stream before it in compiled order that have no space yet and may
        go to `memory`."""
        prefix = self.unplaced.get((self.stream_of(self.tasks[task_id]), memory))
        return 0 if prefix is None else prefix.before(self.position[task_id])

    def first_unplaced_before(self, task_id: int, memory: Port) -> int | None:
        """The earliest task of the task's stream, before it, whose output has no space yet and may go to
        `memory` (None: none)."""
        order = self.order[self.stream_of(self.tasks[task_id])]
        return next((e for e in order[:self.position[task_id]]
                     if e not in self.placed_outputs and memory in self.homes[e]), None)

    def request(self, t: Task, memory: Port, nbytes: int, output: bool) -> simpy.Event:
        """Ask for `nbytes` in `memory` for task `t` (its output, or a leaf it puts there first); the event
        succeeds once they are held."""
        n = self.requests_of[t.id]
        self.requests_of[t.id] += 1
        r = Request((t.start, t.id, n), t.id, memory, nbytes, output, self.env.event())
        bisect.insort(self.pending, r)
        self.serve()
        return r.granted

    def try_take(self, t: Task, memory: Port, nbytes: int) -> bool:
        """Take space for `t`'s output now if the rules allow it (a unit is free to run `t`); else leave it."""
        r = Request((t.start, t.id, self.requests_of[t.id]), t.id, memory, nbytes, True, None)
        if self.ahead_of(r) is not None or not self.grantable(r):
            self.refused[t.id] = r
            return False
        self.refused.pop(t.id, None)
        self.grant(r)
        return True

    def give(self, memory: Port, nbytes: int) -> None:
        self.memories.give(memory, nbytes)
        self.serve()

    def grantable(self, r: Request) -> bool:
        kept = self.kept_for_earlier(r.task, r.memory) if r.output else 0
        return self.memories.free(r.memory) >= r.nbytes + kept

    def grant(self, r: Request) -> None:
        self.memories.take_now(r.memory, r.nbytes)
        if r.output:
            t = self.tasks[r.task]
            for mem in self.homes[t.id]:
                self.unplaced[(self.stream_of(t), mem)].add(self.position[t.id], -t.out_bytes)
            self.placed_outputs.add(t.id)

    def serve(self) -> bool:
        """Grant the waiting requests in compiled order; the first refused in a memory holds back the rest there.
        One pass suffices: a grant only lowers a memory's free bytes and the unplaced bytes of later requests.
        Returns whether it granted any."""
        held_back: set[Port] = set()
        waiting: list[Request] = []
        for r in self.pending:
            if r.memory in held_back or not self.grantable(r):
                held_back.add(r.memory)
                waiting.append(r)
                continue
            self.grant(r)
            r.granted.succeed(r.memory)
        granted = len(waiting) < len(self.pending)
        self.pending = waiting
        return granted

    def blocking(self, task_id: int) -> Request | None:
        """The task's request still waiting, or its output's refused at its last try, if any."""
        return next((r for r in self.pending if r.task == task_id), self.refused.get(task_id))

    def ahead_of(self, r: Request) -> Request | None:
        """The earliest waiting request before `r` in its memory (it holds `r` back), if any."""
        return next((q for q in self.pending if q.memory == r.memory and q.key < r.key), None)
