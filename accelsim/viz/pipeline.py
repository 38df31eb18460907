"""Pipeline timeline plot: stage-level spans (compiler.hierarchy.work.StageSpan, or a task-level Schedule grouped
into them) -> a matplotlib Figure with one row per stage, its work coloured by kind and its bubbles left white.

Each stage's row has a compute lane (forward, backward, weight_grad, recompute, update) and, below it, a thin
communication lane (transfers and collectives), so overlapped communication stays visible under the work that
hides it. Readable at 16+ stages and 100+ micro-batches: one collection per (stage, kind), micro-batch numbers
only on bars wide enough for them, alternate micro-batches in two tones so their boundaries show, and large
plots rasterized."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.plan import PER_STEP, Schedule
from accelsim.viz.timeline import cycles_formatter

COMPUTE_COLOURS = {"forward": "tab:blue", "backward": "tab:orange", "weight_grad": "tab:green",
                   "recompute": "tab:purple", "update": "0.25"}
"""Kinds drawn in a stage's compute lane, in legend order, with their colours."""
COMM_COLOURS = {"transfer": "tab:cyan", "allreduce": "tab:red", "tp_allreduce": "tab:pink",
                "reduce_scatter": "tab:brown", "all_gather": "tab:olive"}
"""Kinds drawn in a stage's communication lane (schedule.kinds' communication kinds), with their colours."""
SPAN_KINDS = (*COMPUTE_COLOURS, *COMM_COLOURS)
_LABELS = {"forward": "forward", "backward": "backward", "weight_grad": "weight gradient (W)",
           "recompute": "recompute", "update": "optimizer update",
           **{k: TASK_KINDS[k].label for k in COMM_COLOURS}}
_COMPUTE_LANE = (-0.42, 0.58)  # (offset from the row's centre, height): rows run top to bottom
_COMM_LANE = (0.2, 0.22)
_ODD_TONE = 0.35  # odd micro-batches mixed this far towards white
_LABEL_FONTSIZE = 6
_MAX_LABELS = 600
_RASTERIZE_ABOVE = 2_000  # spans: above this, bars are rasterized (a vector file of 10^5 bars is unreadable)
_DPI = 110
_STRIPPED = {".png": {"Software": None}, ".pdf": {"Creator": None, "Producer": None, "CreationDate": None},
             ".svg": {"Creator": None, "Date": None}}
"""Metadata left out by suffix, so the same spans give the same bytes (no version, no date)."""


