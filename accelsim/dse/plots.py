"""Figures of one sweep: results table -> PNGs of each metric against each parameter, Pareto fronts with their
points labelled, and the timeline of each Pareto-optimal point of the first front (recompiled on demand)."""
from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw.quantity import parse_bandwidth, parse_bytes, parse_hz
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import Schedule
from accelsim.dse.metrics import DEFAULT_OBJECTIVES, METRICS
from accelsim.viz.labels import place_labels
from accelsim.viz.energy import plot_energy_breakdown
from accelsim.dse.pareto import GOALS, failed_rows, feasible_rows, objective_values, pareto_front, staircase

CompilePoint = Callable[[dict[str, Any]], tuple[Schedule, HwSpec, Graph]]

DPI = 100
PNG_METADATA = {"Software": None}  # matplotlib's version string is the only thing a PNG would add; keep bytes stable
MAX_SERIES = 12  # more series than this (or legend entries) are drawn as a median with a min-max band
MAX_FRONT_LABELS = 16  # Pareto points labelled on a front; more are labelled evenly spaced along it
MAX_TIMELINES = 8  # timelines drawn, evenly spaced along the first front (both ends included)
MAX_VALUE_TICKS = 12  # a numeric parameter with at most this many values gets a tick at each
LOG_DECADES = 2.0  # an axis whose positive values span this many decades is drawn log
LOG_NAME = "plots.log"

# The fronts every sweep gets, when its table has their metrics: (x, y), and their goals unless objectives say.
DEFAULT_FRONTS = (("area_mm2", "throughput_samples_per_s"), ("throughput_samples_per_s", "energy_per_sample_j"))

# Units of columns the metric table (accelsim.dse.metrics.METRICS) does not define, by the name's suffix.
_UNIT_SUFFIXES = (("_samples_per_s", "samples/s"), ("_cycles", "cycles"), ("_bytes", "bytes"), ("_mm2", "mm^2"),
                  ("_j", "J"), ("_w", "W"), ("_hz", "Hz"), ("_s", "s"))
_SHORT_NAMES = {"microbatches": "mb", "data_parallel": "dp", "pipeline_stages": "pp"}


@dataclass(frozen=True)
class SweepView:
    """The rows the figures draw (those that ran, sorted by point) and what every figure's text needs."""

    rows: pd.DataFrame
    feasible: np.ndarray  # per row of `rows`
    failed: int  # rows left out because their point raised
    parameters: tuple[str, ...]
    varying: tuple[str, ...]  # parameters with more than one distinct value among `rows`
    short: dict[str, str]  # parameter -> its name in labels ("rows", "mb")
    label: str


def sweep_view(results: pd.DataFrame, parameters: list[str], label: str) -> SweepView:
    """The rows that ran, sorted by point, with which parameters vary and their short names."""
    failed = failed_rows(results)
    rows = results[~failed].sort_values("point", kind="stable").reset_index(drop=True)
    parameters = list(dict.fromkeys(parameters))
    varying = tuple(p for p in parameters if rows[p].astype(str).nunique() > 1)
    return SweepView(rows=rows, feasible=feasible_rows(rows), failed=int(failed.sum()), parameters=tuple(parameters),
                     varying=varying, short=_short_names(parameters), label=label)


