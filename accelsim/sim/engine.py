"""SimPy simulation of a compiled schedule (Schedule -> Result).

static: the schedule's own order and placement, time-triggered. Each task waits for its compiled
  start, its inputs, its turn on its unit instance, space for its output in its memory and
  bandwidth on its memory port, then runs for its compiled duration. Memory ports are shared
  channels (a running task holds bytes_moved / duration of the port's bytes per cycle,
  schedule/ports.py), which the scheduler books the same way: replaying a schedule on the hardware
  it was compiled for reproduces the compiled timeline.
dynamic: seed 001's runtime ("scheduler + worker threads"): ready tasks enter a FIFO work queue per
  chip and any free capable unit instance takes the first it can run. Outputs go to the unit's own
  memory if it has room, else the next level with room, paying the spill's transfer time as the
  scheduler charges it; leaves take memory from their first reader's release on. No precomputed
  order, placement or in-flight window; the memory held at the end (parameters, optimizer state,
  step results) matches the static schedule's.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

import simpy

from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.expand import chip_list, expand
from accelsim.schedule.plan import PER_STEP, Schedule
from accelsim.schedule.ports import MILLI, port_capacities, port_rate, unit_ports
from accelsim.sim.trace import Result, Span

MODES = ("static", "dynamic")


class SimulationError(AccelsimError):
    """The simulated machine deadlocked (e.g. buffers too small for the work in flight)."""


class _Memories:
    """Capacity-limited stores with an occupancy log."""

    def __init__(self, env: simpy.Environment, capacities: dict[str, int]) -> None:
        self.env = env
        self.stores = {m: simpy.Container(env, capacity=max(c, 1), init=max(c, 1)) for m, c in capacities.items()}
        self.capacity = dict(capacities)
        self.log: dict[str, list[tuple[int, int]]] = {m: [(0, 0)] for m in capacities}

    def used(self, mem: str) -> int:
        return self.capacity[mem] - int(self.stores[mem].level)

    def take(self, mem: str, nbytes: int):
        yield self.stores[mem].get(nbytes)
        self._note(mem)

    def give(self, mem: str, nbytes: int) -> None:
        self.stores[mem].put(nbytes)
        self._note(mem)

    def _note(self, mem: str) -> None:
        log, now = self.log[mem], int(self.env.now)
        if log and log[-1][0] == now:
            log[-1] = (now, self.used(mem))
        else:
            log.append((now, self.used(mem)))


def _run(env: simpy.Environment) -> int:
    """Run to completion, counting processed events (the simulator's unit of work)."""
    events = 0
    while True:
        try:
            env.step()
        except simpy.core.EmptySchedule:
            return events
        events += 1


def _port_bandwidth(hw: HwSpec) -> dict[str, float]:
    out = {}
    for c, chip in enumerate(chip_list(hw)):
        for m in chip.memories:
            out[f"chip{c}:{m.name}"] = m.bytes_per_cycle(hw.clock_hz)
    return out


def _deadlock(schedule_name: str, waiting: dict[int, str], describe: Callable[[int], str]) -> SimulationError:
    lines = [f"  {describe(t)}: waiting for {why}" for t, why in sorted(waiting.items())[:12]]
    more = f"\n  ... and {len(waiting) - 12} more" if len(waiting) > 12 else ""
    return SimulationError(f"simulation of {schedule_name} deadlocked with {len(waiting)} task(s) blocked:\n"
                           + "\n".join(lines) + more)


def simulate(schedule: Schedule, hw: HwSpec, mode: str = "static", graph: Graph | None = None,
             port_contention: bool = True) -> Result:
    """Play `schedule` on `hw` (static), or run its graph with a dynamic work queue (`graph`, or the
    model recorded in the schedule). `port_contention=False` gives every task its port's full
    bandwidth, to see what contention costs a schedule compiled for other hardware."""
    if mode not in MODES:
        raise AccelsimError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "dynamic":
        if graph is None:
            from accelsim.schedule.source import graph_for
            graph = graph_for(schedule)
        return _simulate_dynamic(schedule, hw, graph)
    return _simulate_static(schedule, hw, port_contention)


def _unit_instances(hw: HwSpec, chips_used: set[int]) -> dict[str, int]:
    chips = chip_list(hw)
    out: dict[str, int] = defaultdict(int)
    for c in chips_used:
        for u in chips[c].units:
            out[u.name] += 1 if u.gang else u.count
    return dict(out)


def _simulate_static(schedule: Schedule, hw: HwSpec, port_contention: bool) -> Result:
    env = simpy.Environment()
    tasks = schedule.tasks
    mems = _Memories(env, schedule.memory_capacity_bytes)
    bandwidth = _port_bandwidth(hw)
    # integer milli-bytes per cycle: exact arithmetic, so returning a share never overfills the port
    ports = {p: simpy.Container(env, capacity=cap, init=cap) for p, cap in port_capacities(hw, chip_list(hw)).items()}
    done = [env.event() for _ in tasks]
    out_tensor = {x.task: x for x in schedule.tensors if x.task >= 0}
    readers: dict[int, list[int]] = defaultdict(list)
    for t in tasks:
        for d in t.deps:
            readers[d].append(t.id)
    left = {d: len(r) for d, r in readers.items()}
    order: dict[tuple[int, str, int], list[int]] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: (t.start, t.id)):
        if t.kind != "allreduce":
            order[(t.chip, t.resource, t.instance)].append(t.id)
    turn_of = {tid: (key, i) for key, ids in order.items() for i, tid in enumerate(ids)}
    finished = {key: [env.event() for _ in ids] for key, ids in order.items()}
    groups: dict[tuple[int, int, int], list[int]] = defaultdict(list)
    for t in tasks:
        if t.kind == "allreduce":
            groups[(t.node, t.start, t.end)].append(t.id)
    group_ready = {g: env.event() for g in groups}
    arrived: dict[tuple, int] = defaultdict(int)
    spans: list[Span | None] = [None] * len(tasks)
    waiting: dict[int, str] = {}
    port_bytes: dict[str, int] = defaultdict(int)

    def leaf(x):
        yield env.timeout(x.start)
        yield from mems.take(x.memory, x.size_bytes)
        if x.end < schedule.makespan_cycles:
            yield env.timeout(x.end - x.start)
            mems.give(x.memory, x.size_bytes)

    def run(t):
        planned, duration = t.start, t.end - t.start
        if env.now < planned:
            yield env.timeout(planned - env.now)
        waiting[t.id] = "its inputs"
        yield env.all_of([done[d] for d in t.deps])
        t_data = env.now
        if t.kind == "allreduce":
            g = (t.node, t.start, t.end)
            arrived[g] += 1
            if arrived[g] == len(groups[g]):
                group_ready[g].succeed()
            waiting[t.id] = f"the other {len(groups[g]) - 1} replicas of its all-reduce"
            yield group_ready[g]
        else:
            key, i = turn_of[t.id]
            if i > 0:
                waiting[t.id] = f"unit {key[1]}[{key[2]}] on chip{key[0]}"
                yield finished[key][i - 1]
        t_unit = env.now
        x = out_tensor.get(t.id)
        if x is not None:
            waiting[t.id] = f"{x.size_bytes} B of space in {x.memory} ({mems.used(x.memory)} of " \
                            f"{mems.capacity[x.memory]} B in use)"
            yield from mems.take(x.memory, x.size_bytes)
        t_space = env.now
        rate = 0
        if port_contention and t.port in ports and t.bytes_moved and duration:
            rate = port_rate(t.bytes_moved, duration, ports[t.port].capacity)
            waiting[t.id] = f"{rate / MILLI:.1f} B/cycle of bandwidth on port {t.port}"
            yield ports[t.port].get(rate)
        t_port = env.now
        del waiting[t.id]
        yield env.timeout(duration)
        if rate:
            ports[t.port].put(rate)
        if t.bytes_moved:
            port_bytes[t.port] += t.bytes_moved
        stalls = (("data", max(0, t_data - planned)), ("unit", max(0, t_unit - max(t_data, planned))),
                  ("buffer_space", max(0, t_space - max(t_unit, planned))),
                  ("memory_port", max(0, t_port - max(t_space, planned))))
        spans[t.id] = Span(t.id, t.kind, t.node, t.op, t.phase, t.microbatch, t.replica, t.chip, t.resource,
                           t.instance, t_data, t_port, int(env.now), planned,
                           tuple((c, int(v)) for c, v in stalls if v))
        done[t.id].succeed()
        if t.kind != "allreduce":
            key, i = turn_of[t.id]
            finished[key][i].succeed()
        for d in t.deps:
            left[d] -= 1
            if left[d] == 0 and d in out_tensor:
                mems.give(out_tensor[d].memory, out_tensor[d].size_bytes)

    for x in schedule.tensors:
        if x.task < 0:
            env.process(leaf(x))
    for t in tasks:
        env.process(run(t))
    events = _run(env)
    if waiting:
        raise _deadlock(schedule.graph_name, waiting, lambda i: _describe(tasks[i]))
    return _result("static", schedule, hw, spans, mems, port_bytes, bandwidth, events)


