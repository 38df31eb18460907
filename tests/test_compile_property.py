"""Every compile either returns a schedule the validator accepts or raises the project's own error, over
optimizer x micro-batches x data-parallel x pipeline-stages x every shipped hwconfig (a tiny mlp)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import accelsim as A

HWCONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "hwconfigs").glob("*.yaml"))
OPTIMIZERS = ["sgd", "momentum", "adam"]
BATCH = 2


@lru_cache(maxsize=None)
def _hw(name: str) -> A.HwSpec:
    return A.load_hw(name)


@lru_cache(maxsize=None)
def _train(optimizer: str) -> A.Graph:
    return A.training_graph(A.models.build("mlp", batch=BATCH, sizes=(16, 8, 4)), optimizer=optimizer)


def test_the_property_covers_every_shipped_hwconfig():
    assert len(HWCONFIGS) >= 6 and "groq_like_x4" in HWCONFIGS


@pytest.mark.timeout(600)
@settings(max_examples=25)
@given(optimizer=st.sampled_from(OPTIMIZERS), microbatches=st.integers(1, 4), data_parallel=st.integers(1, 4),
       pipeline_stages=st.integers(1, 4), hw_name=st.sampled_from(HWCONFIGS))
# issue 10, bug 6: a dict rebound to an int inside a closure of compiler/planning/expand.py
@example(optimizer="adam", microbatches=2, data_parallel=2, pipeline_stages=2, hw_name="groq_like_x4")
@example(optimizer="momentum", microbatches=4, data_parallel=4, pipeline_stages=4, hw_name="groq_like_x4")
@example(optimizer="sgd", microbatches=1, data_parallel=1, pipeline_stages=1, hw_name="bespoke_superres")
def test_compile_validates_or_raises_the_projects_error(optimizer, microbatches, data_parallel, pipeline_stages,
                                                       hw_name):
    hw, graph = _hw(hw_name), _train(optimizer)
    try:
        schedule = A.compile(graph, hw, microbatches=microbatches, data_parallel=data_parallel,
                             pipeline_stages=pipeline_stages)
    except A.AccelsimError:
        return
    A.validate_schedule(schedule, graph, hw)
    assert (schedule.options.microbatches, schedule.options.data_parallel, schedule.options.pipeline_stages) == \
        (microbatches, data_parallel, pipeline_stages)
    assert schedule.samples_per_step == BATCH * microbatches * data_parallel
