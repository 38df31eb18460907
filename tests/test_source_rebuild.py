"""A schedule's recorded source rebuilds the graph it was compiled from, whichever step that was: a training
step, an inference graph, or a forward graph compiled as built (its loss included). The source does not say
which of the last two it was; the graph hash picks it (accelsim/source.py)."""
import pytest

import accelsim as A
from accelsim.frontends.graph_file import load_graph, save_graph
from accelsim.passes import inference_graph
from accelsim.schedule.plan import graph_hash
from accelsim.source import graph_for


def _small_block():
    return A.models.build("transformer_block", batch=1, seq=4, d_model=8, heads=2)


@pytest.mark.parametrize("step", ["training", "inference", "forward with loss"])
def test_each_kind_of_step_rebuilds_to_the_graph_compiled(step):
    fwd = _small_block()
    graph = {"training": lambda: A.training_graph(fwd), "inference": lambda: inference_graph(fwd),
             "forward with loss": lambda: fwd}[step]()
    schedule = A.compile(graph, "groq_like")
    assert graph_hash(graph_for(schedule)) == graph_hash(graph)
    assert A.simulate(schedule, "groq_like").makespan_cycles == schedule.makespan_cycles


def test_a_forward_graph_file_compiled_as_built_replays_without_the_graph(tmp_path):
    path = tmp_path / "block.json"
    save_graph(_small_block(), path)
    graph = load_graph(path)
    schedule = A.compile(graph, "groq_like")
    assert A.simulate(schedule, "groq_like").makespan_cycles == schedule.makespan_cycles


def test_a_changed_model_is_still_refused():
    schedule = A.compile(_small_block(), "groq_like")
    tampered = schedule.model_copy(update={"graph_hash": "0" * len(schedule.graph_hash)})
    with pytest.raises(A.AccelsimError, match="different graph"):
        graph_for(tampered)


def test_a_graph_file_keeps_infinite_constants_and_refuses_nan(tmp_path):
    # an attention mask's -inf is an ordinary constant; NaN is never a value a graph file holds
    import json

    import numpy as np

    g = A.Graph("masked")
    x = g.input("x", (3,))
    g.output("y", x + g.const(np.array([-np.inf, 0.0, np.inf])))
    path = tmp_path / "masked.json"
    save_graph(g, path)
    back = load_graph(path)
    assert graph_hash(back) == graph_hash(g)
    out = A.evaluate(back, {"x": np.array([1.0, 2.0, 3.0])})["y"]
    assert out.tolist() == [-np.inf, 2.0, np.inf]
    doc = json.loads(path.read_text())
    doc["nodes"][1]["value"][1] = {"float": "nan"}
    path.write_text(json.dumps(doc))
    with pytest.raises(A.AccelsimError, match="node 1"):
        load_graph(path)
