"""Roofline plot: the hardware's roofs and every node of a graph as a point (seed 001)."""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from accelsim.cost.model import NodeCost  # noqa: E402
from accelsim.cost.roofline import achieved_ops_per_s, chip_peak_ops_per_s, roofs  # noqa: E402
from accelsim.errors import AccelsimError  # noqa: E402
from accelsim.hw.spec import HwSpec  # noqa: E402
from accelsim.ops.registry import get_op  # noqa: E402

_COLOURS = {"tensor": "tab:red", "elementwise": "tab:blue", "reduction": "tab:green", "data_movement": "tab:gray"}
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
"""File types a roofline is written as, chosen by the path's suffix."""


def check_figure_path(path: str | Path) -> Path:
    """`path` as a Path if its suffix is one of FIGURE_SUFFIXES (any case); else AccelsimError naming it."""
    path = Path(path)
    if path.suffix.lower() not in FIGURE_SUFFIXES:
        got = f"suffix {path.suffix!r}" if path.suffix else "no suffix"
        raise AccelsimError(f"{path}: cannot write a figure with {got}; use one of {', '.join(FIGURE_SUFFIXES)}")
    return path


def plot_roofline(hw: HwSpec, costs: list[NodeCost], title: str = "", path: str | Path | None = None,
                  ax: plt.Axes | None = None) -> Figure:
    """Log-log: x = arithmetic intensity (FLOP/byte), y = attained FLOP/s on the node's unit.
    With `path` (suffix .png, .pdf or .svg; parents created) the figure is also written there."""
    if path is not None:
        path = check_figure_path(path)
    fig = ax.figure if ax is not None else plt.figure(figsize=(7, 4.5), dpi=110)
    ax = ax or fig.add_subplot()
    points = [(c.arithmetic_intensity, achieved_ops_per_s(hw, c), get_op(c.op).category) for c in costs
              if c.flops > 0 and math.isfinite(c.arithmetic_intensity)]
    peak = chip_peak_ops_per_s(hw)
    xs = [p[0] for p in points] or [1.0]
    lo, hi = min(min(xs) / 4, 0.01), max(max(xs) * 4, 1e4)
    for roof in roofs(hw):
        ridge = roof.ridge_ops_per_byte
        grid = [lo, min(max(ridge, lo), hi), hi]
        ax.plot(grid, [min(peak, roof.bandwidth_bytes_per_s * x) for x in grid], lw=1.5,
                label=f"{roof.memory}: {roof.bandwidth_bytes_per_s / 1e9:.4g} GB/s, ridge {ridge:.3g} FLOP/B")
    for cat, colour in _COLOURS.items():
        sel = [(x, y) for x, y, c in points if c == cat]
        if sel:
            ax.scatter(*zip(*sel), s=12, alpha=0.7, color=colour, label=f"{cat} nodes ({len(sel)})")
    ax.axhline(peak, color="k", lw=0.8, ls=":")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP / byte)", ylabel="attained FLOP/s",
           title=title or f"roofline of {hw.name} (peak {peak / 1e12:.4g} TFLOP/s)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig
