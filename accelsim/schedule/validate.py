"""Schedule -> None or ScheduleError: check that a static schedule is executable as written.

Every problem is reported at once (up to MAX_PROBLEMS), naming tasks and tensors by kind, op, node
id, node name, micro-batch and replica, so a scheduler bug can be traced to the decision that made it.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import defaultdict

from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.expand import chip_list
from accelsim.schedule.plan import PER_STEP, Schedule, Task, Tensor, graph_hash
from accelsim.schedule.ports import MILLI, port_capacities, port_rate

MAX_PROBLEMS = 20


def validate_schedule(schedule: Schedule, graph: Graph | None = None, hw: HwSpec | None = None) -> None:
    """Raise ScheduleError listing every violated invariant; `graph` adds the graph-dependence checks,
    `hw` the memory-port bandwidth check."""
    names = _Names(schedule, graph)
    problems = _check_tasks(schedule, names)
    ids_ok = not problems  # deps index tasks by position, so they mean nothing if ids are off
    if ids_ok:
        problems += _check_deps(schedule, names)
        problems += _check_lifetimes(schedule, names)
    if graph is not None:
        problems += _check_graph(schedule, graph, names, ids_ok)
    problems += _check_resources(schedule, names)
    if hw is not None:
        problems += _check_ports(schedule, hw, names)
    problems += _check_memory(schedule, names)
    problems += _check_totals(schedule)
    if problems:
        shown = problems[:MAX_PROBLEMS]
        more = [f"... and {len(problems) - MAX_PROBLEMS} more"] if len(problems) > MAX_PROBLEMS else []
        raise ScheduleError(f"schedule of graph {schedule.graph_name!r} on {schedule.hw_name!r}: "
                            f"{len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in shown + more))


class _Names:
    """Readable labels for tasks and tensors: op, %id and (when the graph is known) the node's name."""

    def __init__(self, schedule: Schedule, graph: Graph | None) -> None:
        self.graph = graph
        self.tasks = schedule.tasks

    def node(self, node_id: int, op: str | None = None) -> str:
        g = self.graph
        if g is not None and 0 <= node_id < len(g.nodes):
            n = g.nodes[node_id]
            return f"{op or n.op} %{node_id} {n.name!r}"
        return f"{op} %{node_id}" if op else f"%{node_id}"

    def task(self, t: Task) -> str:
        return f"task {t.id} ({t.kind} {self.node(t.node, t.op)}, {_mb_replica(t.microbatch, t.replica)})"

    def tensor(self, x: Tensor) -> str:
        op = self.tasks[x.task].op if 0 <= x.task < len(self.tasks) and self.graph is None else None
        return (f"tensor of {self.node(x.node, op)} ({_mb_replica(x.microbatch, x.replica)}) in {x.memory} "
                f"at [{x.offset}, {x.offset + x.size_bytes}) live [{x.start}, {x.end})")


def _mb_replica(microbatch: int, replica: int) -> str:
    mb = "per step" if microbatch == PER_STEP else f"mb {microbatch}"
    return f"{mb}, replica {replica}"


def _check_tasks(schedule: Schedule, names: _Names) -> list[str]:
    problems = []
    n = len(schedule.tasks)
    for pos, t in enumerate(schedule.tasks):
        if t.id != pos:
            problems.append(f"{names.task(t)} is at position {pos}: task ids must be 0..{n - 1} in order")
        if not 0 <= t.start < t.end:
            problems.append(f"{names.task(t)} runs [{t.start}, {t.end}): need 0 <= start < end")
        for d in t.deps:
            if not 0 <= d < n:
                problems.append(f"{names.task(t)} depends on task {d}, which does not exist (0..{n - 1})")
    return problems


def _check_deps(schedule: Schedule, names: _Names) -> list[str]:
    tasks = schedule.tasks
    return [f"{names.task(t)} starts at {t.start} before its dependence {names.task(tasks[d])} ends at {tasks[d].end}"
            for t in tasks for d in t.deps if tasks[d].end > t.start]


