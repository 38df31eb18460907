"""Pause Python's cyclic garbage collector around a long, allocation-heavy stage.

Compiling or replaying a large step allocates millions of small objects (task specs, timed intervals,
pydantic models, SimPy events) that stay alive until the stage returns. Each full collection scans all of
them and finds almost nothing: on GPT-2 small over eight chips (43K tasks) the collector took a quarter of
compile + simulate (33.5 s -> 26.9 s without it, experiments/bench_symmetry.py). Reference counting
still frees everything acyclic at once; cycles made meanwhile are collected when the collector resumes.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """The collector off for the block, then back as it was (nesting leaves an outer pause in force)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
