"""The `auto` search: never worse than no rewriting nor than any rule-based pipeline, deterministic,
bounded by its budget and time limit, choosing places of sited passes, refusing bad options."""
import math

import pytest

import accelsim as A
from accelsim.models.sizes import SMALL
from accelsim.passes import PASSES, AppliedPass, inference_graph
from accelsim.pass_search import optimize_with_log
from accelsim.pass_search.auto import SearchOptions
from accelsim.passes.kind import graph_kind
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import graph_hash

# One schedule per candidate instead of two, and no list-scheduling search inside each compile: what these
# tests assert is the pass search's bookkeeping, which holds at any compile effort, so they stay short.
FAST = StepOptions(split=False, effort="fast")


def _graph(model: str, kind: str) -> A.Graph:
    fwd = A.models.build(model, **SMALL[model])
    return inference_graph(fwd) if kind == "inf" else A.training_graph(fwd)


def _makespan(graph: A.Graph, hw: A.HwSpec) -> int:
    return A.compile(graph, hw, split=False, effort="fast").makespan_cycles


def _rule_based_makespans(graph: A.Graph, hw: A.HwSpec) -> dict[str, int]:
    """Each applicable pass alone and all of them in table order, through the public API."""
    names = [name for name, p in PASSES.items() if graph_kind(graph) in p.applies_to]
    out = {}
    for label, passes in [(n, [n]) for n in names] + [("default pipeline", names)]:
        optimized = A.optimize(graph, passes, hw=hw)
        if optimized.passes:
            out[label] = _makespan(optimized, hw)
    return out


@pytest.mark.parametrize("hw_name", ["tpu_v1_like", "groq_like"])
@pytest.mark.parametrize("model,kind", [("transformer_block", "inf"), ("resnet_block", "train")])
def test_auto_is_never_worse_than_no_rewrite_nor_the_best_rule_based_pipeline(model, kind, hw_name):
    hw, g = A.load_hw(hw_name), _graph(model, kind)
    out, log = optimize_with_log(g, "auto", hw=hw, search=SearchOptions(budget=4, step=FAST))
    got = _makespan(out, hw)
    pipelines = _rule_based_makespans(g, hw)
    assert got == log.search.result.makespan_cycles
    assert got <= _makespan(g, hw) == log.search.baseline.makespan_cycles
    assert got <= min(pipelines.values())
    assert log.search.best_pipeline.score.makespan_cycles == min(pipelines.values())
    assert out.passes == log.applied and tuple(e.step for e in log.search.steps) == out.passes


def test_auto_merges_qkv_where_it_pays_and_not_where_it_costs():
    g = _graph("transformer_block", "inf")
    faster = optimize_with_log(g, "auto", hw="tpu_v1_like", search=SearchOptions(step=FAST))[1]
    slower = optimize_with_log(g, "auto", hw="groq_like", search=SearchOptions(step=FAST))[1]
    (merge,) = [c for c in faster.search.candidates if c.label == "merge_qkv"]
    assert merge.score.makespan_cycles < faster.search.baseline.makespan_cycles
    assert "merge_qkv" in [s.name for s in faster.applied]
    assert faster.search.result.makespan_cycles <= merge.score.makespan_cycles
    (merge,) = [c for c in slower.search.candidates if c.label == "merge_qkv"]
    assert merge.score.makespan_cycles > slower.search.baseline.makespan_cycles  # so it is not chosen
    assert "merge_qkv" not in [s.name for s in slower.applied]


def test_auto_is_deterministic():
    g = _graph("gpt2", "inf")
    runs = [optimize_with_log(g, "auto", hw="tpu_v1_like", search=SearchOptions(budget=6, step=FAST))
            for _ in range(2)]
    (g1, log1), (g2, log2) = runs
    assert log1 == log2 and graph_hash(g1) == graph_hash(g2) and g1.passes == g2.passes


def test_auto_tries_a_sited_pass_at_each_place_alone():
    g = _graph("gpt2", "inf")  # two layers: two q, k, v groups
    _, log = optimize_with_log(g, "auto", hw="groq_like", search=SearchOptions(budget=16, step=FAST))
    sited = [c for c in log.search.candidates if any(s.only is not None for s in c.steps)]
    assert len(sited) >= 2 and all(len(s.only) >= 1 for c in sited for s in c.steps if s.only is not None)
    assert any(len(s.only) == 1 for c in sited for s in c.steps if s.only is not None)
    assert log.search.compiles <= 16


def test_the_budget_counts_compiles_but_never_cuts_the_rule_based_pipelines():
    g = _graph("resnet_block", "train")
    _, log = optimize_with_log(g, "auto", hw="groq_like", search=SearchOptions(budget=1, step=FAST))
    s = log.search
    assert s.compiles == s.floor_compiles == len(s.candidates) > 1
    assert "no search beyond them" in s.note
    assert not s.time_limited