def _check_graph(schedule: Schedule, graph: Graph, names: _Names, ids_ok: bool) -> list[str]:
    problems = []
    expected = graph_hash(graph)
    if schedule.graph_hash != expected:
        problems.append(f"the schedule was compiled for graph {schedule.graph_name!r} "
                        f"(hash {schedule.graph_hash[:12]}) but is checked against graph {graph.name!r} "
                        f"(hash {expected[:12]})")
    tasks = schedule.tasks
    for t in tasks:
        if not 0 <= t.node < len(graph.nodes):
            problems.append(f"{names.task(t)} names a node that graph {graph.name!r} does not have "
                            f"(0..{len(graph.nodes) - 1})")
            continue
        node = graph.nodes[t.node]
        if t.kind == "node" and t.op != node.op:
            problems.append(f"{names.task(t)} has op {t.op!r} but graph node %{t.node} is a {node.op}")
        if not ids_ok:
            continue
        dep_nodes = {tasks[d].node for d in t.deps}
        if t.kind == "node":
            needed = [i for i in node.inputs if not graph.nodes[i].is_leaf]
        elif t.kind in ("accumulate", "allreduce"):
            needed = [t.node]
        else:
            needed = []
        for i in needed:
            if i not in dep_nodes:
                problems.append(f"{names.task(t)} needs {names.node(i)} but none of its dependences "
                                f"(tasks {list(t.deps)}) produces, moves, accumulates or reduces it")
    return problems


def _check_resources(schedule: Schedule, names: _Names) -> list[str]:
    """One task at a time per unit instance and per link; an all-reduce is one collective per chip."""
    groups: dict[tuple[object, ...], list[Task]] = defaultdict(list)
    for t in schedule.tasks:
        if t.kind == "allreduce":
            groups[("allreduce", t.chip)].append(t)
        elif t.resource.startswith("link:"):  # a link is shared by both chips it connects
            groups[(t.resource, t.instance)].append(t)
        else:
            groups[(f"chip{t.chip} {t.resource}", t.instance)].append(t)
    problems = []
    for key, group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        where = f"chip{key[1]} all-reduce" if key[0] == "allreduce" else f"{key[0]}[{key[1]}]"
        group.sort(key=lambda t: (t.start, t.end, t.id))
        latest: Task | None = None  # the task seen so far that ends last
        for t in group:
            same_collective = (latest is not None and t.kind == "allreduce" and latest.node == t.node
                               and (latest.start, latest.end) == (t.start, t.end))
            if latest is not None and t.start < latest.end and not same_collective:
                problems.append(f"{names.task(t)} runs [{t.start}, {t.end}) on {where}, overlapping "
                                f"{names.task(latest)} which runs [{latest.start}, {latest.end})")
            if latest is None or t.end > latest.end:
                latest = t
    return problems


def _check_ports(schedule: Schedule, hw: HwSpec, names: _Names) -> list[str]:
    """At no time do the tasks streaming through a memory port hold more bandwidth than it has
    (each holds its bytes over its duration, as the simulator meters it)."""
    capacity = port_capacities(hw, chip_list(hw))
    events: dict[str, list[tuple[int, int, int]]] = defaultdict(list)  # (time, +-rate, task id)
    for t in schedule.tasks:
        if t.port in capacity:
            rate = port_rate(t.bytes_moved, t.end - t.start, capacity[t.port])
            if rate:
                events[t.port] += [(t.start, rate, t.id), (t.end, -rate, t.id)]
    problems = []
    for port, evs in sorted(events.items()):
        level, running = 0, set()
        for time, delta, tid in sorted(evs, key=lambda e: (e[0], e[1] > 0, e[2])):  # releases first
            level += delta
            running.symmetric_difference_update({tid})
            if level > capacity[port]:
                shown = ", ".join(names.task(schedule.tasks[i]) for i in sorted(running)[:4])
                problems.append(f"port {port} is asked for {level / MILLI:.1f} B/cycle at cycle {time}, more "
                                f"than its {capacity[port] / MILLI:.1f}, by {len(running)} tasks: {shown}")
                break
    return problems


def _check_memory(schedule: Schedule, names: _Names) -> list[str]:
    by_memory: dict[str, list[Tensor]] = defaultdict(list)
    for x in schedule.tensors:
        by_memory[x.memory].append(x)
    problems = []
    for memory, tensors in sorted(by_memory.items()):
        capacity = schedule.memory_capacity_bytes.get(memory)
        if capacity is None:
            known = ", ".join(sorted(schedule.memory_capacity_bytes)) or "none"
            problems.append(f"{len(tensors)} tensor(s) are placed in memory {memory!r}, which has no "
                            f"capacity in memory_capacity_bytes (known: {known})")
        for x in tensors:
            if x.offset < 0 or x.size_bytes < 0 or not 0 <= x.start <= x.end:
                problems.append(f"{names.tensor(x)}: need offset >= 0, size_bytes >= 0 and 0 <= start <= end")
            elif capacity is not None and x.offset + x.size_bytes > capacity:
                problems.append(f"{names.tensor(x)} ends past the capacity of {memory} ({capacity} bytes)")
        problems += _overlaps(tensors, names)
        peak = _peak_bytes(tensors)
        recorded = schedule.peak_memory_bytes.get(memory)
        if recorded != peak:
            problems.append(f"peak_memory_bytes[{memory!r}] is {recorded} but the tensors placed there "
                            f"peak at {peak} bytes")
        if capacity is not None and peak > capacity:
            problems.append(f"tensors in {memory} peak at {peak} bytes, over its capacity of {capacity} bytes")
    for memory, recorded in sorted(schedule.peak_memory_bytes.items()):
        if memory not in by_memory and recorded != 0:
            problems.append(f"peak_memory_bytes[{memory!r}] is {recorded} but no tensor is placed there")
    return problems


