"""Threads per kernel call, chosen from the call's size.

A numba parallel region forks and joins every thread. On small tensors that costs more than the
work, and on a busy or oversubscribed machine (pytest-xdist workers, other jobs) the join waits for
the slowest thread's next time slice: a 32k-element add measured 0.16 ms on one thread and 0.77 ms
on two with the cores busy. Calls below PARALLEL_MIN_ELEMENTS run on the calling thread only.

numba's default threading layer here is GNU OpenMP, whose idle threads spin (OMP_WAIT_POLICY=active).
When other processes keep the cores busy, the spinning threads take the time slices the working ones
need: with two busy processes on this 2-core machine a 512^3 matmul took 8.5 ms active and 4.3 ms
passive (medians; 2.2-2.9 ms either way when idle). libgomp reads the policy when numba first launches
its threads, so it is set here (unless the user set it) before any parallel kernel runs.
"""
from __future__ import annotations

import functools
import os
from typing import Callable

import numba
import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

PARALLEL_MIN_ELEMENTS = 1 << 16
"""Input elements (summed over a call's arrays) from which a kernel uses every numba thread."""


def sized(kernel: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """`kernel` run single-threaded when its inputs are small; numba's own setting otherwise."""
    @functools.wraps(kernel)
    def call(*arrays, **attrs):
        if sum(np.size(a) for a in arrays) >= PARALLEL_MIN_ELEMENTS:
            return kernel(*arrays, **attrs)
        threads = numba.get_num_threads()
        numba.set_num_threads(1)
        try:
            return kernel(*arrays, **attrs)
        finally:
            numba.set_num_threads(threads)
    return call
