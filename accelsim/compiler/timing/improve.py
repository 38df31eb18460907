"""The search over list schedules of one Plan (Plan, HwSpec -> the shortest timed run found): every priority
rule, forward-backward improvement of the best, then iterated list scheduling that perturbs the best order
found, all under a budget of task-schedulings rather than wall time, so the same inputs give the same
schedule on every machine. compile (search.time_plan) and schedule_dag both call `improve`: one scheduler,
benchmarked against exact optima as it runs (experiments/bench_scheduler.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelsim.errors import MemoryFitError
from accelsim.hw.spec import HwSpec
from accelsim.compiler.timing.bounds import lower_bounds
from accelsim.compiler.planning.tasks import Plan
from accelsim.compiler.timing.list_sched import Timed, list_schedule
from accelsim.compiler.timing.memory_planner import MemoryPlanner
from accelsim.compiler.timing.pipeline_order import PipelineOrder
from accelsim.compiler.timing.priorities import PRIORITIES, RULES, cheapest_cycles, priority_keys, upward_ranks

Run = tuple[list[Timed], MemoryPlanner]

ALWAYS = ("microbatch", "rank")
"""Rules run whatever the budget: the search never returns worse than these two alone did."""
RESCUE = ("stagger", "tail", "bottleneck")
"""On a plan too large for every rule: the rules tried, in order, while an ALWAYS rule's tensors did not
fit and fewer than two rules' did."""


@dataclass(frozen=True)
class Budget:
    """How much searching one plan gets, counted in task-schedulings (a run of n tasks costs n) so that a
    result never depends on the machine's speed. A plan of 30 tasks gets hundreds of runs; GPT-2 small's
    training step (1,478 tasks, ~0.25 s a run) gets its four distinct rules and one forward-backward pass,
    and its compile stays under 2 s (experiments/bench_compile.py); a plan of over 3,333 tasks gets the
    two ALWAYS rules, as before the search existed. On the scheduler benchmark 8,000 left a problem at
    1.051x its optimum where 10,000 kept every one within 1.04x (200 problems, five seeds)."""

    work_tasks: int = 10_000
    max_runs: int = 300  # tiny plans: past a few hundred runs the search rarely improves
    fb_rounds: int = 6  # forward-backward passes from one start; it stops at the first that does not improve
    fb_starts: int = 2  # distinct rule schedules improved by forward-backward before the perturbed search
    noise_tasks: float = 1.0  # perturbation: start times + normal noise of this many mean task durations
    seed: int = 0
    patience_tasks: int = 5_000  # stop once this much work found no shorter schedule
    gap_stop: float = 0.0  # a schedule within this fraction above the plan's lower bound ends the search
    # stop once this many perturbed runs in a row gave back the incumbent's start times: on the scheduler
    # benchmark (200 problems) stopping at 12 lost one improvement, at 16 none; 20 saves 385 of 28,176 runs
    stale_runs: int = 20

    def scaled(self, factor: int) -> "Budget":
        """The same search with `factor` times the work, runs and patience (effort=thorough)."""
        return replace(self, work_tasks=self.work_tasks * factor, max_runs=self.max_runs * factor,
                       patience_tasks=self.patience_tasks * factor, stale_runs=self.stale_runs * factor)


BUDGET = Budget()


def makespan_of(timed: list[Timed]) -> int:
    return max((x.end for x in timed), default=0)


def reversed_plan(plan: Plan) -> Plan:
    """Every dependence and ordering edge reversed with its lag, ids mirrored so they stay a topological
    order: a schedule of it read backwards in time is a schedule of the original (a collective's members
    still start and end together). It holds no memory and streams through no port (out_bytes, reads and
    port_bytes zeroed): the backward pass only yields an order; the forward pass that follows places
    the tensors and books the ports."""
    n = len(plan.tasks)
    specs = [replace(t, id=n - 1 - t.id, deps=[], after=[], lag={}, reads=[], out_bytes=0, port_bytes=0,
                     keep=False) for t in reversed(plan.tasks)]
    for t in plan.tasks:
        for d, edges in [(d, "deps") for d in t.deps] + [(a, "after") for a in t.after]:
            r = specs[n - 1 - d]
            getattr(r, edges).append(n - 1 - t.id)
            if t.lag.get(d):
                r.lag[n - 1 - t.id] = max(r.lag.get(n - 1 - t.id, 0), t.lag[d])
    for r in specs:
        r.deps.sort()
        r.after.sort()
    return replace(plan, tasks=specs, leaf_bytes={})


