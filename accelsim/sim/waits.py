"""Why a dynamic run deadlocked: the cycle in its wait-for graph (blocked task -> the tasks it waits on), read from
the runtime's state (sim/dynamic.py) when no event is left and told as one paragraph."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from functools import cached_property

from accelsim.schedule.plan import Task, memory_label
from accelsim.schedule.ports import Port
from accelsim.sim.machine import describe

Edge = tuple[int, str]
"""(the task waited on, how the waiting task waits on it, e.g. "waits for its input from task 4")."""
MAX_LISTED = 8
"""The cycle's steps and micro-batches a deadlock's paragraph lists; the rest are counted. A cycle through every
micro-batch of a step of thousands would otherwise make a paragraph of megabytes."""


def _listed(items: list[str], what: str) -> str:
    """The first MAX_LISTED of `items`, joined by "; ", and how many more `what` there are."""
    shown = "; ".join(items[:MAX_LISTED])
    return shown if len(items) <= MAX_LISTED else f"{shown}; and {len(items) - MAX_LISTED:,} more {what}"


def find_cycle(waits: dict[int, list[Edge]], starts: Iterable[int]) -> list[tuple[int, str]]:
    """The first cycle reached depth first from `starts` (edges in their given order), as [(task, how it waits
    on the next task of the cycle)], the last waiting on the first; [] if the waits form no cycle."""
    state: dict[int, int] = {}  # 1: on the current path, 2: explored
    for start in starts:
        if state.get(start):
            continue
        path: list[tuple[int, str]] = []
        stack: list[tuple[int, int]] = [(start, 0)]  # (task, index of its next edge)
        state[start] = 1
        while stack:
            task, i = stack[-1]
            edges = waits.get(task, [])
            if i == len(edges):
                stack.pop()
                state[task] = 2
                if path:
                    path.pop()
                continue
            stack[-1] = (task, i + 1)
            nxt, how = edges[i]
            if state.get(nxt) == 1:
                cycle = path + [(task, how)]
                first = next(k for k, (t, _) in enumerate(cycle) if t == nxt)
                return cycle[first:]
            if not state.get(nxt):
                state[nxt] = 1
                path.append((task, how))
                stack.append((nxt, 0))
    return []


def explain_cycle(cycle: list[tuple[int, str]], name: Callable[[int], str], spans: list[str]) -> str:
    """One paragraph: each task of the cycle and how it waits on the next, and which hazard closed it.
    `name` names a task; `spans` are the micro-batches ("mb 0, replica 0") of the cycle's tasks and of what holds
    the memories they wait for. At most MAX_LISTED of each are listed (the rest counted), so the paragraph is bounded
    however many micro-batches a cycle runs through."""
    if not cycle:
        return ""
    steps = [f"{name(task)} {how}" for task, how in cycle[:MAX_LISTED]]
    if len(cycle) > MAX_LISTED:
        steps.append(f"and {len(cycle) - MAX_LISTED:,} more tasks, the last of which {cycle[-1][1]}")
    if len(spans) > 1:
        hazard = (f"The cycle spans {len(spans):,} micro-batches ({_listed(spans, 'micro-batches')}): the work "
                  "queue starts each micro-batch's tasks as soon as their inputs are ready, without the compiled "
                  "in-flight window (it follows data dependences only), so their tensors fill the memory each needs "
                  "to go on. "
                  "This is a hazard of dynamic issue that the static replay, which keeps the window, does not "
                  "have; give the memory more room or simulate in static mode.")
    else:
        hazard = ("Within one micro-batch the runtime grants space in the compiled order, so the cycle comes from "
                  "where it placed tensors (the unit's own memory when it has room, else the next level), which "
                  "differs from the compiled placement; simulate in static mode to follow the compiled one.")
    return f"Cycle of waits: {'; '.join(steps)}; and so back to the first. {hazard}"


class WaitGraph:
    """The dynamic runtime's state read as a wait-for graph. A base of sim/dynamic.py's WorkQueueRuntime, whose
    state it reads: tasks, waiting, space (SpaceGrants), memories, done, staging, leaves_of, leaf_home,
    leaf_placer, placed and freed."""

    def why_blocked(self) -> str:
        """The cycle of waits that left the blocked tasks blocked, in one paragraph ("" if none is found)."""
        waits = {t: self.waits_of(self.tasks[t]) for t in self.waiting}
        first = sorted(self.waiting, key=lambda t: (self.space.blocking(t) is None, self.tasks[t].start, t))
        cycle = find_cycle(waits, first)
        involved = {task for task, _ in cycle}
        for task, _ in cycle:  # what fills a memory the cycle waits for counts too, whether on the cycle or not
            request = self.space.blocking(task)
            if request is not None:
                involved |= {reader for _, reader in self.holders(request.memory)}
        spans = sorted({(self.tasks[t].microbatch, self.tasks[t].replica) for t in involved})
        return explain_cycle(cycle, lambda t: describe(self.tasks[t]), [f"mb {m}, replica {r}" for m, r in spans])

    def waits_of(self, t: Task) -> list[Edge]:
        """The tasks a blocked task waits on, each with how: the producers of its missing inputs, the reader
        placing a leaf it reads, or for its buffer space the request ahead of it, the earlier output of its
        micro-batch kept room for, or the readers that would free what fills the memory."""
        request = self.space.blocking(t.id)
        if request is None:
            placing = [(self.leaf_placer[k], f"waits for leaf %{k[0]}, which task {self.leaf_placer[k]} puts in memory")
                       for k in self.leaves_of[t.id] if k in self.leaf_home and not self.leaf_home[k].triggered
                       and self.leaf_placer[k] != t.id]
            inputs = [(d, f"waits for its input from task {d}") for d in sorted(set(t.deps) | set(self.staging[t.id]))
                      if not self.done[d].triggered]
            return placing + inputs
        mem, nbytes = request.memory, request.nbytes
        space = f"waits for {nbytes} B of space in {memory_label(*mem)} ({self.memories.free(mem)} B free)"
        ahead = self.space.ahead_of(request)
        if ahead is not None:
            return [(ahead.task, f"{space} behind the earlier-scheduled request of task {ahead.task} there")]
        if request.output and self.memories.free(mem) >= nbytes:
            earlier = self.space.first_unplaced_before(t.id, mem)
            if earlier is not None:
                return [(earlier, f"{space}, kept for the output of task {earlier}, earlier in its micro-batch's "
                                  "compiled order")]
        return [(reader, f"{space}, held by {what} until task {reader} reads it")
                for what, reader in self.holders(mem) if reader != t.id]

    def holders(self, mem: Port) -> list[tuple[str, int]]:
        """(what holds space in `mem`, a task that has yet to read it) for every output and leaf held there."""
        readers_of, leaf_readers = self.readers
        out = []
        for d, where in sorted(self.placed.items()):
            if where == mem and d not in self.freed:
                out += [(f"the output of task {d}", r) for r in readers_of[d] if not self.done[r].triggered]
        for key, home in sorted(self.leaf_home.items()):
            if home.triggered and home.value == mem:
                out += [(f"leaf %{key[0]} of mb {key[1]}", r) for r in leaf_readers[key] if not self.done[r].triggered]
        return out

    @cached_property
    def readers(self) -> tuple[dict[int, list[int]], dict[tuple[int, int, int, int], list[int]]]:
        """The data readers of each task's output and of each leaf, in task order; built once, when a deadlock is
        explained (holders runs per blocked task: scanning every task each time made a deadlock of a few hundred
        micro-batches take minutes to explain)."""
        readers_of: dict[int, list[int]] = defaultdict(list)
        leaf_readers: dict[tuple[int, int, int, int], list[int]] = defaultdict(list)
        for r in self.tasks:
            for d in r.deps:
                readers_of[d].append(r.id)
            for key in self.leaves_of[r.id]:
                leaf_readers[key].append(r.id)
        return readers_of, leaf_readers
