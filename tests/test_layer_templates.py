"""Layer templates (compiler/hierarchy/layer_templates.py): a step whose layers repeat, measured from a few of
its layers, has the StepWork of the whole graph's measurement; the CLI and compile take that path for large
steps without building them whole."""
from __future__ import annotations

import json

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.compiler.hierarchy import step as step_module
from accelsim.compiler.hierarchy.layer_templates import recipe, recipe_of, templated_work
from accelsim.compiler.hierarchy.templates import step_work
from accelsim.limits import DEFAULT_LIMITS
from accelsim.schedule.options import StepOptions

MODEL = {"batch": 1, "seq": 64, "d_model": 128, "heads": 4, "vocab": 512}


@pytest.fixture(scope="module")
def hw():
    return A.load_hw("a100_x64")


def _options(**step) -> StepOptions:
    return StepOptions(remat="every:1", **step)


@pytest.mark.parametrize("layers, t, p, v, m, d", [(8, 2, 2, 2, 4, 2), (10, 1, 4, 1, 3, 1)])
def test_layer_templates_give_the_whole_graphs_step_work(hw, layers, t, p, v, m, d):
    r = recipe("gpt2", {**MODEL, "layers": layers, "tensor_parallel": t}, {"optimizer": "adam"}, "every:1")
    options = _options(pipeline_stages=p, virtual_stages=v, tensor_parallel=t, microbatches=m, data_parallel=d,
                       pipeline_schedule="interleaved" if v > 1 else "1f1b")
    templated = templated_work(r, hw, options, DEFAULT_LIMITS.max_tasks)
    assert templated is not None
    assert [n for n in templated.names if n.startswith("h")] == [f"h{i}" for i in range(layers)]
    assert len(templated.graph.nodes) < len(r.build(layers).nodes)  # fewer layers measured than the model has
    assert templated.work == step_work(r.build(layers), hw, options)


def test_model_state_and_activation_bytes_of_gpt2_medium_on_four_stages_match_the_whole_graph(hw):
    # gpt2-medium's widths with 8 of its 24 layers: two per stage still repeat a layer template within
    # every stage, and a per-layer error weighs 3x more against the whole graph than with all 24
    opts = {"size": "medium", "layers": 8, "batch": 1, "seq": 128, "vocab": 1024, "tensor_parallel": 2}
    r = recipe("gpt2", opts, {"optimizer": "adam"}, "every:1")
    options = _options(pipeline_stages=4, tensor_parallel=2, microbatches=4, data_parallel=2,
                       pipeline_schedule="1f1b")
    measured = templated_work(r, hw, options, DEFAULT_LIMITS.max_tasks)
    graph = r.build(r.layers)
    assert r.layers == 8 and len(measured.graph.nodes) < len(graph.nodes)  # measured from fewer layers
    templated, whole = measured.work, step_work(graph, hw, options)
    assert len(templated.stages) == len(whole.stages) == 4 and len(templated.chunks) == len(whole.chunks)
    for got, want in zip(templated.stages, whole.stages):
        for field in ("parameter_bytes", "optimizer_bytes", "gradient_bytes"):
            assert getattr(got, field) == pytest.approx(getattr(want, field), rel=0.01), (got.stage, field)
    for got, want in zip(templated.chunks, whole.chunks):
        for field in ("activation_bytes", "backward_bytes", "stash_bytes"):
            assert getattr(got, field) == pytest.approx(getattr(want, field), rel=0.01), (got.chunk, field)
    assert sum(s.parameter_bytes for s in whole.stages) > 0


def test_recipes_exist_only_for_repeated_layers_and_layer_local_recomputation():
    assert recipe("transformer_block", {}, {"optimizer": "sgd"}, None) is None
    assert recipe("gpt2", MODEL, {"optimizer": "sgd"}, "sqrt") is None
    assert recipe("gpt2", {**MODEL, "size": "gpt3-175b"}, {"optimizer": "sgd"}, "every:1").layers == 96
    assert recipe("gpt2", {**MODEL, "layers": 5, "size": "gpt3-175b"}, {"optimizer": "sgd"}, None).layers == 5


def test_a_graph_rewritten_otherwise_than_by_its_remat_policy_has_no_recipe():
    step = A.training_graph(A.models.build("gpt2", **MODEL, layers=4), optimizer="sgd")
    assert recipe_of(step, StepOptions()) is not None
    assert recipe_of(step, StepOptions(remat="every:1")) is None  # the graph was not rematerialized
    assert recipe_of(A.rematerialize(step, "every:1"), StepOptions(remat="every:1")) is not None
    assert recipe_of(A.rematerialize(step, "sqrt"), StepOptions(remat="sqrt")) is None
    # rematerialized by another policy than the options name: its node count tells
    assert recipe_of(A.rematerialize(step, "every:2"), StepOptions(remat="every:1")) is None


def test_templates_that_would_measure_every_layer_are_not_used(hw):
    r = recipe("gpt2", {**MODEL, "layers": 6}, {"optimizer": "sgd"}, None)
    assert templated_work(r, hw, _options(pipeline_stages=2), DEFAULT_LIMITS.max_tasks) is None


def test_compile_measures_a_large_step_from_templates_with_the_whole_graphs_makespan(hw, monkeypatch):
    step = A.rematerialize(A.training_graph(A.models.build("gpt2", **MODEL, layers=8), optimizer="sgd"), "every:1")
    kw = dict(granularity="stage", pipeline_stages=2, virtual_stages=2, microbatches=4,
              pipeline_schedule="interleaved", remat="every:1")
    whole = A.compile(step, hw, **kw)
    monkeypatch.setattr(step_module, "TEMPLATE_TASKS", 0)
    templated = A.compile(step, hw, **kw)
    assert (whole.template_layers, templated.template_layers) == (None, 8)
    assert templated.measured_graph_nodes < whole.measured_graph_nodes
    assert templated.makespan_cycles == whole.makespan_cycles


def test_run_at_stage_granularity_builds_a_large_step_from_templates_only(tmp_path, monkeypatch, capsys):
    built: list[int] = []
    real_build = A.models.build

    def counting_build(name, **opts):
        built.append(opts.get("layers"))
        return real_build(name, **opts)

    monkeypatch.setattr(step_module, "TEMPLATE_TASKS", 0)
    monkeypatch.setattr(A.models, "build", counting_build)
    out = tmp_path / "run.json"
    sets = [a for k, v in {**MODEL, "layers": 12}.items() for a in ("--set", f"{k}={v}")]
    assert main(["run", "--hw", "a100_x64", "--model", "gpt2", *sets, "--pipeline-stages", "2",
                 "--virtual-stages", "2", "--pipeline-schedule", "interleaved", "--microbatches", "4",
                 "--remat", "every:1", "--granularity", "stage", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["template_layers"] == 12
    assert 12 not in built and built  # the 12-layer step itself was never built
    assert "stage granularity" in capsys.readouterr().out


def test_auto_granularity_estimates_a_steps_tasks_once(hw, monkeypatch):
    import accelsim.limits as limits_module

    calls: list[int] = []
    real = limits_module.estimate_tasks

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(limits_module, "estimate_tasks", counting)
    monkeypatch.setattr(step_module, "estimate_tasks", counting)
    step = A.training_graph(A.models.build("transformer_block", batch=1, seq=8, d_model=16, heads=2), optimizer="sgd")
    A.compile(step, hw, granularity="auto", microbatches=2)
    assert len(calls) == 1
