"""Plots of a simulation Result: a Gantt timeline of its spans, unit/port utilization and memory occupancy."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from accelsim.errors import AccelsimError
from accelsim.schedule.plan import PER_STEP
from accelsim.sim.trace import Result, Span

Row = tuple[int, str, int]  # (chip, resource label, instance)

# Qualitative, one colour per micro-batch (cycling): tab10 with gold for its grey, which marks per-step tasks.
_MB_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
               "gold", "tab:olive", "tab:cyan")
_PER_STEP_COLOUR = "0.55"
_MAX_LEGEND_MICROBATCHES = 10
_DPI = 110
_PHASE_LABELS = {"forward": "forward (solid)", "backward": "backward (light, hatched)",
                 "update": "update (black edge)"}


def timeline_rows(result: Result) -> list[Row]:
    """Every (chip, resource, instance) that ran a span: by chip, unit kinds before links, then name, instance."""
    rows = {(s.chip, s.resource, s.instance) for s in result.spans}
    return sorted(rows, key=lambda r: (r[0], r[1] not in result.unit_instances, r[1], r[2]))


def row_label(result: Result, resource: str, instance: int) -> str:
    """A row's name on its chip: a unit instance as "mxm[1]", a link or all-reduce as its name ("link:0->1")."""
    if resource in result.unit_instances or instance:
        return f"{resource}[{instance}]"
    return resource


def _microbatch_colour(microbatch: int) -> tuple[float, float, float, float]:
    return to_rgba(_PER_STEP_COLOUR if microbatch == PER_STEP else _MB_COLOURS[microbatch % len(_MB_COLOURS)])


def _mix(rgba: tuple[float, ...], towards: float, amount: float) -> tuple[float, ...]:
    return tuple(c + (towards - c) * amount for c in rgba[:3]) + (1.0,)


def _phase_style(phase: str, colour: tuple[float, ...]) -> dict:
    """forward: solid; backward: lighter and hatched (hatch drawn in the edge colour); update: black edge.
    The thin edges separate back-to-back spans and keep sub-pixel spans visible in their colour."""
    if phase == "backward":
        return {"facecolor": _mix(colour, 1.0, 0.45), "edgecolor": colour, "hatch": "////", "linewidth": 0.4}
    if phase == "update":
        return {"facecolor": colour, "edgecolor": "black", "linewidth": 0.9}
    return {"facecolor": colour, "edgecolor": _mix(colour, 0.0, 0.35), "linewidth": 0.4}


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


def _legend_handles(spans: list[Span]) -> list[Patch]:
    microbatches = sorted({s.microbatch for s in spans if s.microbatch != PER_STEP})
    handles = [Patch(color=_microbatch_colour(m), label=f"micro-batch {m}")
               for m in microbatches[:_MAX_LEGEND_MICROBATCHES]]
    if len(microbatches) > _MAX_LEGEND_MICROBATCHES:
        handles.append(Patch(color="none", label=f"... ({len(microbatches) - _MAX_LEGEND_MICROBATCHES} more)"))
    if any(s.microbatch == PER_STEP for s in spans):
        handles.append(Patch(color=_PER_STEP_COLOUR, label="per step"))
    phases = {s.phase for s in spans}
    neutral = to_rgba("0.8")
    handles += [Patch(label=_PHASE_LABELS.get(p, p), **_phase_style(p, neutral))
                for p in (*_PHASE_LABELS, *sorted(phases - set(_PHASE_LABELS))) if p in phases]
    return handles


