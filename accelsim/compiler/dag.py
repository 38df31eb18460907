"""The list scheduler on an abstract task DAG (problem dict -> schedule dict), so its core can be
tested and benchmarked against exact optima on its own. It is compile's code path (the search of
improve.py over ListScheduler runs), fed tasks that touch no memory, on a machine of one unit kind per
task kind."""
from __future__ import annotations

import heapq
from numbers import Integral
from typing import Any

from accelsim.errors import ScheduleError
from accelsim.hw.load import parse_hw
from accelsim.limits import DEFAULT_LIMITS
from accelsim.compiler.planning.tasks import Plan, TaskSpec
from accelsim.compiler.timing.improve import improve, makespan_of
from accelsim.compiler.timing.list_sched import list_schedule
from accelsim.schedule.plan import PER_STEP
from accelsim.compiler.timing.priorities import PRIORITIES

MAX_DURATION = 10**12
"""Largest duration or delay in cycles: an hour at a few hundred GHz, far past any step."""
MAX_UNITS_PER_KIND = 4096
MAX_KINDS = 256
MAX_INSTANCES = 16384
"""As the hardware schema's limits per chip: units per kind, unit kinds, and instances in all."""
MAX_MICROBATCH = DEFAULT_LIMITS.max_tasks
"""A micro-batch label names at most one micro-batch per task."""


def _int(value: Any, lo: int, hi: int, where: str) -> int:
    if not isinstance(value, Integral) or isinstance(value, bool) or not lo <= value <= hi:
        raise ScheduleError(f"schedule_dag: {where} must be an integer from {lo} to {hi}, got {value!r:.80}")
    return int(value)


def validate_dag_problem(problem: Any) -> None:
    """Raise ScheduleError naming the first key that breaks the problem's shape (see schedule_dag)."""
    _parse(problem)


def _parse(problem: Any) -> tuple[dict[str, int], list[tuple[str, str, int, int]], list[tuple[int, int, int]],
                                  list[int]]:
    """(units, tasks as (id, kind, duration, micro-batch or PER_STEP), deps as (task index, task index,
    delay), a topological order of the task indices); cycles refused."""
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
        if not isinstance(t, dict) or not {"id", "kind", "duration"} <= set(t) <= {"id", "kind", "duration",
                                                                                    "microbatch"}:
            raise ScheduleError(f"schedule_dag: tasks[{i}] must be a dict with id, kind and duration (and "
                                f"optionally microbatch), got {t!r:.80}")
        tid, kind = t["id"], t["kind"]
        if not isinstance(tid, str) or not tid:
            raise ScheduleError(f"schedule_dag: tasks[{i}].id must be a non-empty string, got {tid!r:.80}")
        if tid in index:
            raise ScheduleError(f"schedule_dag: tasks[{i}].id {tid!r:.80} is used twice")
        if not isinstance(kind, str) or kind not in units:
            raise ScheduleError(f"schedule_dag: tasks[{i}] ({tid!r:.40}) has kind {kind!r:.40}, which is not in "
                                f"units ({', '.join(map(repr, units))})"[:300])
        index[tid] = i
        microbatch = (_int(t["microbatch"], 0, MAX_MICROBATCH, f"tasks[{i}].microbatch") if "microbatch" in t
                      else PER_STEP)
        parsed.append((tid, kind, _int(t["duration"], 1, MAX_DURATION, f"tasks[{i}].duration"), microbatch))
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


def schedule_dag(problem: dict, priority: str | None = None) -> dict:
    """List-schedule an abstract DAG. `problem`: {"units": {kind: count}, "tasks": [{"id": str, "kind":
    str, "duration": int, "microbatch": int (optional)}], "deps": [[a, b, delay], ...]} with start(b) >=
    end(a) + delay (delay optional, default 0). A task's micro-batch only steers the micro-batch rules
    (priorities.py); a task without one belongs to the whole step, as a training step's update does.
    `priority`: one of PRIORITIES for that rule alone, or None for compile's search (improve.py: every
    rule, then improvement passes), keeping the shortest schedule.
    Returns {"makespan": int, "tasks": {id: {"start": int, "unit": kind, "instance": int}}}."""
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
        _, kind, duration, microbatch = tasks[old]
        specs.append(TaskSpec(id=new, kind="node", node=0, op="dag", phase="forward", microbatch=microbatch,
                              replica=0, stage=0, chip=0, out_chip=0, deps=[],
                              options=((name[kind], units[kind], duration),), out_bytes=0))
    for a, b, delay in sorted(edges):
        spec = specs[position[b]]
        spec.deps.append(position[a])
        if delay:
            spec.lag[position[a]] = delay
    for spec in specs:
        spec.deps.sort()
    plan = Plan(specs, [hw.chips[0]], [0], {(0, 0): 0}, {}, ["dag"])
    timed = (improve(plan, hw) if priority is None else list_schedule(plan, hw, priority))[0]
    kind_of = {v: k for k, v in name.items()}
    placed = [timed[position[old]] for old in range(len(tasks))]
    return {"makespan": makespan_of(timed),
            "tasks": {tid: {"start": x.start, "unit": kind_of[x.resource], "instance": x.instance}
                      for (tid, *_), x in zip(tasks, placed)}}