def test_a_time_limit_that_cuts_the_search_is_reported():
    g = _graph("resnet_block", "train")
    _, log = optimize_with_log(g, "auto", hw="groq_like", search=SearchOptions(time_limit_s=1e-9, step=FAST))
    s = log.search
    assert s.time_limited and s.compiles == s.floor_compiles
    assert "depend on this machine's speed" in log.summary()
    assert s.result.makespan_cycles <= s.best_pipeline.score.makespan_cycles


def _plain_matmul() -> A.Graph:
    """y = x @ w: nothing for any pass to rewrite (no bias, no activation, no chain, no twin)."""
    g = A.Graph("plain")
    g.output("y", g.input("x", (4, 8)) @ g.param("w", (8, 3)))
    return g


def test_a_graph_no_pass_rewrites_comes_back_unchanged_saying_so():
    g = _plain_matmul()
    out, log = optimize_with_log(g, "auto", hw="groq_like", search=SearchOptions(step=FAST))
    assert graph_hash(out) == graph_hash(g) and out is not g and out.passes == ()
    assert log.records == () and log.search.compiles == 1
    assert "no pass rewrites inference graph" in log.search.note and "returned unchanged" in log.summary()


def test_auto_needs_hardware():
    with pytest.raises(A.GraphError, match="needs the hardware: give hw="):
        A.optimize(_graph("mlp", "inf"), "auto")


@pytest.mark.parametrize("kwargs,expected", [
    ({"budget": 0}, "budget must be an integer >= 1"),
    ({"budget": -3}, "budget must be an integer >= 1"),
    ({"budget": 2.5}, "budget must be an integer >= 1"),
    ({"budget": True}, "budget must be an integer >= 1"),
    ({"time_limit_s": math.nan}, "time_limit_s must be None or a finite number"),
    ({"time_limit_s": math.inf}, "time_limit_s must be None or a finite number"),
    ({"time_limit_s": 0}, "time_limit_s must be None or a finite number"),
    ({"time_limit_s": "1"}, "time_limit_s must be None or a finite number"),
    ({"step": {"microbatches": 2}}, "step must be an accelsim StepOptions"),
    ({"limits": 5}, "limits must be an accelsim.limits.Limits"),
])
def test_bad_search_options_are_refused(kwargs, expected):
    with pytest.raises(A.GraphError, match=expected):
        SearchOptions(**kwargs)


@pytest.mark.parametrize("kwargs,expected", [
    ({"microbatches": 0}, "microbatches"), ({"data_parallel": 1.5}, "data_parallel"),
    ({"split": "yes"}, "split"), ({"limits": 5}, "unknown step option"),
])
def test_bad_step_options_are_refused(kwargs, expected):
    with pytest.raises(A.ScheduleError, match=expected):
        StepOptions.of(**kwargs)


def test_search_options_go_with_auto_only_and_auto_is_no_pass_name():
    g = _graph("mlp", "inf")
    with pytest.raises(A.GraphError, match="configure passes='auto'"):
        A.optimize(g, ["cse"], hw="groq_like", search=SearchOptions())
    with pytest.raises(A.GraphError, match="is the search over passes, not a pass"):
        A.optimize(g, ["cse", "auto"])
    with pytest.raises(A.GraphError, match="search must be a pass_search.auto.SearchOptions"):
        A.optimize(g, "auto", hw="groq_like", search={"budget": 3})


def test_auto_compiles_with_the_step_options_it_is_given():
    g = _graph("transformer_block", "inf")
    step = StepOptions(microbatches=2, split=False, effort="fast")
    out, log = optimize_with_log(g, "auto", hw="tpu_v1_like", search=SearchOptions(budget=3, step=step))
    assert log.search.result.makespan_cycles == A.compile(out, "tpu_v1_like", microbatches=2, split=False,
                                                          effort="fast").makespan_cycles
    assert log.search.baseline.makespan_cycles == A.compile(g, "tpu_v1_like", microbatches=2, split=False,
                                                            effort="fast").makespan_cycles


def test_the_chosen_sequence_replays_to_the_same_graph():
    g = _graph("gpt2", "inf")
    out, log = optimize_with_log(g, "auto", hw="tpu_v1_like", search=SearchOptions(budget=4, step=FAST))
    assert out.passes and all(isinstance(p, AppliedPass) for p in out.passes)
    assert graph_hash(A.optimize(g, list(out.passes), verify=False)) == graph_hash(out)


def test_budget_and_time_limit_may_be_given_as_shorthand_but_not_twice():
    g = _graph("transformer_block", "inf")
    _, log = optimize_with_log(g, "auto", hw="tpu_v1_like", budget=3, time_limit_s=60.0)
    assert log.search.budget == 3 and log.search.time_limit_s == 60.0
    with pytest.raises(A.GraphError, match="not both"):
        A.optimize(g, "auto", hw="tpu_v1_like", budget=3, search=SearchOptions())
    with pytest.raises(A.GraphError, match="budget must be an integer >= 1"):
        A.optimize(g, "auto", hw="tpu_v1_like", budget=0)
    with pytest.raises(A.GraphError, match="configure passes='auto'"):
        A.optimize(g, ["cse"], budget=3)
