"""The run summary's energy table: the components past its rows share one row, never a row of "1 others"."""
import pytest

import accelsim as A
from accelsim.cli import summary


@pytest.fixture(scope="module")
def run_summary():
    step = A.training_graph(A.models.build("mlp", batch=64, sizes=(16, 256, 10)), optimizer="sgd", lr=0.01)
    hw = A.load_hw("groq_like_x4")
    sched = A.compile(step, hw, pipeline_stages=2, microbatches=2, stage_layers=(1, 1), split=False, effort="fast")
    return A.run_summary(sched, hw)


def _components(run_summary, rows, monkeypatch):
    monkeypatch.setattr(summary, "ENERGY_ROWS", rows)
    table = summary.energy_table(run_summary)
    return [str(c) for c in table.columns[1].cells]


def test_one_component_past_the_rows_gets_its_own_row(run_summary, monkeypatch):
    n = len(run_summary.energy_breakdown.items)
    components = _components(run_summary, n - 1, monkeypatch)
    assert len(components) == n and not any("others" in c for c in components)


def test_two_past_the_rows_share_one(run_summary, monkeypatch):
    n = len(run_summary.energy_breakdown.items)
    assert _components(run_summary, n - 2, monkeypatch)[-1] == "2 others"
