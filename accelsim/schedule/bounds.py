"""Lower bounds on a step's makespan: the critical path and the busiest resource's total work."""
from __future__ import annotations

from collections import defaultdict

from accelsim.hw.spec import HwSpec
from accelsim.schedule.expand import Plan, TaskSpec
from accelsim.schedule.list_sched import upward_ranks
from accelsim.schedule.plan import Bounds, memory_label, resource_label
from accelsim.schedule.ports import MILLI, port_capacities, unit_ports


def _unit_work(tasks: list[TaskSpec]) -> dict[tuple[int, str], int]:
    """Cycles per instance, rounded up, of the tasks that can run only on one resource kind (a
    collective once). Integer arithmetic: six 7-cycle tasks on 6 instances need exactly 7 cycles."""
    total: dict[tuple[int, str], int] = defaultdict(int)
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


def lower_bounds(plan: Plan, hw: HwSpec) -> Bounds:
    """Critical path: the longest dependence chain at each task's cheapest cost. Resource bound: for
    each resource kind on each chip, the work of the tasks that can run only there divided by its
    instances (a collective counts once), and for each memory port the bandwidth its tasks need.
    No schedule can finish before either."""
    cp = max(upward_ranks(plan.tasks), default=0)
    work = _unit_work(plan.tasks)
    (chip, resource), res = max(work.items(), key=lambda kv: (kv[1], kv[0]), default=((0, "-"), 0))
    name = f"chip{chip}:{resource}"
    for port, cycles in sorted(_port_work(plan, hw).items()):
        if cycles > res:  # a unit keeps the label on a tie
            res, name = cycles, memory_label(*port)
    return Bounds(critical_path_cycles=cp, resource_cycles=res, resource=name, bound_cycles=max(cp, res))
