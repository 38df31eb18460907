"""Tile-level traffic of one GEMM on a systolic array with operand buffers: how many times each operand tile
is fetched from the backing memory, how many partial sums go out and come back, and the stall cycles when
that traffic outruns the buffers' channels.

The fold order is SCALE-Sim's (and a weight-stationary compiler's usual one): column folds outside, row folds
inside, `for fc in range(FC): for fr in range(FR)`. Each dataflow gives the three operands a role:

    dataflow  stationary (R x C per fold)   streamed (T x R per fold, by fr)   output (by fc)
    os        the outputs (M x N)           left M x K, by fr; right K x N by fc (T x C per fold)
    ws        right K x N (weights)         left M x K                        T x C = M x C, sums over fr
    is        left K x M (inputs)           right K x N                       T x C = N x C, sums over fr

and the reuse follows from where an operand's index sits in the loop nest:
- indexed by both folds (a stationary tile): each element is needed by one fold, fetched once;
- indexed by the inner fold only (a streamed operand): the whole operand is swept once per column fold.
  It is fetched once if it fits the active buffer, else once per sweep (a cyclic sweep through a smaller
  buffer reuses nothing, LRU or FIFO alike);
- indexed by the outer fold only (os's weights): a T x C tile serves all FR inner folds if it fits the
  active buffer, else it is fetched again for every fold;
- an output indexed by the outer fold only accumulates over the inner folds (ws, is): if its T x C tile of
  partial sums fits the active output buffer it is written once, else every row fold writes its partial
  sums and all but the first read them back.
A conv's left operand is the im2col matrix (each input pixel kh x kw times): a layer whose raw input fits
the active buffer fetches it once and expands it on chip; otherwise every sweep fetches the im2col rows,
as SCALE-Sim does. Weight and output tiles are never duplicated.

Time. Each buffer has its own channel to the backing memory (SCALE-Sim's per-SRAM interface bandwidth).
Double-buffered, the next fold's tiles arrive while the current fold computes, so only the first fold's
tiles (the fill) and the last output tile (the drain) are exposed:
    cycles = fill + max(compute, the busiest channel's remaining traffic / bandwidth) + drain.
Single-buffered, a fold waits for its tiles: cycles = compute + the busiest channel's traffic / bandwidth.
stall cycles = cycles - compute. SCALE-Sim's own memory system (a sliding window over a diagonal prefetch
order that re-reads whole operands on a wrap-around) is replayed exactly by cost/scalesim_memory.py; this
model is what a double-buffered design does, and tests/test_tile_traffic.py compares the two.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral, Real

from accelsim.cost.systolic import DATAFLOWS, _positive


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
        return elems // 2 if self.double_buffered else elems


@dataclass(frozen=True, slots=True)
class TileTraffic:
    """Elements moved between the backing memory and the operand buffers, elements the array moves in and
    out of the buffers, and the time it all takes."""

    input_fetch_elems: int
    weight_fetch_elems: int
    output_write_elems: int
    output_read_elems: int  # partial sums read back for accumulation (ws, is with a small output buffer)
    buffer_access_elems: int  # array <-> operand buffers: every fold reads its operand tiles, writes outputs
    compute_cycles: int
    fill_cycles: int  # first fold's tiles, before any MAC
    drain_cycles: int  # last output tile, after the last MAC
    channel_cycles: int  # the busiest channel's whole traffic at its bandwidth: above compute, it sets the pace
    total_cycles: int

    @property
    def stall_cycles(self) -> int:
        return self.total_cycles - self.compute_cycles

    @property
    def backing_read_elems(self) -> int:
        return self.input_fetch_elems + self.weight_fetch_elems + self.output_read_elems


def _swept(view: int, unique: int, active: int, sweeps: int) -> int:
    """An operand read whole once per sweep: fetched once (its unique elements) if those fit the active
    buffer, else every sweep."""
    return unique if unique <= active else sweeps * view


def tile_traffic(batch: int, m: int, k: int, n: int, rows: int, cols: int, dataflow: str, compute_cycles: int,
                 elem_bytes: int, buffers: BufferConfig, unique_left_elems: int | None = None,
                 channels: int = 1) -> TileTraffic:
    """Traffic and time of `batch` (m x k) @ (k x n) GEMMs on a rows x cols array (see the module docstring).

    `unique_left_elems`: distinct elements of the left operand over all batches (a conv's raw input, fewer
    than its im2col view batch*m*k); default the view. `channels`: instances of a gang unit sharing the work,
    each with its own buffers and channels (the traffic is split over them).
    """
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {', '.join(DATAFLOWS)}")
    batch, m, k, n, rows, cols, elem_bytes, channels = _positive(
        batch=batch, m=m, k=k, n=n, rows=rows, cols=cols, elem_bytes=elem_bytes, channels=channels)
    _positive(input_bytes=buffers.input_bytes, weight_bytes=buffers.weight_bytes, output_bytes=buffers.output_bytes)
    if isinstance(compute_cycles, bool) or not isinstance(compute_cycles, Integral) or compute_cycles < 0:
        raise ValueError(f"compute_cycles must be an integer >= 0, got {compute_cycles!r}")
    rate = buffers.channel_bytes_per_cycle
    if isinstance(rate, bool) or not isinstance(rate, Real) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"channel_bytes_per_cycle must be a finite number > 0, got {rate!r}")
    left, right, out = batch * m * k, batch * k * n, batch * m * n
    unique_left = left if unique_left_elems is None else min(left, unique_left_elems)
    act_in = buffers.active_elems(buffers.input_bytes, elem_bytes)
    act_w = buffers.active_elems(buffers.weight_bytes, elem_bytes)
    act_out = buffers.active_elems(buffers.output_bytes, elem_bytes)
    if dataflow == "os":
        fr, fc = math.ceil(m / rows), math.ceil(n / cols)
        r_used, c_used = min(rows, m), min(cols, n)
        input_fetch = batch * _swept(m * k, unique_left // batch, act_in, fc)
        weight_fetch = right if k * c_used <= act_w else fr * right
        output_write, output_read = out, 0
        first_tiles = (r_used * k, k * c_used)
        last_out = r_used * c_used
        buffer_access = batch * fr * fc * (r_used * k + k * c_used + r_used * c_used)
    else:
        # ws: rows over K, cols over N, T = M; is: rows over K, cols over M, T = N (module docstring)
        spatial_cols, temporal = (n, m) if dataflow == "ws" else (m, n)
        fr, fc = math.ceil(k / rows), math.ceil(spatial_cols / cols)
        r_used, c_used = min(rows, k), min(cols, spatial_cols)
        stationary_fetch = right if dataflow == "ws" else (unique_left if unique_left <= act_in else left)
        streamed_view, streamed_unique, streamed_active = (
            (m * k, unique_left // batch, act_in) if dataflow == "ws" else (k * n, k * n, act_w))
        streamed_fetch = batch * _swept(streamed_view, streamed_unique, streamed_active, fc)
        input_fetch, weight_fetch = ((streamed_fetch, stationary_fetch) if dataflow == "ws"
                                     else (stationary_fetch, streamed_fetch))
        if temporal * c_used <= act_out:  # the partial sums of a column fold stay in the output buffer
            output_write, output_read = out, 0
        else:
            output_write, output_read = fr * out, (fr - 1) * out
        streamed_tile, stationary_tile = temporal * r_used, r_used * c_used
        first_tiles = ((streamed_tile, stationary_tile) if dataflow == "ws"  # (input, weight)
                       else (stationary_tile, streamed_tile))
        last_out = temporal * c_used
        buffer_access = batch * fr * fc * (temporal * r_used + r_used * c_used + temporal * c_used)
    bandwidth = buffers.channel_bytes_per_cycle * channels
    to_cycles = lambda elems: math.ceil(elems * elem_bytes / bandwidth)  # noqa: E731
    # what each channel (input, weight, output) moves in all, and the part of it exposed before the first
    # MAC (the first input and weight tiles) or after the last (the last output tile)
    channel_elems = (input_fetch, weight_fetch, output_write + output_read)
    exposed = (min(first_tiles[0], act_in), min(first_tiles[1], act_w), min(last_out, out))
    fill, drain = max(to_cycles(exposed[0]), to_cycles(exposed[1])), to_cycles(exposed[2])
    channel_cycles = max(to_cycles(elems) for elems in channel_elems)
    if buffers.double_buffered:
        busiest = max(to_cycles(max(0, total - part)) for total, part in zip(channel_elems, exposed))
        total_cycles = fill + max(compute_cycles, busiest) + drain
    else:
        total_cycles = compute_cycles + channel_cycles
    return TileTraffic(input_fetch, weight_fetch, output_write, output_read, buffer_access, compute_cycles,
                       fill, drain, channel_cycles, total_cycles)
