"""The compiled schedules in schedules/ are exactly what the scheduler produces today."""
from pathlib import Path

import pytest

import accelsim as A
from accelsim.compiler import compile
from accelsim.schedule.io import save_schedule
from accelsim.api import load_schedule

SCHEDULES = Path(__file__).resolve().parent.parent / "schedules"
HWCONFIGS = sorted(p.stem for p in (SCHEDULES.parent / "hwconfigs").glob("*.yaml"))


def test_every_shipped_hwconfig_has_a_schedule_for_the_default_model():
    assert sorted(p.stem.removeprefix("superres_train_") for p in SCHEDULES.glob("superres_train_*.json")) == HWCONFIGS


@pytest.mark.parametrize("hw_name", HWCONFIGS)
def test_recompiling_the_default_training_step_reproduces_the_shipped_schedule(hw_name, tmp_path):
    """Made by `accelsim compile --hw <hw> -o schedules/superres_train_<hw>.json` (superres, SGD, lr 0.01)."""
    hw = A.load_hw(hw_name)
    graph = A.training_graph(A.models.build("superres"), optimizer="sgd", lr=0.01)
    shipped = SCHEDULES / f"superres_train_{hw_name}.json"
    loaded = load_schedule(shipped, graph, hw)
    fresh = tmp_path / "fresh.json"
    save_schedule(compile(graph, hw, **loaded.options.model_dump()), fresh)
    assert fresh.read_bytes() == shipped.read_bytes()


def test_a_shipped_schedule_is_refused_for_another_graph():
    other = A.training_graph(A.models.build("superres", batch=2))
    with pytest.raises(A.AccelsimError, match="accelsim compile"):
        load_schedule(SCHEDULES / "superres_train_groq_like.json", other, A.load_hw("groq_like"))
