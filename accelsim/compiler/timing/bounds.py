"""Lower bounds on a step's makespan: the critical path and the busiest resource's total work, both
counting the slow-memory traffic no placement can avoid (schedule/levels.py prices it)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from accelsim.hw.spec import HwSpec, Memory
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.hw.placement import output_home
from accelsim.schedule.levels import aligned, is_result, memory_of, memory_order, preferred_memory, spill_cycles
from accelsim.schedule.plan import PER_STEP, Bounds, memory_label, resource_label
from accelsim.schedule.ports import MILLI, port_capacities, unit_ports
from accelsim.compiler.timing.priorities import longest_paths


@dataclass(frozen=True)
class Forced:
    """What tensors too large for a chip's fast memory force: each task's least duration over its
    options, and the bytes every schedule moves through each slow memory's port."""

    durations: list[int]
    slow_bytes: dict[tuple[int, str], int]


def _two_levels(plan: Plan) -> list[tuple[Memory, Memory] | None]:
    """Per chip its (fast, slow) memories when it has exactly two; the bounds below reason about one
    backing memory (several slow memories stream in parallel, so their costs do not add)."""
    out = []
    for chip in plan.chips:
        levels = memory_order(chip)
        out.append((levels[0], levels[1]) if len(levels) == 2 else None)
    return out


def _forced(plan: Plan, hw: HwSpec) -> Forced:
    """A tensor larger than its chip's fast memory lives in the slow one in every schedule: its
    producer pays writing it there unless its unit writes that memory (levels.write_cycles), and a
    reader whose port is the fast memory lasts at least the time to stream it (levels.read_cycles).
    A step result that fits the chip's backing memory is always written there (levels.first_memory; the
    scheduler waits for room there rather than place it elsewhere), or where a placement puts step results. Those bytes pass that memory's port
    (levels.port_loads)."""
    pairs = _two_levels(plan)
    port_of = unit_ports(plan.chips)
    clock = hw.clock_hz

    def too_big(chip: int, nbytes: int) -> bool:
        pair = pairs[chip]
        return pair is not None and aligned(nbytes) > pair[0].capacity_bytes

    durations: list[int] = []
    slow_bytes: dict[tuple[int, str], int] = defaultdict(int)
    for t in plan.tasks:
        pair, out_pair = pairs[t.chip], pairs[t.out_chip]
        reads = sum(aligned(plan.tasks[d].out_bytes) for d in set(t.deps) if too_big(t.chip, plan.tasks[d].out_bytes))
        reads += sum(aligned(plan.leaf_size(n, t.replica)) for n, _ in set(t.reads)
                     if too_big(t.chip, plan.leaf_size(n, t.replica)))
        writes = t.out_bytes if t.out_bytes and too_big(t.out_chip, t.out_bytes) else 0
        out_chip = plan.chips[t.out_chip]
        home = output_home(out_chip, plan.out_class.get(t.node), True) if plan.out_class else None
        backing = memory_of(out_chip, home) if home is not None else memory_order(out_chip)[-1]
        result = (is_result(t.keep, t.phase) and t.out_bytes and len(out_chip.memories) > 1
                  and aligned(t.out_bytes) <= backing.capacity_bytes)
        least, loads = None, []
        for resource, _, cycles in t.options:
            port = port_of.get((t.chip, resource))
            length, load = cycles, {}
            if port is not None and pair is not None and reads and port[1] != pair[1].name:
                length = max(cycles, spill_cycles(pair[1], reads, clock))
                load[(t.chip, pair[1].name)] = reads
            own = preferred_memory(out_chip, resource)
            target = backing if result else (out_pair[1] if writes else None)
            if target is not None and own != target.name:  # results always go to the backing memory
                length += spill_cycles(target, t.out_bytes, clock)
                if port is not None:
                    key = (t.out_chip, target.name)
                    load[key] = load.get(key, 0) + t.out_bytes
            least = length if least is None else min(least, length)
            loads.append(load)
        durations.append(least)
        if all(load == loads[0] for load in loads):  # every option moves these bytes through those ports
            for key, nbytes in loads[0].items():
                slow_bytes[key] += nbytes
    return Forced(durations, dict(slow_bytes))


