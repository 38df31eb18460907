"""Plots of a simulation Result: a Gantt timeline of its spans, unit/port utilization and memory occupancy.

Time axes are plain cycles with thousands separators (never an offset such as "+1.2e6"); memory is in
MiB (2**20 bytes), and a memory's peak is metrics.peak_memory_bytes, the figure run_summary reports."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from accelsim import fmt, metrics
from accelsim.errors import AccelsimError
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.plan import PER_STEP
from accelsim.sim.trace import Result, Span

Row = tuple[int, str, int]  # (chip, resource label, instance)

# Qualitative, one hue per micro-batch: tab10 with gold for its grey, which marks per-step tasks. Past ten
# micro-batches the hues repeat darker, and past twenty with an extra hatch, so that up to 80 micro-batches
# get distinct (colour, hatch) pairs.
_MB_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
               "gold", "tab:olive", "tab:cyan")
_MB_DARKEN = (0.0, 0.45)  # per cycle of ten, towards black
_MB_HATCHES = ("", "..", "||", "**")  # per cycle of twenty
_PER_STEP_COLOUR = "0.55"
_MAX_LEGEND_MICROBATCHES = 10
_DPI = 110
_PHASE_LABELS = {"forward": "forward (solid)", "backward": "backward (light, hatched)",
                 "update": "update (black edge)"}
# Communication task kinds (schedule/kinds.py, TaskKindDef.communication): a hatch each, named in the legend
# by the kind's label, in the kinds' table order.
_COMM_HATCHES = {"allreduce": "xx", "tp_allreduce": "oo", "reduce_scatter": "\\\\\\", "all_gather": "++",
                 "transfer": "---"}  # line hatches: cheap to draw for thousands of transfers
_OTHER_COMM_HATCH = "OO"  # a communication kind without a hatch of its own above
_COMM_EDGE = "0.15"
_STALL_COLOUR = "crimson"
_STALL_STYLE = {"facecolor": to_rgba(_STALL_COLOUR, 0.3), "edgecolor": _STALL_COLOUR, "hatch": "xx",
                "linewidth": 0.6}
_LABEL_FONTSIZE = 6
_MAX_BAR_LABELS = 400


def cycles_formatter() -> ScalarFormatter:
    """Plain cycles with thousands separators ("1,234,567"): no offset, no scientific notation."""

    class _Cycles(ScalarFormatter):
        def __call__(self, x, pos=None):
            return f"{x:,.0f}" if abs(x - round(x)) < 1e-9 else f"{x:,.1f}"

    fmt = _Cycles(useOffset=False)
    fmt.set_scientific(False)
    return fmt


def _cycles_axis(ax: Axes) -> None:
    ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", steps=[1, 2, 2.5, 5, 10], integer=True))
    ax.xaxis.set_major_formatter(cycles_formatter())


def format_mib(nbytes: float) -> str:
    """Bytes as MiB (2**20 bytes) to 4 significant digits, as the terminal prints sizes of a MiB or more:
    "1.777 MiB", "15.28 MiB", "0.302 MiB", "2,048 MiB"; never in scientific notation."""
    mib = nbytes / metrics.MIB
    if mib >= 1000:
        return f"{mib:,.0f} MiB"
    if mib >= 1e-3 or mib == 0:
        return f"{mib:.4g} MiB"
    return f"{mib:.6f} MiB"


def timeline_rows(result: Result) -> list[Row]:
    """Every (chip, resource, instance) that ran a span: by chip, unit kinds before links, then name, instance."""
    rows = {(s.chip, s.resource, s.instance) for s in result.spans}
    return sorted(rows, key=lambda r: (r[0], r[1] not in result.unit_instances, r[1], r[2]))


def row_label(result: Result, resource: str, instance: int) -> str:
    """A row's name on its chip: a unit instance as "mxm[1]", a link or all-reduce as its name ("link:0->1")."""
    if resource in result.unit_instances or instance:
        return f"{resource}[{instance}]"
    return resource


def microbatch_style(microbatch: int) -> tuple[tuple[float, float, float, float], str]:
    """A micro-batch's (colour, hatch): its hue cycles every ten, darker from the second ten on, with an
    extra hatch from the third; per-step tasks (PER_STEP) are grey."""
    if microbatch == PER_STEP:
        return to_rgba(_PER_STEP_COLOUR), ""
    hue = to_rgba(_MB_COLOURS[microbatch % len(_MB_COLOURS)])
    cycle = microbatch // len(_MB_COLOURS)
    hatch = _MB_HATCHES[(cycle // len(_MB_DARKEN)) % len(_MB_HATCHES)]
    return _mix(hue, 0.0, _MB_DARKEN[cycle % len(_MB_DARKEN)]), hatch


def _mix(rgba: tuple[float, ...], towards: float, amount: float) -> tuple[float, ...]:
    return tuple(c + (towards - c) * amount for c in rgba[:3]) + (1.0,)


def _comm_hatch(kind: str) -> str | None:
    """A communication kind's hatch; None for a kind whose time is a unit's (or a name that is no task kind)."""
    k = TASK_KINDS.get(kind)
    if k is None or not k.communication:
        return None
    return _COMM_HATCHES.get(kind, _OTHER_COMM_HATCH)


def _phase_style(phase: str, colour: tuple[float, ...], kind: str = "node", extra_hatch: str = "") -> dict:
    """forward: solid; backward: lighter and hatched (hatch drawn in the edge colour); update: black edge.
    A communication kind (_comm_hatch) replaces the phase's hatch with its own, drawn dark. The thin edges
    separate back-to-back spans and keep sub-pixel spans visible in their colour."""
    if phase == "backward":
        style = {"facecolor": _mix(colour, 1.0, 0.45), "edgecolor": colour, "hatch": "////", "linewidth": 0.4}
    elif phase == "update":
        style = {"facecolor": colour, "edgecolor": "black", "linewidth": 0.9}
    else:
        style = {"facecolor": colour, "edgecolor": _mix(colour, 0.0, 0.35), "linewidth": 0.4}
    comm_hatch = _comm_hatch(kind)
    if comm_hatch is not None:
        style.update(hatch=comm_hatch, edgecolor=_COMM_EDGE)
    hatch = style.get("hatch", "") + extra_hatch
    if hatch:
        style["hatch"] = hatch
    return style


def _span_style(span: Span) -> dict:
    colour, hatch = microbatch_style(span.microbatch)
    return _phase_style(span.phase, colour, span.kind, hatch)


def _new_figure(width_in: float, height_in: float) -> Figure:
    # A bare Figure (no pyplot): nothing is registered globally and it renders with Agg when saved.
    return Figure(figsize=(width_in, height_in), dpi=_DPI, layout="constrained")


def _save(fig: Figure, path: str | Path | None) -> None:
    if path is not None:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=_DPI)
        except (OSError, ValueError) as e:  # ValueError: a suffix matplotlib cannot write
            raise AccelsimError(f"cannot write the figure to {str(path)!r}: {e}") from None


def check_result(result: object) -> None:
    """The plots take a simulation Result (from A.simulate)."""
    if not isinstance(result, Result):
        raise AccelsimError(f"expected a simulation Result (from A.simulate), got {type(result).__name__}")


def _in_window(span: Span, window: tuple[float, float] | None) -> bool:
    return window is None or (span.end >= window[0] and span.start <= window[1])


def _busy_cycles(span: Span, window: tuple[float, float] | None) -> float:
    if window is None:
        return span.end - span.start
    return max(0.0, min(span.end, window[1]) - max(span.start, window[0]))


def _keep_busiest(rows: list[Row], spans: list[Span], window, max_rows: int) -> list[Row]:
    """The max_rows rows with the most busy cycles (in the window), kept in row order; ties by row order."""
    busy: dict[Row, float] = defaultdict(float)
    for s in spans:
        busy[(s.chip, s.resource, s.instance)] += _busy_cycles(s, window)
    order = {r: i for i, r in enumerate(rows)}
    kept = sorted(rows, key=lambda r: (-busy[r], order[r]))[:max_rows]
    return sorted(kept, key=order.__getitem__)


def _stall_cycles(span: Span) -> int:
    return sum(c for _, c in span.stalls)


def _legend_handles(spans: list[Span]) -> list[Patch]:
    microbatches = sorted({s.microbatch for s in spans if s.microbatch != PER_STEP})
    handles = []
    for m in microbatches[:_MAX_LEGEND_MICROBATCHES]:
        colour, hatch = microbatch_style(m)
        handles.append(Patch(facecolor=colour, edgecolor=_mix(colour, 0.0, 0.35), hatch=hatch or None,
                             linewidth=0.4, label=f"micro-batch {m}"))
    if len(microbatches) > _MAX_LEGEND_MICROBATCHES:
        handles.append(Patch(color="none", label=f"... ({len(microbatches) - _MAX_LEGEND_MICROBATCHES} more; "
                                                 f"hues repeat darker every {len(_MB_COLOURS)})"))
    if any(s.microbatch == PER_STEP for s in spans):
        handles.append(Patch(color=_PER_STEP_COLOUR, label="per step"))
    phases = {s.phase for s in spans}
    neutral = to_rgba("0.8")
    handles += [Patch(label=_PHASE_LABELS.get(p, p), **_phase_style(p, neutral))
                for p in (*_PHASE_LABELS, *sorted(phases - set(_PHASE_LABELS))) if p in phases]
    kinds = {s.kind for s in spans}
    handles += [Patch(facecolor="0.85", edgecolor=_COMM_EDGE, hatch=_comm_hatch(k.name), linewidth=0.4, label=k.label)
                for k in TASK_KINDS.values() if k.communication and k.name in kinds]
    causes = sorted({c for s in spans for c, v in s.stalls if v > 0})
    if causes:
        handles.append(Patch(**_STALL_STYLE, label=f"stall, waiting for: {', '.join(causes)}".replace("_", " ")))
    return handles


def _draw_stalls(ax: Axes, spans: list[Span], y_of: dict[Row, int]) -> None:
    """Each span's stall (the cycles it started late: static mode, after its compiled start; dynamic, after
    its inputs were ready) as a red hatched band in the lower part of its row, ending at its start."""
    by_row: dict[Row, list[tuple[int, int]]] = defaultdict(list)
    for s in spans:
        row = (s.chip, s.resource, s.instance)
        stall = _stall_cycles(s)
        if stall > 0 and row in y_of:
            by_row[row].append((s.start - stall, stall))
    for row, xranges in sorted(by_row.items()):
        ax.broken_barh(xranges, (y_of[row] + 0.1, 0.35), zorder=3, gid="stalls", **_STALL_STYLE)


def span_label(span: Span, layers: Sequence[str] | None) -> str:
    """What a bar or trace event is called: its node's layer name (layer_names.layer_names) where given,
    else its op's name."""
    return span.op if layers is None else layers[span.node]


def check_layers(result: Result, layers: object) -> None:
    """`layers` must name every node a span computes: a sequence of strings by node id, or None."""
    if layers is None:
        return
    if not isinstance(layers, Sequence) or isinstance(layers, str) or not all(isinstance(x, str) for x in layers):
        raise AccelsimError(f"layers must be a sequence of layer names by node id (layer_names(graph)), got "
                            f"{type(layers).__name__}")
    top = max((s.node for s in result.spans), default=-1)
    if top >= len(layers):
        raise AccelsimError(f"layers names {len(layers)} nodes, but the result of {result.graph_name!r} has a span "
                            f"of node %{top}: pass layer_names of the graph the schedule was compiled from")


def _bars_that_fit(spans: list[Span], y_of: dict[Row, int], x0: float, x1: float, axes_px: float,
                   dpi: float, layers: Sequence[str] | None = None) -> list[tuple]:
    """(-width in px, task, span, x, y) of every bar at least as wide as its label would be."""
    px_per_cycle = axes_px / (x1 - x0)
    char_px = 0.62 * _LABEL_FONTSIZE * dpi / 72  # DejaVu Sans: ~0.6 em per lower-case character
    fits = []
    for s in spans:
        row = (s.chip, s.resource, s.instance)
        lo, hi = max(s.start, x0), min(s.end, x1)
        width_px = (hi - lo) * px_per_cycle
        if row in y_of and width_px >= char_px * len(span_label(s, layers)) + 6:
            fits.append((-width_px, s.task, s, (lo + hi) / 2, y_of[row]))
    return fits


def _label_bars(ax: Axes, spans: list[Span], y_of: dict[Row, int], x0: float, x1: float,
                layers: Sequence[str] | None = None) -> None:
    """The span's label (its layer's name, else its op's) centred on every bar wide enough to hold it (an
    estimate of the text's width against the bar's width once the figure is laid out, so a label never spills
    over its bar); the widest bars first, at most _MAX_BAR_LABELS of them."""
    fig = ax.figure
    if not _bars_that_fit(spans, y_of, x0, x1, fig.bbox.width, fig.dpi, layers):
        return  # none would fit even across the whole figure: skip the layout
    engine = fig.get_layout_engine()
    if engine is not None:  # lay the figure out first (legend, tick labels), so the axes' width is final
        engine.execute(fig)
        axes_px = 0.97 * ax.bbox.width
    else:  # an Axes laid out by its owner: allow for what may still take some of its width
        axes_px = 0.8 * ax.bbox.width
    for _, _, s, x, y in sorted(_bars_that_fit(spans, y_of, x0, x1, axes_px, fig.dpi, layers))[:_MAX_BAR_LABELS]:
        style = _span_style(s)
        face = style["facecolor"]
        dark = 0.299 * face[0] + 0.587 * face[1] + 0.114 * face[2] < 0.5
        backing = {"bbox": {"facecolor": face, "edgecolor": "none", "pad": 0.6}} if style.get("hatch") else {}
        label = ax.text(x, y, span_label(s, layers), ha="center", va="center", fontsize=_LABEL_FONTSIZE, clip_on=True,
                        gid="op_label", color="white" if dark else "black", **backing)
        label.set_in_layout(False)  # inside its bar: nothing for the layout to make room for


MERGE_ABOVE_SPANS = 2000
"""A raster timeline of more spans than this joins bars a pixel cannot tell apart (merge_subpixel); smaller
ones, and vector output (SVG, PDF: zoomable), draw one bar per span."""


def merge_subpixel(xranges: list[tuple[int, int]], pixel: float) -> list[tuple[int, int]]:
    """(start, width) bars of one row and style, with each bar narrower than a pixel joined to the bar before it
    when less than a pixel apart: the picture is the same at the figure's resolution, and a step of thousands
    of short hatched tasks draws in a fraction of the time (hatching costs Agg per path). Bars a pixel wide
    or more stay apart, so every visible task keeps its own edges."""
    out: list[list[int]] = []
    for start, width in sorted(xranges):
        if out:
            last = out[-1]
            if start - (last[0] + last[1]) < pixel and min(width, last[1]) < pixel:
                last[1] = max(last[0] + last[1], start + width) - last[0]
                continue
        out.append([start, width])
    return [(a, b) for a, b in out]


def plot_timeline(result: Result, path: str | Path | None = None, title: str = "", ax: Axes | None = None,
                  window: tuple[float, float] | None = None, max_rows: int = 64,
                  layers: Sequence[str] | None = None) -> Figure:
    """Gantt chart in cycles: one row per unit instance / link, one bar per span, colour = micro-batch,
    hatching/edges = phase, a hatch per communication kind (all-reduce, reduce-scatter, ...), the layer's name
    (`layers`: layer_names(graph), by node id; None: the op's name) on bars wide enough for it, and stalls
    (cycles a task started late) as red bands before their task. `window=(t0, t1)` zooms in; past `max_rows`
    rows only the busiest are drawn."""
    check_result(result)
    check_layers(result, layers)
    if window is not None and not window[0] < window[1]:
        raise AccelsimError(f"window must be (t0, t1) with t0 < t1 in cycles, got {window}")
    if max_rows < 1:
        raise AccelsimError(f"max_rows must be at least 1, got {max_rows}")
    all_rows = timeline_rows(result)
    spans = [s for s in result.spans if _in_window(s, window)]
    rows = _keep_busiest(all_rows, spans, window, max_rows) if len(all_rows) > max_rows else all_rows
    y_of = {r: i for i, r in enumerate(rows)}

    handles = _legend_handles(spans)
    if ax is None:  # tall enough for its rows and for its legend
        fig = _new_figure(12.0, min(max(1.8 + 0.24 * max(len(rows), 1), 0.8 + 0.17 * len(handles)), 16.0))
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    # One broken_barh (a single collection) per (row, micro-batch, phase, kind): thousands of spans stay fast.
    groups: dict[tuple[Row, int, str, str], list[tuple[int, int]]] = defaultdict(list)
    for s in spans:
        row = (s.chip, s.resource, s.instance)
        if row in y_of:
            kind = s.kind if _comm_hatch(s.kind) is not None else ""
            groups[(row, s.microbatch, s.phase, kind)].append((s.start, s.end - s.start))
    end = max(result.makespan_cycles, max((s.end for s in result.spans), default=0), 1)
    x0, x1 = window if window is not None else (0, end)
    raster = path is None or Path(path).suffix.lower() == ".png"
    # cycles per pixel (at most: the axes are narrower than the figure); 0 keeps one bar per span
    pixel = (x1 - x0) / (fig.get_figwidth() * fig.dpi) if raster and len(spans) > MERGE_ABOVE_SPANS else 0.0
    for (row, microbatch, phase, kind), xranges in sorted(groups.items()):
        colour, hatch = microbatch_style(microbatch)
        ax.broken_barh(merge_subpixel(xranges, pixel), (y_of[row] - 0.4, 0.8), gid=f"spans mb={microbatch} {phase} {kind or 'unit'}",
                       **_phase_style(phase, colour, kind, hatch))
    _draw_stalls(ax, spans, y_of)

    ax.set_yticks(range(len(rows)),
                  [f"chip{c} {row_label(result, r, i)}" for c, r, i in rows], fontsize=7)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # first row on top
    ax.set_xlim(x0, x1)
    _cycles_axis(ax)
    ax.set_xlabel("cycles")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    if result.clock_hz > 0:
        hz = result.clock_hz
        top = ax.secondary_xaxis("top", functions=(lambda c: c / hz * 1e6, lambda us: us * hz / 1e6))
        top.set_xlabel(f"µs at {hz / 1e6:.4g} MHz", fontsize=8)
        top.xaxis.set_major_formatter(ScalarFormatter(useOffset=False))
        top.tick_params(labelsize=7)
    ax.tick_params(axis="x", labelsize=7)

    heading = title or (f"{result.graph_name} on {result.hw_name} ({result.mode}): "
                        f"{fmt.cycles(result.makespan_cycles)} = {fmt.seconds(result.makespan_s)}")
    if len(rows) < len(all_rows):
        heading += f"\n(showing the {len(rows)} busiest of {len(all_rows)} rows)"
    if window is not None:
        heading += f"  [window {window[0]:,.0f}-{window[1]:,.0f} cycles]"
    ax.set_title(heading, fontsize=9)
    if not spans:
        ax.text(0.5, 0.5, "no spans in range", transform=ax.transAxes, ha="center", va="center", color="0.4")
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    _label_bars(ax, spans, y_of, x0, x1, layers)
    _save(fig, path)
    return fig


def plot_utilization(result: Result, path: str | Path | None = None, ax: Axes | None = None) -> Figure:
    """Horizontal bars in percent: busy fraction per unit kind, and bytes moved / peak per memory port or link."""
    check_result(result)
    units = result.utilization()
    ports = result.port_utilization()
    labels = [*units, *ports]
    values = [100 * v for v in (*units.values(), *ports.values())]
    colours = ["tab:blue"] * len(units) + ["tab:orange"] * len(ports)
    if ax is None:
        fig = _new_figure(7.0, min(1.6 + 0.3 * max(len(labels), 1), 10.0))
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    ax.barh(range(len(labels)), values, color=colours, height=0.7)
    for y, v in enumerate(values):
        ax.text(v, y, f" {v:.1f}%", va="center", fontsize=7)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, max(100.0, *values) * 1.12 if values else 100.0)
    ax.set_xlabel("utilization over the makespan (%)")
    ax.axvline(100, color="k", lw=0.6, ls=":")
    ax.legend(handles=[Patch(color="tab:blue", label="unit kind (busy / instances)"),
                       Patch(color="tab:orange", label="memory port / link (bytes / peak)")],
              fontsize=7, loc="lower right")
    ax.set_title(f"utilization: {result.graph_name} on {result.hw_name} ({result.mode})", fontsize=9)
    _save(fig, path)
    return fig


BYTE_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))
"""The units a memory panel's axis may use: the largest that its top reaches at least 1 of."""


def byte_unit(top_bytes: float) -> tuple[str, int]:
    """(name, bytes) of the unit a panel whose y range ends at `top_bytes` is drawn in: 2.4 GiB of HBM in
    GiB, 32 MiB of SRAM in MiB, 64 KiB of buffer in KiB (each level readable on its own axis)."""
    return next(((name, size) for name, size in BYTE_UNITS if top_bytes >= size), BYTE_UNITS[-1])


def format_bytes(nbytes: float) -> str:
    """Bytes in the largest binary unit they reach, to 4 significant digits: "64 KiB", "5 MiB", "2.4 GiB"."""
    name, size = byte_unit(nbytes)
    return f"{nbytes / size:,.4g} {name}" if nbytes / size < 1e4 else f"{nbytes / size:,.0f} {name}"


def plot_memory(result: Result, path: str | Path | None = None, ax: Axes | None = None) -> Figure:
    """Bytes in use over cycles (a step plot), one panel per memory level: memories of the same name (a
    chip's "sram", every chip's "hbm") share a panel, each panel in its own unit (KiB, MiB or GiB), so 32 MiB
    of SRAM is not flattened beside 2.4 GiB of HBM. Each memory's peak (metrics.peak_memory_bytes, the figure
    run_summary reports for a static replay) is in its legend label and marked on its curve, and its capacity
    dashed in its colour where the y range reaches it. Memories never used are named in the title, not drawn;
    capacities far above every peak of their panel are left off its y range. With `ax` (one axes given), every
    level is drawn on it in MiB, as one panel. A dynamic-mode Result allocates on its own, so its peak is its
    own and the title says so."""
    check_result(result)
    end = max(result.makespan_cycles, 1)
    memories = sorted(result.memories, key=lambda m: (m.chip, m.memory))
    peaks = metrics.peak_memory_bytes(memories)
    used = [m for m in memories if peaks[m.label] > 0] or memories
    unused = [m.label for m in memories if m not in used]
    levels: dict[str, list] = {}
    declared = {m.label: i for i, m in enumerate(result.memories)}  # the hardware's order: fastest level first
    for m in sorted(used, key=lambda m: declared[m.label]):
        levels.setdefault(m.memory if ax is None else "", []).append(m)
    for group in levels.values():
        group.sort(key=lambda m: (m.chip, m.memory))
    if ax is None:
        fig = _new_figure(9.0, 1.4 + 2.6 * max(len(levels), 1))
        axes = list(fig.subplots(max(len(levels), 1), 1, sharex=True, squeeze=False)[:, 0])
    else:
        fig, axes = ax.figure, [ax]

    zoomed = False
    for panel, group in zip(axes, levels.values() or [[]]):
        zoomed |= _memory_panel(panel, group, peaks, end, forced_mib=ax is not None)
    for panel in axes:
        panel.set_xlim(0, end)
        _cycles_axis(panel)
        panel.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10], integer=True))
        panel.grid(lw=0.4, alpha=0.5)
    axes[-1].set_xlabel("cycles")
    title = f"memory occupancy: {result.graph_name} on {result.hw_name} ({result.mode})"
    if result.mode != "static":
        title += f"\n(the {result.mode} runtime's own allocation: its peak may differ from the compiled schedule's)"
    if zoomed:
        title += "\n(y axes zoomed to the occupancy: some capacities lie above them)"
    if unused:
        title += "\n(unused, not drawn: " + ", ".join(unused[:4]) + (", ..." if len(unused) > 4 else "") + ")"
    axes[0].set_title(title, fontsize=9)
    _save(fig, path)
    return fig


