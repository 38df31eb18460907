"""Analytical timing of a GEMM on a rows x cols systolic array: (M, K, N, array, dataflow) -> SystolicCost.

Mirrors SCALE-Sim v2/v3's compute model (scalesim/compute/systolic_compute_{os,ws,is}.py), checked
against it by experiments/scalesim_compare.py and tests/test_systolic.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

DATAFLOWS = ("os", "ws", "is")


@dataclass(frozen=True, slots=True)
class SystolicCost:
    """The compute time of one (possibly batched) GEMM on one systolic array, memory stalls excluded."""

    compute_cycles: int  # total cycles including fill/drain of every fold
    folds: int  # number of array mappings (row folds x col folds x batch)
    macs: int  # M*K*N*batch
    utilization: float  # macs / (compute_cycles * rows * cols)


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


def fold_cycles(rows: int, cols: int, temporal: int, dataflow: str) -> int:
    """Cycles of one fold, fill and drain included, for `temporal` = T elements streamed through it.

    Folds run back to back without overlap, and a partly used fold costs as much as a full one
    (SCALE-Sim pads its demand matrices with idle requests to the full array).
    OS: PE (r, c) gets its first operands r + c cycles late (skew) and then accumulates T products,
    so the far corner is done after (rows-1) + (cols-1) + T cycles.
    WS/IS: `rows` cycles shift the stationary operand in; stream element t then enters array row r at
    cycle rows + t + r and its sum leaves the bottom of column c at cycle rows + t + (rows-1) + c;
    the last one (t = T-1, c = cols-1) leaves in cycle 2*rows + cols + T - 3, counting from 0.
    """
    if dataflow not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {dataflow!r}; expected one of {', '.join(DATAFLOWS)}")
    preload_cycles = 0 if dataflow == "os" else rows
    return preload_cycles + rows + cols + temporal - 2


def gemm_cycles(m: int, k: int, n: int, rows: int, cols: int, dataflow: str, batch: int = 1) -> SystolicCost:
    """Cycles for `batch` independent (m x k) @ (k x n) GEMMs run back to back, fold after fold.

    SCALE-Sim reports the 0-based index of the last cycle (its total cycles), one less than the
    count returned here.
    """
    m, k, n, rows, cols, batch = _positive(m=m, k=k, n=n, rows=rows, cols=cols, batch=batch)
    spatial_rows, spatial_cols, temporal = _spatial_temporal(m, k, n, dataflow)
    folds = math.ceil(spatial_rows / rows) * math.ceil(spatial_cols / cols) * batch
    compute_cycles = folds * fold_cycles(rows, cols, temporal, dataflow)
    macs = m * k * n * batch
    return SystolicCost(compute_cycles, folds, macs, macs / (compute_cycles * rows * cols))


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