def _unit_work(tasks: list[TaskSpec], durations: list[int],
               extra: dict[tuple[int, str], int]) -> dict[tuple[int, str], int]:
    """Cycles per instance, rounded up, of the tasks that can run only on one resource kind (a
    collective once), each at its least duration, plus `extra` cycles those tasks cannot avoid.
    Integer arithmetic: six 7-cycle tasks on 6 instances need exactly 7 cycles."""
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
        resource, n, _ = t.options[0]
        key = (t.chip, resource_label(resource, t.chip, t.out_chip))
        total[key] += durations[t.id]
        instances[key] = n
    return {key: -(-cycles // instances.get(key, 1)) for key, cycles in total.items()}


def _port_work(plan: Plan, hw: HwSpec, forced: Forced) -> dict[tuple[int, str], int]:
    """Cycles each port is fully busy at least, from the tasks whose every option streams through it.
    A task holds min(bytes / cycles, capacity) for its cycles, so it uses at least
    min(bytes, capacity x its cheapest cycles) of the port's capacity x makespan; bytes forced
    through a slow memory's port stream at most at its bandwidth, so they count whole."""
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
    for port, nbytes in forced.slow_bytes.items():
        milli[port] += nbytes * MILLI
    return {p: -(-m // capacity[p]) for p, m in milli.items() if capacity[p]}


def _leaf_read_work(plan: Plan, hw: HwSpec) -> dict[tuple[int, str], int]:
    """Cycles each unit kind must spend streaming parameters from slow memory, where they cannot all
    fit in the fast one. A chip's per-step leaves (parameters, optimizer state, constants) live from
    the step's start; with a fast memory m0 and one backing memory m1, at least E = (their bytes -
    capacity of m0) of them sit in m1, and a task whose unit streams from m0 then lasts max(c, r),
    r = the cycles of reading them from m1 (levels.read_cycles). For each unit kind, the cheapest way to
    put E bytes in m1 costs at least the fractional-knapsack relaxation over the leaves, each at the
    extra cycles it adds to that kind's single-resource readers: max(c, x) is convex, so a leaf adds
    at least max(c, x) - c on top of whatever else the task streams. Leaves too large for m0 are
    already in each reader's least duration (_forced): they count towards E but not as items."""
    port_of = unit_ports(plan.chips)
    extra: dict[tuple[int, str], int] = {}
    on_chip: dict[int, list] = defaultdict(list)  # only a chip's own tasks read its leaves
    for t in plan.tasks:
        on_chip[t.chip].append(t)
    for c, pair in enumerate(_two_levels(plan)):
        if pair is None:
            continue
        fast, slow = pair
        size: dict[tuple[int, int], int] = {}
        cost: dict[str, dict[tuple[int, int], int]] = defaultdict(lambda: defaultdict(int))
        for t in on_chip[c]:
            leaves = {(node, t.replica) for node, mb in t.reads if mb == PER_STEP}
            for item in leaves:
                size[item] = aligned(plan.leaf_size(*item))
            if len({r for r, _, _ in t.options}) != 1 or port_of.get((c, t.options[0][0]), (c, ""))[1] != fast.name:
                continue
            resource, _, cycles = t.options[0]
            for item in leaves:
                read = spill_cycles(slow, size[item], hw.clock_hz)
                cost[resource][item] += max(cycles, read) - cycles
        small = {i: b for i, b in size.items() if b <= fast.capacity_bytes}
        need_all = sum(small.values()) - int(fast.capacity_bytes)  # E less the leaves too large for m0
        if need_all <= 0:
            continue
        for resource, per_item in cost.items():
            need, total = need_all, 0.0
            for item in sorted(small, key=lambda i: (per_item.get(i, 0) / small[i], i)):
                take = min(need, small[item])
                total += per_item.get(item, 0) * take / small[item]
                need -= take
                if need <= 0:
                    break
            if int(total):
                extra[(c, resource_label(resource, c, c))] = int(total)
    return extra


def _data_only(tasks: list[TaskSpec]) -> list[TaskSpec]:
    """The tasks without their ordering-only edges: the in-flight window is the compiler's own choice,
    so a bound on the step must hold whatever the window (with a window of 3 of 4 micro-batches, the
    chain through the window made a wave-bound schedule look optimal)."""
    return [replace(t, after=[], lag={d: w for d, w in t.lag.items() if d in t.deps}) if t.after else t
            for t in tasks]


def lower_bounds(plan: Plan, hw: HwSpec) -> Bounds:
    """Critical path: the longest chain of data dependences at each task's least duration. Resource bound: for
    each resource kind on each chip, the work of the tasks that can run only there divided by its
    instances (a collective counts once), and for each memory port the bandwidth its tasks need.
    No schedule can finish before either."""
    forced = _forced(plan, hw)
    cp = int(max(longest_paths(_data_only(plan.tasks), forced.durations), default=0))
    work = _unit_work(plan.tasks, forced.durations, _leaf_read_work(plan, hw))
    (chip, resource), res = max(work.items(), key=lambda kv: (kv[1], kv[0]), default=((0, "-"), 0))
    name = f"chip{chip}:{resource}"
    for port, cycles in sorted(_port_work(plan, hw, forced).items()):
        if cycles > res:  # a unit keeps the label on a tie
            res, name = cycles, memory_label(*port)
    return Bounds(critical_path_cycles=cp, resource_cycles=res, resource=name, bound_cycles=max(cp, res))