class StageInterval(Protocol):
    """What the plot reads of a span: compiler.hierarchy.work.StageSpan fits (a reader of schedules never imports
    the compiler, so the record is read by its fields), and so does PipelineSpan."""

    @property
    def stage(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def microbatch(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def replica(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PipelineSpan:
    """One stage-level interval grouped from a task-level schedule (schedule_spans), with the fields of
    compiler.hierarchy.work.StageSpan, so both plot the same way."""

    stage: int
    kind: str
    microbatch: int
    chunk: int
    start: int
    end: int
    replica: int = 0


_FIELDS = ("stage", "kind", "microbatch", "start", "end", "replica")


def _check_spans(spans: Sequence[StageInterval]) -> list[StageInterval]:
    """Every span has StageSpan's fields, a known kind and 0 <= start <= end; problems named by index."""
    out = list(spans)
    for i, s in enumerate(out):
        if not all(hasattr(s, f) for f in _FIELDS):
            raise AccelsimError(f"plot_pipeline: span {i} is a {type(s).__name__}; expected a StageSpan "
                                f"(compiler.hierarchy.work: fields {', '.join(_FIELDS)}) or pass a Schedule")
        if s.kind not in SPAN_KINDS:
            raise AccelsimError(f"plot_pipeline: span {i} (stage {s.stage}, micro-batch {s.microbatch}) has kind "
                                f"{s.kind!r}; expected one of {', '.join(SPAN_KINDS)}")
        if not 0 <= s.start <= s.end or s.stage < 0:
            raise AccelsimError(f"plot_pipeline: span {i} ({s.kind}, stage {s.stage}) runs from cycle {s.start} to "
                                f"{s.end}; expected a stage >= 0 and 0 <= start <= end")
    return out


def _recomputed(graph: Graph | None) -> frozenset[int]:
    """Nodes that recompute a forward value (remat/rewrite.py names each copy '<name>.recompute')."""
    if graph is None:
        return frozenset()
    return frozenset(n.id for n in graph.nodes if n.phase == "backward" and n.name.endswith(".recompute"))


def _task_kind(task, recomputed: frozenset[int]) -> str:
    if TASK_KINDS[task.kind].communication:
        return task.kind
    if task.phase == "backward" and task.node in recomputed:
        return "recompute"
    return task.phase  # forward, backward (accumulations too) or update


def schedule_spans(schedule: Schedule, graph: Graph | None = None) -> tuple[PipelineSpan, ...]:
    """A task-level schedule as stage spans: its tasks grouped by (stage, replica, kind, micro-batch), each
    group's intervals merged where they touch or overlap (a stage's tensor-parallel ranks and units together).
    Kind: the task's phase (forward, backward, update), or its communication kind; with the graph it was
    compiled from, recomputation (backward nodes that recompute a forward value) as "recompute". Chunk: the
    stage. Sorted by (replica, stage, start, kind, micro-batch)."""
    if not isinstance(schedule, Schedule):
        raise AccelsimError(f"schedule_spans needs a Schedule, got {type(schedule).__name__}")
    recomputed = _recomputed(graph)
    groups: dict[tuple[int, int, str, int], list[tuple[int, int]]] = defaultdict(list)
    for t in schedule.tasks:
        groups[(t.stage, t.replica, _task_kind(t, recomputed), t.microbatch)].append((t.start, t.end))
    out = []
    for (stage, replica, kind, microbatch), intervals in groups.items():
        intervals.sort()
        lo, hi = intervals[0]
        for s, e in intervals[1:] + [(None, None)]:
            if s is not None and s <= hi:
                hi = max(hi, e)
                continue
            out.append(PipelineSpan(stage=stage, kind=kind, microbatch=microbatch, chunk=stage, start=lo, end=hi,
                                 replica=replica))
            if s is not None:
                lo, hi = s, e
    return tuple(sorted(out, key=lambda s: (s.replica, s.stage, s.start, s.kind, s.microbatch, s.end)))


def _tone(kind: str, microbatch: int) -> tuple[float, ...]:
    """The kind's colour; odd micro-batches lighter, so adjacent micro-batches of one kind stay apart."""
    rgba = to_rgba(COMPUTE_COLOURS.get(kind) or COMM_COLOURS[kind])
    if microbatch >= 0 and microbatch % 2:
        return tuple(c + (1.0 - c) * _ODD_TONE for c in rgba[:3]) + (1.0,)
    return rgba


def bubble_fraction(spans: Sequence[StageInterval]) -> float:
    """Idle compute-lane time over (stages x the span from the first span's start to the last one's end):
    the white of the plot (0.0 with no time)."""
    spans = list(spans)
    if not spans:
        return 0.0
    t0, t1 = min(s.start for s in spans), max(s.end for s in spans)
    stages = sorted({s.stage for s in spans})
    busy = 0
    for stage in stages:
        merged: list[list[int]] = []
        for s, e in sorted((s.start, s.end) for s in spans if s.stage == stage and s.kind in COMPUTE_COLOURS):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        busy += sum(e - s for s, e in merged)
    window = (t1 - t0) * len(stages)
    return 1.0 - busy / window if window else 0.0


def _label_microbatches(ax: Axes, spans: list[StageInterval], y_of: dict[int, int], x0: float, x1: float) -> None:
    """The micro-batch number on compute bars at least as wide as the number (none when they would overlap)."""
    fig = ax.figure
    engine = fig.get_layout_engine()
    if engine is not None:
        engine.execute(fig)
    px_per_cycle = 0.97 * ax.bbox.width / max(x1 - x0, 1)
    char_px = 0.62 * _LABEL_FONTSIZE * fig.dpi / 72
    fits = [(-(s.end - s.start), s.stage, s.start, s) for s in spans
            if s.kind in COMPUTE_COLOURS and s.microbatch != PER_STEP
            and (s.end - s.start) * px_per_cycle >= char_px * len(str(s.microbatch)) + 4]
    for _, _, _, s in sorted(fits)[:_MAX_LABELS]:
        text = ax.text((s.start + s.end) / 2, y_of[s.stage] + _COMPUTE_LANE[0] + _COMPUTE_LANE[1] / 2,
                       str(s.microbatch), ha="center", va="center", fontsize=_LABEL_FONTSIZE, color="white",
                       clip_on=True, gid="microbatch_label")
        text.set_in_layout(False)


def _legend(kinds: set[str]) -> list[Patch]:
    handles = [Patch(facecolor=COMPUTE_COLOURS.get(k) or COMM_COLOURS[k], label=_LABELS[k])
               for k in SPAN_KINDS if k in kinds]
    handles.append(Patch(facecolor=_tone("forward", 1), label="odd micro-batches: lighter"))
    handles.append(Patch(facecolor="white", edgecolor="0.5", label="idle (bubble)"))
    return handles


def _save(fig: Figure, path: str | Path | None) -> None:
    if path is None:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=_DPI, metadata=_STRIPPED.get(path.suffix.lower()))
    except (OSError, ValueError) as e:  # ValueError: a suffix matplotlib cannot write
        raise AccelsimError(f"cannot write the pipeline plot to {str(path)!r}: {e}") from None


def plot_pipeline(spans: Sequence[StageInterval] | Schedule, path: str | Path | None = None, title: str = "",
                  ax: Axes | None = None, replica: int = 0, clock_hz: float | None = None,
                  graph: Graph | None = None) -> Figure:
    """Pipeline timeline in cycles: one row per stage (replica `replica`), compute coloured by kind with
    bubbles white, communication in a thin lane below; saved to `path` if given (PNG, PDF or SVG, without
    version or date metadata). `spans`: StageSpans, or a task-level Schedule (schedule_spans; `graph` marks
    its recomputation; its clock is used). `clock_hz`: adds a microseconds axis."""
    if isinstance(spans, Schedule):
        clock_hz = clock_hz or spans.clock_hz
        spans = schedule_spans(spans, graph)
    elif isinstance(spans, (str, bytes)) or not hasattr(spans, "__iter__"):
        raise AccelsimError(f"plot_pipeline needs a sequence of StageSpan or a Schedule, got {type(spans).__name__}")
    every = _check_spans(spans)
    replicas = sorted({s.replica for s in every})
    if every and replica not in replicas:
        raise AccelsimError(f"plot_pipeline: replica={replica!r} has no spans; the spans' replicas: "
                            f"{', '.join(map(str, replicas))}")
    shown = [s for s in every if s.replica == replica]
    stages = sorted({s.stage for s in shown}) or [0]
    y_of = {stage: i for i, stage in enumerate(stages)}
    if ax is None:  # tall enough for 16+ stages, capped so 64 stages still fit a page
        fig = Figure(figsize=(14.0, min(1.6 + 0.32 * len(stages), 18.0)), dpi=_DPI, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    rasterized = len(shown) > _RASTERIZE_ABOVE
    groups: dict[tuple[int, str, int], list[tuple[int, int]]] = defaultdict(list)
    for s in shown:
        if s.end > s.start:
            groups[(s.stage, s.kind, s.microbatch >= 0 and s.microbatch % 2)].append((s.start, s.end - s.start))
    for (stage, kind, odd), xranges in sorted(groups.items()):
        offset, height = _COMPUTE_LANE if kind in COMPUTE_COLOURS else _COMM_LANE
        ax.broken_barh(sorted(xranges), (y_of[stage] + offset, height), facecolors=_tone(kind, int(odd)),
                       linewidth=0, rasterized=rasterized, gid=f"stage{stage} {kind}")
    t0 = min((s.start for s in shown), default=0)
    t1 = max((s.end for s in shown), default=1)
    t1 = t1 if t1 > t0 else t0 + 1
    ax.set_xlim(t0, t1)
    ax.set_ylim(len(stages) - 0.5, -0.5)  # stage 0 on top
    ax.set_yticks(range(len(stages)), [f"stage {s}" for s in stages], fontsize=7 if len(stages) <= 32 else 5)
    ax.xaxis.set_major_formatter(cycles_formatter())
    ax.set_xlabel("cycles")
    ax.tick_params(axis="x", labelsize=7)
    ax.grid(axis="x", lw=0.4, alpha=0.4)
    ax.set_axisbelow(True)
    if clock_hz:
        hz = float(clock_hz)
        top = ax.secondary_xaxis("top", functions=(lambda c: c / hz * 1e6, lambda us: us * hz / 1e6))
        top.set_xlabel(f"µs at {hz / 1e6:.4g} MHz", fontsize=8)
        top.tick_params(labelsize=7)
    microbatches = len({s.microbatch for s in shown if s.microbatch >= 0})
    heading = title or (f"pipeline: {len(stages)} stages, {microbatches} micro-batches"
                        + (f", replica {replica} of {len(replicas)}" if len(replicas) > 1 else "")
                        + f"; bubble {100 * bubble_fraction(shown):.1f}% of the stages' time")
    ax.set_title(heading, fontsize=9)
    if not shown:
        ax.text(0.5, 0.5, "no spans", transform=ax.transAxes, ha="center", va="center", color="0.4")
    ax.legend(handles=_legend({s.kind for s in shown}), fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0),
              frameon=False)
    _label_microbatches(ax, shown, y_of, t0, t1)
    _save(fig, path)
    return fig
