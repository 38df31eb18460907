"""Which points a sweep evaluates: every combination (grid), seeded distinct draws (random), or Optuna
trials asked a batch at a time and told their results in ask order (optuna). Each search hands out
rounds of points (`ask`) and hears their records back (`tell`); the same spec gives the same points."""
from __future__ import annotations

import contextlib
import itertools
import math
import warnings
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from accelsim.errors import SweepError
from accelsim.dse.checks import constraints, objectives
from accelsim.dse.deps import require
from accelsim.dse.params import Parameter, parameters
from accelsim.dse.spec import SweepSpec

DRAW_BATCH = 1024
MAX_DRAWS_PER_POINT = 100


@dataclass(frozen=True)
class Point:
    """One point: its place in generation order and its value per parameter key."""

    index: int
    params: dict[str, Any]


def grid_points(params: list[Parameter]) -> list[Point]:
    """The cartesian product in the order the parameters are listed, the last varying fastest."""
    combos = itertools.product(*(p.values for p in params))
    return [Point(i, {p.key: v for p, v in zip(params, combo)}) for i, combo in enumerate(combos)]


def _draw(p: Parameter, rng: np.random.Generator, n: int) -> list[Any]:
    """`n` seeded draws of one parameter: uniform over a list or a stepped range, uniform or
    log-uniform over a continuous one."""
    if p.values is not None:
        return [p.values[i] for i in rng.integers(0, len(p.values), size=n)]
    r = p.range
    if r.step is not None or (r.integer and not r.log):
        step = r.step if r.step is not None else 1
        ks = rng.integers(0, int(r.count()), size=n)
        return [int(r.low + k * step) if r.integer else float(r.low + k * step) for k in ks]
    if r.log:
        top = r.high + 1 if r.integer else r.high
        xs = np.exp(rng.uniform(math.log(r.low), math.log(top), size=n))
    else:
        xs = rng.uniform(r.low, r.high, size=n)
    if r.integer:
        return [int(min(max(math.floor(x), r.low), r.high)) for x in xs]
    return [float(min(max(x, r.low), r.high)) for x in xs]


def random_points(params: list[Parameter], count: int, seed: int) -> list[Point]:
    """`count` distinct points drawn with numpy's Generator seeded by `seed`, in draw order (the spec
    check guarantees a finite space holds at least `count`)."""
    rng = np.random.default_rng(seed)
    seen: set[tuple[Any, ...]] = set()
    out: list[Point] = []
    for _ in range(MAX_DRAWS_PER_POINT * count // DRAW_BATCH + 1):
        columns = [_draw(p, rng, DRAW_BATCH) for p in params]
        for combo in zip(*columns):
            if combo not in seen:
                seen.add(combo)
                out.append(Point(len(out), {p.key: v for p, v in zip(params, combo)}))
                if len(out) == count:
                    return out
    raise SweepError(f"drew {MAX_DRAWS_PER_POINT * count:,} random points and found only {len(out)} distinct ones "
                     f"of the {count} asked; ask fewer points or widen the parameters")


class FixedSearch:
    """Grid and random searches: every point is known up front, so there is one round."""

    def __init__(self, points: list[Point]) -> None:
        self.total = len(points)
        self._pending = points

    def ask(self) -> list[Point]:
        points, self._pending = self._pending, []
        return points

    def tell(self, points: list[Point], records: list[dict[str, Any]]) -> None:
        pass


@contextlib.contextmanager
def _quiet(optuna: Any) -> Iterator[None]:
    """Optuna without its per-trial log lines and experimental-feature warnings, restored after."""
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(level)


class OptunaSearch:
    """An Optuna study asked `batch` trials per round and told their results in ask order, so the
    points depend on the seed and the batch, never on how many workers ran them. A rerun replays the
    same asks: the runner reads stored points instead of evaluating them."""

    def __init__(self, spec: SweepSpec) -> None:
        self._optuna = optuna = require("optuna", "sweep")
        self._params = parameters(spec)
        self._constraints = constraints(spec)
        self._objectives = objectives(spec)
        self._batch, self.total = spec.search.batch, spec.search.points
        samplers = {"nsga2": optuna.samplers.NSGAIISampler, "tpe": optuna.samplers.TPESampler,
                    "random": optuna.samplers.RandomSampler}
        with _quiet(optuna):
            sampler = samplers[spec.search.sampler](seed=spec.search.seed)
            self._study = optuna.create_study(
                directions=["maximize" if d == "max" else "minimize" for d in self._objectives.values()],
                sampler=sampler)
        self._distributions = {p.key: self._distribution(p) for p in self._params}
        self._asked: list[Any] = []

    def _distribution(self, p: Parameter) -> Any:
        d = self._optuna.distributions
        if p.values is not None:
            return d.CategoricalDistribution(p.values)
        r = p.range
        if r.integer:
            return d.IntDistribution(int(r.low), int(r.high), log=r.log, step=int(r.step or 1))
        return d.FloatDistribution(float(r.low), float(r.high), log=r.log,
                                   step=None if r.step is None else float(r.step))

    def ask(self) -> list[Point]:
        n = min(self._batch, self.total - len(self._study.trials))
        with _quiet(self._optuna):
            self._asked = [self._study.ask(self._distributions) for _ in range(max(n, 0))]
        return [Point(t.number, {p.key: t.params[p.key] for p in self._params}) for t in self._asked]

    def tell(self, points: list[Point], records: list[dict[str, Any]]) -> None:
        """Tell each trial its objectives and constraint violations (NSGA-II and TPE rank infeasible
        trials below feasible ones), or FAIL for a failed point or a non-finite objective."""
        state = self._optuna.trial.TrialState
        with _quiet(self._optuna):
            for trial, record in zip(self._asked, records):
                values = [record["metrics"][m] for m in self._objectives]
                if record["error"] or not all(math.isfinite(v) for v in values):
                    self._study.tell(trial, state=state.FAIL)
                    continue
                for i, c in enumerate(self._constraints):
                    trial.set_constraint(f"{i}: {c.text}", c.violation(record["metrics"], record["fits"]))
                self._study.tell(trial, values)
        self._asked = []


def make_search(spec: SweepSpec) -> FixedSearch | OptunaSearch:
    params = parameters(spec)
    if spec.search.method == "grid":
        return FixedSearch(grid_points(params))
    if spec.search.method == "random":
        return FixedSearch(random_points(params, spec.search.points, spec.search.seed))
    return OptunaSearch(spec)
