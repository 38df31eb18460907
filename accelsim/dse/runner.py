"""`sweep(spec)`: a sweep spec -> the results table, with every finished point saved as it finishes
(resumable after kill -9), points run in this process, a process pool or a Dask cluster, and the
Pareto and timeline plots at the end."""
from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from accelsim.errors import SweepError
from accelsim.dse.checks import constraints, metric_columns, objectives
from accelsim.dse.deps import require
from accelsim.dse.evaluate import compile_point, spec_payload
from accelsim.dse.executors import check_dask_address, check_workers, make_executor
from accelsim.dse.load import load_spec
from accelsim.dse.params import parameters
from accelsim.dse.search import Point, make_search
from accelsim.dse.spec import SweepSpec
from accelsim.dse.store import PointStore, point_ids
from accelsim.dse.table import feasible, results_table

RESULTS_EVERY_S = 5.0
"""How often results.parquet is rewritten while points finish (and once at the end)."""
MAX_STORE_NOTES = 20
"""Stored points evaluated again are named one a line up to this many, then counted (an accelsim upgrade
makes every stored point stale at once)."""


@dataclass(frozen=True)
class Estimate:
    """How long the rest of a sweep should take, measured on its first evaluated points: `points` still to
    evaluate (those not asked yet counted as new), the median `seconds_per_point` of the `measured` ones
    (each point's own wall time in its worker, so starting the workers is not counted), over `workers`."""

    sweep: str
    points: int
    measured: int
    seconds_per_point: float
    workers: int

    @property
    def seconds(self) -> float:
        return self.points * self.seconds_per_point / self.workers


Confirm = Callable[[Estimate], None]
"""Called once with the estimate after the first points finished; raises (a SweepError) to stop there."""


@dataclass
class SweepRun:
    """What one run of a sweep did: the results, how many rows were evaluated now (`new`) or taken
    from earlier results (`reused`: the store, or an identical earlier point), how many failed or
    missed a constraint, and what it wrote."""

    spec: SweepSpec
    results: Any  # pandas.DataFrame
    new: int = 0
    reused: int = 0
    failed: int = 0
    infeasible: int = 0
    results_path: Path | None = None
    plots: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class _Progress:
    """A rich progress bar on stderr (M/N, elapsed, ETA), or nothing."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                             console=Console(stderr=True), disable=not enabled)
        self._task = self._bar.add_task(label, total=total)

    def __enter__(self) -> "_Progress":
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def advance(self, n: int) -> None:
        self._bar.advance(self._task, n)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The bar off the terminal while something else writes or asks there."""
        self._bar.stop()
        try:
            yield
        finally:
            self._bar.start()


