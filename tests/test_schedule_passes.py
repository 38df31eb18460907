"""Schedules record the passes that rewrote their graph: a saved schedule's graph is rebuilt (model ->
step graph -> passes) and its hash checked; tampered records are refused in one paragraph; the graph
hash covers constants' values."""
import json

import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.models.sizes import SMALL
from accelsim.passes import AppliedPass, inference_graph
from accelsim.pass_search import optimize_with_log
from accelsim.schedule.io import read_schedule, save_schedule
from accelsim.api import load_schedule
from accelsim.schedule.plan import graph_hash
from accelsim.source import graph_for

HW = "tpu_v1_like"


def _gpt2(kind: str = "inf") -> A.Graph:
    fwd = A.models.build("gpt2", **SMALL["gpt2"])
    return inference_graph(fwd) if kind == "inf" else A.training_graph(fwd)


@pytest.fixture(scope="module")
def sited() -> tuple[A.Graph, A.Schedule]:
    """gpt2 inference with cse everywhere, then merge_qkv in its second layer only."""
    g = _gpt2()
    once, log = optimize_with_log(g, ["cse", "merge_qkv"])
    second = log.records[1].sites[1]
    out = A.optimize(g, ["cse", AppliedPass("merge_qkv", (second,))])
    assert out.passes == (AppliedPass("cse"), AppliedPass("merge_qkv", (second,)))
    return out, A.compile(out, HW, split=False)


def test_a_schedule_records_the_passes_and_its_graph_is_rebuilt_from_them(sited, tmp_path):
    graph, sched = sited
    path = tmp_path / "sched.json"
    save_schedule(sched, path)
    recorded = json.loads(path.read_text())["source"]["passes"]
    assert recorded == [{"name": "cse", "only": None}, {"name": "merge_qkv", "only": list(graph.passes[1].only)}]
    loaded = read_schedule(path)
    rebuilt = graph_for(loaded)
    assert graph_hash(rebuilt) == graph_hash(graph) == loaded.graph_hash and rebuilt.passes == graph.passes
    assert A.simulate(loaded).makespan_cycles == sched.makespan_cycles
    assert A.check(loaded, backend="numpy").passed


def test_an_unoptimized_schedule_has_no_passes_field(tmp_path):
    sched = A.compile(_gpt2(), HW, split=False)
    save_schedule(sched, tmp_path / "plain.json")
    assert "passes" not in json.loads((tmp_path / "plain.json").read_text())["source"]


def test_auto_then_compile_gives_a_schedule_whose_graph_rebuilds(tmp_path):
    from accelsim.pass_search.auto import SearchOptions
    from accelsim.schedule.options import StepOptions

    g = _gpt2()
    out = A.optimize(g, "auto", hw=HW, search=SearchOptions(budget=4, step=StepOptions(split=False)))
    assert out.passes and out.source == g.source
    save_schedule(A.compile(out, HW, split=False), tmp_path / "auto.json")
    assert graph_hash(graph_for(read_schedule(tmp_path / "auto.json"))) == graph_hash(out)


def _tampered(sched: A.Schedule, tmp_path, passes) -> str:
    data = json.loads(sched.model_dump_json())
    data["source"]["passes"] = passes
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("passes,expected", [
    ([{"name": "fuse_everything", "only": None}], "records pass 'fuse_everything' (step 1 of 1), which this "
                                                  "accelsim does not know"),
    ([{"name": "cse", "only": None}, {"name": "merge_qkv", "only": [3]}], "rewrote at none of them"),
    ([{"name": "cse", "only": None}, {"name": "merge_qkv", "only": None}], "different graph"),
    ([{"name": "cse", "only": [1]}], "rewrites everywhere it matches; only a sited pass takes anchor ids"),
    ([{"name": "cse", "only": None}, {"name": "cse", "only": None}], "does not apply to the rebuilt gpt2 graph "
                                                                     "(unchanged: nothing matched)"),
    ([{"name": "fold_batchnorm", "only": None}], "its pass fold_batchnorm (step 1 of 1) does not apply"),
])
def test_a_tampered_pass_record_is_refused_in_one_paragraph(sited, tmp_path, passes, expected):
    path = _tampered(sited[1], tmp_path, passes)
    with pytest.raises(A.ScheduleError) as e:
        A.simulate(read_schedule(path))
    assert expected in str(e.value) and "\n" not in str(e.value)


