"""Priority rules of the list scheduler: one record per rule (tasks -> a sort key per task, lowest first).

No single rule wins everywhere: the upward rank (HEFT) favours the longest path but ignores which unit is
the bottleneck and lets micro-batches move in lockstep; micro-batch-first fills a pipeline in order but
starves a shared unit. The search (improve.py) runs every rule and keeps the shortest schedule.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from accelsim.compiler.planning.tasks import TaskSpec
from accelsim.schedule.plan import PER_STEP

Key = tuple[float, float, float, int]
"""(class, -score, -upward rank, task id): a class is taken before any later one (micro-batch-first), then
the higher score, then the longer path; the id breaks the remaining ties, so a run is deterministic."""

FIRST_CLASS = -1
"""The class of a gradient accumulation in a memory-lean run (`accumulations_first`): taken as soon as it is
ready. Its upward rank is short (only later micro-batches' accumulations and the update follow it), so by
score it waits behind every later micro-batch's forward and backward work, and the list scheduler frees a
tensor only once its last reader is taken: each micro-batch's weight gradients stay placed until then.
ResNet-50 training on groq_like with 16 micro-batches held four micro-batches' gradients (4 x 25.6 MB of
its 220 MiB) that way, every rule but micro-batch-first ran out of memory, and throughput fell below that
of 8 micro-batches (issue 27). An accumulation frees a gradient, so taking it early never costs memory; it
can cost time (it takes the vector unit before critical work), so only the rescue of a large plan whose
rules did not fit runs this way (improve.py)."""

PERTURB_SPREAD = 0.2
"""Iterated list scheduling scales each task's score by a factor drawn from [1 - spread, 1 + spread)."""
STAGGER_BEATS = 0.5
"""Micro-batches' offset in the staggered rule. With a whole beat the last of M micro-batches starts M - 1
beats late and its whole chain follows; on the benchmark's training steps half a beat, beside the plain
rank, left the least to the search (a quarter and a whole beat were each worse on average)."""


def longest_paths(tasks: list[TaskSpec], weight: list[float]) -> list[float]:
    """path[t] = weight[t] + max over successors s of (lag t->s + path[s]): the heaviest chain from t's
    start to the end of the step (ids are a topological order)."""
    path = list(weight)
    best_succ = [0.0] * len(tasks)
    for t in reversed(tasks):
        path[t.id] += best_succ[t.id]
        for d in t.preds:
            best_succ[d] = max(best_succ[d], path[t.id] + t.lag.get(d, 0))
    return path


def cheapest_cycles(t: TaskSpec) -> int:
    return min(c for _, _, c in t.options)


def upward_ranks(tasks: list[TaskSpec]) -> list[int]:
    """rank[t]: the longest remaining path from t's start to the end of the step, each task at its cheapest
    cost and each dependence with its lag (cycles)."""
    return [int(r) for r in longest_paths(tasks, [cheapest_cycles(t) for t in tasks])]


def _home(t: TaskSpec) -> tuple[int, str, int]:
    """The resource of a task's cheapest option as (chip, resource, instances); a link is per destination."""
    resource, instances, _ = min(t.options, key=lambda o: (o[2], o[0]))
    return t.chip, resource if resource != "link" else f"link>{t.out_chip}", instances


def resource_loads(tasks: list[TaskSpec], microbatch: int | None = None) -> dict[tuple[int, str], float]:
    """Cycles per instance each resource must work, every task at its cheapest option (only the tasks of
    `microbatch` when given)."""
    work: dict[tuple[int, str], float] = defaultdict(float)
    for t in tasks:
        if microbatch is None or t.microbatch == microbatch:
            chip, resource, instances = _home(t)
            work[(chip, resource)] += cheapest_cycles(t) / instances
    return work


@dataclass(frozen=True)
class Inputs:
    """What every rule may read: the tasks and their upward ranks (cycles)."""

    tasks: list[TaskSpec]
    rank: list[int]