class _Run:
    """The state of one run: the rows generated so far, the records known, and what to write."""

    def __init__(self, spec: SweepSpec, store: PointStore | None, workers: int = 1,
                 confirm: Confirm | None = None) -> None:
        self.spec, self.store = spec, store
        self.rows: list[tuple[int, str]] = []  # (point index, point id) in generation order
        self.records: dict[str, dict[str, Any]] = {}
        self.evaluated: set[str] = set()
        self.untrusted: dict[str, str] = {}  # point id -> why its stored file was not used
        self.workers, self.confirm = workers, confirm
        self._total = 0  # the search's points, set as it starts
        self._written = time.monotonic()

    def known(self, pid: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if pid not in self.records and pid not in self.untrusted and self.store is not None:
            stored = self.store.load(pid, params)
            if stored.record is not None:
                self.records[pid] = stored.record
            elif stored.problem is not None:
                self.untrusted[pid] = stored.problem
        return self.records.get(pid)

    def finished(self, pid: str, record: dict[str, Any]) -> None:
        if self.store is not None:
            self.store.save(pid, record)
        self.records[pid] = record
        self.evaluated.add(pid)
        if time.monotonic() - self._written > RESULTS_EVERY_S:
            self.write()

    def table(self) -> Any:
        return results_table(self.spec, self.rows, self.records)

    def write(self) -> None:
        if self.store is not None:
            self.store.save_results(self.table())
        self._written = time.monotonic()

    def execute(self, search: Any, executor: Any, progress: bool) -> None:
        """Every round of the search: stored points are read, the others evaluated, each id once; on
        any failure (Ctrl-C included) the results of what finished are still written."""
        if self.store is not None:
            self.store.save_spec(self.spec._text)
        payload = spec_payload(self.spec)
        self._total = search.total
        try:
            with _Progress(progress, search.total, self.spec.name) as bar:
                while points := search.ask():
                    pids = self._round(points, executor, payload, bar)
                    search.tell(points, [self.records[pid] for pid in pids])
        except BaseException:
            if self.records:
                with contextlib.suppress(SweepError):  # the points are on disk already; the table is a courtesy
                    self.write()
            raise
        self.write()

    def _round(self, points: list[Point], executor: Any, payload: dict[str, Any], bar: _Progress) -> list[str]:
        """Evaluate the points of one round that no record answers; returns their ids."""
        pids = point_ids(self.spec, [p.params for p in points])
        self.rows += [(p.index, pid) for p, pid in zip(points, pids)]
        todo: dict[str, dict[str, Any]] = {}
        for p, pid in zip(points, pids):
            if self.known(pid, p.params) is None:
                todo.setdefault(pid, p.params)
        rows_of = Counter(pids)
        bar.advance(sum(n for pid, n in rows_of.items() if pid not in todo))
        for done, (pid, record) in enumerate(executor.run(payload, list(todo.items())), 1):
            self.finished(pid, record)
            bar.advance(rows_of[pid])
            self._estimate(len(todo) - done, bar)
        return pids

    def _estimate(self, left_in_round: int, bar: _Progress) -> None:
        """Once the first points of the sweep (one per worker, at least two) have finished and others
        remain, hand `confirm` the estimate of the rest: it may stop the sweep there."""
        probe = max(2, self.workers)
        if self.confirm is None or len(self.evaluated) != probe:
            return
        left = left_in_round + self._total - len(self.rows)  # points not asked yet counted as new ones
        if left <= 0:
            return
        confirm, self.confirm = self.confirm, None
        per_point = statistics.median(self.records[pid]["wall_s"] for pid in self.evaluated)
        with bar.paused():
            confirm(Estimate(self.spec.name, left, probe, per_point, self.workers))

    def summary(self) -> SweepRun:
        """The results and the counts: a row is new when it is the first with its id evaluated now."""
        result = SweepRun(spec=self.spec, results=self.table().to_pandas(),
                          results_path=self.store.results_path if self.store is not None else None)
        seen: set[str] = set()
        cons = constraints(self.spec)
        for _, pid in sorted(self.rows):
            record = self.records[pid]
            now = pid in self.evaluated and pid not in seen
            seen.add(pid)
            result.new += now
            result.reused += not now
            result.failed += bool(record["error"])
            result.infeasible += not record["error"] and not feasible(record, cons)
        result.notes += self._untrusted_notes()
        return result

    def _untrusted_notes(self) -> list[str]:
        """A line per stored point evaluated again because its file failed a check, naming the point
        and why (the first MAX_STORE_NOTES, then how many more)."""
        if self.store is None or not self.untrusted:
            return []
        index: dict[str, int] = {}  # point id -> its first point
        for i, pid in sorted(self.rows):
            index.setdefault(pid, i)
        notes = [f"point {index[pid]} evaluated again: its file {self.store.points_dir / f'{pid}.json'} {why}"
                 for pid, why in sorted(self.untrusted.items(), key=lambda item: index[item[0]])]
        more = len(notes) - MAX_STORE_NOTES
        if more > 0:
            notes = notes[:MAX_STORE_NOTES] + [f"{more:,} more stored points evaluated again, their files too "
                                               f"failing a check"]
        return notes


def _plots(spec: SweepSpec, results: Any, out: Path, progress: bool = False) -> list[Path]:
    """The sweep's figures (dse/plots.py), imported here: matplotlib and pandas load only for plots. With
    `progress`, a spinner line on stderr names the figure being drawn ("drawing plots (3 done): timeline of
    point #7"): the Pareto points' timelines are compiled and simulated again, which took a minute of silence."""
    from rich.console import Console

    from accelsim.dse.plots import sweep_plots

    console = Console(stderr=True)
    with contextlib.ExitStack() as stack:
        on_figure = None
        if progress and console.is_terminal:
            status = stack.enter_context(console.status("drawing plots"))
            done = [0]

            def on_figure(name: str) -> None:
                status.update(f"drawing plots ({done[0]} done): {name}")
                done[0] += 1
        return list(sweep_plots(results, out / "plots", parameters=[p.key for p in parameters(spec)],
                                metrics=metric_columns(spec), objectives=objectives(spec),
                                compile_point=lambda params: compile_point(spec, params), label=spec.name,
                                on_figure=on_figure))


def run_sweep(spec_or_path: str | Path | dict[str, Any] | SweepSpec, out: str | Path | None = None, workers: int = 1,
              dask: str | None = None, progress: bool = False, plots: bool = False,
              confirm: Confirm | None = None) -> SweepRun:
    """Load and check the spec (a YAML file, a dict of its keys or a SweepSpec), evaluate its points (`workers` processes, or a Dask cluster: "local" or
    "tcp://HOST:PORT"), and return what happened. With `out`, every finished point is saved under
    out/points as it finishes, a rerun reuses them (a stored point whose file fails its checks is
    evaluated again, and a note names it), and results.parquet, spec.yaml and (with `plots`)
    out/plots/ are written. `confirm` hears the estimate of the rest once the first points finished, and
    may stop the sweep there by raising."""
    workers, dask = check_workers(workers), check_dask_address(dask)
    spec = load_spec(spec_or_path)
    require("pandas", "sweep")
    require("pyarrow", "sweep")
    search = make_search(spec)
    executor = make_executor(workers, dask)  # an unreachable scheduler is refused before anything is written
    try:
        run = _Run(spec, PointStore(out) if out is not None else None, workers, confirm)
        run.execute(search, executor, progress)
    finally:
        executor.close()
    result = run.summary()
    if plots and run.store is not None:
        result.plots = _plots(spec, result.results, run.store.out, progress)
    elif plots:
        result.notes.append("plots skipped: no output directory")
    return result


def sweep(spec_or_path: str | Path | dict[str, Any] | SweepSpec, out: str | Path | None = None, workers: int = 1,
          dask: str | None = None, progress: bool = False, plots: bool = False) -> Any:
    """Run a design-space sweep and return its results as a pandas DataFrame, one row per point (see
    run_sweep; `out` None writes nothing)."""
    return run_sweep(spec_or_path, out=out, workers=workers, dask=dask, progress=progress, plots=plots).results