def test_a_recorded_pass_for_another_kind_of_graph_is_refused(tmp_path):
    sched = A.compile(A.training_graph(A.models.build("mlp", **SMALL["mlp"])), HW, split=False)
    path = _tampered(sched, tmp_path, [{"name": "fold_batchnorm", "only": None}])
    with pytest.raises(A.ScheduleError, match=r"fold_batchnorm \(step 1 of 1\) does not apply to the rebuilt mlp "
                                              r"graph \(skipped: applies to inference graphs"):
        A.simulate(read_schedule(path))


@pytest.mark.parametrize("passes,expected", [
    ([{"name": "merge_qkv", "only": [-1]}], "only must be node ids (>= 0), ascending and distinct"),
    ([{"name": "merge_qkv", "only": [9, 3]}], "ascending and distinct"),
    ([{"name": "merge_qkv", "only": []}], "ascending and distinct"),
    ([{"name": "merge_qkv", "only": ["3"]}], "valid integer"),
    ([{"name": 3}], "valid string"),
    ([{"name": ""}], "at least 1 character"),
    ([{"name": "cse", "where": [1]}], "Extra inputs"),
    ("cse", "valid array"),
])
def test_a_pass_record_of_the_wrong_type_is_refused_naming_the_field(sited, tmp_path, passes, expected):
    path = _tampered(sited[1], tmp_path, passes)
    with pytest.raises(A.ScheduleError, match="not a valid schedule") as e:
        read_schedule(path)
    assert "source.passes" in str(e.value) and expected in str(e.value)


def _folded(gamma_mean: float) -> A.Graph:
    """conv2d + inference batch norm whose gamma is drawn around `gamma_mean`, folded: gamma is gone, its
    values live on in the folded weight and bias constants."""
    g = A.Graph("convbn", dtype="float64")
    x = g.input("x", (1, 2, 5, 5))
    y = F.conv2d(x, g.param("w", (3, 2, 3, 3)))
    bn = [g.param("gamma", (3,), init="normal", mean=gamma_mean), g.param("beta", (3,)),
          g.param("mean", (3,)), g.param("var", (3,), init="uniform", low=0.5, high=1.5)]
    g.output("y", F.batch_norm_inference(y, *bn))
    return A.optimize(g, ["fold_batchnorm"])


def test_the_graph_hash_covers_a_folded_constants_values():
    a, b = _folded(1.0), _folded(2.0)
    assert a.passes == b.passes == (AppliedPass("fold_batchnorm"),) and a.params == []
    assert a.dump() == b.dump()  # the listing shows only one-element constants' values
    assert graph_hash(a) != graph_hash(b)


def test_the_graph_hash_ignores_cached_values_of_parameters_and_inputs():
    g = _gpt2()
    before = graph_hash(g)
    for n in g.nodes:
        if n.op in ("param", "input"):
            g.leaf_value(n.id)  # drawn and cached
    assert graph_hash(g) == before == graph_hash(_gpt2())


def test_a_const_of_another_dtype_or_shape_with_the_same_bytes_hashes_differently():
    def graph(value: np.ndarray) -> A.Graph:
        g = A.Graph("c", dtype="float64")
        x = g.input("x", (4,))
        g.output("y", x + g.const(value).reshape((4,)))
        return g
    flat, square = np.arange(4.0), np.arange(4.0).reshape(2, 2)
    assert flat.tobytes() == square.tobytes()
    assert graph_hash(graph(flat)) != graph_hash(graph(square))


def test_load_schedule_of_an_optimized_graph_accepts_that_graph(sited, tmp_path):
    graph, sched = sited
    save_schedule(sched, tmp_path / "s.json")
    assert load_schedule(tmp_path / "s.json", graph, A.load_hw(HW)).graph_hash == graph_hash(graph)