def sweep_plots(results: pd.DataFrame, out_dir: Path, *, parameters: list[str], metrics: list[str],
                objectives: dict[str, str], compile_point: CompilePoint | None, label: str,
                on_figure: Callable[[str], None] | None = None) -> list[Path]:
    """Write a sweep's PNGs under out_dir: param_<key>.png (every metric against that parameter),
    pareto_<y>_vs_<x>.png (each front), energy_breakdown.png (a stacked bar per point, when the table has
    the energy-by-component metrics, ENERGY_COLUMNS) and timeline_point<N>.png; returns their paths in that order.

    What was skipped and why, and every point whose compile_point or simulation failed, goes to
    out_dir/plots.log instead of raising. A table with no row that ran gives [] and writes nothing.
    `on_figure` hears each figure's name before it is drawn (a timeline compiles and simulates its point,
    which can take as long as the point did), so a caller can show progress instead of silence."""
    step = on_figure or (lambda name: None)
    _check_arguments(results, out_dir, parameters, metrics, objectives, compile_point, label)
    failed = failed_rows(results)
    if failed.all():  # also the empty table: its metric columns may never have been made
        return []
    _check_columns(results, parameters, metrics, objectives)
    view = sweep_view(results, parameters, label)
    out_dir = Path(out_dir)
    log: list[str] = []
    paths: list[Path] = []
    metric_names = list(dict.fromkeys(metrics))
    for parameter in view.parameters:
        if parameter not in view.varying:
            log.append(f"skipped metrics vs {parameter}: it has one value")
            continue
        step(f"metrics vs {parameter}")
        fig = plot_metrics_vs_parameter(view, parameter, metric_names, log)
        if fig is not None:
            paths.append(_save(fig, out_dir / f"param_{_slug(parameter)}.png", log))

    first_front: pd.DataFrame | None = None
    for x, y in front_pairs(results, objectives):
        goals = {x: objectives.get(x, DEFAULT_OBJECTIVES.get(x)), y: objectives.get(y, DEFAULT_OBJECTIVES.get(y))}
        drawn = _finite_feasible(view, (x, y))
        if not drawn.any():
            log.append(f"skipped the front {y} vs {x}: no feasible point has finite values of both")
            continue
        step(f"Pareto front {y} vs {x}")
        front = pareto_front(view.rows[drawn], x, y, goals)
        fig = plot_front(view, x, y, goals, front)
        paths.append(_save(fig, out_dir / f"pareto_{_slug(y)}_vs_{_slug(x)}.png", log))
        first_front = front if first_front is None else first_front

    bars = energy_bars(view)
    if bars is not None:
        step("energy breakdown")
        paths.append(_save(plot_energy_breakdown(bars, ylabel="energy per step (J)", title=f"{label}: energy by "
                                                 "component"), out_dir / "energy_breakdown.png", log))
    elif any(c in results.columns for c in ENERGY_COLUMNS[1:]):
        log.append(f"no energy breakdown: it needs the metrics {', '.join(ENERGY_COLUMNS)} with finite values")

    if first_front is not None and compile_point is not None:
        paths += _write_timelines(view, first_front, compile_point, out_dir, log, step)
    elif compile_point is not None:
        log.append("no timelines: no Pareto front was drawn")
    _write_log(out_dir / LOG_NAME, log)
    return paths


def front_pairs(results: pd.DataFrame, objectives: Mapping[str, str]) -> list[tuple[str, str]]:
    """(x, y) of each front to draw: DEFAULT_FRONTS whose columns exist, then every pair of objectives (in their
    order) not already drawn."""
    pairs = [(x, y) for x, y in DEFAULT_FRONTS if x in results.columns and y in results.columns]
    keys = list(objectives)
    for i, x in enumerate(keys):
        for y in keys[i + 1:]:
            if {x, y} not in [set(p) for p in pairs]:
                pairs.append((x, y))
    return pairs