def _describe(t) -> str:
    return f"task {t.id} ({t.kind} {t.op} %{t.node}, mb {t.microbatch}, replica {t.replica}, chip{t.chip})"


def _result(mode, schedule, hw, spans, mems, port_bytes, bandwidth, events) -> Result:
    spans = tuple(s for s in spans if s is not None)
    for link in {s.resource for s in spans if s.resource.startswith("link:")}:
        bandwidth.setdefault(link, hw.interconnect.bytes_per_cycle(hw.clock_hz) if hw.interconnect else 0.0)
    return Result(
        mode=mode, graph_name=schedule.graph_name, hw_name=hw.name, clock_hz=hw.clock_hz,
        samples_per_step=schedule.samples_per_step, spans=spans,
        makespan_cycles=max((s.end for s in spans), default=0), compiled_makespan_cycles=schedule.makespan_cycles,
        memory_capacity_bytes=dict(schedule.memory_capacity_bytes),
        occupancy={m: tuple(v) for m, v in mems.log.items()}, port_bytes=dict(port_bytes),
        port_bandwidth=dict(bandwidth), unit_instances=_unit_instances(hw, {s.chip for s in spans}),
        events=events)


def _simulate_dynamic(schedule: Schedule, hw: HwSpec, graph: Graph) -> Result:
    """Work queue per chip; free unit instances take the first queued task they can run."""
    from accelsim.schedule.list_sched import MemoryPlanner, spill_cycles  # memory order per chip, as the scheduler's

    env = simpy.Environment()
    plan = expand(graph, hw, schedule.options)
    specs = plan.tasks
    mems = _Memories(env, schedule.memory_capacity_bytes)
    planner = MemoryPlanner(hw, plan)
    order = {c: [a.name for _, a in row] for c, row in enumerate(planner.order)}
    memory_of = {a.name: m for row in planner.order for m, a in row}
    preferred = {(c, u.name): f"chip{c}:{u.writes[0]}" for c, chip in enumerate(plan.chips) for u in chip.units}
    bandwidth = _port_bandwidth(hw)
    ports = {p: simpy.Container(env, capacity=cap, init=cap) for p, cap in port_capacities(hw, chip_list(hw)).items()}
    queues = {c: simpy.FilterStore(env) for c in range(len(plan.chips))}
    done = [env.event() for _ in specs]
    readers: dict[int, list[int]] = defaultdict(list)
    for t in specs:
        for d in t.deps:
            readers[d].append(t.id)
    left = {d: len(r) for d, r in readers.items()}
    placed: dict[int, str] = {}
    ready_at: dict[int, int] = {}
    spans: list[Span | None] = [None] * len(specs)
    waiting: dict[int, str] = {t.id: "its inputs" for t in specs}
    port_bytes: dict[str, int] = defaultdict(int)
    reads_port = unit_ports(plan.chips)
    groups: dict[int, list[int]] = defaultdict(list)
    for t in specs:
        if t.group >= 0:
            groups[t.group].append(t.id)
    # leaves (inputs, parameters, optimizer state) take memory from their first reader's release on,
    # as the scheduler places them: per-sample inputs until their last reader ends, the rest for good
    leaf_left: dict[tuple, int] = defaultdict(int)
    for t in specs:
        for key in {(r, t.chip) for r in t.reads}:
            leaf_left[key] += 1
    leaf_home: dict[tuple, simpy.Event] = {}

    def target(chip: int, nbytes: int, first: str | None = None) -> str:
        """`first` (the unit's own memory) if it has room now, else the first memory in the scheduler's
        order with room, else the last (and wait there): the scheduler's ranking."""
        ranked = sorted(order[chip], key=lambda m: m != first)
        return next((m for m in ranked if mems.stores[m].level >= nbytes), ranked[-1])

    def hold_leaves(t):
        for key in sorted({(r, t.chip) for r in t.reads}):
            if key not in leaf_home:
                leaf_home[key] = env.event()
                nbytes = plan.leaf_bytes[key[0][0]]
                mem = target(t.chip, nbytes)
                waiting[t.id] = f"{nbytes} B of space in {mem} for leaf %{key[0][0]} {plan.node_names[key[0][0]]!r}"
                yield from mems.take(mem, nbytes)
                leaf_home[key].succeed(mem)
            if not leaf_home[key].processed:  # another reader is still taking its space
                yield leaf_home[key]

    def release(t):
        yield env.all_of([done[d] for d in t.deps])
        yield from hold_leaves(t)
        ready_at[t.id] = int(env.now)
        if t.group >= 0:
            if t.id == groups[t.group][0]:
                env.process(collective(t.group))
            return
        waiting[t.id] = f"a free unit among {', '.join(sorted({r for r, _, _ in t.options}))} on chip{t.chip}"
        yield queues[t.chip].put(t)

    def output_space(t, resource: str | None = None):
        if not t.out_bytes:
            return
        mem = target(t.out_chip, t.out_bytes, preferred.get((t.out_chip, resource)))
        waiting[t.id] = f"{t.out_bytes} B of space in {mem}"
        yield from mems.take(mem, t.out_bytes)
        placed[t.id] = mem

    def spill_of(t, resource: str) -> int:
        """Writing the output to a memory other than the unit's own costs its transfer time there,
        as the scheduler charges a spill."""
        where = placed.get(t.id)
        if where is None or where == preferred.get((t.out_chip, resource)):
            return 0
        return spill_cycles(memory_of[where], t.out_bytes, hw.clock_hz)

    def finish(t, resource, instance, start, t_ready_unit, t_space):
        stalls = (("unit", t_ready_unit - ready_at[t.id]), ("buffer_space", t_space - t_ready_unit),
                  ("memory_port", start - t_space))
        spans[t.id] = Span(t.id, t.kind, t.node, t.op, t.phase, t.microbatch, t.replica, t.chip, resource,
                           instance, ready_at[t.id], start, int(env.now), ready_at[t.id],
                           tuple((c, int(v)) for c, v in stalls if v))
        waiting.pop(t.id, None)
        done[t.id].succeed()
        for d in t.deps:
            left[d] -= 1
            if left[d] == 0 and d in placed and not specs[d].keep:  # step results stay, as scheduled
                mems.give(placed[d], specs[d].out_bytes)
        for key in {(r, t.chip) for r in t.reads}:
            leaf_left[key] -= 1
            if leaf_left[key] == 0 and key[0][1] != PER_STEP:
                mems.give(leaf_home[key].value, plan.leaf_bytes[key[0][0]])

    def worker(chip: int, resource: str, instance: int):
        while True:
            t = yield queues[chip].get(lambda t: any(r == resource for r, _, _ in t.options))
            t_unit = int(env.now)
            yield from output_space(t, resource)
            t_space = int(env.now)
            cycles = next(c for r, _, c in t.options if r == resource) + spill_of(t, resource)
            port = reads_port.get((chip, resource), resource)
            rate = 0
            if port in ports and t.port_bytes:
                rate = port_rate(t.port_bytes, cycles, ports[port].capacity)
                waiting[t.id] = f"{rate / MILLI:.1f} B/cycle of bandwidth on port {port}"
                yield ports[port].get(rate)
            t_port = int(env.now)
            waiting.pop(t.id, None)
            yield env.timeout(cycles)
            if rate:
                ports[port].put(rate)
            port_bytes[port] += t.port_bytes
            finish(t, resource, instance, t_port, t_unit, t_space)

    def collective(group: int):
        members = [specs[i] for i in groups[group]]
        yield env.all_of([done[d] for m in members for d in m.deps])
        for m in members:
            yield from output_space(m)
        start = int(env.now)
        yield env.timeout(members[0].options[0][2])
        for m in members:
            port_bytes["allreduce"] += m.port_bytes
            finish(m, "allreduce", 0, start, start, start)

    resources = {(t.chip, r, n) for t in specs if t.group < 0 for r, n, _ in t.options}
    for chip, resource, n in sorted(resources):
        for i in range(n):
            env.process(worker(chip, resource, i))
    for t in specs:
        env.process(release(t))
    events = _run(env)
    if waiting:
        raise _deadlock(schedule.graph_name, waiting, lambda i: _describe(specs[i]))
    return _result("dynamic", schedule, hw, spans, mems, port_bytes, bandwidth, events)
