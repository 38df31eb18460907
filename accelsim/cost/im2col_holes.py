"""Where a conv's windows run off its input: (GEMM, im2col geometry with the input's extents) -> Holes, the cells
of the im2col operand's fetch stream that hold no pixel (cost/tile_traffic.py's docstring, "Windows off the
input"). SCALE-Sim's output is ceil((H - k + s) / s) wide, so its last window column and row may run off the
input; those entries are skipped by its fetch stream, which shifts every later position."""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

from accelsim.cost.systolic import _positive


@dataclass(frozen=True, slots=True)
class Holes:
    """Cells of a stream's tiles that hold nothing (a window's pixels off the input), as runs sorted by their
    first cell's index: a diagonal of the stack for a diagonal stream, a position for an unrolled one."""

    firsts: tuple[int, ...]
    counts: tuple[int, ...]
    steps: tuple[int, ...]  # index step from one cell of a run to the next
    prefix: tuple[int, ...]  # cells in runs [0, i)
    span: int  # the largest index span of a run

    @property
    def total(self) -> int:
        return self.prefix[-1]

    def before(self, index: int) -> int:
        """Hole cells at indices below `index`; only runs starting within `span` of it can be cut."""
        hi = bisect.bisect_left(self.firsts, index)
        out = self.prefix[hi]
        for run in range(bisect.bisect_left(self.firsts, index - self.span), hi):
            inside = -(-(index - self.firsts[run]) // self.steps[run])
            out -= max(0, self.counts[run] - inside)
        return out


def hole_runs(m: int, k: int, im2col: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """(output pixel, first k, end k) of the im2col entries whose input pixel lies off the input: the right
    columns of each kernel row of a window that runs off the right edge, the bottom kernel rows of one that runs
    off the bottom. im2col = (channels, kernel width, output width, stride, input width, input height)."""
    channels, kernel_w, out_w, stride, in_w, in_h = im2col
    kernel_h, out_h = k // (kernel_w * channels), m // out_w
    row_len = kernel_w * channels
    first_ox = max(0, -(-(in_w - kernel_w + 1) // stride))  # the first window column that runs off the right
    first_oy = max(0, -(-(in_h - kernel_h + 1) // stride))
    pixels = sorted({oy * out_w + ox for oy in range(out_h) for ox in range(first_ox, out_w)}
                    | {oy * out_w + ox for oy in range(first_oy, out_h) for ox in range(out_w)})
    runs = []
    for pixel in pixels:
        oy, ox = divmod(pixel, out_w)
        x_in, y_in = max(0, in_w - ox * stride), max(0, in_h - oy * stride)  # kernel columns, rows on the input
        if x_in < kernel_w:
            runs += [(pixel, ky * row_len + x_in * channels, (ky + 1) * row_len) for ky in range(min(kernel_h, y_in))]
        if y_in < kernel_h:
            runs.append((pixel, y_in * row_len, k))
    return runs


def checked_input_extents(m: int, k: int, im2col: tuple) -> tuple[int, ...]:
    """im2col with its input extents checked against the GEMM: whole output rows and whole kernels (a window
    may run off the input, even start past it, as SCALE-Sim's ceil-sized output does: the stream's holes)."""
    channels, kernel_w, out_w, stride = im2col[:4]
    in_w, in_h = _positive(im2col_input_w=im2col[4], im2col_input_h=im2col[5])
    kernel_h = k // (kernel_w * channels) if k % (kernel_w * channels) == 0 else 0
    out_h = m // out_w if m % out_w == 0 else 0
    if not kernel_h or not out_h or kernel_w > in_w or kernel_h > in_h:
        raise ValueError(f"im2col {im2col!r} does not fit the GEMM m={m} (output pixels), k={k} (kernel x "
                         f"channels): expected m a multiple of the output width, k of kernel width x channels "
                         f"and the kernel within the {in_w} x {in_h} input")
    return channels, kernel_w, out_w, stride, in_w, in_h


def stream_holes(dataflow: str, m: int, k: int, side: int, tile: tuple[int, int, int, int],
                 im2col: tuple[int, ...]) -> Holes | None:
    """The holes of a conv's left (im2col) stream, laid out as `dataflow` streams it in tiles (blocks, rows,
    width, last width) cut by the array side `side` (rows for os and ws, columns for is); None if none."""
    blocks, rows, width, last_width = tile
    cells = []  # (first index, count, step)
    for pixel, first_k, end_k in hole_runs(m, k, im2col):
        if dataflow == "os":  # tile = pixel fold, row = k, column = pixel in fold
            fold, col = divmod(pixel, side)
            cells.append((fold * rows + first_k + col, end_k - first_k, 1))
        elif dataflow == "ws":  # tile = k fold, row = pixel, column = k in fold: split at the folds
            start = first_k
            while start < end_k:
                stop = min(end_k, (start // side + 1) * side)
                cells.append((start // side * rows + pixel + start % side, stop - start, 1))
                start = stop
        else:  # is, unrolled: tile = pixel fold, row = k, column = pixel in fold
            fold, col = divmod(pixel, side)
            fold_width = last_width if fold == blocks - 1 else width
            cells.append((fold * rows * width + first_k * fold_width + col, end_k - first_k, fold_width))
    if not cells:
        return None
    cells.sort()
    prefix = tuple(itertools.accumulate((count for _, count, _ in cells), initial=0))
    return Holes(tuple(c[0] for c in cells), tuple(c[1] for c in cells), tuple(c[2] for c in cells), prefix,
                 max((count - 1) * step + 1 for _, count, step in cells))
