"""Analytical timing of a GEMM on a rows x cols systolic array: (M, K, N, array, dataflow) -> SystolicCost.

By default mirrors SCALE-Sim v2/v3's compute model (scalesim/compute/systolic_compute_{os,ws,is}.py), checked
against it by experiments/scalesim_compare.py and tests/test_systolic.py; `fold_overlap="stationary"`
models a double-buffered stationary operand (TPU v1's MXU, Groq's MXM), whose folds overlap.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

DATAFLOWS = ("os", "ws", "is")
FOLD_OVERLAPS = ("none", "stationary")  # see run_cycles


@dataclass(frozen=True, slots=True)
class SystolicCost:
    """The compute time of one (possibly batched) GEMM on one systolic array, memory stalls excluded."""

    compute_cycles: int  # total cycles including fill/drain of every fold
    folds: int  # number of array mappings (row folds x col folds x batch)
    macs: int  # M*K*N*batch
    utilization: float  # macs / (compute_cycles * rows * cols)
    temporal: int  # T: the elements streamed through each fold (M for ws, N for is, K for os)


def _positive(**sizes: int) -> tuple[int, ...]:
    """The sizes as Python ints (numpy ints welcome); ValueError naming every one that is not >= 1."""
    bad = [f"{name}={value!r}" for name, value in sizes.items()
           if isinstance(value, bool) or not isinstance(value, Integral) or value < 1]
    if bad:
        raise ValueError(f"sizes must be positive integers, got {', '.join(bad)}")
    return tuple(int(value) for value in sizes.values())


def _spatial_temporal(m: int, k: int, n: int, dataflow: str) -> tuple[int, int, int]:
    """(Sr, Sc, T): what is spread over array rows and columns, and what streams through time."""
    if dataflow == "os":  # each PE holds one output pixel x filter, the window streams through
        return m, n, k
    if dataflow == "ws":  # each PE holds one weight; ofmap pixels stream through
        return k, n, m
    if dataflow == "is":  # each PE holds one input; filters stream through
        return k, m, n
    raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {', '.join(DATAFLOWS)}")


def preload_cycles(rows: int, dataflow: str, preload_rows_per_cycle: int = 1) -> int:
    """Cycles to install a ws/is array's stationary tile: its `rows` rows at `preload_rows_per_cycle`
    rows per cycle (1: a shift chain, as SCALE-Sim and TPU v1's MXU); an os array installs nothing."""
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {', '.join(DATAFLOWS)}")
    if dataflow == "os":
        return 0
    rows, rate = _positive(rows=rows, preload_rows_per_cycle=preload_rows_per_cycle)
    return -(-rows // rate)


def fold_cycles(rows: int, cols: int, temporal: int, dataflow: str, preload_rows_per_cycle: int = 1) -> int:
    """Cycles of one fold, fill and drain included, for `temporal` = T elements streamed through it.

    A partly used fold costs as much as a full one (SCALE-Sim pads its demand matrices with idle
    requests to the full array); how consecutive folds combine is run_cycles's business.
    OS: PE (r, c) gets its first operands r + c cycles late (skew) and then accumulates T products,
    so the far corner is done after (rows-1) + (cols-1) + T cycles.
    WS/IS: `rows` cycles shift the stationary operand in; stream element t then enters array row r at
    cycle rows + t + r and its sum leaves the bottom of column c at cycle rows + t + (rows-1) + c;
    the last one (t = T-1, c = cols-1) leaves in cycle 2*rows + cols + T - 3, counting from 0.
    An install of P = preload_cycles(...) cycles instead of `rows` moves all of that by P - rows.
    """
    return preload_cycles(rows, dataflow, preload_rows_per_cycle) + rows + cols + temporal - 2


def run_cycles(folds: int, rows: int, cols: int, temporal: int, dataflow: str, fold_overlap: str = "none",
               preload_rows_per_cycle: int = 1) -> int:
    """Cycles for `folds` folds of T = `temporal` streamed elements run one after another on one array.

    "none" (SCALE-Sim): every fold pays its own preload, fill and drain: folds * fold_cycles.

    "stationary" (ws and is only): the PEs hold a second, shadow copy of the stationary operand, so the
    next fold's tile is installed while the current fold streams. TPU v1's MXU "holds one 64 KiB tile
    of weights plus one for double-buffering (to hide the 256 cycles it takes to shift a tile in)", and
    its weights "take effect with the advancing wave alongside the first data of a new block" (Jouppi
    et al., ISCA 2017, Section 2 and the text on Figure 4; arXiv 1704.04760 pp. 3-4): 256 rows in 256
    cycles, one row per cycle (k = preload_rows_per_cycle = 1, SCALE-Sim's rate). Groq's MXM, also
    weight-stationary with activation streams flowing past installed weights (Abts et al., ISCA 2020),
    writes its weights from the chip's streams, k rows per cycle (hwconfigs/groq_like.yaml sources k).

    Let P = ceil(rows / k) be one tile's install, fold f's first element enter array row 0 in cycle s_f
    (row r in cycle s_f + r); as in fold_cycles, s_0 = P. Three constraints set the next fold's start:
      - shadow row r may take fold f+1's weights once fold f's weights moved from it to the active
        registers, which they do with fold f's wave at the end of cycle s_f + r (a register swap: the
        shadow may be written on that same edge), and must hold them by cycle s_{f+1} + r, when fold
        f+1's first element reaches row r: a window of s_{f+1} - s_f cycles per row, the windows of
        consecutive rows one cycle apart. With k = 1 (a shift chain) row 0's window binds:
        s_{f+1} >= s_f + rows; with k rows per cycle written to any row, the rows freed by the wave
        (one per cycle) are written within their windows if every window holds P cycles:
        s_{f+1} >= s_f + P (each row is written once per fold, `rows` writes at k per cycle);
      - each array row takes one streamed element per cycle: s_{f+1} >= s_f + T.
    So folds issue every max(T, P) cycles: the install is hidden entirely when T >= P and in part
    otherwise. Because the tile switch travels with the data, fold f+1's elements follow fold f's
    through the array without a drain in between, so the skew of rows + cols - 2 (the last element's
    trip down to the bottom row and across to the last column) is paid once per run, after the last fold:
        cycles = fold_cycles + (folds - 1) * max(T, P).
    Partial sums from consecutive row folds go to the accumulators one row per cycle in stream order,
    as they do within a fold, so no port is shared by two folds in one cycle. A run is the folds of
    one node: the next node's first install is not overlapped with this node's last fold.
    OS keeps outputs in the PEs, not an installed operand, so it has no such overlap and is refused.
    """
    folds, rows, cols, temporal = _positive(folds=folds, rows=rows, cols=cols, temporal=temporal)
    one = fold_cycles(rows, cols, temporal, dataflow, preload_rows_per_cycle)
    if fold_overlap == "none":
        return folds * one
    if fold_overlap != "stationary":
        raise ValueError(f"unknown fold_overlap {fold_overlap!r}; expected one of {', '.join(FOLD_OVERLAPS)}")
    if dataflow == "os":
        raise ValueError("fold_overlap 'stationary' needs a ws or is array (a double-buffered stationary "
                         "operand); an os array keeps its outputs in the PEs, so use fold_overlap 'none'")
    return one + (folds - 1) * max(temporal, preload_cycles(rows, dataflow, preload_rows_per_cycle))


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int, dataflow: str, batch: int = 1,
                fold_overlap: str = "none", preload_rows_per_cycle: int = 1) -> SystolicCost:
    """Cycles for `batch` independent (m x k) @ (k x n) GEMMs run fold after fold (see run_cycles).

    With the default fold_overlap "none", SCALE-Sim reports the 0-based index of the last cycle (its
    total cycles), one less than the count returned here.
    """
    m, k, n, rows, cols, batch = _positive(m=m, k=k, n=n, rows=rows, cols=cols, batch=batch)
    spatial_rows, spatial_cols, temporal = _spatial_temporal(m, k, n, dataflow)
    folds = math.ceil(spatial_rows / rows) * math.ceil(spatial_cols / cols) * batch
    compute_cycles = run_cycles(folds, rows, cols, temporal, dataflow, fold_overlap, preload_rows_per_cycle)
    macs = m * k * n * batch
    return SystolicCost(compute_cycles, folds, macs, macs / (compute_cycles * rows * cols), temporal)


def _pair(name: str, value: int | tuple[int, int]) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, Integral) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, Integral) and not isinstance(v, bool) for v in pair):
        raise ValueError(f"{name} must be an int or a pair of ints, got {value!r}")
    return int(pair[0]), int(pair[1])