def _rank(x: Inputs) -> list[float]:
    return [float(r) for r in x.rank]


def _tail(x: Inputs) -> list[float]:
    """Rank less the task's own cost: the path after it ends. A long task that feeds nothing no longer
    outranks a short one whose successors are still to run."""
    return [float(r - cheapest_cycles(t)) for t, r in zip(x.tasks, x.rank)]


def _bottleneck(x: Inputs) -> list[float]:
    """A path length in which each task weighs its cost times its resource's load relative to the busiest
    resource: work queued for the bottleneck counts in full, work on idle units hardly at all, so the
    busiest unit is fed first (the upward rank treats every unit as free)."""
    loads = resource_loads(x.tasks)
    busiest = max(loads.values(), default=0.0) or 1.0
    weight = [cheapest_cycles(t) * loads[_home(t)[:2]] / busiest for t in x.tasks]
    return longest_paths(x.tasks, weight)


def _microbatch_class(t: TaskSpec, n_tasks: int) -> int:
    return t.microbatch if t.microbatch != PER_STEP else n_tasks  # per-step work (updates) after every batch


def _staggered(x: Inputs) -> list[float]:
    """Rank less micro-batch m times STAGGER_BEATS beats, a beat being the busiest resource's work per
    micro-batch: micro-batch m is ranked as if it started that much later, so micro-batches enter the
    bottleneck one after another instead of all at once (as under the rank) or strictly in turn
    (micro-batch-first)."""
    microbatches = sorted({t.microbatch for t in x.tasks if t.microbatch != PER_STEP})
    if len(microbatches) < 2:
        return _rank(x)
    beat = max(max(resource_loads(x.tasks, m).values(), default=0.0) for m in microbatches)
    offset = {m: i * STAGGER_BEATS * beat for i, m in enumerate(microbatches)}
    return [r - offset.get(t.microbatch, 0.0) for t, r in zip(x.tasks, x.rank)]


@dataclass(frozen=True)
class PriorityRule:
    """A rule ranks ready tasks by class (lowest first), then score (highest first). `score` is what
    perturbation scales."""

    name: str
    score: Callable[[Inputs], list[float]]
    by_microbatch: bool = False  # the class is the micro-batch: earlier micro-batches first


RULES: dict[str, PriorityRule] = {r.name: r for r in (
    PriorityRule("microbatch", _rank, by_microbatch=True),
    PriorityRule("rank", _rank),
    PriorityRule("tail", _tail),
    PriorityRule("bottleneck", _bottleneck),
    PriorityRule("stagger", _staggered),
)}
PRIORITIES = tuple(RULES)
"""Every rule, in the order the search tries them; on equal makespans the earlier rule's schedule is kept."""


def priority_keys(rule: PriorityRule, tasks: list[TaskSpec], rank: list[int], perturb: int | None = None,
                  classes: list[int] | None = None, accumulations_first: bool = False) -> list[Key]:
    """Each task's sort key under `rule` (lowest first). `perturb`: a seed; each score is scaled by a factor
    drawn from it (iterated list scheduling), the class is kept. `classes`: a class per task that replaces
    the rule's (a pipeline schedule's order, pipeline_order.py). `accumulations_first`: gradient
    accumulations in FIRST_CLASS (a memory-lean run)."""
    score = rule.score(Inputs(tasks, rank))
    if perturb is not None:
        scale = np.random.default_rng(perturb).uniform(1 - PERTURB_SPREAD, 1 + PERTURB_SPREAD, len(tasks))
        score = [float(s * f) for s, f in zip(score, scale)]
    n = len(tasks)
    def task_class(t: TaskSpec) -> int:
        if accumulations_first and t.kind == "accumulate":
            return FIRST_CLASS
        if classes is not None:
            return classes[t.id]
        return _microbatch_class(t, n) if rule.by_microbatch else 0

    return [(task_class(t), -score[t.id], -rank[t.id], t.id) for t in tasks]
