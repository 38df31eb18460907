"""SCALE-Sim 3.0.0's double-buffered SRAMs with a fixed (USER) DRAM bandwidth, re-implemented exactly and fast:
(layer, array, dataflow, SRAM words, words/cycle) -> ScaleSimTraffic (cycles, stalls, DRAM and SRAM words).

The rules, read from scalesim/memory/* and compute/* and reproduced here (no approximation: every case of
tests/data/scalesim_bandwidth.json matches in every field):

* Demand: one row per stall-free cycle; each read SRAM gets the addresses the array edge wants (-1 = none),
  the ofmap SRAM the outputs written. Folds run column fold outer, row fold inner, with SCALE-Sim's skew
  and inter-fold gaps. Its conv output is ceil((H + 2p - kh + s) / s) wide, one more than the usual
  floor((H + 2p - kh) / s) + 1 when s does not divide H + 2p - kh (the extra windows read padding).
* Read SRAM (ifmap, filter) of S words fed W words/cycle: the prefetch matrix (the operand fold after fold;
  for os, ws's ifmap and is's filter the whole stack is rolled along its anti-diagonals) is cut into sets
  of ceil(S/100) addresses (padding skipped; a last, possibly empty, set after the last full one). The
  SRAM holds a circular window of nA = ceil(ceil(S/2) / set) sets from set 0; an address hits if any set
  in the window holds it (im2col repeats pixels, so several may). On a miss the window moves forward by
  nP = ceil((S - ceil(S/2)) / set) sets (mod the set count) and ceil((S - ceil(S/2)) / W) lines of W words
  are read, until the address hits. The fill's lines arrive up to cycle -1; each move's last line arrives
  lines + 1 cycles after the previous move's, whatever the current cycle. A row's read finishes at cycle +
  offset, offset = 1 (hit latency) plus, per move, potential = arrival - (cycle + offset), added once and
  then once more if positive (SCALE-Sim's code), so a DRAM stream that is ahead lowers the offset.
* Write SRAM (ofmap): outputs fill W-word lines. When free space < ceil(S/2) and the last drain is over,
  the open line is closed (its empty slots count as written and drained, except in a drain's last line)
  and up to ceil((S - ceil(S/2)) / W) lines drain, one per cycle from now; writing into a full SRAM waits
  for the drain. After the last row everything left drains back to back from that row's cycle.
* Row i runs at cycle = i + stalls so far; stalls += max(ifmap out - cycle - 1, filter out - cycle - 1,
  ofmap out - cycle). Total Cycles = the largest ofmap cycle (0-based).

Why DRAM reads are often many times the operand: the window only moves forward, round a circle of sets.
The anti-diagonal roll of the stacked prefetch matrix interleaves the last diagonals of fold f with the
first ones of fold f + 1, but the demand finishes fold f before it starts fold f + 1, so at a fold boundary
it steps back by up to an array side of diagonals. If the move that served fold f's tail dropped the set
holding fold f + 1's head, the only way back to that set is forward, all the way round: about nsets / nP
moves, a whole re-read of the prefetch matrix, for that one boundary. Whether a boundary trips depends on
where the window's edges fall (set size, nA, nP, nsets), so reads jump by whole passes and are not monotonic
in the SRAM size. Superres conv2 (os, 32x32, 64 kB, 10 words/cycle): the ifmap prefetch matrix (im2col, 128
row folds, 2,359,296 words) makes 3,597 sets of 656; the window holds 50 and moves 50. 16 of the 254 fold
boundaries cost 69-70 moves each; 1,294 moves in all read 42.4 M words, 18 passes over the prefetch matrix
and 152 times the 278,784-word padded input.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from numbers import Integral

import numba
import numpy as np

DATAFLOWS = ("os", "ws", "is")
HIT_LATENCY_CYCLES = 1  # read_buffer.hit_latency; the read port adds 1 cycle, the write port 0
MAX_DEMAND_ELEMENTS = 200_000_000  # demand entries (and padded input words) at most: ~1 GB, ~10 s
MIN_SRAM_WORDS = 2  # with fewer, SCALE-Sim's prefetch/drain half is empty: it never moves, or crashes


@dataclass(frozen=True, slots=True)
class ScaleSimTraffic:
    """SCALE-Sim 3.0.0's report for one layer (USER bandwidth). Cycles are SCALE-Sim's, 0 = first demand row."""

    compute_cycles: int  # demand rows (stall-free cycles)
    stall_cycles: int
    total_cycles: int  # as a count: SCALE-Sim's reported Total Cycles + 1
    ifmap_dram_words: int
    filter_dram_words: int
    ofmap_dram_words: int
    ifmap_sram_reads: int
    filter_sram_reads: int
    ofmap_sram_writes: int  # os also counts rows + cols per fold, as SCALE-Sim does
    first_dram_read_cycle: int  # negative: the initial fill runs before cycle 0
    last_dram_write_cycle: int  # so SCALE-Sim's "Total Cycles (incl. prefetch)" = last - first
    ifmap_dram_start_cycle: int
    ifmap_dram_stop_cycle: int
    filter_dram_start_cycle: int
    filter_dram_stop_cycle: int
    ofmap_dram_start_cycle: int
    ofmap_dram_stop_cycle: int
    ifmap_window_moves: int  # prefetches after the initial fill; ifmap_dram_words grows by one batch each
    filter_window_moves: int


def _validated(sizes: dict[str, object], words: dict[str, object], bandwidths: dict[str, object],
               dataflow: object, padding: object = 0) -> list[int]:
    """The sizes, words and bandwidths as Python ints; one ValueError naming every bad argument."""
    problems = [f"{name}={value!r} (expected a positive integer)"
                for name, value in {**sizes, **words, **bandwidths}.items()
                if isinstance(value, bool) or not isinstance(value, Integral) or value < 1]
    problems += [f"{name}={value!r} (expected >= {MIN_SRAM_WORDS} words: half active, half prefetch/drain)"
                 for name, value in words.items() if isinstance(value, Integral) and 1 <= value < MIN_SRAM_WORDS]
    if isinstance(padding, bool) or not isinstance(padding, Integral) or padding < 0:
        problems.append(f"padding={padding!r} (expected an integer >= 0)")
    if not isinstance(dataflow, str) or dataflow not in DATAFLOWS:
        problems.append(f"dataflow={dataflow!r} (expected one of {', '.join(DATAFLOWS)})")
    if problems:
        raise ValueError(f"invalid SCALE-Sim layer: {'; '.join(problems)}")
    return [int(value) for value in {**sizes, **words, **bandwidths}.values()]


def scalesim_gemm_traffic(m: int, k: int, n: int, rows: int, cols: int, dataflow: str,
                          ifmap_words: int, filter_words: int, ofmap_words: int,
                          ifmap_bw_words: int, filter_bw_words: int, ofmap_bw_words: int) -> ScaleSimTraffic:
    """SCALE-Sim's cycles and traffic for (m x k) @ (k x n); SRAM sizes in words, bandwidths in words/cycle."""
    m, k, n, rows, cols, *buffers = _validated(
        dict(m=m, k=k, n=n, rows=rows, cols=cols),
        dict(ifmap_words=ifmap_words, filter_words=filter_words, ofmap_words=ofmap_words),
        dict(ifmap_bw_words=ifmap_bw_words, filter_bw_words=filter_bw_words, ofmap_bw_words=ofmap_bw_words),
        dataflow)
    # SCALE-Sim's GEMM is a conv of an m x k one-channel input with n filters of 1 x k (topology_utils).
    return _traffic(1, m, k, n, 1, k, 1, rows, cols, dataflow, *buffers)