def conv_as_gemm(n: int, c: int, h: int, w: int, o: int, kh: int, kw: int,
                 stride: int | tuple[int, int] = (1, 1), padding: int | tuple[int, int] = (0, 0),
                 dilation: int | tuple[int, int] = (1, 1), groups: int = 1) -> tuple[int, int, int, int]:
    """The im2col view of an NCHW conv2d: (batch=groups, M=N*Ho*Wo, K=(C/groups)*KH*KW, N=O/groups)."""
    stride, padding, dilation = _pair("stride", stride), _pair("padding", padding), _pair("dilation", dilation)
    n, c, h, w, o, kh, kw, groups = _positive(n=n, c=c, h=h, w=w, o=o, kh=kh, kw=kw, groups=groups)
    _positive(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0], dilation_w=dilation[1])
    if min(padding) < 0:
        raise ValueError(f"padding must be >= 0, got {padding}")
    if c % groups or o % groups:
        raise ValueError(f"groups={groups} must divide both in channels c={c} and out channels o={o}")
    out_hw = []
    for size, kernel, s, p, d, axis in zip((h, w), (kh, kw), stride, padding, dilation, "hw"):
        span = d * (kernel - 1) + 1
        if size + 2 * p < span:
            raise ValueError(f"conv kernel span {span} exceeds padded input {axis}={size + 2 * p}")
        out_hw.append((size + 2 * p - span) // s + 1)
    return groups, n * out_hw[0] * out_hw[1], (c // groups) * kh * kw, o // groups
