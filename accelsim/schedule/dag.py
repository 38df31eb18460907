"""The list scheduler on an abstract task DAG (problem dict -> schedule dict), so its core can be
tested and benchmarked against exact optima on its own. It is compile's code path (ListScheduler and
its priority rules), fed tasks that touch no memory, on a machine of one unit kind per task kind."""
from __future__ import annotations

import heapq
from dataclasses import replace
from numbers import Integral
from typing import Any

from accelsim.errors import ScheduleError
from accelsim.hw.load import parse_hw
from accelsim.limits import DEFAULT_LIMITS
from accelsim.schedule.expand import Plan, TaskSpec
from accelsim.schedule.list_sched import PRIORITIES, Timed, list_schedule

MAX_DURATION = 10**12
"""Largest duration or delay in cycles: an hour at a few hundred GHz, far past any step."""
MAX_UNITS_PER_KIND = 4096
MAX_KINDS = 256
MAX_INSTANCES = 16384
"""As the hardware schema's limits per chip: units per kind, unit kinds, and instances in all."""
MAX_TRIES = 128
TRY_BUDGET_TASKS = 20_000
FB_ROUNDS = 4
FB_STARTS = 8
"""Forward-backward improvement: FB_ROUNDS passes from each of the FB_STARTS shortest schedules."""
"""Iterated list scheduling: at most MAX_TRIES perturbed runs and MAX_TRIES x tasks <= TRY_BUDGET_TASKS."""
"""As the hardware schema's unit count."""


def _int(value: Any, lo: int, hi: int, where: str) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or not lo <= value <= hi:
        raise ScheduleError(f"schedule_dag: {where} must be an integer from {lo} to {hi}, got {value!r:.80}")
    return int(value)


def validate_dag_problem(problem: Any) -> None:
    """Raise ScheduleError naming the first key that breaks the problem's shape (see schedule_dag)."""
    _parse(problem)


