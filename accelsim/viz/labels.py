"""Point labels that never collide: each label goes to the first nearby place where it overlaps no label
placed before it and stays inside the axes (Pareto points of a sweep, named nodes of a roofline)."""
from __future__ import annotations

from matplotlib.axes import Axes

LABEL_OFFSETS = tuple((dx, dy) for dy in (9, -15, 22, -28, 35, -41) for dx in (7, -7))
"""Where a point's label may go (points from the point, tried in order): beside it, then further above and
below; a label leans right (text after the point) or left, mirrored."""


def place_labels(ax: Axes, labels: list[tuple[float, float, str, bool]]) -> int:
    """Annotate each (x, y, text, lean right) in data coordinates at the first of LABEL_OFFSETS where its box
    overlaps no label placed before it and stays inside the axes; a label with no such place is left out
    (so give the most important first). Call it once the axes' scales, limits and title are set. Boxes are measured
    on the drawn figure (text size in points does not scale with the data), so labels never collide
    however close the points are. Returns how many were placed."""
    fig = ax.figure
    if not hasattr(fig.canvas, "get_renderer"):  # a bare Figure: measure with Agg, as PNGs are drawn
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        FigureCanvasAgg(fig)
    fig.draw_without_rendering()  # constrained layout settles the axes before anything is measured
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken: list = []
    for x, y, text, right in labels:
        offsets = LABEL_OFFSETS if right else tuple((-dx, dy) for dx, dy in LABEL_OFFSETS)
        for dx, dy in offsets:
            note = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points",
                               ha="left" if dx > 0 else "right", fontsize=7, zorder=5,
                               bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.75},
                               arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.5})
            box = note.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
            if inside and not any(box.overlaps(other) for other in taken):
                taken.append(box)
                break
            note.remove()
    return len(taken)