def _memory_panel(ax: Axes, group: list, peaks: dict[str, int], end: int, forced_mib: bool) -> bool:
    """Draw one level's memories on `ax` in the unit its range needs (MiB when `forced_mib`); True when a
    capacity was left above the zoomed y range."""
    peak = max((peaks[m.label] for m in group), default=0)
    capacities = [m.capacity_bytes for m in group if m.capacity_bytes]
    shown = [c for c in capacities if peak == 0 or c <= 3 * peak]  # 200 MiB would flatten a 0.4 MiB curve
    top = max([peak, *shown]) * 1.1 or float(metrics.MIB)
    unit, size = ("MiB", metrics.MIB) if forced_mib else byte_unit(top)
    capacity_labelled = False
    for m in group:
        xs = [c for c, _ in m.occupancy]
        ys = [b / size for _, b in m.occupancy]
        if xs and xs[-1] < end:  # hold the last level to the end of the step
            xs.append(end)
            ys.append(ys[-1])
        label = f"{m.label}: peak {format_bytes(peaks[m.label])}" + (
            f" of {format_bytes(m.capacity_bytes)}" if m.capacity_bytes else "")
        (line,) = ax.step(xs, ys, where="post", lw=1.2, label=label)
        if peaks[m.label] and m.occupancy:
            at = next(c for c, b in m.occupancy if b == peaks[m.label])
            ax.plot([at], [peaks[m.label] / size], marker="v", ms=5, color=line.get_color(), ls="none",
                    label="_peak")
        if m.capacity_bytes and m.capacity_bytes in shown:  # drawn only where the y range reaches it
            ax.axhline(m.capacity_bytes / size, color=line.get_color(), ls="--", lw=0.9,
                       label="_capacity" if capacity_labelled else "capacity (dashed, its memory's colour)")
            capacity_labelled = True
    ax.set_ylim(0, top / size)
    ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))
    name = group[0].memory if group and not forced_mib else "memory"
    ax.set_ylabel(f"{name} in use ({unit})", fontsize=8)
    if any(not line.get_label().startswith("_") for line in ax.get_lines()):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no occupancy recorded", transform=ax.transAxes, ha="center", va="center", color="0.4")
    return len(shown) < len(capacities)