def _overlaps(tensors: list[Tensor], names: _Names) -> list[str]:
    """Pairs live at the same time at overlapping addresses: a sweep over start times keeping the live
    tensors sorted by offset, so each new tensor is checked only against its address neighbours."""
    problems = []
    order = sorted(range(len(tensors)), key=lambda k: (tensors[k].start, tensors[k].offset, k))
    live: list[tuple[int, int]] = []  # (offset, k), sorted; disjoint in address unless already reported
    ends: list[tuple[int, int, int]] = []  # heap of (end, offset, k) of the tensors in `live`
    for k in order:
        x = tensors[k]
        if x.size_bytes <= 0 or x.end <= x.start:
            continue  # occupies no bytes, or no time
        while ends and ends[0][0] <= x.start:
            _, offset, j = heapq.heappop(ends)
            del live[bisect_left(live, (offset, j))]
        top = x.offset + x.size_bytes
        pos = bisect_left(live, (top, -1))  # live[:pos] start below x's top address
        while pos > 0:
            pos -= 1
            other = tensors[live[pos][1]]
            if other.offset + other.size_bytes <= x.offset:
                break
            problems.append(f"{names.tensor(x)} overlaps {names.tensor(other)} in time and address")
        insort(live, (x.offset, k))
        heapq.heappush(ends, (x.end, x.offset, k))
    return problems


def _peak_bytes(tensors: list[Tensor]) -> int:
    """Largest sum of live sizes; at equal times frees come first, as live intervals are half-open."""
    events = sorted([(x.start, x.size_bytes) for x in tensors] + [(x.end, -x.size_bytes) for x in tensors],
                    key=lambda e: (e[0], e[1] > 0))
    peak = live = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def _check_lifetimes(schedule: Schedule, names: _Names) -> list[str]:
    """A tensor is live while its producer runs and until every reader on its chip has finished."""
    tasks = schedule.tasks
    produced: dict[int, list[Tensor]] = defaultdict(list)
    problems = []
    for x in schedule.tensors:
        if x.task < 0:
            continue
        if x.task >= len(tasks):
            problems.append(f"{names.tensor(x)} is produced by task {x.task}, which does not exist")
            continue
        producer = tasks[x.task]
        produced[x.task].append(x)
        if producer.node != x.node:
            problems.append(f"{names.tensor(x)} is produced by {names.task(producer)}, which is for another node")
        if x.start > producer.start or x.end < producer.end:
            problems.append(f"{names.tensor(x)} is not live for the whole of its producer "
                            f"{names.task(producer)} [{producer.start}, {producer.end})")
    for t in tasks:
        chip = f"chip{t.chip}:"
        for d in t.deps:
            for x in produced.get(d, ()):
                if x.memory.startswith(chip) and x.end < t.end:
                    problems.append(f"{names.tensor(x)} is freed before its reader {names.task(t)} "
                                    f"ends at {t.end}")
    return problems


def _check_totals(schedule: Schedule) -> list[str]:
    problems = []
    last_end = max((t.end for t in schedule.tasks), default=0)
    if schedule.makespan_cycles != last_end:
        problems.append(f"makespan_cycles is {schedule.makespan_cycles} but the last task ends at {last_end}")
    b = schedule.bounds
    if b.bound_cycles != max(b.critical_path_cycles, b.resource_cycles):
        problems.append(f"bounds.bound_cycles is {b.bound_cycles} but should be the larger of "
                        f"critical_path_cycles {b.critical_path_cycles} and resource_cycles {b.resource_cycles}")
    if schedule.makespan_cycles < b.bound_cycles:
        problems.append(f"makespan_cycles {schedule.makespan_cycles} beats the lower bound {b.bound_cycles}: "
                        "the bound or the schedule is wrong")
    return problems
