"""Schedule -> None or ScheduleError: check that a static schedule is executable as written.

Every problem is reported at once (up to MAX_PROBLEMS shown), naming tasks and tensors by kind, op,
node id, node name, micro-batch and replica, so a scheduler bug or an edited file can be traced to
the decision that made it. Without `graph` and `hw` only the schedule's own consistency is checked;
with them (schedule/agreement.py) it must fit that graph and hardware; with the compiler's plan check as
well (accelsim.compiler.verify.verify_schedule, which every loaded or simulated schedule goes through)
it must be exactly a timing of the plan the compiler expands for them.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import OrderedDict, defaultdict

from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of
from accelsim.schedule.agreement import PlanCheck, check_agreement
from accelsim.schedule.collectives import links_of_schedule
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.schedule.levels import aligned
from accelsim.schedule.mapping_check import check_mappings
from accelsim.schedule.names import Names, mb_replica
from accelsim.schedule.plan import (COLLECTIVE, COLLECTIVES, LINK, PER_STEP, Schedule, Task, Tensor, graph_hash,
                                    hw_hash, memory_label, peak_bytes)

MAX_PROBLEMS = 20
RECENT_VALID = 2
"""Schedules remembered as fully validated in this process (compile validates, then simulate and check
validate the same object again: on a 43K-task step that second pass took as long as the replay)."""
_recent: OrderedDict[int, tuple[Schedule, str, str]] = OrderedDict()


def _known_valid(schedule: Schedule, graph: Graph, hw: HwSpec) -> bool:
    """Whether this very object passed a full validation against an equal graph and hardware. A Schedule
    is deeply frozen (tuples of frozen models), so an object once valid stays valid; an edited copy
    (model_copy, a reloaded file) is a new object and is validated again. The entry holds the object, so
    its id cannot be reused while remembered."""
    seen = _recent.get(id(schedule))
    return seen is not None and seen[0] is schedule and seen[1:] == (graph_hash(graph), hw_hash(hw))


def _remember(schedule: Schedule, graph: Graph, hw: HwSpec) -> None:
    _recent[id(schedule)] = (schedule, graph_hash(graph), hw_hash(hw))
    while len(_recent) > RECENT_VALID:
        _recent.popitem(last=False)


def validate_schedule(schedule: Schedule, graph: Graph | None = None, hw: HwSpec | None = None,
                      plan_check: PlanCheck | None = None) -> None:
    """Raise ScheduleError listing every violated rule. `graph` and `hw` add the checks against the
    graph and the hardware; `plan_check` (the compiler's, accelsim.compiler.verify) the check that the
    schedule is exactly a timing of its plan. Only a validation with all three is remembered as full."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"expected a Schedule (from A.compile or A.load_schedule), got {type(schedule).__name__}")
    if graph is not None and not isinstance(graph, Graph):
        raise ScheduleError(f"graph must be an accelsim Graph, got {type(graph).__name__}")
    if hw is not None and not isinstance(hw, HwSpec):
        raise ScheduleError(f"hw must be an HwSpec (from A.load_hw), got {type(hw).__name__}")
    full = graph is not None and hw is not None and plan_check is not None
    if full and _known_valid(schedule, graph, hw):
        return
    names = Names(schedule, graph)
    problems = check_totals(schedule)
    task_problems = check_tasks(schedule, names)
    problems += task_problems
    ids_ok = not task_problems  # deps index tasks by position, so they mean nothing if ids are off
    if ids_ok:
        problems += check_deps(schedule, names)
        problems += check_resources(schedule, names)
        problems += check_tensors(schedule, names)
    problems += check_memory(schedule, names)
    if graph is not None and hw is not None:
        problems += check_mappings(schedule, graph, hw, names)
    if graph is not None or hw is not None:
        problems += check_agreement(schedule, graph, hw, names, ids_ok and not problems, plan_check)
    if hw is not None and ids_ok and schedule.hw_hash == hw_hash(hw):
        problems += check_links(schedule, hw, names)
    if problems:
        raise_problems(schedule, problems)
    if full:
        _remember(schedule, graph, hw)


def raise_problems(schedule: Schedule, problems: list[str]) -> None:
    shown = problems[:MAX_PROBLEMS]
    more = [f"... and {len(problems) - MAX_PROBLEMS} more"] if len(problems) > MAX_PROBLEMS else []
    raise ScheduleError(f"invalid schedule of graph {schedule.graph_name!r} on {schedule.hw_name!r}: "
                        f"{len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in shown + more))


def check_tasks(schedule: Schedule, names: Names) -> list[str]:
    """Ids in order, positive durations, dependences on earlier tasks, known candidates and options."""
    problems = []
    n = len(schedule.tasks)
    o = schedule.options
    if n == 0:
        problems.append("the schedule has no tasks")
    for pos, t in enumerate(schedule.tasks):
        who = names.task(t)
        if t.id != pos:
            problems.append(f"{who} is at position {pos}: task ids must be 0..{n - 1} in order")
        if not t.start < t.end:
            problems.append(f"{who} runs [{t.start}, {t.end}): need start < end")
        if len(set(t.deps + t.after)) != len(t.deps + t.after):
            problems.append(f"{who} lists a dependence twice: {list(t.deps)} and after {list(t.after)}")
        for d in t.deps + t.after:
            if not 0 <= d < pos:
                problems.append(f"{who} depends on task {d}: dependences must be earlier tasks (0..{pos - 1})")
        if not t.replica < o.data_parallel:
            problems.append(f"{who} is for replica {t.replica} but the schedule has {o.data_parallel} replica(s)")
        if not t.microbatch < o.microbatches:
            problems.append(f"{who} is for micro-batch {t.microbatch} but the schedule has {o.microbatches}")
        if not t.candidates < len(schedule.candidates):
            problems.append(f"{who} names candidate list {t.candidates}, which does not exist "
                            f"(0..{len(schedule.candidates) - 1})")
            continue
        options = {c.resource: c for c in schedule.candidates[t.candidates]}
        chosen = options.get(t.resource)
        if chosen is None:
            problems.append(f"{who} runs on {t.resource!r}, which is not one of its candidates "
                            f"({', '.join(options) or 'none'})")
        elif not t.instance < chosen.instances:
            problems.append(f"{who} runs on instance {t.instance} of {t.resource!r}, which has "
                            f"{chosen.instances} instance(s)")
        elif t.end - t.start < chosen.cycles:
            problems.append(f"{who} runs {t.end - t.start} cycles on {t.resource!r}, which needs {chosen.cycles}")
        problems += _kind_rules(t, who)
    return problems


def _kind_rules(t: Task, who: str) -> list[str]:
    """What its kind holds decides where it may run: a link between two chips, a collective's resource in a
    group, or a unit of its chip."""
    holds = TASK_KINDS[t.kind].holds
    if holds is Holds.LINK and (t.resource != LINK or t.chip == t.out_chip):
        return [f"{who} is a transfer: it must run on {LINK!r} between two different chips "
                f"(runs on {t.resource!r} from chip{t.chip} to chip{t.out_chip})"]
    if holds is Holds.COLLECTIVE and (t.resource not in COLLECTIVES or t.group < 0):
        return [f"{who} is a collective: it must run on one of {', '.join(map(repr, COLLECTIVES))} (its algorithm) "
                f"in a group (runs on {t.resource!r}, group {t.group})"]
    if holds is Holds.UNIT and (t.resource in (LINK, *COLLECTIVES) or t.chip != t.out_chip):
        return [f"{who} runs on a unit: its resource cannot be {t.resource!r} and its output stays on its chip"]
    if holds is Holds.DMA and (t.resource in (LINK, *COLLECTIVES) or t.chip != t.out_chip):
        return [f"{who} runs on a DMA engine of its chip: its resource cannot be {t.resource!r} and its output "
                f"stays on its chip"]
    return []


def check_deps(schedule: Schedule, names: Names) -> list[str]:
    tasks = schedule.tasks
    return [f"{names.task(t)} starts at {t.start} before its dependence {names.task(tasks[d])} ends at {tasks[d].end}"
            for t in tasks for d in t.deps + t.after if tasks[d].end > t.start]


def check_resources(schedule: Schedule, names: Names) -> list[str]:
    """One task at a time per unit instance and per link; the members of one all-reduce share an
    interval and one collective runs at a time per chip."""
    groups: dict[tuple[object, ...], list[Task]] = defaultdict(list)
    for t in schedule.tasks:
        holds = TASK_KINDS[t.kind].holds
        if holds is Holds.COLLECTIVE:
            groups[(f"chip{t.chip} {COLLECTIVE}", 0)].append(t)
        elif holds is Holds.LINK:
            groups[(f"link chip{t.chip}->chip{t.out_chip}", t.instance)].append(t)
        else:
            groups[(f"chip{t.chip} {t.resource}", t.instance)].append(t)
    problems = []
    for key, group in sorted(groups.items(), key=lambda kv: str(kv[0])):
        where = f"{key[0]}[{key[1]}]"
        group.sort(key=lambda t: (t.start, t.end, t.id))
        latest: Task | None = None  # the task seen so far that ends last
        for t in group:
            same_collective = (latest is not None and t.group >= 0 and latest.group == t.group
                               and (latest.start, latest.end) == (t.start, t.end))
            if latest is not None and t.start < latest.end and not same_collective:
                problems.append(f"{names.task(t)} runs [{t.start}, {t.end}) on {where}, overlapping "
                                f"{names.task(latest)} which runs [{latest.start}, {latest.end})")
            if latest is None or t.end > latest.end:
                latest = t
    members: dict[int, list[Task]] = defaultdict(list)
    for t in schedule.tasks:
        if t.group >= 0:
            members[t.group].append(t)
    for g, ts in sorted(members.items()):
        # a data-parallel all-reduce has one member per replica; a tensor-parallel one, one per rank's chip
        if (len({(t.start, t.end, t.node, t.kind, t.resource) for t in ts}) != 1
                or len({(t.replica, t.chip) for t in ts}) != len(ts)):
            problems.append(f"collective group {g} (tasks {[t.id for t in ts]}) must be one task per replica or "
                            "rank, all for one node over one interval by one algorithm")
    return problems


def check_links(schedule: Schedule, hw: HwSpec, names: Names) -> list[str]:
    """One transfer or collective at a time on every physical link of `hw` (hw/topology.py): a transfer
    holds its route, a collective every link its algorithm crosses (schedule/collectives.py), over its
    interval; the members of one collective hold them together."""
    topo = topology_of(hw)
    tasks = schedule.tasks
    users: dict[object, list[tuple[int, int, int]]] = defaultdict(list)  # link -> (start, end, first task)
    for h in links_of_schedule(schedule, topo):
        first = tasks[h.tasks[0]]
        end = max(tasks[i].end for i in h.tasks)
        for link in h.links:
            users[link].append((first.start, end, first.id))
    problems = []
    for link, spans in sorted(users.items()):
        spans.sort()
        latest: tuple[int, int, int] | None = None
        for span in spans:
            if latest is not None and span[0] < latest[1]:
                a, b = tasks[span[2]], tasks[latest[2]]
                problems.append(f"{_holder(a, names)} runs [{span[0]}, {span[1]}) on {topo.label(link)}, overlapping "
                                f"{_holder(b, names)} which runs [{latest[0]}, {latest[1]}): a link carries one "
                                "transfer or collective at a time")
            if latest is None or span[1] > latest[1]:
                latest = span
    return problems


def _holder(t: Task, names: Names) -> str:
    return names.task(t) if t.group < 0 else f"the {t.kind} of group {t.group} ({names.task(t)} and its other members)"


def check_tensors(schedule: Schedule, names: Names) -> list[str]:
    """Each output has exactly one tensor, of its size, on its chip, live while produced and read;
    each leaf read has one tensor on the reader's chip, live for its readers; nothing else is placed."""
    tasks = schedule.tasks
    makespan = max((t.end for t in tasks), default=0)  # the step's end, whatever makespan_cycles claims
    problems = []
    outputs: dict[int, list[Tensor]] = defaultdict(list)
    leaves: dict[tuple[int, int, int, int], list[Tensor]] = defaultdict(list)
    for x in schedule.tensors:
        if x.task >= 0:
            outputs[x.task].append(x)
        else:
            leaves[(x.node, x.microbatch, x.replica, x.chip)].append(x)
    readers: dict[int, list[Task]] = defaultdict(list)
    leaf_readers: dict[tuple[int, int, int, int], list[Task]] = defaultdict(list)
    for t in tasks:
        for d in t.deps:
            readers[d].append(t)
        for node, mb in t.reads:
            leaf_readers[(node, mb, t.replica, t.chip)].append(t)
    for task_id in sorted(outputs):
        if task_id >= len(tasks):
            problems.append(f"{names.tensor(outputs[task_id][0])} is produced by task {task_id}, which does not exist")
    for t in tasks:
        placed = outputs.get(t.id, [])
        who = names.task(t)
        if not t.out_bytes:
            problems += [f"{names.tensor(x)} is placed for {who}, which has no output" for x in placed]
            continue
        if len(placed) != 1:
            problems.append(f"{who} has {len(placed)} output tensors placed, need exactly 1")
            continue
        x = placed[0]
        if (x.node, x.microbatch, x.replica, x.chip) != (t.node, t.microbatch, t.replica, t.out_chip):
            problems.append(f"{names.tensor(x)} is not the output of {who} (node, micro-batch, replica and chip "
                            f"must be {t.node}, {t.microbatch}, {t.replica}, chip{t.out_chip})")
        if x.size_bytes != aligned(t.out_bytes):
            problems.append(f"{names.tensor(x)} has {x.size_bytes} bytes but {who} writes {t.out_bytes} "
                            f"(placed as {aligned(t.out_bytes)})")
        last_read = max((r.end for r in readers[t.id] if r.chip == x.chip), default=t.end)
        end = makespan if t.keep else max(last_read, t.end)
        if x.start > t.start or x.end < end:
            problems.append(f"{names.tensor(x)} must be live over [{t.start}, {end}): from its producer's start "
                            f"to its last reader's end{' (a result: the end of the step)' if t.keep else ''}")
    for key, ts in sorted(leaf_readers.items()):
        placed = leaves.pop(key, [])
        if len(placed) != 1:
            node, mb, replica, chip = key
            problems.append(f"leaf {names.node(node)} ({mb_replica(mb, replica)}) read on chip{chip} by "
                            f"{names.task(ts[0])} has {len(placed)} tensors placed, need exactly 1")
            continue
        x = placed[0]
        start, end = (0, makespan) if key[1] == PER_STEP else (min(r.start for r in ts), max(r.end for r in ts))
        if x.start > start or x.end < end:
            problems.append(f"{names.tensor(x)} must be live over [{start}, {end}) for its readers")
    for key, placed in sorted(leaves.items()):
        problems += [f"{names.tensor(x)} is a leaf tensor no task reads" for x in placed]
    return problems


def check_memory(schedule: Schedule, names: Names) -> list[str]:
    """Every tensor in a known memory, inside its capacity, never overlapping a live tensor; the
    recorded peaks are the tensors' real peaks."""
    problems = []
    table = {}
    for m in schedule.memories:
        if (m.chip, m.memory) in table:
            problems.append(f"memory {memory_label(m.chip, m.memory)} is listed twice in memories")
        table[(m.chip, m.memory)] = m
    by_memory: dict[tuple[int, str], list[Tensor]] = defaultdict(list)
    for x in schedule.tensors:
        by_memory[(x.chip, x.memory)].append(x)
    for key, tensors in sorted(by_memory.items()):
        label = memory_label(*key)
        m = table.get(key)
        if m is None:
            known = ", ".join(memory_label(*k) for k in sorted(table)) or "none"
            problems.append(f"{len(tensors)} tensor(s) are placed in memory {label}, which is not in the "
                            f"schedule's memories (known: {known})")
        for x in tensors:
            if not x.start < x.end:
                problems.append(f"{names.tensor(x)}: need start < end")
            elif m is not None and x.offset + x.size_bytes > m.capacity_bytes:
                problems.append(f"{names.tensor(x)} ends past the capacity of {label} ({m.capacity_bytes} bytes)")
        problems += overlaps(tensors, names)
        peak = peak_bytes([(x.start, x.end, x.size_bytes) for x in tensors])
        if m is not None and m.peak_bytes != peak:
            problems.append(f"the peak of {label} is recorded as {m.peak_bytes} bytes but the tensors placed "
                            f"there peak at {peak} bytes")
    for key, m in sorted(table.items()):
        if key not in by_memory and m.peak_bytes != 0:
            problems.append(f"the peak of {memory_label(*key)} is recorded as {m.peak_bytes} but no tensor is placed there")
    return problems


def overlaps(tensors: list[Tensor], names: Names) -> list[str]:
    """Pairs live at the same time at overlapping addresses: a sweep over start times keeping the live
    tensors sorted by offset, so each new tensor is checked only against its address neighbours."""
    problems = []
    order = sorted(range(len(tensors)), key=lambda k: (tensors[k].start, tensors[k].offset, k))
    live: list[tuple[int, int]] = []  # (offset, k), sorted; disjoint in address unless already reported
    ends: list[tuple[int, int, int]] = []  # heap of (end, offset, k) of the tensors in `live`
    for k in order:
        x = tensors[k]
        if x.end <= x.start:
            continue  # occupies no time
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
            if len(problems) > MAX_PROBLEMS:
                return problems
        insort(live, (x.offset, k))
        heapq.heappush(ends, (x.end, x.offset, k))
    return problems


def check_totals(schedule: Schedule) -> list[str]:
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
    energy = sum(t.energy_pj for t in schedule.tasks)
    if schedule.energy_pj is None and energy:
        problems.append(f"energy_pj is null (the hardware has no energy figures) but its tasks' energies add up "
                        f"to {energy}")
    if schedule.energy_pj is not None and abs(schedule.energy_pj - energy) > 1e-6 * max(energy, 1.0):
        problems.append(f"energy_pj is {schedule.energy_pj} but its tasks' energies add up to {energy}")
    updates = any(t.phase == "update" for t in schedule.tasks)
    if schedule.training != updates:
        problems.append(f"training is {schedule.training} but the schedule {'has' if updates else 'has no'} "
                        "optimizer-update tasks")
    return problems + check_exact(schedule)


GAP_TOLERANCE = 1e-9
"""The recorded gap is a float division of two integers: equal to the recomputed one up to rounding."""


def check_exact(schedule: Schedule) -> list[str]:
    """The exact mode's report (if any) agrees with the schedule: its bound is a lower bound (at most the
    makespan, at least the schedule's own bounds), its gap and status follow from the two, and the kept
    schedule is no longer than the list schedule it was seeded with."""
    e = schedule.exact
    if e is None:
        return []
    problems = []
    makespan = schedule.makespan_cycles
    if e.bound_cycles > makespan:
        problems.append(f"exact.bound_cycles {e.bound_cycles} is above makespan_cycles {makespan}: a lower "
                        "bound cannot exceed a schedule that reaches it")
    if e.bound_cycles < schedule.bounds.bound_cycles:
        problems.append(f"exact.bound_cycles {e.bound_cycles} is below bounds.bound_cycles "
                        f"{schedule.bounds.bound_cycles}: the exact mode keeps the larger of the two")
    gap = 0.0 if makespan == 0 else (makespan - e.bound_cycles) / makespan
    if not abs(e.gap - gap) <= GAP_TOLERANCE:
        problems.append(f"exact.gap is {e.gap} but (makespan_cycles - exact.bound_cycles) / makespan_cycles "
                        f"is {gap}")
    proved = e.bound_cycles == makespan
    if (e.status == "optimal") != proved:
        problems.append(f"exact.status is {e.status!r} but the bound {e.bound_cycles} "
                        f"{'equals' if proved else 'is below'} the makespan {makespan} (expected "
                        f"{'optimal' if proved else 'feasible'!r})")
    if e.list_makespan_cycles < makespan:
        problems.append(f"exact.list_makespan_cycles {e.list_makespan_cycles} is below makespan_cycles {makespan}: "
                        "the exact mode keeps the list schedule unless it finds a shorter one")
    return problems
