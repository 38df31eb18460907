"""Lower bounds on a step's makespan: the critical path and the busiest resource's total work."""
from __future__ import annotations

from collections import defaultdict

from accelsim.hw.spec import HwSpec
from accelsim.schedule.expand import Plan, TaskSpec
from accelsim.schedule.list_sched import upward_ranks
from accelsim.schedule.levels import aligned, memory_order, spill_cycles
from accelsim.schedule.plan import PER_STEP, Bounds, memory_label, resource_label
from accelsim.schedule.ports import MILLI, port_capacities, unit_ports


def _unit_work(tasks: list[TaskSpec], extra: dict[tuple[int, str], int]) -> dict[tuple[int, str], int]:
    """Cycles per instance, rounded up, of the tasks that can run only on one resource kind (a
    collective once), plus `extra` cycles those tasks cannot avoid. Integer arithmetic: six 7-cycle
    tasks on 6 instances need exactly 7 cycles."""
    total: dict[tuple[int, str], int] = defaultdict(int, extra)
    instances: dict[tuple[int, str], int] = {}
    seen_groups = set()
    for t in tasks:
        if len({r for r, _, _ in t.options}) != 1:
            continue
        if t.group >= 0:
            if (t.group, t.chip) in seen_groups:
                continue
            seen_groups.add((t.group, t.chip))
        resource, n, cycles = t.options[0]
        key = (t.chip, resource_label(resource, t.chip, t.out_chip))
        total[key] += cycles
        instances[key] = n
    return {key: -(-cycles // instances[key]) for key, cycles in total.items()}


def _port_work(plan: Plan, hw: HwSpec) -> dict[tuple[int, str], int]:
    """Cycles each port is fully busy at least, from the tasks whose every option streams through it.
    A task holds min(bytes / cycles, capacity) for its cycles, so it uses at least
    min(bytes, capacity x its cheapest cycles) of the port's capacity x makespan."""
    capacity = port_capacities(hw, plan.chips)
    port_of = unit_ports(plan.chips)
    milli: dict[tuple[int, str], int] = defaultdict(int)
    for t in plan.tasks:
        ports = {port_of.get((t.chip, r)) for r, _, _ in t.options}
        if len(ports) != 1 or None in ports or not t.port_bytes:
            continue
        (port,) = ports
        cheapest = min(c for _, _, c in t.options)
        milli[port] += min(t.port_bytes * MILLI, capacity[port] * cheapest)
    return {p: -(-m // capacity[p]) for p, m in milli.items() if capacity[p]}


def _leaf_read_work(plan: Plan, hw: HwSpec) -> dict[tuple[int, str], int]:
    """Cycles each unit kind must spend streaming parameters from slow memory, where they cannot all
    fit in the fast one. A chip's per-step leaves (parameters, optimizer state, constants) live from
    the step's start; with a fast memory m0 and one backing memory m1, at least E = (their bytes -
    capacity of m0) of them sit in m1, and a task whose unit streams from m0 then lasts max(c, r),
    r = the cycles of reading them from m1 (levels.read_cycles). For each unit kind, the cheapest way to
    put E bytes in m1 costs at least the fractional-knapsack relaxation over the leaves, each at the
    extra cycles it adds to that kind's single-resource readers (max(c, x) - c is convex and 0 at 0,
    so a leaf's extra summed over leaves never exceeds the extra of their sum)."""
    port_of = unit_ports(plan.chips)
    extra: dict[tuple[int, str], int] = {}
    for c, chip in enumerate(plan.chips):
        levels = memory_order(chip)
        if len(levels) != 2:
            continue  # several slow memories stream in parallel: the per-leaf sum would overcount
        fast, slow = levels
        size: dict[tuple[int, int], int] = {}
        cost: dict[str, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
        for t in plan.tasks:
            leaves = {(node, t.replica) for node, mb in t.reads if mb == PER_STEP} if t.chip == c else set()
            for item in leaves:
                size[item] = aligned(plan.leaf_bytes[item[0]])
            if len({r for r, _, _ in t.options}) != 1 or port_of.get((c, t.options[0][0]), (c, ""))[1] != fast.name:
                continue
            resource, _, cycles = t.options[0]
            for item in leaves:
                read = spill_cycles(slow, size[item], hw.clock_hz)
                cost[resource][item] += max(cycles, read) - cycles
        excess = sum(size.values()) - int(fast.capacity_bytes)
        if excess <= 0:
            continue
        for resource, per_item in cost.items():
            need, total = excess, 0.0
            for item in sorted(size, key=lambda i: (per_item.get(i, 0) / size[i], i)):
                take = min(need, size[item])
                total += per_item.get(item, 0) * take / size[item]
                need -= take
                if need <= 0:
                    break
            if int(total):
                extra[(c, resource_label(resource, c, c))] = int(total)
    return extra


def lower_bounds(plan: Plan, hw: HwSpec) -> Bounds:
    """Critical path: the longest dependence chain at each task's cheapest cost. Resource bound: for
    each resource kind on each chip, the work of the tasks that can run only there divided by its
    instances (a collective counts once), and for each memory port the bandwidth its tasks need.
    No schedule can finish before either."""
    cp = max(upward_ranks(plan.tasks), default=0)
    work = _unit_work(plan.tasks, _leaf_read_work(plan, hw))
    (chip, resource), res = max(work.items(), key=lambda kv: (kv[1], kv[0]), default=((0, "-"), 0))
    name = f"chip{chip}:{resource}"
    for port, cycles in sorted(_port_work(plan, hw).items()):
        if cycles > res:  # a unit keeps the label on a tie
            res, name = cycles, memory_label(*port)
    return Bounds(critical_path_cycles=cp, resource_cycles=res, resource=name, bound_cycles=max(cp, res))