def scalesim_conv_traffic(c: int, h: int, w: int, o: int, kh: int, kw: int, stride: int, padding: int,
                          rows: int, cols: int, dataflow: str,
                          ifmap_words: int, filter_words: int, ofmap_words: int,
                          ifmap_bw_words: int, filter_bw_words: int, ofmap_bw_words: int) -> ScaleSimTraffic:
    """SCALE-Sim's cycles and traffic for a batch-1 conv2d (h, w unpadded; padding on each side; one stride)."""
    c, h, w, o, kh, kw, stride, rows, cols, *buffers = _validated(
        dict(c=c, h=h, w=w, o=o, kh=kh, kw=kw, stride=stride, rows=rows, cols=cols),
        dict(ifmap_words=ifmap_words, filter_words=filter_words, ofmap_words=ofmap_words),
        dict(ifmap_bw_words=ifmap_bw_words, filter_bw_words=filter_bw_words, ofmap_bw_words=ofmap_bw_words),
        dataflow, padding)
    hp, wp = h + 2 * int(padding), w + 2 * int(padding)  # SCALE-Sim is given the padded input
    if kh > hp or kw > wp:
        raise ValueError(f"invalid SCALE-Sim layer: kernel kh={kh} x kw={kw} exceeds the padded input {hp} x {wp}")
    return _traffic(c, hp, wp, o, kh, kw, stride, rows, cols, dataflow, *buffers)