def plot_metrics_vs_parameter(view: SweepView, parameter: str, metrics: list[str],
                              log: list[str] | None = None) -> Figure | None:
    """One subplot per metric with values: the metric over `parameter`, a line per combination of the other
    varying parameters (a median with a min-max band past MAX_SERIES), infeasible points hollow grey."""
    drawable = [m for m in metrics if np.isfinite(objective_values(view.rows, m)).any()]
    for m in metrics:
        if m not in drawable and log is not None:
            log.append(f"metrics vs {parameter}: left out {m} (no finite value)")
    if not drawable:
        return None
    xs, ticks = _positions(view.rows[parameter])
    others = [p for p in view.varying if p != parameter]
    found: dict[tuple[str, ...], tuple[tuple, list[int]]] = {}  # key -> (sort key, rows)
    for i, row in enumerate(view.rows[others].itertuples(index=False, name=None)):
        found.setdefault(tuple(_short_value(v, 12) for v in row), (tuple(map(_value_order, row)), []))[1].append(i)
    groups = {key: rows for key, (_, rows) in sorted(found.items(), key=lambda kv: kv[1][0])}
    aggregate = len(groups) > MAX_SERIES

    ncols = 1 if len(drawable) == 1 else 2 if len(drawable) <= 6 else 3
    nrows = math.ceil(len(drawable) / ncols)
    fig = Figure(figsize=(6.0 * ncols + 2.2, 3.0 * nrows + 0.9), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, metric in zip(axes, drawable):
        ys = objective_values(view.rows, metric)
        if aggregate:
            _draw_band(ax, xs, ys, view.feasible)
        else:
            for colour, idx in enumerate(groups.values()):
                _draw_series(ax, xs[idx], ys[idx], view.feasible[idx], f"C{colour}")
        _draw_infeasible(ax, xs, ys, view.feasible)
        ax.set_title(_shown(metric), fontsize=9)
        ax.set_xlabel(_shown(parameter), fontsize=8)
        ax.set_ylabel(_shown(axis_label(metric)), fontsize=8)
        _set_scales(ax, xs if ticks is None else None, ys, ticks)
        ax.grid(lw=0.4, alpha=0.5)
        ax.tick_params(labelsize=7)
    for ax in axes[len(drawable):]:
        ax.set_visible(False)

    handles = _series_handles(groups, others, view, aggregate)
    if (~view.feasible).any():
        handles.append(Line2D([], [], ls="", marker="o", mfc="none", mec="0.55", label="infeasible"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=7, frameon=False)
    notes = [f"median of {len(groups)} series, band = min-max" if aggregate else f"{len(groups)} series"]
    notes += _row_notes(view)
    fig.suptitle(_shown(f"{view.label}: metrics vs {parameter}\n({'; '.join(notes)})"), fontsize=10)
    return fig


def plot_front(view: SweepView, x: str, y: str, goals: Mapping[str, str], front: pd.DataFrame,
               ax: Axes | None = None) -> Figure:
    """All points of (x, y), the Pareto points of `front` (pareto_front) in red joined as a staircase and
    labelled "#point key=value ..." (at most MAX_FRONT_LABELS; neighbours alternate above and below)."""
    xs, ys = objective_values(view.rows, x), objective_values(view.rows, y)
    if ax is None:
        fig = Figure(figsize=(9.0, 6.0), dpi=DPI, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    feasible = view.feasible & np.isfinite(xs) & np.isfinite(ys)
    ax.scatter(xs[feasible], ys[feasible], s=14, color="tab:blue", alpha=0.55, lw=0,
               label=f"feasible ({int(feasible.sum())})")
    _draw_infeasible(ax, xs, ys, view.feasible)
    fx, fy = objective_values(front, x), objective_values(front, y)
    sx, sy = staircase(fx, fy, goals[x], goals[y])
    ax.plot(sx, sy, color="tab:red", lw=1.1, zorder=3)
    ax.scatter(fx, fy, s=30, color="tab:red", zorder=4, label=f"Pareto ({len(front)})")
    labelled = _spread(len(front), MAX_FRONT_LABELS)
    ax.set_xlabel(_shown(f"{axis_label(x)}  [{goals[x]}]"), fontsize=9)
    ax.set_ylabel(_shown(f"{axis_label(y)}  [{goals[y]}]"), fontsize=9)
    _set_scales(ax, xs[feasible], ys[feasible], None)
    ax.grid(lw=0.4, alpha=0.5)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=8, loc="best")
    ax.set_title("\n", fontsize=9)  # the title's two lines take their room before the labels are measured
    placed = place_labels(ax, [(fx[i], fy[i], _shown(point_label(view, front.iloc[i])), 2 * i <= len(front) - 1)
                                for i in labelled])
    notes = [f"{len(front)} Pareto of {int(feasible.sum())} feasible points"]
    if placed < len(front):
        notes.append(f"{placed} labelled, evenly along the front, none overlapping")
    notes += _row_notes(view)
    ax.set_title(_shown(f"{view.label}: Pareto front, {y} ({goals[y]}) vs {x} ({goals[x]})\n({'; '.join(notes)})"),
                 fontsize=9)
    return fig


ENERGY_COLUMNS = ("energy_j", "static_energy_j", "dynamic_energy_j", "arithmetic_energy_j", "memory_energy_j",
                  "off_chip_energy_j", "link_energy_j")
"""The metrics a sweep records for its energy-by-component plot (RunSummary's energy figures, J per step)."""


def energy_bars(view: SweepView) -> dict[str, dict[str, float]] | None:
    """Per point that ran with finite energies, its step's energy by viz.energy.SEGMENTS, J (unit buffers: the
    dynamic energy less arithmetic, memory and links), by point_label; None when the table lacks a column of
    ENERGY_COLUMNS or no point has them all."""
    if not all(c in view.rows.columns for c in ENERGY_COLUMNS):
        return None
    bars = {}
    for _, r in view.rows.iterrows():
        v = {c: pd.to_numeric(r[c], errors="coerce") for c in ENERGY_COLUMNS}
        if not all(np.isfinite(x) for x in v.values()):
            continue
        bars[point_label(view, r)] = {
            "arithmetic": v["arithmetic_energy_j"],
            "unit buffers": max(0.0, v["dynamic_energy_j"] - v["arithmetic_energy_j"] - v["memory_energy_j"]
                                - v["link_energy_j"]),
            "on-chip memory": max(0.0, v["memory_energy_j"] - v["off_chip_energy_j"]),
            "off-chip memory": v["off_chip_energy_j"], "links": v["link_energy_j"], "static": v["static_energy_j"]}
    return bars or None


def point_label(view: SweepView, row: pd.Series) -> str:
    """'#3 rows=128 mb=4': the point number and the values of the parameters that vary in the sweep."""
    parts = [f"#{_short_value(row['point'], 4)}"] if "point" in row.index else []
    parts += [f"{view.short[p]}={_short_value(row[p], 4)}" for p in view.varying]
    return " ".join(parts)


def axis_label(metric: str) -> str:
    """A metric's axis label with its unit, from the sweep's metric table or its name's suffix ('area_mm2 (mm^2)')."""
    known = METRICS.get(metric)
    unit = known.unit if known else next((u for suffix, u in _UNIT_SUFFIXES if metric.endswith(suffix)), None)
    return f"{metric} ({unit})" if unit else metric


def _write_timelines(view: SweepView, front: pd.DataFrame, compile_point: CompilePoint, out_dir: Path,
                     log: list[str], step: Callable[[str], None]) -> list[Path]:
    from accelsim.api import simulate
    from accelsim.viz.timeline import plot_timeline

    paths = []
    chosen = _spread(len(front), MAX_TIMELINES)
    if len(chosen) < len(front):
        log.append(f"timelines: {len(chosen)} of the {len(front)} points of the first front, evenly along it")
    for i in chosen:
        row = front.iloc[i]
        name = f"point #{_short_value(row['point'], 12)}" if "point" in row.index else f"front point {i}"
        params = {p: _plain(row[p]) for p in view.parameters}
        step(f"timeline of {name}")
        try:
            stage = "compile_point"
            schedule, hw, graph = compile_point(params)
            stage = "simulate"
            result = simulate(schedule, hw, graph=graph)
            stage = "plot_timeline"
            title = (f"{view.label}: {point_label(view, row)}\n{result.graph_name} on {result.hw_name}: "
                     f"{result.makespan_cycles:,} cycles")
            fig = plot_timeline(result, title=_shown(title))
        except Exception as e:  # noqa: BLE001  (a user's compile_point may raise anything; the rest still plot)
            log.append(f"timeline {name}: {stage} failed: {type(e).__name__}: {' '.join(str(e).split())}")
            continue
        stem = _slug(_short_value(row["point"], 12)) if "point" in row.index else str(i)
        paths.append(_save(fig, out_dir / f"timeline_point{stem}.png", log))
    return paths


def _check_arguments(results: Any, out_dir: Any, parameters: Any, metrics: Any, objectives: Any,
                     compile_point: Any, label: Any) -> None:
    if not isinstance(results, pd.DataFrame):
        raise AccelsimError(f"expected the sweep results as a pandas DataFrame, got {type(results).__name__}")
    if "point" not in results.columns:
        known = ", ".join(map(str, results.columns)) or "none"
        raise AccelsimError(f"the results table has no 'point' column (columns: {known}); expected the sweep's "
                            "results table: point, point_id, config_hash, one column per parameter and per metric, "
                            "feasible, error, wall_s")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise AccelsimError(f"out_dir must be a path, got {type(out_dir).__name__} ({out_dir!r})")
    for what, names in (("parameters", parameters), ("metrics", metrics)):
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise AccelsimError(f"{what} must be a list of column names (str), got {names!r}")
    if not isinstance(objectives, Mapping):
        raise AccelsimError(f"objectives must map metric columns to 'max' or 'min', got {objectives!r}")
    for metric, goal in objectives.items():
        if not isinstance(metric, str) or goal not in GOALS:
            raise AccelsimError(f"objective {metric!r}: {goal!r}; expected a metric column name mapped to "
                                "'max' or 'min'")
    if compile_point is not None and not callable(compile_point):
        raise AccelsimError(f"compile_point must be None or a function params -> (schedule, hw, graph), got "
                            f"{type(compile_point).__name__}")
    if not isinstance(label, str):
        raise AccelsimError(f"label must be a str (the sweep's name, shown in titles), got {label!r}")


def _check_columns(results: pd.DataFrame, parameters: list[str], metrics: list[str],
                   objectives: Mapping[str, str]) -> None:
    known = ", ".join(map(str, results.columns))
    for what, names in (("parameter", parameters), ("metric", metrics), ("objective", list(objectives))):
        for name in names:
            if name not in results.columns:
                raise AccelsimError(f"{what} {name!r} is not a column of the results table; expected one of: {known}")
    for metric in [*metrics, *objectives]:
        objective_values(results, metric)  # refuses a column that is not numbers, by name


def _short_names(parameters: list[str]) -> dict[str, str]:
    """Last key of each path ('chips.0.units.mxu.array.rows' -> 'rows', a tied 'rows, cols' -> 'rows=cols'),
    abbreviated; the full key where two parameters would share a name."""
    short = {p: "=".join(_SHORT_NAMES.get(k, k) for k in (path.strip().rsplit(".", 1)[-1] for path in p.split(",")))
             for p in parameters}  # a tied key's paths: "rows=cols"
    return {p: s if list(short.values()).count(s) == 1 else p for p, s in short.items()}


def _finite_feasible(view: SweepView, metrics: tuple[str, ...]) -> np.ndarray:
    return view.feasible & np.all([np.isfinite(objective_values(view.rows, m)) for m in metrics], axis=0)


def _positions(column: pd.Series) -> tuple[np.ndarray, list[str] | None]:
    """x of each row: the value itself for numbers, else the index of its category (and the tick labels)."""
    if not pd.api.types.is_bool_dtype(column):
        numbers = pd.to_numeric(column, errors="coerce")
        if numbers.isna().sum() == column.isna().sum():
            return numbers.astype("float64").to_numpy(), None
    magnitudes = _quantities(column)
    order = (lambda kv: (0, magnitudes[kv[1]], "")) if magnitudes is not None else (lambda kv: _value_order(kv[1]))
    categories = sorted({_short_value(v, 12): v for v in column}.items(), key=order)
    index = {name: i for i, (name, _) in enumerate(categories)}
    return np.array([index[_short_value(v, 12)] for v in column], dtype=float), [name for name, _ in categories]


def _quantities(column: pd.Series) -> dict[str, float] | None:
    """Each value's magnitude when every value is a quantity as hardware files write them ("17 GB/s",
    "4 MiB", "700 MHz"), so such categories sort by size and not as text; else None."""
    values = {v for v in column if isinstance(v, str)}
    if len(values) != len(column.unique()):
        return None
    out = {}
    for v in values:
        for parse in (parse_bandwidth, parse_bytes, parse_hz):
            try:
                out[v] = float(parse(v))
                break
            except (ValueError, TypeError):
                continue
        else:
            return None
    return out


def _value_order(value: Any) -> tuple[int, float, str]:
    """Numbers by value (NaN last among them), then everything else by its text: a total order on mixed values."""
    value = _plain(value)
    if isinstance(value, Real) and not isinstance(value, bool):
        return (0, math.inf if math.isnan(value) else float(value), "nan" if math.isnan(value) else "")
    return (1, 0.0, str(value))


def _draw_series(ax: Axes, xs: np.ndarray, ys: np.ndarray, feasible: np.ndarray, colour: str) -> None:
    keep = feasible & np.isfinite(xs) & np.isfinite(ys)
    order = np.argsort(xs[keep], kind="stable")
    ax.plot(xs[keep][order], ys[keep][order], "-o", color=colour, ms=3.5, lw=1.1)


def _draw_band(ax: Axes, xs: np.ndarray, ys: np.ndarray, feasible: np.ndarray) -> None:
    keep = feasible & np.isfinite(xs) & np.isfinite(ys)
    stats = pd.Series(ys[keep]).groupby(xs[keep]).agg(["median", "min", "max"]).sort_index()
    ax.fill_between(stats.index, stats["min"], stats["max"], color="C0", alpha=0.22, lw=0)
    ax.plot(stats.index, stats["median"], "-o", color="C0", ms=3.5, lw=1.3)


def _draw_infeasible(ax: Axes, xs: np.ndarray, ys: np.ndarray, feasible: np.ndarray) -> None:
    keep = ~feasible & np.isfinite(xs) & np.isfinite(ys)
    if keep.any():
        ax.scatter(xs[keep], ys[keep], s=18, facecolors="none", edgecolors="0.55", lw=0.8,
                   label=f"infeasible ({int(keep.sum())})")


def _series_handles(groups: dict[tuple[str, ...], list[int]], others: list[str], view: SweepView,
                    aggregate: bool) -> list[Line2D]:
    if aggregate:
        return [Line2D([], [], color="C0", marker="o", ms=3.5, label="median (band: min-max)")]
    if not others:
        return [Line2D([], [], color="C0", marker="o", ms=3.5, label="feasible")]
    firsts = [view.rows.iloc[rows[0]] for rows in groups.values()]
    return [Line2D([], [], color=f"C{i}", marker="o", ms=3.5,
                   label=_shown(" ".join(f"{view.short[p]}={_short_value(row[p], 4)}" for p in others)))
            for i, row in enumerate(firsts)]


def _set_scales(ax: Axes, xs: np.ndarray | None, ys: np.ndarray, ticks: list[str] | None) -> None:
    if ticks is not None:
        step = max(1, math.ceil(len(ticks) / 20))  # at most ~20 category names on an axis
        ax.set_xticks(range(0, len(ticks), step), [_shown(t) for t in ticks[::step]], rotation=30, ha="right")
        ax.set_xlim(-0.5, len(ticks) - 0.5)
    elif xs is not None:
        if _spans_decades(xs):
            ax.set_xscale("log")
        values = np.unique(xs[np.isfinite(xs)])
        if len(values) <= MAX_VALUE_TICKS:  # a grid's few values: tick exactly those (no 2.5 micro-batches)
            ax.set_xticks(values, [_short_value(v, 4) for v in values])
            ax.xaxis.set_minor_locator(NullLocator())
    if _spans_decades(ys):
        ax.set_yscale("log")


def _spans_decades(values: np.ndarray) -> bool:
    finite = values[np.isfinite(values)]
    return bool(len(finite)) and bool((finite > 0).all()) and finite.max() >= finite.min() * 10**LOG_DECADES


def _row_notes(view: SweepView) -> list[str]:
    notes = []
    if (~view.feasible).any():
        notes.append(f"{int((~view.feasible).sum())} infeasible, hollow grey")
    if view.failed:
        notes.append(f"{view.failed} failed point(s) omitted")
    return notes


def _spread(n: int, cap: int) -> list[int]:
    """Indices 0..n-1, or `cap` of them evenly spaced with both ends, when n > cap."""
    if n <= cap:
        return list(range(n))
    return sorted({int(round(i)) for i in np.linspace(0, n - 1, cap)})


def _short_value(value: Any, digits: int) -> str:
    value = _plain(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.{digits}g}"
    text = str(value)
    return text if len(text) <= 24 else text[:23] + "…"


def _plain(value: Any) -> Any:
    """numpy scalars as Python values, so compile_point and labels see ints, floats and strs."""
    return value.item() if isinstance(value, np.generic) else value


def _shown(text: str) -> str:
    """Text as matplotlib should print it: a '$' in a name or value would otherwise start math mode."""
    return text.replace("$", r"\$")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "_"


def _save(fig: Figure, path: Path, log: list[str]) -> Path:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi="figure", metadata=PNG_METADATA, bbox_inches="tight")  # labels may reach past the axes
    except OSError as e:
        raise AccelsimError(f"cannot write the figure {str(path)!r}: {e}") from None
    log.append(f"wrote {path.name}")
    return path


def _write_log(path: Path, lines: list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    except OSError as e:
        raise AccelsimError(f"cannot write the plot log {str(path)!r}: {e}") from None
