"""experiments/tpu_breakdown.py: a tpu_v1_like run's time split into the weight stream running, the stream idle
while the activation unit works (the RAW wait), and neither; hand-made spans with hand-checked answers."""
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

if "tpu_breakdown" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "tpu_breakdown", Path(__file__).resolve().parent.parent / "experiments" / "tpu_breakdown.py")
    sys.modules["tpu_breakdown"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["tpu_breakdown"])
stream_breakdown = sys.modules["tpu_breakdown"].stream_breakdown
drain_share = sys.modules["tpu_breakdown"].drain_share


@dataclass(frozen=True)
class Span:
    kind: str
    resource: str
    start: int
    end: int
    node: int = 0


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


def test_the_drain_is_one_fold_after_each_matrix_unit_task_over_the_makespan():
    """A 4x4 weight-stationary array shifting one row a cycle: a fold of T rows takes 4 (shift) + 4 + 4 - 2 (skew)
    + T cycles, so T = 2 and T = 6 drain 12 and 16 cycles: 28 of a 56-cycle run. Other units' tasks have none."""
    graph = SimpleNamespace(nodes=[SimpleNamespace(shape=(2, 4)), SimpleNamespace(shape=(6, 4))])
    array = SimpleNamespace(rows=4, cols=4, dataflow="ws", preload_rows_per_cycle=1)
    run = Run((Span("node", "mxu", 0, 20, node=0), Span("prefetch", "dma.parameters", 0, 10),
               Span("node", "activation", 20, 30, node=0), Span("node", "mxu", 30, 56, node=1)), 56)
    assert drain_share(run, graph, array) == 28 / 56