@functools.lru_cache(maxsize=256)
def _traffic(c: int, hp: int, wp: int, o: int, kh: int, kw: int, stride: int, ar: int, ac: int, dataflow: str,
             ifmap_words: int, filter_words: int, ofmap_words: int,
             ifmap_bw: int, filter_bw: int, ofmap_bw: int) -> ScaleSimTraffic:
    """The validated, padded layer (cached: arguments are plain ints and strings)."""
    out_h, out_w = -(-(hp - kh + stride) // stride), -(-(wp - kw + stride) // stride)  # SCALE-Sim's ceil
    m, k, n = out_h * out_w, kh * kw * c, o
    sr, sc, t = {"os": (m, n, k), "ws": (k, n, m), "is": (k, m, n)}[dataflow]
    fr, fc = -(-sr // ar), -(-sc // ac)
    fold_rows = k + ar + ac - 2 if dataflow == "os" else 2 * ar + ac + t - 2
    widths = {"os": ar + 2 * ac, "ws": ar + 2 * ac, "is": 2 * ac + ar}[dataflow]
    demand = fr * fc * fold_rows * widths
    if demand > MAX_DEMAND_ELEMENTS or hp * wp * c > MAX_DEMAND_ELEMENTS:
        raise ValueError(
            f"layer too large to emulate SCALE-Sim's memory: its demand matrices hold {demand:,} elements "
            f"({fr * fc:,} folds x {fold_rows:,} rows x {widths} ifmap+filter+ofmap columns) and its padded input "
            f"{hp * wp * c:,} words; the limit is {MAX_DEMAND_ELEMENTS:,} each (MAX_DEMAND_ELEMENTS), so that one "
            f"layer cannot take minutes or gigabytes; use accelsim's analytical cost model for it instead.")
    ifmap_ids = _im2col(c, hp, wp, kh, kw, stride, out_h, out_w)
    filter_ids = (np.arange(n, dtype=np.int32)[None, :] * k + np.arange(k, dtype=np.int32)[:, None])
    layout = {"os": _os_layout, "ws": _ws_layout, "is": _is_layout}[dataflow]
    if_fetch, f_fetch, if_demand, f_demand, of_counts = layout(ifmap_ids, filter_ids, ar, ac)
    assert if_demand.shape[0] == f_demand.shape[0] == of_counts.shape[0] == fr * fc * fold_rows
    (if_fill, if_batch), *if_buf = _read_buffer(if_fetch, hp * wp * c, ifmap_words, ifmap_bw)
    (f_fill, f_batch), *f_buf = _read_buffer(f_fetch, k * n, filter_words, filter_bw)
    active = math.ceil(ofmap_words * 0.5)
    drain_lines = -(-(ofmap_words - active) // ofmap_bw)
    state = _simulate(if_demand, f_demand, of_counts, *if_buf, if_batch + 1, *f_buf, f_batch + 1, ofmap_words,
                      active, drain_lines, ofmap_bw)
    stalls, max_ofmap_cycle, if_moves, if_last, f_moves, f_last, of_words, of_first, of_last = (int(v) for v in state)
    sram_reads = {"os": (fc * m * k, fr * k * n, m * n + fr * fc * (ar + ac)),
                  "ws": (fc * m * k, k * n, fr * m * n), "is": (m * k, fc * k * n, fr * m * n)}[dataflow]
    return ScaleSimTraffic(
        compute_cycles=int(if_demand.shape[0]), stall_cycles=stalls, total_cycles=max_ofmap_cycle + 1,
        ifmap_dram_words=(if_fill + if_moves * if_batch) * ifmap_bw,
        filter_dram_words=(f_fill + f_moves * f_batch) * filter_bw, ofmap_dram_words=of_words,
        ifmap_sram_reads=sram_reads[0], filter_sram_reads=sram_reads[1], ofmap_sram_writes=sram_reads[2],
        first_dram_read_cycle=-max(if_fill, f_fill), last_dram_write_cycle=of_last,
        ifmap_dram_start_cycle=-if_fill, ifmap_dram_stop_cycle=if_last, filter_dram_start_cycle=-f_fill,
        filter_dram_stop_cycle=f_last, ofmap_dram_start_cycle=of_first, ofmap_dram_stop_cycle=of_last,
        ifmap_window_moves=if_moves, filter_window_moves=f_moves)


def _im2col(c: int, hp: int, wp: int, kh: int, kw: int, stride: int, out_h: int, out_w: int) -> np.ndarray:
    """(out pixels x window) input addresses, channel fastest (operand_matrix.calc_ifmap_elem_addr); -1 where a
    window of SCALE-Sim's extra output row or column runs off the input."""
    oy, ox = np.divmod(np.arange(out_h * out_w, dtype=np.int64), out_w)
    ky, rest = np.divmod(np.arange(kh * kw * c, dtype=np.int64), kw * c)
    kx, ch = np.divmod(rest, c)
    y, x = oy[:, None] * stride + ky[None, :], ox[:, None] * stride + kx[None, :]
    return np.where((y < hp) & (x < wp), (y * wp + x) * c + ch[None, :], -1).astype(np.int32)


def _pad(mat: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """mat in the top-left corner of a rows x cols matrix of -1 (an under-used fold's idle PEs)."""
    out = np.full((rows, cols), -1, dtype=mat.dtype)
    out[:mat.shape[0], :mat.shape[1]] = mat
    return out


def _gaps(blocks: np.ndarray, before: int, after: int) -> np.ndarray:
    """Each fold block (..., rows, width) with idle (-1) demand rows before and after it."""
    pad = [(0, 0)] * (blocks.ndim - 2) + [(before, after), (0, 0)]
    return np.pad(blocks, pad, constant_values=-1)


def _stack(blocks: np.ndarray, fc: int, fr: int) -> np.ndarray:
    """Fold blocks (fc or 1, fr or 1, rows, width) repeated to every (column fold, row fold), stacked in time."""
    out = np.empty((fc, fr) + blocks.shape[2:], dtype=blocks.dtype)
    out[...] = blocks
    return out.reshape(-1, blocks.shape[-1])


def _skew(blocks: np.ndarray, fc: int, fr: int) -> np.ndarray:
    """As _stack, each block skewed: column j delayed j cycles (systolic fill), rows + width - 1 rows each."""
    rows, width = blocks.shape[-2:]
    out = np.full((fc, fr, rows + width - 1, width), -1, dtype=blocks.dtype)
    for j in range(width):
        out[:, :, j:j + rows, j] = blocks[:, :, :, j]
    return out.reshape(-1, width)


def _valid_counts(demand: np.ndarray) -> np.ndarray:
    return (demand >= 0).sum(axis=1, dtype=np.int64)


def _os_layout(a: np.ndarray, b: np.ndarray, ar: int, ac: int) -> tuple[np.ndarray, ...]:
    """Output stationary (systolic_compute_os): windows along rows, filters along columns, K streams."""
    (m, k), n = a.shape, b.shape[1]
    fr, fc = -(-m // ar), -(-n // ac)
    a_folds = _pad(a, fr * ar, k).reshape(fr, ar, k).transpose(0, 2, 1)  # (fr, K, ar): A^T per row fold
    b_folds = _pad(b, k, fc * ac).reshape(k, fc, ac).transpose(1, 0, 2)  # (fc, K, ac)
    out = np.ones((m, n), dtype=np.int8)
    out_folds = _pad(out, fr * ar, fc * ac).reshape(fr, ar, fc, ac).transpose(2, 0, 1, 3)[:, :, ::-1]
    return (_diagonal(a_folds.reshape(-1, ar)), _diagonal(b_folds.reshape(-1, ac)),
            _skew(_gaps(a_folds, 0, ac - 1)[None], fc, fr), _skew(_gaps(b_folds, 0, ar - 1)[:, None], fc, fr),
            _valid_counts(_skew(_gaps(out_folds, k - 1, 0), fc, fr)))


def _ws_layout(a: np.ndarray, b: np.ndarray, ar: int, ac: int) -> tuple[np.ndarray, ...]:
    """Weight stationary (systolic_compute_ws): K along rows, filters along columns, output pixels stream."""
    (m, k), n = a.shape, b.shape[1]
    fr, fc = -(-k // ar), -(-n // ac)
    a_folds = _pad(a, m, fr * ar).reshape(m, fr, ar).transpose(1, 0, 2)  # (fr, M, ar)
    b_fetch = _pad(b, k, fc * ac).reshape(k, fc, ac).transpose(1, 0, 2)  # (fc, K, ac), fetched unrolled
    b_folds = _pad(b, fr * ar, fc * ac).reshape(fr, ar, fc, ac).transpose(2, 0, 1, 3)[:, :, ::-1]
    out = _pad(np.ones((m, n), dtype=np.int8), m, fc * ac).reshape(m, fc, ac).transpose(1, 0, 2)
    return (_diagonal(a_folds.reshape(-1, ar)), b_fetch.reshape(-1),
            _skew(_gaps(a_folds, ar, ac - 1)[None], fc, fr), _stack(_gaps(b_folds, 0, ar + ac + m - 2), fc, fr),
            _valid_counts(_skew(_gaps(out, 2 * ar - 1, 0)[:, None], fc, fr)))


def _is_layout(a: np.ndarray, b: np.ndarray, ar: int, ac: int) -> tuple[np.ndarray, ...]:
    """Input stationary (systolic_compute_is): K along rows, output pixels along columns, filters stream."""
    (m, k), n = a.shape, b.shape[1]
    fr, fc = -(-k // ar), -(-m // ac)
    a_fetch = _pad(a.T, k, fc * ac).reshape(k, fc, ac).transpose(1, 0, 2)  # (fc, K, ac), fetched unrolled
    a_folds = _pad(a.T, fr * ar, fc * ac).reshape(fr, ar, fc, ac).transpose(2, 0, 1, 3)[:, :, ::-1]
    b_folds = _pad(b, fr * ar, n).reshape(fr, ar, n).transpose(0, 2, 1)  # (fr, N, ar)
    out = _pad(np.ones((n, m), dtype=np.int8), n, fc * ac).reshape(n, fc, ac).transpose(1, 0, 2)
    return (a_fetch.reshape(-1), _diagonal(b_folds.reshape(-1, ar)),
            _stack(_gaps(a_folds, 0, ar + ac + n - 2), fc, fr), _skew(_gaps(b_folds, ar, ac - 1)[None], fc, fr),
            _valid_counts(_skew(_gaps(out, 2 * ar - 1, 0)[:, None], fc, fr)))


def _diagonal(mat: np.ndarray) -> np.ndarray:
    return _diagonal_order(np.ascontiguousarray(mat))


@numba.njit(cache=False)
def _diagonal_order(mat: np.ndarray) -> np.ndarray:
    """mat's elements along anti-diagonals, each from its bottom row up (create_*_prefetch_mat's roll)."""
    rows, cols = mat.shape
    out = np.empty(rows * cols, dtype=mat.dtype)
    idx = 0
    for diag in range(rows + cols - 1):
        for r in range(min(diag, rows - 1), max(0, diag - cols + 1) - 1, -1):
            out[idx] = mat[r, diag - r]
            idx += 1
    return out


def _read_buffer(fetch: np.ndarray, n_ids: int, words: int, bw: int) -> tuple:
    """((fill lines, lines per window move), per-address set lists as CSR, sets, active sets, moved sets)."""
    active = math.ceil(words * 0.5)
    per_set = math.ceil(words / 100)
    valid = np.ascontiguousarray(fetch[fetch >= 0])
    n_sets = valid.size // per_set + 1  # prepare_hashed_buffer closes a set at per_set, then appends the rest
    n_active = min(-(-active // per_set), n_sets)
    n_moved = min(-(-(words - active) // per_set), n_sets - n_active)
    offsets = np.zeros(n_ids + 1, dtype=np.int64)
    np.cumsum(np.bincount(valid, minlength=n_ids), out=offsets[1:])
    set_of = _sets_by_address(valid, offsets, per_set)
    fill_lines = min(-(-active // bw), -(-fetch.size // bw))
    return (fill_lines, -(-(words - active) // bw)), offsets, set_of, n_sets, n_active, n_moved


@numba.njit(cache=False)
def _sets_by_address(valid: np.ndarray, offsets: np.ndarray, per_set: int) -> np.ndarray:
    """For each address, the (ascending) indices of the sets that hold it, in CSR order given offsets."""
    fill = offsets[:-1].copy()
    out = np.empty(valid.size, dtype=np.int32)
    for pos in range(valid.size):
        out[fill[valid[pos]]] = pos // per_set
        fill[valid[pos]] += 1
    return out


@numba.njit(cache=False)
def _in_window(addr, offsets, set_of, start, n_sets, n_active):
    """active_buffer_hit: does any set holding addr lie in the circular window [start, start + n_active)?"""
    for p in range(offsets[addr], offsets[addr + 1]):
        ahead = set_of[p] - start
        if ahead < 0:
            ahead += n_sets
        if ahead < n_active:
            return True
    return False


@numba.njit(cache=False)
def _read_row(row, cycle, offsets, set_of, n_sets, n_active, n_moved, move_cycles, state):
    """read_buffer.service_reads for one demand row; state = [window start, last arrival, moves]. -> cycle out."""
    offset = HIT_LATENCY_CYCLES
    for addr in row:
        if addr < 0:
            continue
        moves = 0
        while not _in_window(addr, offsets, set_of, state[0], n_sets, n_active):
            if n_moved == 0 or moves > n_sets:  # a full circle always hits: an internal error, not a hang
                raise RuntimeError("read SRAM: an address in no prefetch set")
            state[0] = (state[0] + n_moved) % n_sets  # new_prefetch: the window moves forward
            state[1] += move_cycles
            state[2] += 1
            moves += 1
            potential = state[1] - (cycle + offset)
            offset += potential
            if potential > 0:
                offset += potential
    return cycle + offset


@numba.njit(cache=False)
def _drain(start_cycle, lines, drain_lines, bw, w):
    """write_buffer.empty_drain_buf: up to drain_lines lines, one per cycle. w = [lines, open line fill, free,
    drained lines, drain end, DRAM words, first drain cycle, last drain cycle]. -> last cycle of this drain."""
    end = min(w[3] + drain_lines, w[0])
    count = end - w[3]
    words = count * bw - (bw - lines[end - 1])  # only the last line's empty slots are discounted
    w[5] += words
    w[2] += words
    w[3] = end
    last = start_cycle + count - 1
    if w[6] < 0 or start_cycle < w[6]:
        w[6] = start_cycle
    w[7] = max(w[7], last)
    return last


@numba.njit(cache=False)
def _close_line(lines, w):
    if w[1] > 0:
        lines[w[0]] = w[1]
        w[0] += 1
        w[1] = 0


@numba.njit(cache=False)
def _write_row(count, cycle, lines, active, drain_lines, bw, w):
    """write_buffer.service_writes for one row of `count` outputs. -> cycle out."""
    current = cycle
    for _ in range(count):
        w[1] += 1
        w[2] -= 1
        if w[1] == bw:
            _close_line(lines, w)
        if current < w[4]:
            if w[2] <= 0:
                current = w[4]  # the SRAM is full: wait for the drain
        elif w[2] < active:
            _close_line(lines, w)
            w[4] = _drain(current, lines, drain_lines, bw, w)
    return current


@numba.njit(cache=False)
def _simulate(if_demand, f_demand, of_counts, if_offsets, if_sets, if_n, if_active, if_moved, if_move_cycles,
              f_offsets, f_sets, f_n, f_active, f_moved, f_move_cycles, of_words, of_active, drain_lines, of_bw):
    """double_buffered_scratchpad.service_memory_requests. -> [stalls, max ofmap cycle, ifmap moves, ifmap last
    arrival, filter moves, filter last arrival, ofmap DRAM words, first and last ofmap drain cycle]."""
    if_state = np.array([0, -1, 0], dtype=np.int64)
    f_state = np.array([0, -1, 0], dtype=np.int64)
    w = np.array([0, 0, of_words, 0, 0, 0, -1, -1], dtype=np.int64)  # see _drain
    lines = np.empty(of_counts.sum() + 1, dtype=np.int64)
    stalls = 0
    max_ofmap_cycle = -1
    cycle = np.int64(0)
    for i in range(if_demand.shape[0]):
        cycle = i + stalls
        if_out = _read_row(if_demand[i], cycle, if_offsets, if_sets, if_n, if_active, if_moved, if_move_cycles,
                           if_state)
        f_out = _read_row(f_demand[i], cycle, f_offsets, f_sets, f_n, f_active, f_moved, f_move_cycles, f_state)
        of_out = _write_row(of_counts[i], cycle, lines, of_active, drain_lines, of_bw, w)
        stalls += max(if_out - cycle - HIT_LATENCY_CYCLES, f_out - cycle - HIT_LATENCY_CYCLES, of_out - cycle)
        max_ofmap_cycle = max(max_ofmap_cycle, of_out)
        cycle = of_out
    # empty_all_buffers: close the open line, then drain everything left back to back from the last row's cycle
    _close_line(lines, w)
    while w[3] < w[0]:
        w[4] = _drain(cycle, lines, drain_lines, of_bw, w)
        cycle = w[4] + 1
    return np.array([stalls, max_ofmap_cycle, if_state[2], if_state[1], f_state[2], f_state[1], w[5], w[6], w[7]],
                    dtype=np.int64)