def _parse(problem: Any) -> tuple[dict[str, int], list[tuple[str, str, int]], list[tuple[int, int, int]], list[int]]:
    """(units, tasks as (id, kind, duration), deps as (task index, task index, delay), a topological
    order of the task indices); cycles refused."""
    if not isinstance(problem, dict):
        raise ScheduleError(f"schedule_dag: the problem must be a dict with units, tasks and deps, got "
                            f"{type(problem).__name__}")
    unknown = sorted(set(problem) - {"units", "tasks", "deps"}, key=str)
    if unknown:
        raise ScheduleError(f"schedule_dag: unknown key(s) {unknown!r:.80}; expected units, tasks and deps")
    units, tasks, deps = problem.get("units"), problem.get("tasks"), problem.get("deps", [])
    if not isinstance(units, dict) or not units:
        raise ScheduleError(f"schedule_dag: units must be a non-empty dict {{kind: count}}, got {units!r:.80}")
    if len(units) > MAX_KINDS:
        raise ScheduleError(f"schedule_dag: {len(units)} unit kinds, above the limit of {MAX_KINDS}")
    for kind, count in units.items():
        if not isinstance(kind, str) or not kind:
            raise ScheduleError(f"schedule_dag: unit kinds must be non-empty strings, got {kind!r:.80}")
        _int(count, 1, MAX_UNITS_PER_KIND, f"units[{kind!r:.40}]")
    if sum(units.values()) > MAX_INSTANCES:
        raise ScheduleError(f"schedule_dag: {sum(units.values())} unit instances in all, above the limit of "
                            f"{MAX_INSTANCES}")
    if not isinstance(tasks, list) or not tasks:
        raise ScheduleError(f"schedule_dag: tasks must be a non-empty list, got {type(tasks).__name__}")
    if len(tasks) > DEFAULT_LIMITS.max_tasks:
        raise ScheduleError(f"schedule_dag: {len(tasks):,} tasks, above the limit of {DEFAULT_LIMITS.max_tasks:,}")
    parsed, index = [], {}
    for i, t in enumerate(tasks):
        if not isinstance(t, dict) or set(t) != {"id", "kind", "duration"}:
            raise ScheduleError(f"schedule_dag: tasks[{i}] must be a dict with exactly id, kind and duration, "
                                f"got {t!r:.80}")
        tid, kind = t["id"], t["kind"]
        if not isinstance(tid, str) or not tid:
            raise ScheduleError(f"schedule_dag: tasks[{i}].id must be a non-empty string, got {tid!r:.80}")
        if tid in index:
            raise ScheduleError(f"schedule_dag: tasks[{i}].id {tid!r:.80} is used twice")
        if not isinstance(kind, str) or kind not in units:
            raise ScheduleError(f"schedule_dag: tasks[{i}] ({tid!r:.40}) has kind {kind!r:.40}, which is not in "
                                f"units ({', '.join(map(repr, units))})"[:300])
        index[tid] = i
        parsed.append((tid, kind, _int(t["duration"], 1, MAX_DURATION, f"tasks[{i}].duration")))
    if not isinstance(deps, list) or len(deps) > 20 * DEFAULT_LIMITS.max_tasks:
        raise ScheduleError(f"schedule_dag: deps must be a list of [a, b] or [a, b, delay] of at most "
                            f"{20 * DEFAULT_LIMITS.max_tasks:,} entries, got {type(deps).__name__}")
    edges: dict[tuple[int, int], int] = {}
    for j, d in enumerate(deps):
        if not isinstance(d, (list, tuple)) or len(d) not in (2, 3):
            raise ScheduleError(f"schedule_dag: deps[{j}] must be [a, b] or [a, b, delay], got {d!r:.80}")
        a, b = d[0], d[1]
        for end in (a, b):
            if not isinstance(end, str) or end not in index:
                raise ScheduleError(f"schedule_dag: deps[{j}] names task {end!r:.80}, which is not in tasks")
        if a == b:
            raise ScheduleError(f"schedule_dag: deps[{j}] makes task {a!r:.80} depend on itself")
        delay = _int(d[2], 0, MAX_DURATION, f"deps[{j}] delay") if len(d) == 3 else 0
        key = (index[a], index[b])
        edges[key] = max(edges.get(key, 0), delay)
    edge_list = [(a, b, w) for (a, b), w in edges.items()]
    order = _topological(len(parsed), edge_list)
    if len(order) != len(parsed):
        placed = set(order)
        stuck = [parsed[i][0] for i in range(len(parsed)) if i not in placed][:5]
        raise ScheduleError(f"schedule_dag: the deps form a cycle (through tasks {stuck!r:.120})")
    return dict(units), parsed, edge_list, order


