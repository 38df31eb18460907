"""Input rows gathered, zero-padded, into contiguous buffers: shared by the numba conv2d kernels.

conv.py (im2col, col2im, the band kernel) and winograd.py read the input through these, so
their own inner loops copy whole runs with no bounds check per element.
Column indices are often unsigned (np.uint64): numba then adds no negative-index wraparound,
which would keep LLVM from vectorizing the loop.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def valid_range(length, n, step, offset):
    """[lo, hi): the q in [0, n) whose q * step + offset lies in [0, length)."""
    lo = 0 if offset >= 0 else (-offset + step - 1) // step
    hi = 0 if offset >= length else min(n, (length - 1 - offset) // step + 1)
    return lo, max(lo, hi)


@numba.njit(cache=True)
def gather_row(src, offset, step, dst, n):
    """dst[q] = src[q * step + offset] for q < n, and 0 where that index falls outside src."""
    lo, hi = valid_range(src.shape[0], n, step, offset)
    u_lo, u_hi, u_n, u_step = np.uint64(lo), np.uint64(hi), np.uint64(n), np.uint64(step)
    first = np.uint64(lo * step + offset)  # >= 0: lo is the first q inside src
    for q in range(u_lo):
        dst[q] = 0
    if step == 1:
        for q in range(u_hi - u_lo):
            dst[u_lo + q] = src[first + q]
    else:
        for q in range(u_hi - u_lo):
            dst[u_lo + q] = src[first + q * u_step]
    for q in range(u_hi, u_n):
        dst[q] = 0


@numba.njit(cache=True)
def fill_slab(x, h0, pw, slab):
    """slab[c, t, phase, q] = x[c, h0 + t, q * phases + phase - pw], 0 outside x: the rows of x from
    h0 on, zero-padded by pw columns on the left and split into `phases` interleaved column sets.

    With stride sw as the phase count, every kernel tap (i, j) reads its part of a slab row as one
    contiguous run: input column ow*sw + j*dw is slab column ow + (j*dw) // sw of phase (j*dw) % sw.
    """
    phases, wq = slab.shape[2], slab.shape[3]
    for c in range(slab.shape[0]):
        for t in range(slab.shape[1]):
            h = h0 + t
            for phase in range(phases):
                dst = slab[c, t, phase]
                if 0 <= h < x.shape[1]:
                    gather_row(x[c, h], phase - pw, phases, dst, wq)
                else:
                    for q in range(wq):
                        dst[q] = 0
