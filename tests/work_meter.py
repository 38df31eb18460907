"""The work a block of code does, counted the same on a busy machine as on an idle one: the steps of Python
it runs (function calls, lines and returns, as sys.settrace sees them) and the peak of memory it allocates
(tracemalloc).

Tests bound these instead of wall-clock time: no test may assert a duration, since a loaded machine
stretches every one. A refusal that expands a bomb, reads a whole hostile file or loops super-linearly over
its input exceeds such a budget by orders of magnitude on any machine, and `max_steps` stops the block
there, so a blow-up fails at once with a count instead of running into the pytest timeout:

    with WorkMeter(max_steps=100_000) as work:
        with pytest.raises(HwConfigError):
            load_hw(bomb)
    assert work.peak_bytes < 16 * 2**20, work.line()

Work done in C (libyaml, json, numpy) shows only in the memory it allocates. Counts depend on the Python
and library versions, not on the machine, so a budget is set several times above what the code does today
and far below what the blow-up it guards against does.
"""
from __future__ import annotations

import itertools
import operator
import sys
import tracemalloc
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any, Callable

_UNLIMITED = 2**62


class WorkBudgetExceeded(BaseException):
    """Raised inside the measured code when it passes max_steps (a BaseException, so that the code's own
    `except Exception` cannot swallow it); the meter turns it into an AssertionError."""


@dataclass
class Work:
    """What the measured block did, filled in when it ends."""

    steps: int = 0
    peak_bytes: int = 0

    def line(self) -> str:
        return f"{self.steps:,} Python steps, peak {self.peak_bytes / 2**20:.1f} MiB allocated"


class WorkMeter:
    """Context manager counting the Python steps run in this thread inside the block and the peak of memory
    allocated there; with max_steps, the block is stopped by an AssertionError once it runs more."""

    def __init__(self, max_steps: int | None = None) -> None:
        self.max_steps = max_steps
        self.work = Work()
        self._limit = _UNLIMITED if max_steps is None else max_steps
        self._ticks = itertools.repeat(True, self._limit)
        self._was_tracing_memory = False
        self._base_bytes = 0
        self._old_trace: Callable[..., Any] | None = None

    def _tracer(self) -> Callable[..., Any]:
        # Counting down an itertools.repeat allocates nothing per step (an int counter would allocate an
        # object per step, which tracemalloc records: five times slower). next() gives False once the
        # budget is spent.
        ticks = self._ticks

        def trace(frame: FrameType, event: str, arg: Any) -> Callable[..., Any]:
            if next(ticks, False):
                return trace
            sys.settrace(None)
            raise WorkBudgetExceeded()
        return trace

    def _count(self) -> int:
        return self._limit - operator.length_hint(self._ticks)

    def reset(self) -> None:
        """Count from here: what the block did before (setting up the call under test) is not counted."""
        self._ticks = itertools.repeat(True, self._limit)
        sys.settrace(self._tracer())
        tracemalloc.reset_peak()
        self._base_bytes = tracemalloc.get_traced_memory()[0]

    def __enter__(self) -> Work:
        self._was_tracing_memory = tracemalloc.is_tracing()
        if not self._was_tracing_memory:
            tracemalloc.start()
        self._old_trace = sys.gettrace()
        self.reset()
        return self.work

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        sys.settrace(self._old_trace)
        self.work.steps = self._count()
        self.work.peak_bytes = max(tracemalloc.get_traced_memory()[1] - self._base_bytes, 0)
        if not self._was_tracing_memory:
            tracemalloc.stop()
        if exc_type is WorkBudgetExceeded:
            raise AssertionError(f"more than {self.max_steps:,} Python steps: a blow-up or a hang (the code "
                                 f"under test needs a small fraction of that)") from None