class _Search:
    """Runs list schedules, keeps the shortest (the first on a tie) and counts the work spent. A run whose
    tensors do not fit (MemoryFitError) is skipped; the first such error is raised only if none fits."""

    def __init__(self, plan: Plan, hw: HwSpec, budget: Budget, classes: list[int] | None = None) -> None:
        self.plan, self.hw, self.budget = plan, hw, budget
        # a pipeline schedule's classes (pipeline_order.py) bind every run; the reversed plan's run backwards
        self.classes = classes
        self.back_classes = None if classes is None else [-c for c in reversed(classes)]
        self.n = max(len(plan.tasks), 1)
        self.spent = self.runs = 0
        self.best: Run | None = None
        self.improved_at = 0  # work spent when the best was last improved
        self.error: MemoryFitError | None = None
        self.target = -1.0  # a best at or below this many cycles ends the search (set by improve)
        self.accumulates = any(t.kind == "accumulate" for t in plan.tasks)

    def affordable(self, runs: int = 1) -> bool:
        return self.spent + runs * self.n <= self.budget.work_tasks and self.runs + runs <= self.budget.max_runs

    def near_bound(self) -> bool:
        """The best schedule is within budget.gap_stop of the lower bound: little is left to find."""
        return self.best is not None and makespan_of(self.best[0]) <= self.target

    def run(self, plan: Plan, priority: str = "rank", order: list[float] | None = None,
            forward: bool = True, lean: bool = False) -> Run | None:
        """One list schedule of `plan` (the reversed plan when not `forward`: never kept as a result);
        `lean`: gradient accumulations first (priorities.FIRST_CLASS)."""
        self.spent += self.n
        self.runs += 1
        try:
            result = list_schedule(plan, self.hw, priority, order=order,
                                   classes=self.classes if forward else self.back_classes, accumulations_first=lean)
        except MemoryFitError as exc:
            self.error = self.error or exc
            return None
        if forward and (self.best is None or makespan_of(result[0]) < makespan_of(self.best[0])):
            self.best = result
            self.improved_at = self.spent
        return result

    def result(self) -> Run:
        if self.best is None:
            assert self.error is not None, "a search that ran nothing"
            raise self.error
        return self.best


def distinct_rules(plan: Plan, classes: list[int] | None = None) -> list[str]:
    """The rules in PRIORITIES order, less those that order the tasks exactly as an earlier one does (with
    one micro-batch the staggered rule is the rank): the same order gives the same schedule."""
    rank = upward_ranks(plan.tasks)
    seen, out = set(), []
    for name in PRIORITIES:
        keys = priority_keys(RULES[name], plan.tasks, rank, classes=classes)
        order = tuple(sorted(range(len(keys)), key=keys.__getitem__))
        if order not in seen:
            seen.add(order)
            out.append(name)
    return out


def forward_backward(search: _Search, back: Plan, start: Run) -> Run:
    """Forward-backward improvement (justification): schedule the reversed plan taking the tasks that
    finish last first, read it backwards, then schedule forwards again taking the earliest starts first;
    each pass shifts work towards one end and closes idle gaps a single pass leaves. Repeats while it
    improves, up to budget.fb_rounds passes; returns the best of `start` and the passes."""
    n = len(search.plan.tasks)
    best = start
    for _ in range(search.budget.fb_rounds):
        if not search.affordable(2) or search.near_bound():
            break
        finish = [-float(x.end) for x in best[0]]
        rev = search.run(back, order=[finish[n - 1 - j] for j in range(n)], forward=False)
        if rev is None:
            break
        horizon = makespan_of(rev[0])
        nxt = search.run(search.plan, order=[float(horizon - rev[0][n - 1 - i].end) for i in range(n)])
        if nxt is None or makespan_of(nxt[0]) >= makespan_of(best[0]):
            break
        best = nxt
    return best