def plot_timeline(result: Result, path: str | Path | None = None, title: str = "", ax: Axes | None = None,
                  window: tuple[float, float] | None = None, max_rows: int = 64) -> Figure:
    """Gantt chart in cycles: one row per unit instance / link, one bar per span, colour = micro-batch,
    hatching/edges = phase. `window=(t0, t1)` zooms in; past `max_rows` rows only the busiest are drawn."""
    check_result(result)
    if window is not None and not window[0] < window[1]:
        raise AccelsimError(f"window must be (t0, t1) with t0 < t1 in cycles, got {window}")
    if max_rows < 1:
        raise AccelsimError(f"max_rows must be at least 1, got {max_rows}")
    all_rows = timeline_rows(result)
    spans = [s for s in result.spans if _in_window(s, window)]
    rows = _keep_busiest(all_rows, spans, window, max_rows) if len(all_rows) > max_rows else all_rows
    y_of = {r: i for i, r in enumerate(rows)}

    if ax is None:
        fig = _new_figure(12.0, min(1.8 + 0.24 * max(len(rows), 1), 16.0))
        ax = fig.add_subplot()
    else:
        fig = ax.figure

    # One broken_barh (a single collection) per (row, micro-batch, phase): thousands of spans stay fast.
    groups: dict[tuple[Row, int, str], list[tuple[int, int]]] = defaultdict(list)
    for s in spans:
        row = (s.chip, s.resource, s.instance)
        if row in y_of:
            groups[(row, s.microbatch, s.phase)].append((s.start, s.end - s.start))
    for (row, microbatch, phase), xranges in sorted(groups.items()):
        ax.broken_barh(xranges, (y_of[row] - 0.4, 0.8), **_phase_style(phase, _microbatch_colour(microbatch)))

    ax.set_yticks(range(len(rows)),
                  [f"chip{c} {row_label(result, r, i)}" for c, r, i in rows], fontsize=7)
    ax.set_ylim(max(len(rows), 1) - 0.5, -0.5)  # first row on top
    end = max(result.makespan_cycles, max((s.end for s in result.spans), default=0), 1)
    ax.set_xlim(*(window if window is not None else (0, end)))
    ax.set_xlabel("cycles")
    ax.grid(axis="x", lw=0.4, alpha=0.5)
    ax.set_axisbelow(True)
    if result.clock_hz > 0:
        hz = result.clock_hz
        top = ax.secondary_xaxis("top", functions=(lambda c: c / hz * 1e6, lambda us: us * hz / 1e6))
        top.set_xlabel(f"µs at {hz / 1e6:.4g} MHz", fontsize=8)
        top.tick_params(labelsize=7)
    ax.tick_params(axis="x", labelsize=7)

    heading = title or (f"{result.graph_name} on {result.hw_name} ({result.mode}): "
                        f"{result.makespan_cycles:,} cycles = {result.makespan_s * 1e6:.4g} µs")
    if len(rows) < len(all_rows):
        heading += f"\n(showing the {len(rows)} busiest of {len(all_rows)} rows)"
    if window is not None:
        heading += f"  [window {window[0]:,.0f}-{window[1]:,.0f} cycles]"
    ax.set_title(heading, fontsize=9)
    if not spans:
        ax.text(0.5, 0.5, "no spans in range", transform=ax.transAxes, ha="center", va="center", color="0.4")
    handles = _legend_handles(spans)
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
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


def plot_memory(result: Result, path: str | Path | None = None, ax: Axes | None = None) -> Figure:
    """Bytes in use per memory over cycles (MiB, step plot), each memory's capacity dashed in its colour.
    Memories never used are listed, not drawn; capacities far above every peak are left off the y range."""
    check_result(result)
    mib = 1 << 20
    if ax is None:
        fig = _new_figure(9.0, 4.5)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    end = max(result.makespan_cycles, 1)
    memories = sorted(result.memories, key=lambda m: (m.chip, m.memory))
    used = [m for m in memories if m.peak_bytes > 0] or memories
    unused = [m.label for m in memories if m not in used]
    for m in used:
        xs = [c for c, _ in m.occupancy]
        ys = [b / mib for _, b in m.occupancy]
        if xs and xs[-1] < end:  # hold the last level to the end of the step
            xs.append(end)
            ys.append(ys[-1])
        capacity_mib = m.capacity_bytes / mib
        label = f"{m.label}: peak {m.peak_bytes / mib:.3g}"
        label += f" of {capacity_mib:.4g} MiB" if capacity_mib else " MiB"
        (line,) = ax.step(xs, ys, where="post", lw=1.2, label=label)
        if capacity_mib:
            ax.axhline(capacity_mib, color=line.get_color(), ls="--", lw=0.9, label="_capacity")

    # A 200 MiB capacity would flatten a 0.4 MiB occupancy into the x axis: show only capacities
    # within a few times the highest peak, unless nothing is in use at all.
    capacities = [m.capacity_bytes / mib for m in used]
    peak_mib = max((m.peak_bytes for m in used), default=0) / mib
    shown = [c for c in capacities if peak_mib == 0 or c <= 3 * peak_mib]
    top = max([peak_mib, *shown]) * 1.1 or 1.0
    ax.set_xlim(0, end)
    ax.set_ylim(0, top)
    ax.set_xlabel("cycles")
    ax.set_ylabel("in use (MiB)")
    ax.grid(lw=0.4, alpha=0.5)
    title = f"memory occupancy: {result.graph_name} on {result.hw_name} ({result.mode})"
    if len(shown) < sum(1 for c in capacities if c):
        title += "\n(y axis zoomed to the occupancy: some capacities lie above it)"
    ax.set_title(title, fontsize=9)
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        handles.append(Line2D([], [], color="0.3", ls="--", lw=0.9, label="capacity"))
        if unused:
            names = ", ".join(unused[:4]) + (", ..." if len(unused) > 4 else "")
            handles.append(Patch(color="none", label=f"unused: {names}"))
        ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), frameon=False)
    else:
        ax.text(0.5, 0.5, "no occupancy recorded", transform=ax.transAxes, ha="center", va="center", color="0.4")
    _save(fig, path)
    return fig