def _topological(n: int, edges: list[tuple[int, int, int]]) -> list[int]:
    """Kahn's order, ties by the problem's task order, so the result is deterministic; shorter than
    `n` when the edges form a cycle."""
    waiting = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b, _ in edges:
        waiting[b] += 1
        succ[a].append(b)
    ready = [i for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for s in succ[i]:
            waiting[s] -= 1
            if not waiting[s]:
                heapq.heappush(ready, s)
    return order


def _makespan(run: list[Timed]) -> int:
    return max(x.end for x in run)


def reversed_plan(plan: Plan) -> Plan:
    """The same tasks with every dependence reversed (delays kept), ids mirrored so they stay a
    topological order: a schedule of it read backwards in time is a schedule of the original."""
    n = len(plan.tasks)
    specs = [replace(t, id=n - 1 - t.id, deps=[], lag={}, after=[]) for t in reversed(plan.tasks)]
    for t in plan.tasks:
        for d in t.deps:
            r = specs[n - 1 - d]
            r.deps.append(n - 1 - t.id)
            if t.lag.get(d):
                r.lag[n - 1 - t.id] = t.lag[d]
    for r in specs:
        r.deps.sort()
    return replace(plan, tasks=specs)


def justified(plan: Plan, hw, start: list[Timed], rounds: int) -> list[list[Timed]]:
    """Forward-backward improvement (justification): schedule the reversed DAG taking the tasks that
    finish last first, read it backwards, then schedule forwards again taking the earliest starts
    first; each pass shifts work towards one end and often closes idle gaps a single pass leaves."""
    n = len(plan.tasks)
    back = reversed_plan(plan)
    out, current = [], start
    for _ in range(rounds):
        finish = [-current[i].end for i in range(n)]
        rev = list_schedule(back, hw, "rank", order=[finish[n - 1 - j] for j in range(n)])[0]
        horizon = _makespan(rev)
        starts = [horizon - rev[n - 1 - i].end for i in range(n)]
        current = list_schedule(plan, hw, "rank", order=[float(x) for x in starts])[0]
        out.append(current)
    return out


def schedule_dag(problem: dict, priority: str | None = None) -> dict:
    """List-schedule an abstract DAG. `problem`: {"units": {kind: count}, "tasks": [{"id": str, "kind":
    str, "duration": int}], "deps": [[a, b, delay], ...]} with start(b) >= end(a) + delay (delay optional,
    default 0). `priority`: one of PRIORITIES, or None for every rule, keeping the shortest schedule (as
    compile does). Returns {"makespan": int, "tasks": {id: {"start": int, "unit": kind, "instance": int}}}."""
    if priority is not None and priority not in PRIORITIES:
        raise ScheduleError(f"schedule_dag: priority must be one of {PRIORITIES} or None, got {priority!r:.40}")
    units, tasks, edges, order = _parse(problem)
    kinds = list(units)
    name = {k: f"u{i}" for i, k in enumerate(kinds)}  # unit names the hardware schema accepts
    hw = parse_hw({"name": "dag", "clock_hz": 1e9, "chips": [{"units": [
        {"name": name[k], "categories": ["elementwise"], "count": units[k], "vector": {"lanes": 1},
         "reads": ["mem"], "writes": ["mem"]} for k in kinds],
        "memories": [{"name": "mem", "kind": "sram", "capacity_bytes": 1024, "bandwidth_bytes_per_cycle": 1}]}]},
        "<schedule_dag>")
    position = {old: new for new, old in enumerate(order)}
    specs = []
    for new, old in enumerate(order):
        _, kind, duration = tasks[old]
        specs.append(TaskSpec(id=new, kind="node", node=0, op="dag", phase="forward", microbatch=0, replica=0,
                              stage=0, chip=0, out_chip=0, deps=[], options=((name[kind], units[kind], duration),),
                              out_bytes=0))
    for a, b, delay in sorted(edges):
        spec = specs[position[b]]
        spec.deps.append(position[a])
        if delay:
            spec.lag[position[a]] = delay
    for spec in specs:
        spec.deps.sort()
    plan = Plan(specs, [hw.chips[0]], [0], {(0, 0): 0}, {}, ["dag"])
    rules = [priority] if priority is not None else list(PRIORITIES)
    runs = [list_schedule(plan, hw, rule)[0] for rule in rules]
    if priority is None:  # iterated list scheduling under a work budget: small problems get more tries
        tries = min(MAX_TRIES, TRY_BUDGET_TASKS // len(specs))
        runs += [list_schedule(plan, hw, "rank", perturb=seed)[0] for seed in range(tries)]
        starts = min(FB_STARTS, TRY_BUDGET_TASKS // (2 * FB_ROUNDS * len(specs)))
        seeds = sorted(range(len(runs)), key=lambda i: (_makespan(runs[i]), i))[:starts]
        runs += [r for i in seeds for r in justified(plan, hw, runs[i], FB_ROUNDS)]
    timed = min(runs, key=_makespan)  # the first on a tie: deterministic
    kind_of = {v: k for k, v in name.items()}
    placed = [timed[position[old]] for old in range(len(tasks))]
    return {"makespan": _makespan(timed),
            "tasks": {tid: {"start": x.start, "unit": kind_of[x.resource], "instance": x.instance}
                      for (tid, _, _), x in zip(tasks, placed)}}