def improve(plan: Plan, hw: HwSpec, budget: Budget = BUDGET, pipeline: PipelineOrder | None = None) -> Run:
    """The shortest list schedule found for `plan`, the first found on a tie (see the module docstring).

    1. Every distinct priority rule (ALWAYS first, the others while the budget lasts). On a large plan,
       the RESCUE rules while fewer than two fit, then the rules that did not fit again memory-lean
       (accumulations first, priorities.FIRST_CLASS) while fewer than two fit.
    2. Forward-backward improvement of the fb_starts best rule schedules.
    3. Until the budget is spent: the best schedule's start times plus random noise as a new priority
       order, a forward run, forward-backward passes; the result replaces the incumbent when no longer, so
       the search drifts across plateaus of equal makespan. It stops early after budget.patience_tasks of
       work without a shorter schedule, or budget.stale_runs runs in a row that gave back the incumbent's
       very start times (the noise no longer moves anything).
    After the ALWAYS rules, a best schedule within budget.gap_stop of the lower bound ends the search.
    `pipeline`: every run takes each pipeline chip's work items in that schedule's order (pipeline_order.py).
    """
    search = _Search(plan, hw, budget, None if pipeline is None else pipeline.classes(plan))
    # comparing the rules' orders costs a few sorts: on a plan too large for a third run, skip it; there
    # the other rules run only to rescue a step whose tensors did not fit under an ALWAYS rule (the rank
    # rules start every micro-batch's forward pass before any backward frees memory; RESCUE staggers them)
    large = not search.affordable(len(ALWAYS) + 1)
    rules = list(ALWAYS) + [r for r in RESCUE if r not in ALWAYS] if large else distinct_rules(plan, search.classes)
    if not large:  # only ALWAYS rules run on a large plan: the bound could stop nothing there
        search.target = lower_bounds(plan, hw).bound_cycles * (1 + budget.gap_stop)
    found: list[tuple[int, int, Run]] = []
    failed: list[str] = []
    for i, name in enumerate(rules):
        rescue = large and search.error is not None and len(found) < len(ALWAYS)
        if name in ALWAYS or (search.affordable() and not search.near_bound()) or rescue:
            run = search.run(plan, name)
            if run is not None:
                found.append((makespan_of(run[0]), i, run))
            else:
                failed.append(name)
    if large and search.accumulates:  # the rescue goes on memory-lean: accumulations free gradients first
        for name in failed:
            if len(found) >= len(ALWAYS):
                break
            run = search.run(plan, name, lean=True)
            if run is not None:
                found.append((makespan_of(run[0]), len(rules), run))
    search.result()  # raises when no rule's tensors fit: neither would a perturbation's
    if not search.affordable(2) or search.near_bound():
        return search.result()
    back = reversed_plan(plan)
    for _, _, run in sorted(found, key=lambda f: f[:2])[:budget.fb_starts]:
        forward_backward(search, back, run)
    incumbent = search.best
    if not search.affordable(3):
        return search.result()
    rng = np.random.default_rng(budget.seed)
    sigma = budget.noise_tasks * sum(cheapest_cycles(t) for t in plan.tasks) / search.n
    stale = 0  # perturbed runs in a row that returned the incumbent's own start times
    while (search.affordable(3) and not search.near_bound() and stale < budget.stale_runs
           and search.spent - search.improved_at < budget.patience_tasks):
        order = [x.start + sigma * z for x, z in zip(incumbent[0], rng.standard_normal(len(plan.tasks)))]
        run = search.run(plan, order=[float(k) for k in order])
        if run is None:
            continue
        run = forward_backward(search, back, run)
        same = all(a.start == b.start for a, b in zip(run[0], incumbent[0]))
        stale = stale + 1 if same else 0
        if makespan_of(run[0]) <= makespan_of(incumbent[0]):
            incumbent = run
    return search.result()
