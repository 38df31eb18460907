"""experiments/tpu_breakdown.py: a tpu_v1_like run's time split into the weight stream running, the stream idle
while the activation unit works (the RAW wait), and neither; hand-made spans with hand-checked answers."""
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

if "tpu_breakdown" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "tpu_breakdown", Path(__file__).resolve().parent.parent / "experiments" / "tpu_breakdown.py")
    sys.modules["tpu_breakdown"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["tpu_breakdown"])
stream_breakdown = sys.modules["tpu_breakdown"].stream_breakdown


@dataclass(frozen=True)
class Span:
    kind: str
    resource: str
    start: int
    end: int


@dataclass(frozen=True)
class Run:
    spans: tuple
    makespan_cycles: int


def test_the_stream_runs_under_prefetches_and_the_matrix_unit_and_waits_behind_the_vector_work():
    run = Run((Span("prefetch", "dma.parameters", 0, 10), Span("node", "mxu", 10, 30),
               Span("node", "activation", 25, 40), Span("prefetch", "dma.parameters", 40, 50)), 50)
    split = stream_breakdown(run)
    assert (split.stream, split.raw_wait, split.other) == (40 / 50, 10 / 50, 0.0)


def test_time_with_neither_the_stream_nor_the_vector_unit_is_other():
    run = Run((Span("node", "mxu", 0, 10), Span("node", "activation", 5, 15), Span("node", "mxu", 20, 30)), 30)
    split = stream_breakdown(run)
    assert (split.stream, split.raw_wait, split.other) == pytest.approx((20 / 30, 5 / 30, 5 / 30))
    assert str(split) == " 67%/ 17%/ 17%"
