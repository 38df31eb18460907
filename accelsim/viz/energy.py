"""Energy by component as a stacked bar per design (EnergyBreakdown or a sweep's energy metrics -> Figure):
what each design spends on arithmetic, inside its units, on chip memory, off chip memory, links and leakage."""
from __future__ import annotations

from collections.abc import Mapping

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from accelsim.errors import AccelsimError
from accelsim.sim.energy import EnergyBreakdown

SEGMENTS = ("arithmetic", "unit buffers", "on-chip memory", "off-chip memory", "links", "static")
"""The stack, bottom to top: what an architect trades (compute, data movement near and far, leakage)."""
_COLORS = ("#4c72b0", "#8172b2", "#55a868", "#c44e52", "#ccb974", "#8c8c8c")


def energy_segments(b: EnergyBreakdown) -> dict[str, float]:
    """A breakdown's energy per SEGMENTS entry, J (they sum to b.total_pj * 1e-12)."""
    memory = b.memory_pj
    return {"arithmetic": b.kind_pj("arithmetic") * 1e-12, "unit buffers": b.kind_pj("unit_buffers") * 1e-12,
            "on-chip memory": (memory - b.off_chip_pj) * 1e-12, "off-chip memory": b.off_chip_pj * 1e-12,
            "links": b.kind_pj("link") * 1e-12, "static": b.static_pj * 1e-12}


def plot_energy_breakdown(bars: Mapping[str, Mapping[str, float]], ax: Axes | None = None,
                          ylabel: str = "energy per step (J)", title: str = "energy by component") -> Figure:
    """One stacked bar per design, in `bars`' order: design label -> SEGMENTS name -> energy (any one unit,
    named by `ylabel`). A segment a design lacks is 0; a name outside SEGMENTS or a negative or non-finite
    value is refused, naming the design and the segment."""
    for label, parts in bars.items():
        for name, value in parts.items():
            if name not in SEGMENTS:
                raise AccelsimError(f"plot_energy_breakdown: design {label!r} has segment {name!r}; the segments "
                                    f"are {', '.join(SEGMENTS)}")
            if not (value >= 0 and value != float("inf")):
                raise AccelsimError(f"plot_energy_breakdown: design {label!r}, segment {name!r} is {value!r}; "
                                    "expected a finite energy >= 0")
    if ax is None:
        fig = Figure(figsize=(max(4.0, 0.45 * len(bars) + 2.5), 4.0), layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    labels = list(bars)
    bottom = [0.0] * len(labels)
    for name, color in zip(SEGMENTS, _COLORS):
        heights = [float(bars[label].get(name, 0.0)) for label in labels]
        if any(heights):
            ax.bar(range(len(labels)), heights, bottom=bottom, color=color, label=name, width=0.7)
            bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(labels)), labels, rotation=60 if len(labels) > 4 else 0, ha="right" if len(labels) > 4
                  else "center", fontsize=7 if len(labels) > 12 else 9)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig
