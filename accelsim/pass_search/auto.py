"""`optimize(graph, "auto", hw=...)`: search sequences of rewrite passes, and where each applies, for the
shortest compiled makespan on the hardware, as TASO does for its substitutions (Graph, HwSpec -> Graph,
SearchLog).

A candidate is a sequence of steps, each a pass of PASSES that applies to the graph's kind, run
everywhere it matches or, for a sited pass, at some of its places (PassDef.sited). Its score is the
makespan of its graph compiled with the caller's step options (pass_search/score.py); ties go to less peak
memory, then fewer bytes moved, then fewer steps, then the candidate found first.

1. The floor, always evaluated in full: the unoptimized graph, each pass alone, and the default
   pipeline (every applicable pass in table order, each on the result of the last). The result is the
   best candidate ever scored, so by construction its makespan is never above the unoptimized graph's
   nor above the best of these rule-based pipelines.
2. Best-first search with relaxation (TASO's backtracking search): take the best unexpanded
   candidate; its children are each pass applied everywhere, then, for a sited pass with several
   places, at each place alone and (from three places on) at all places but one. A child joins the
   queue when its makespan is within RELAXATION of the best so far, so a step that costs a little now
   may enable a better one later. Candidates are keyed by graph hash: equal graphs reached by other
   sequences are neither compiled nor expanded twice.
3. The search stops when the queue is empty, when `budget` compiles have been spent (the floor counts
   towards them but is never cut short), or when the optional wall-clock `time_limit_s` has passed;
   the log says which. Everything but the time limit is deterministic: the same graph, hardware and
   options give the same sequence and log on any machine. A time-limited search may stop at another
   point on a faster or slower machine, and the log says so.

Every pass application goes through the pass manager's checks once (IR, outputs and the float64
numeric check against the original graph); the result is cached by (graph hash, pass, places).
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from numbers import Real
from typing import Callable, Iterator

from accelsim.errors import AccelsimError, GraphError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import AppliedPass
from accelsim.hw.spec import HwSpec
from accelsim.limits import Limits
from accelsim.passes import equivalence
from accelsim.passes.kind import graph_kind
from accelsim.passes.manager import PassRecord, apply_pass
from accelsim.pass_search.score import Score, StepEffect, change, score
from accelsim.passes.table import PASSES, PassDef
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import graph_hash

RELAXATION = 1.05
"""A child within this factor of the best makespan so far is still expanded (TASO's alpha)."""
DEFAULT_BUDGET = 32


@dataclass(frozen=True)
class SearchOptions:
    """How `auto` searches: at most `budget` compiles (an int >= 1), an optional wall-clock limit in
    seconds (None: none; a finite number > 0), the step options every candidate is compiled with, and the
    ceiling on one compiled step's tasks (`limits`; None: accelsim.limits.DEFAULT_LIMITS)."""

    budget: int = DEFAULT_BUDGET
    time_limit_s: float | None = None
    step: StepOptions = field(default_factory=StepOptions)
    limits: Limits | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.budget, int) or isinstance(self.budget, bool) or self.budget < 1:
            raise GraphError(f"optimize auto: budget must be an integer >= 1 (compiles), got {self.budget!r}")
        t = self.time_limit_s
        if t is not None and (not isinstance(t, Real) or isinstance(t, bool) or not math.isfinite(t) or t <= 0):
            raise GraphError(f"optimize auto: time_limit_s must be None or a finite number of seconds > 0, "
                             f"got {t!r}")
        if not isinstance(self.step, StepOptions):
            raise GraphError(f"optimize auto: step must be an accelsim StepOptions, got {type(self.step).__name__}")
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise GraphError(f"optimize auto: limits must be an accelsim.limits.Limits, got "
                             f"{type(self.limits).__name__}")


@dataclass(frozen=True)
class Candidate:
    """One distinct graph the search compiled: the steps that made it, where it came from ("baseline",
    "single", "pipeline" or "search"), and its score (None: it did not compile; `problem` says why)."""

    steps: tuple[AppliedPass, ...]
    origin: str
    score: Score | None
    problem: str = ""

    @property
    def label(self) -> str:
        return " > ".join(s.label for s in self.steps) or "unoptimized"

    def describe(self) -> str:
        """The label, saying which rule-based pipeline it is."""
        if self.origin == "single":
            return f"{self.label} alone"
        return f"default pipeline: {self.label}" if self.origin == "pipeline" else self.label


@dataclass(frozen=True)
class SearchLog:
    """What the search did: its budget and the compiles spent (`floor_compiles` of them on the floor),
    whether the time limit cut it short, every candidate compiled, in order, the best rule-based pipeline,
    and per chosen step its effect; `note` says why the result is the input unchanged, if it is."""

    budget: int
    compiles: int
    floor_compiles: int
    applications: int
    time_limit_s: float | None
    time_limited: bool
    candidates: tuple[Candidate, ...]
    best_pipeline: Candidate
    steps: tuple[StepEffect, ...]
    baseline: Score
    result: Score
    note: str

    def headline(self) -> str:
        """What the search spent: compiles of the budget, pass runs, candidates that did not compile."""
        failed = sum(c.score is None for c in self.candidates)
        return (f"{self.compiles} candidate graph(s) compiled of a budget of {self.budget} ({self.floor_compiles} "
                f"for the unoptimized graph and the rule-based pipelines), {self.applications} pass run(s)"
                + (f", {failed} candidate(s) did not compile" if failed else ""))

    def notes(self) -> list[str]:
        """Why the search stopped early or returned the input unchanged, if it did."""
        lines = []
        if self.time_limited:
            lines.append(f"the time limit of {self.time_limit_s:g} s cut the search short, so the result may depend "
                         "on this machine's speed")
        return lines + ([self.note] if self.note else [])

    def summary(self) -> str:
        lines = [self.headline(),
                 f"makespan unoptimized {self.baseline.makespan_cycles:,} cycles; best rule-based pipeline "
                 f"({self.best_pipeline.describe()}) {self.best_pipeline.score.makespan_cycles:,}; chosen "
                 f"{change(self.baseline.makespan_cycles, self.result.makespan_cycles, 'cycles')}"]
        lines += [f"step {k}: {e.summary()}" for k, e in enumerate(self.steps, 1)] + self.notes()
        return "\n".join(f"auto: {line}" for line in lines)

    def to_json(self) -> dict:
        return {"budget": self.budget, "compiles": self.compiles, "floor_compiles": self.floor_compiles,
                "applications": self.applications, "time_limit_s": self.time_limit_s,
                "time_limited": self.time_limited, "note": self.note,
                "baseline": self.baseline.to_json(), "result": self.result.to_json(),
                "best_pipeline": {"steps": self.best_pipeline.describe(),
                                  "score": self.best_pipeline.score.to_json()},
                "steps": [e.to_json() for e in self.steps],
                "candidates": [{"steps": c.label, "origin": c.origin, "problem": c.problem,
                                "score": c.score.to_json() if c.score else None} for c in self.candidates]}


@dataclass(eq=False)
class _State:
    """A candidate being searched: its graph and how it was made (parent: the candidate one step shorter)."""

    graph: Graph
    hash: str
    steps: tuple[AppliedPass, ...]
    records: tuple[PassRecord, ...]
    parent: _State | None
    candidate: Candidate
    index: int

    @property
    def key(self) -> tuple:
        s = self.candidate.score
        if s is None:
            return (math.inf, math.inf, math.inf, len(self.steps), self.index)
        return (s.makespan_cycles, s.peak_bytes, s.moved_bytes, len(self.steps), self.index)


class _Stop(Exception):
    """The budget or the time limit is spent: no more compiles."""


class _Search:
    """The caches and counters of one search: scored candidates by graph hash, pass applications by
    (graph hash, pass, places)."""

    def __init__(self, original: Graph, hw: HwSpec, ref: equivalence.Reference | None, limits: Limits,
                 options: SearchOptions, progress: Callable[[int, int], None] | None) -> None:
        self.original, self.hw, self.ref, self.limits, self.options = original, hw, ref, limits, options
        self.progress = progress
        self.states: dict[str, _State] = {}
        self.applied: dict[tuple[str, str, tuple[int, ...] | None], tuple[PassRecord, Graph]] = {}
        self.compiles = 0
        self.time_limited = False
        self.started = time.perf_counter()

    def _may_compile(self, floor: bool) -> None:
        if floor:
            return
        if self.compiles >= self.options.budget:
            raise _Stop
        limit = self.options.time_limit_s
        if limit is not None and time.perf_counter() - self.started > limit:
            self.time_limited = True
            raise _Stop

    def state(self, graph: Graph, steps: tuple[AppliedPass, ...], records: tuple[PassRecord, ...],
              parent: _State | None, origin: str, floor: bool) -> tuple[_State, bool]:
        """The candidate of `graph` (compiled unless an equal graph was) and whether it is new."""
        h = graph_hash(graph)
        if h in self.states:
            return self.states[h], False
        self._may_compile(floor)
        try:
            result, problem = score(graph, self.hw, self.options.step, self.options.limits), ""
        except AccelsimError as e:
            if parent is None:
                raise GraphError(f"optimize auto: the unoptimized graph {graph.name!r} does not compile on "
                                 f"{self.hw.name}, so there is no makespan to improve: {e}") from None
            result, problem = None, str(e)
        self.compiles += 1
        if self.progress is not None:
            self.progress(self.compiles, self.options.budget)
        s = _State(graph, h, steps, records, parent, Candidate(steps, origin, result, problem), len(self.states))
        self.states[h] = s
        return s, True

    def extend(self, s: _State, p: PassDef, only: tuple[int, ...] | None, origin: str,
               floor: bool = False) -> tuple[_State | None, PassRecord, bool]:
        """`s` with pass `p` applied (at `only`): the candidate (None where the pass did not apply), the
        pass's record, and whether the candidate is new (no equal graph was scored before)."""
        key = (s.hash, p.name, only)
        if key not in self.applied:
            self._may_compile(floor)  # verifying the application costs a little; a spent budget stops here
            self.applied[key] = apply_pass((p, only), self.original, s.graph, self.hw, self.ref, self.limits)
        record, graph = self.applied[key]
        if record.status != "applied":
            return None, record, False
        steps = s.steps + (AppliedPass(p.name, only),)
        child, new = self.state(graph, steps, s.records + (record,), s, origin, floor)
        return child, record, new

    def children(self, s: _State, passes: list[PassDef]) -> Iterator[_State]:
        """New candidates one step from `s`: each pass everywhere, then sited passes at fewer places."""
        sites: dict[str, tuple[int, ...]] = {}
        for p in passes:
            child, record, new = self.extend(s, p, None, "search")
            if p.sited and len(record.sites) > 1:
                sites[p.name] = record.sites
            if new:
                yield child
        for name, places in sites.items():
            subsets = [(i,) for i in places]
            if len(places) > 2:
                subsets += [tuple(j for j in places if j != i) for i in places]
            for only in subsets:
                child, _, new = self.extend(s, PASSES[name], only, "search")
                if new:
                    yield child


def _floor(search: _Search, root: _State, passes: list[PassDef]) -> list[Candidate]:
    """Score each pass alone and the default pipeline; the rule-based pipelines' candidates, in that order."""
    pipelines = []
    for p in passes:
        child, _, _ = search.extend(root, p, None, "single", floor=True)
        if child is not None:
            pipelines.append(child.candidate)
    current = root
    for p in passes:
        child, _, _ = search.extend(current, p, None, "pipeline", floor=True)
        current = child or current
    if current is not root:
        pipelines.append(Candidate(current.steps, "pipeline", current.candidate.score, current.candidate.problem))
    return pipelines


def _best(states: list[_State]) -> _State:
    return min((s for s in states if s.candidate.score is not None), key=lambda s: s.key)


def _effects(s: _State) -> tuple[StepEffect, ...]:
    chain = []
    while s.parent is not None:
        chain.append(StepEffect(s.steps[-1], len(s.records[-1].rewrites), s.parent.candidate.score, s.candidate.score))
        s = s.parent
    return tuple(reversed(chain))


def auto_search(graph: Graph, hw: HwSpec, ref: equivalence.Reference | None, limits: Limits,
                options: SearchOptions, progress: Callable[[int, int], None] | None = None
                ) -> tuple[Graph, list[PassRecord], SearchLog]:
    """The best graph found (`graph` itself when nothing beats it), the records of the passes that made
    it, and the search's log (see the module docstring). `ref`: the numeric check's reference (None:
    not checked); `limits`: its ceiling."""
    if not isinstance(options, SearchOptions):
        raise GraphError(f"optimize auto: search must be a pass_search.auto.SearchOptions, got {type(options).__name__}")
    search = _Search(graph, hw, ref, limits, options, progress)
    root, _ = search.state(graph, (), (), None, "baseline", floor=True)
    kind = graph_kind(graph)
    passes = [p for p in PASSES.values() if kind in p.applies_to and p.searched]
    pipelines = _floor(search, root, passes)
    floor_compiles = search.compiles
    best = _best(list(search.states.values()))
    # the root too: its children at fewer places of a sited pass are not in the floor
    queue = [(s.key, s) for s in search.states.values() if s.key[0] <= RELAXATION * best.key[0]]
    heapq.heapify(queue)
    try:
        while queue:
            _, s = heapq.heappop(queue)
            if s.key[0] > RELAXATION * best.key[0]:
                continue  # the best improved since it was queued
            for child in search.children(s, passes):
                if child.candidate.score is None:
                    continue
                if child.key[0] <= RELAXATION * best.key[0]:
                    heapq.heappush(queue, (child.key, child))
                best = min(best, child, key=lambda x: x.key)
    except _Stop:
        pass
    note = _note(graph, hw, kind, pipelines, best is root, floor_compiles, options.budget)
    valid = [c for c in pipelines if c.score is not None]
    best_pipeline = min(valid, key=lambda c: c.score.makespan_cycles) if valid else root.candidate
    log = SearchLog(options.budget, search.compiles, floor_compiles, len(search.applied), options.time_limit_s,
                    search.time_limited, tuple(s.candidate for s in search.states.values()), best_pipeline,
                    _effects(best), root.candidate.score, best.candidate.score, note)
    return best.graph, list(best.records), log


def _note(graph: Graph, hw: HwSpec, kind: str, pipelines: list[Candidate], unchanged: bool, floor_compiles: int,
          budget: int) -> str:
    """Why the result is the input unchanged, or that the budget went to the floor alone ("" otherwise)."""
    if not pipelines:
        return (f"no pass rewrites {kind} graph {graph.name!r} (or none whose result {hw.name} runs): "
                "returned unchanged")
    if unchanged:
        return f"no candidate's makespan beats the unoptimized graph's on {hw.name}: returned unchanged"
    if floor_compiles >= budget:
        return (f"the budget of {budget} compile(s) went to the unoptimized graph and the rule-based pipelines "
                f"({floor_compiles} compiles, always evaluated in full): no search beyond them")
    return ""
