"""Does a schedule agree with the graph and hardware it claims? (Schedule, Graph, HwSpec -> problems)

A schedule from disk may have been edited. With the hardware, every chip, unit, instance, memory and
port it names must exist, with the hardware's capacities and bandwidths, and each task must last its
candidate's cycles plus the spill its output's memory costs. With the graph, every node task must be its
node's and receive the values its kind needs. Whether the schedule is exactly a timing of the plan the
compiler expands (same tasks, dependences, leaf reads, sizes, candidates and bounds) is the compiler's
check (accelsim.compiler.verify), passed in as `plan_check`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import HwSpec
from accelsim.hw.placement import streams_of
from accelsim.schedule.kinds import TASK_KINDS, Holds, Reads
from accelsim.schedule.levels import chip_list, read_cycles, write_cycles
from accelsim.schedule.plan import Schedule, Task, graph_hash, hw_hash, memory_label
from accelsim.schedule.ports import MILLI, port_capacities, port_rate, unit_ports
from accelsim.schedule.traffic import placed_io, task_loads
from accelsim.schedule.split import computes_rows, cuts_of, is_rows, rows_split
from accelsim.schedule.names import Names


PlanCheck = Callable[[Schedule, Graph, HwSpec, Names], list[str]]
"""(schedule, graph, hw, names) -> problems: whether the schedule is exactly a timing of the plan the compiler
expands for them. The compiler provides it (accelsim.compiler.verify); the contract only calls it."""


def check_agreement(schedule: Schedule, graph: Graph | None, hw: HwSpec | None, names: Names, consistent: bool,
                    plan_check: PlanCheck | None = None) -> list[str]:
    """Problems of `schedule` against `graph` and/or `hw`. `consistent`: its own checks passed, so
    task ids index tasks and the plan comparison (`plan_check`, the compiler's: accelsim.compiler.verify)
    is meaningful."""
    problems = []
    if hw is not None and (schedule.hw_hash != hw_hash(hw) or schedule.hw_name != hw.name):
        return [f"the schedule was compiled for hardware {schedule.hw_name!r} (hash {schedule.hw_hash[:12]}) but "
                f"is used with hardware {hw.name!r} (hash {hw_hash(hw)[:12]}): recompile with `accelsim compile`"]
    if graph is not None and (schedule.graph_hash != graph_hash(graph) or schedule.graph_name != graph.name):
        return [f"the schedule was compiled for graph {schedule.graph_name!r} (hash {schedule.graph_hash[:12]}) "
                f"but is used with graph {graph.name!r} (hash {graph_hash(graph)[:12]}): recompile with "
                "`accelsim compile`"]
    if graph is not None:
        problems += _check_nodes(schedule, graph, names, consistent)
    if hw is not None:
        problems += _check_hardware(schedule, hw, names)
        if not problems and consistent:
            io = placed_io(schedule, hw)  # where each task's inputs and output live: both checks read it
            problems += _check_durations(schedule, hw, names, io)
            problems += _check_ports(schedule, hw, names, io)
    if graph is not None and hw is not None and not problems and consistent and plan_check is not None:
        problems += plan_check(schedule, graph, hw, names)
    return problems


def _check_nodes(schedule: Schedule, graph: Graph, names: Names, consistent: bool) -> list[str]:
    """Node ids exist, tasks that compute their node carry its op, and each task's dependences deliver the
    values its kind needs."""
    problems = []
    tasks = schedule.tasks
    for t in tasks:
        if not t.node < len(graph.nodes):
            problems.append(f"{names.task(t)} names node %{t.node}, which graph {graph.name!r} does not have "
                            f"(0..{len(graph.nodes) - 1})")
            continue
        node = graph.nodes[t.node]
        kind = TASK_KINDS[t.kind]
        if kind.computes_node and t.op != node.op:
            problems.append(f"{names.task(t)} has op {t.op!r} but graph node %{t.node} is a {node.op}")
        elif t.is_part:
            problem = _cut_problem(graph, node, t)
            if problem:
                problems.append(f"{names.task(t)} is part {t.part} of {t.parts} of {names.node(t.node)}, but {problem}")
                continue
        if not consistent:
            continue
        delivered: dict[int, list[Task]] = {}
        for d in t.deps:
            delivered.setdefault(tasks[d].node, []).append(tasks[d])
        for i in kind.needs(graph, node):
            if i not in delivered:
                problems.append(f"{names.task(t)} needs {names.node(i)} but none of its dependences "
                                f"(tasks {list(t.deps)}) produces, moves, accumulates or reduces it")
        if kind.computes_node:  # from whole inputs, or its rows from rows
            for i, got in delivered.items():
                problem = None if _same_rows(graph, node, t, i, got) else _parts_problem(got)
                if problem:
                    problems.append(f"{names.task(t)} reads {names.node(i)} in parts, but {problem}")
            continue
        problems += [f"{names.task(t)} {p}" for p in _cut_rule(graph, t, [tasks[d] for d in t.deps])]
    shards = {(x.node, x.microbatch, x.replica, x.chip): x for x in schedule.tensors if x.parts > 1}
    for t in tasks if shards and consistent else ():
        for node_id, mb in t.reads:
            x = shards.get((node_id, mb, t.replica, t.chip))
            if x is not None and not _reads_shard(graph, t, node_id, x.part, x.parts):
                problems.append(f"{names.task(t)} reads {names.node(node_id)}, placed on chip{t.chip} as rows part "
                                f"{x.part} of {x.parts} only: a reader of a shard must be an all-gather member or "
                                "compute that rows part of an elementwise node")
    for x in schedule.tensors:
        if not x.node < len(graph.nodes):
            problems.append(f"{names.tensor(x)} is of node %{x.node}, which graph {graph.name!r} does not have")
    return problems


def _cut_rule(graph: Graph, t: Task, deps: list[Task]) -> list[str]:
    """Why a task that moves, accumulates or reduces its dependences' outputs does not hold what its kind
    reads (Reads): the same part as each dependence, its rows part of whole ones (a reduce-scatter), or the
    whole from every part of one cut, or from its group's leaf shards (an all-gather)."""
    reads = TASK_KINDS[t.kind].reads
    if reads is Reads.SCATTER:
        if not t.is_part or not is_rows(graph, graph.nodes[t.node], t.split) or any(d.is_part for d in deps):
            return [f"is a {t.kind}: it must hold a rows part of its node, reading whole values"]
        return []
    if reads is Reads.GATHER:
        problem = _parts_problem(deps) if deps else (None if t.reads else "it has neither")
        if t.is_part or (deps and not all(d.is_part for d in deps)) or problem:
            return [f"is a {t.kind}: it must hold its node whole, reading every part of one cut or its group's "
                    f"leaf shards{f' ({problem})' if problem else ''}"]
        return []
    return [f"holds part {t.part} of {t.parts} (split {t.split}) but reads task {d.id}, part {d.part} of {d.parts} "
            f"(split {d.split})" for d in deps if (d.split, d.part, d.parts) != (t.split, t.part, t.parts)]


def _same_rows(graph: Graph, node: Node, t: Task, i: int, got: list[Task]) -> bool:
    """Whether a rows part reads input `i` as the same rows part of it (ZeRO's update, compiler/planning/zero.py)."""
    if len(got) != 1 or not (t.is_part and got[0].is_part) or (got[0].part, got[0].parts) != (t.part, t.parts):
        return False
    src = graph.nodes[i]
    return (is_rows(graph, node, t.split) and is_rows(graph, src, got[0].split) and src.shape[:1] == node.shape[:1]
            and all(axis == 0 for j, axis in zip(node.inputs, rows_split(graph, node).in_axes) if j == i))


def _reads_shard(graph: Graph, t: Task, node_id: int, part: int, parts: int) -> bool:
    """Whether `t` may read leaf `node_id` as rows part `part` of `parts`: an all-gather member gathers it;
    a node task computing that rows part of its node cuts that input by rows."""
    kind = TASK_KINDS[t.kind]
    if kind.reads is Reads.GATHER:
        return True
    node = graph.nodes[t.node]
    if not (kind.computes_node and t.is_part and (t.part, t.parts) == (part, parts)
            and is_rows(graph, node, t.split)):
        return False
    return graph.nodes[node_id].shape[:1] == node.shape[:1] and all(
        axis == 0 for j, axis in zip(node.inputs, rows_split(graph, node).in_axes) if j == node_id)


def _cut_problem(graph: Graph, node: Node, t: Task) -> str | None:
    """Why a part task cannot be a part of its node: its op has no such split, or too few indices."""
    if node.is_leaf or not TASK_KINDS[t.kind].partial:
        return f"a {t.kind} task of a {node.op} node is never a part"
    splits = cuts_of(graph, node)
    if t.split >= len(splits):
        return (f"{node.op} node %{node.id} has {len(splits)} way(s) to split "
                f"({', '.join(s.name for s in splits) or 'none'}), not split {t.split}")
    size = node.shape[splits[t.split].out_axis]
    if t.parts > size:
        return f"its {splits[t.split].name} axis has {size} indices, fewer than {t.parts} parts"
    if TASK_KINDS[t.kind].computes_node and is_rows(graph, node, t.split) and not computes_rows(graph, node):
        return f"only an elementwise node computes a part of its rows, and {node.op} is not one"
    return None


def _parts_problem(got: list[Task]) -> str | None:
    """Why the dependences `got`, all of one node, do not deliver it whole: parts must come all
    together, each exactly once, cut the same way."""
    parts = [d for d in got if d.is_part]
    if not parts:
        return None
    cuts = {(d.split, d.parts) for d in parts}
    indices = sorted(d.part for d in parts)
    if len(parts) != len(got) or len(cuts) != 1 or indices != list(range(parts[0].parts)):
        return (f"its dependences deliver parts {[(d.id, d.part, d.parts) for d in got]} (task, part, parts): "
                f"every part of one cut is needed, each once, and no whole copy beside them")
    return None


def _check_hardware(schedule: Schedule, hw: HwSpec, names: Names) -> list[str]:
    """Chips, units, instances and memories named by the schedule exist, with the hardware's sizes."""
    chips = chip_list(hw)
    problems = []
    if schedule.clock_hz != hw.clock_hz:
        problems.append(f"clock_hz is {schedule.clock_hz} but {hw.name} runs at {hw.clock_hz}")
    for t in schedule.tasks:
        for chip in (t.chip, t.out_chip):
            if not chip < len(chips):
                problems.append(f"{names.task(t)} names chip{chip}, but {hw.name} has {len(chips)} chip(s)")
                break
        else:
            holds = TASK_KINDS[t.kind].holds
            if holds is Holds.DMA and t.resource not in streams_of(chips[t.chip]):
                problems.append(f"{names.task(t)} runs on DMA engine {t.resource!r}, which chip{t.chip} of {hw.name} "
                                f"does not have (its placement streams: "
                                f"{', '.join(streams_of(chips[t.chip])) or 'none'})")
            if holds is not Holds.UNIT:
                continue
            unit = next((u for u in chips[t.chip].units if u.name == t.resource), None)
            if unit is None:
                problems.append(f"{names.task(t)} runs on unit {t.resource!r}, which chip{t.chip} of {hw.name} "
                                f"does not have ({', '.join(u.name for u in chips[t.chip].units)})")
            elif not t.instance < (1 if unit.gang else unit.count):
                problems.append(f"{names.task(t)} runs on instance {t.instance} of {t.resource!r}, which has "
                                f"{1 if unit.gang else unit.count} on {hw.name}")
            elif t.port != unit.reads[0]:
                problems.append(f"{names.task(t)} streams through port {t.port!r}, but unit {unit.name!r} reads "
                                f"{unit.reads[0]!r}")
    expected = {(c, m.name): int(m.capacity_bytes) for c, chip in enumerate(chips) for m in chip.memories}
    listed = {(m.chip, m.memory): m.capacity_bytes for m in schedule.memories}
    for key in sorted(set(expected) | set(listed)):
        if expected.get(key) != listed.get(key):
            problems.append(f"memory {memory_label(*key)} has capacity {listed.get(key)} in the schedule but "
                            f"{expected.get(key)} on {hw.name} (None: no such memory)")
    return problems


def _costs(schedule: Schedule, hw: HwSpec, io: tuple) -> tuple[dict[int, int], dict[int, int]]:
    """Per task: the cycles of reading inputs outside its unit's port memory (levels.read_cycles) and
    of writing its output outside its unit's memory (levels.write_cycles; a collective's members all
    pay their worst)."""
    chips = chip_list(hw)
    ports = unit_ports(chips)
    inputs, outputs = io
    read: dict[int, int] = defaultdict(int)
    write: dict[int, int] = defaultdict(int)
    for t in schedule.tasks:
        port = ports.get((t.chip, t.resource))
        if port is not None:
            read[t.id] = read_cycles(chips[t.chip], port[1], inputs[t.id], hw.clock_hz)
        if outputs[t.id] is not None:
            write[t.id] = write_cycles(chips[t.out_chip], t.resource, outputs[t.id][0], t.out_bytes, hw.clock_hz)
    for members in _groups(schedule).values():
        worst = max(write[t] for t in members)
        for t in members:
            write[t] = worst
    return read, write


def _groups(schedule: Schedule) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for t in schedule.tasks:
        if t.group >= 0:
            out[t.group].append(t.id)
    return out


def _check_durations(schedule: Schedule, hw: HwSpec, names: Names, io: tuple) -> list[str]:
    """A task lasts the longer of its candidate's cycles and the streaming of inputs that live outside
    its unit's memory, plus the cost of writing its output outside that memory."""
    read, write = _costs(schedule, hw, io)
    problems = []
    for t in schedule.tasks:
        cycles = next(c.cycles for c in schedule.candidates[t.candidates] if c.resource == t.resource)
        want = max(cycles, read[t.id]) + write[t.id]
        if t.end - t.start != want:
            why = (f" (reading its inputs from slower memory takes {read[t.id]})" if read[t.id] > cycles else "") + \
                  (f" plus {write[t.id]} to write its output outside its unit's memory" if write[t.id] else "")
            problems.append(f"{names.task(t)} lasts {t.end - t.start} cycles, but on {t.resource!r} it takes "
                            f"{cycles}{why}")
    return problems


def _check_ports(schedule: Schedule, hw: HwSpec, names: Names, io: tuple) -> list[str]:
    """At no time do the tasks streaming through a memory port hold more bandwidth than it has: each
    holds its loads (levels.port_loads: its operands through its port, inputs from other memories,
    an output written outside its unit's memory) over its duration, as the simulator meters them."""
    capacity = port_capacities(hw, chip_list(hw))
    events: dict[tuple[int, str], list[tuple[int, int, int]]] = defaultdict(list)  # (time, +-rate, task id)
    for t, loads in zip(schedule.tasks, task_loads(schedule, hw, io)):
        for memory, nbytes in loads.items():
            key = (t.chip, memory)
            rate = port_rate(nbytes, t.end - t.start, capacity[key])
            if rate:
                events[key] += [(t.start, rate, t.id), (t.end, -rate, t.id)]
    problems = []
    for port, evs in sorted(events.items()):
        level, running = 0, set()
        for time, delta, tid in sorted(evs, key=lambda e: (e[0], e[1] > 0, e[2])):  # releases first
            level += delta
            running.symmetric_difference_update({tid})
            if level > capacity[port]:
                shown = ", ".join(names.task(schedule.tasks[i]) for i in sorted(running)[:4])
                problems.append(f"port {memory_label(*port)} is asked for {level / MILLI:.1f} B/cycle at cycle "
                                f"{time}, more than its {capacity[port] / MILLI:.1f}, by {len(running)} tasks: {shown}")
                break
    return problems
