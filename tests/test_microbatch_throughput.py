"""More micro-batches never make a step slower per sample (issue 27's regression: ResNet-50 training on groq_like
fell from 7,211 samples/s at M=8 to 5,939 at M=16; experiments/microbatch_sweep.py measures it), and
a large plan whose rules' tensors do not fit is rescued with gradient accumulations taken first."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.compiler.planning.expand import expand
from accelsim.compiler.timing import improve
from accelsim.errors import MemoryFitError
from accelsim.schedule.options import StepOptions

TOLERANCE = 0.97  # experiments/microbatch_sweep.py's


def test_throughput_at_any_m_keeps_up_with_the_best_at_a_smaller_m():
    """resnet_block training on groq_like: the sweep's property on a model CI compiles in seconds."""
    graph = A.training_graph(A.models.build("resnet_block"))
    best = 0.0
    for m in (1, 2, 4, 8):
        s = A.compile(graph, "groq_like", microbatches=m)
        throughput = s.samples_per_step / s.makespan_cycles
        assert throughput >= TOLERANCE * best, f"M={m}: {throughput / best:.3f} of the best at a smaller M"
        best = max(best, throughput)


def _step():
    hw = A.load_hw("groq_like")
    graph = A.training_graph(A.models.build("mlp", batch=4, sizes=(16, 8, 4)))
    return hw, expand(graph, hw, StepOptions(microbatches=3), None)


def test_a_large_plan_whose_rules_do_not_fit_is_rescued_memory_lean(monkeypatch):
    hw, plan = _step()
    assert any(t.kind == "accumulate" for t in plan.tasks)
    real, calls = improve.list_schedule, []

    def lean_only(plan, hw, priority, *args, accumulations_first=False, **kwargs):
        calls.append((priority, accumulations_first))
        if not accumulations_first:
            raise MemoryFitError(f"no room under {priority}")
        return real(plan, hw, priority, *args, accumulations_first=accumulations_first, **kwargs)

    monkeypatch.setattr(improve, "list_schedule", lean_only)
    timed, _ = improve.improve(plan, hw, improve.Budget(work_tasks=0))  # a plan too large for more than ALWAYS
    rules = list(improve.ALWAYS) + [r for r in improve.RESCUE if r not in improve.ALWAYS]
    assert calls == [(r, False) for r in rules] + [(r, True) for r in improve.ALWAYS]
    lean = min(max(x.end for x in real(plan, hw, r, accumulations_first=True)[0]) for r in improve.ALWAYS)
    assert max(x.end for x in timed) == lean


def test_runs_that_fit_are_never_retried(monkeypatch):
    hw, plan = _step()
    calls = []
    real = improve.list_schedule
    monkeypatch.setattr(improve, "list_schedule",
                        lambda *a, **k: calls.append(k.get("accumulations_first")) or real(*a, **k))
    improve.improve(plan, hw, improve.Budget(work_tasks=0))
    assert calls == [False] * len(improve.ALWAYS)


def test_accumulations_first_takes_each_accumulation_as_soon_as_its_gradients_are_ready():
    """Under the rank rule an accumulation waits behind later micro-batches' work in the order the list
    scheduler takes tasks; memory-lean, it starts when its inputs end or its unit frees up."""
    hw, plan = _step()
    timed, _ = improve.list_schedule(plan, hw, "rank", accumulations_first=True)
    accumulations = [t for t in plan.tasks if t.kind == "accumulate"]
    for t in accumulations:
        ready = max(timed[d].end for d in t.deps)
        assert timed[t.id].start >= ready
    assert any(timed[t.id].start == max(timed[d].end for d in t.deps) for t in accumulations)


@pytest.mark.parametrize("lean", [False, True])
def test_both_kinds_of_run_are_valid_schedules_of_the_plan(lean):
    hw, plan = _step()
    timed, _ = improve.list_schedule(plan, hw, "stagger", accumulations_first=lean)
    for t in plan.tasks:
        assert all(timed[d].end <= timed[t.id].start for d in t.preds)
