"""Roofline plot: the hardware's roofs and every node of a graph as a point (seed 001).

Every unit kind with an arithmetic peak gets its compute ceiling, every memory its bandwidth slope, and
the chip's total peak a dotted line; y is in TFLOP/s, x in FLOP/byte."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from accelsim.cost.model import NodeCost  # noqa: E402
from accelsim.cost.roofline import achieved_ops_per_s, chip_peak_ops_per_s, roofs, unit_roofs  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.hw.spec import HwSpec  # noqa: E402
from accelsim.ops.registry import get_op  # noqa: E402
from accelsim.viz.labels import place_labels  # noqa: E402

_COLOURS = {"tensor": "tab:red", "elementwise": "tab:blue", "reduction": "tab:green", "data_movement": "tab:gray"}
_ROOF_COLOURS = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan", "tab:pink", "tab:orange")
_SLOPE_COLOURS = ("navy", "teal", "darkgoldenrod", "slategray")
_SLOPE_STYLES = ("-", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))
TERA = 1e12
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
"""File types a roofline is written as, chosen by the path's suffix."""


def check_figure_path(path: str | Path) -> Path:
    """`path` as a Path if its suffix is one of FIGURE_SUFFIXES (any case); else AccelsimError naming it."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        got = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise AccelsimError(f"{path}: cannot write a figure with {got}; use one of {', '.join(FIGURE_SUFFIXES)}")
    return path


def _plain(value: float, _pos=None) -> str:
    """A log axis's tick as a plain number ("0.01", "1000"), not 10^k."""
    return f"{value:,.12g}"


def _bytes_per_s(value: float) -> str:
    """A bandwidth in decimal units, as hardware files and data sheets give them: "18.43 TB/s", "34 GB/s"."""
    for factor, unit in ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s")):
        if value >= factor:
            return f"{value / factor:.4g} {unit}"
    return f"{value:.4g} B/s"


MAX_NAMED_POINTS = 12
"""Nodes named on a roofline: the ones with the most FLOPs (a label that would overlap another is left out)."""


def plot_roofline(hw: HwSpec, costs: list[NodeCost], title: str = "", path: str | Path | None = None,
                  ax: Axes | None = None, node_names: Mapping[int, str] | None = None) -> Figure:
    """Log-log: x = arithmetic intensity (FLOP/byte), y = attained TFLOP/s of each node on its unit.

    Roofs of the first chip: a horizontal compute ceiling per unit kind at what one node can reach on it (one
    instance, or the whole gang), solid (kinds with the same ceiling share a line and its label); the chip's
    total peak (every unit together) dotted black; and one slope per memory, bandwidth x intensity up to the
    chip's peak, with its ridge point. With `node_names` (node id -> name), the MAX_NAMED_POINTS nodes with the
    most FLOPs are labelled with their names, never overlapping. With `path` (suffix .png, .pdf or .svg; parents created) the figure is
    also written there."""
    if path is not None:
        path = check_figure_path(path)
    fig = ax.figure if ax is not None else Figure(figsize=(8, 7.5), dpi=110, layout="constrained")
    ax = ax or fig.add_subplot()
    points = [(c.arithmetic_intensity, achieved_ops_per_s(hw, c) / TERA, get_op(c.op).category) for c in costs
              if c.flops > 0 and math.isfinite(c.arithmetic_intensity)]
    chip = hw.chips[0]
    peak = chip_peak_ops_per_s(hw, chip) / TERA
    units = unit_roofs(hw, chip)
    xs = [p[0] for p in points] or [1.0]
    lo, hi = min(min(xs) / 4, 0.01), max(max(xs) * 4, 1e4)

    for i, roof in enumerate(roofs(hw, chip)):
        beta = roof.bandwidth_bytes_per_s / TERA  # TFLOP/s per FLOP/byte
        ridge = roof.ridge_ops_per_byte
        grid = [lo, min(max(ridge, lo), hi), hi]
        ax.plot(grid, [min(peak, beta * x) for x in grid], lw=1.4, color=_SLOPE_COLOURS[i % len(_SLOPE_COLOURS)],
                ls=_SLOPE_STYLES[i % len(_SLOPE_STYLES)],
                label=f"{roof.memory} bandwidth {_bytes_per_s(roof.bandwidth_bytes_per_s)} "
                      f"(ridge {ridge:.3g} FLOP/byte)")
    ceilings: dict[float, list[str]] = {}  # units with the same ceiling share one line, named together
    for u in units:
        if u.instances == 1:
            detail = ""
        elif u.node_peak_ops_per_s == u.peak_ops_per_s:
            detail = f", a gang of {u.instances}"
        else:
            detail = f", x{u.instances} = {u.peak_ops_per_s / TERA:,.4g} in all"
        ceilings.setdefault(u.node_peak_ops_per_s / TERA, []).append(f"{u.unit} ({u.compute_model}{detail})")
    for i, (top, names) in enumerate(ceilings.items()):
        ax.hlines(top, lo, hi, color=_ROOF_COLOURS[i % len(_ROOF_COLOURS)], lw=1.6,
                  label=textwrap.fill(f"ceiling {top:,.4g} TFLOP/s per node: {'; '.join(names)}", 110,
                                      subsequent_indent="    "))
    ax.axhline(peak, color="k", lw=0.9, ls=":", label=f"chip peak, all units: {peak:,.4g} TFLOP/s")
    for cat, colour in _COLOURS.items():
        sel = [(x, y) for x, y, c in points if c == cat]
        if sel:
            ax.scatter(*zip(*sel), s=12, alpha=0.7, color=colour, label=f"{cat} nodes ({len(sel)})", zorder=3)

    ys = [p[1] for p in points] or [peak]
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(min(min(ys), peak) / 20, peak * 3),
           xlabel="arithmetic intensity (FLOP/byte)", ylabel="attained TFLOP/s (10^12 FLOP/s)")
    ax.xaxis.set_major_formatter(FuncFormatter(_plain))
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    heading = title or f"roofline of {hw.name} (chip {chip.name!r}: peak {peak:,.4g} TFLOP/s)"
    no_roof = [u.name for u in chip.units if u.name not in {r.unit for r in units}]
    if no_roof and not title:
        heading += f"\nno compute roof (no arithmetic peak): {', '.join(no_roof)}"
    ax.set_title(heading, fontsize=9)
    ax.grid(which="major", lw=0.4, alpha=0.5)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=1, frameon=False)
    if node_names:
        heaviest = sorted((c for c in costs if c.flops > 0 and math.isfinite(c.arithmetic_intensity)),
                          key=lambda c: (-c.flops, c.node))[:MAX_NAMED_POINTS]
        place_labels(ax, [(c.arithmetic_intensity, achieved_ops_per_s(hw, c) / TERA,
                           node_names.get(c.node, f"%{c.node}"), True) for c in heaviest])
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig
