"""Wrong types and values handed to the public Python API: each is refused with the project's own error
naming the argument, never a traceback from numpy, pydantic or matplotlib."""
from pathlib import Path

import numpy as np
import pytest

import accelsim as A


@pytest.fixture(scope="module")
def step():
    graph = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 4)))
    return graph, A.compile(graph, "groq_like")


CASES = {
    "validate_schedule graph str": (lambda g, s: A.validate_schedule(s, "g"), "Graph"),
    "validate_schedule hw str": (lambda g, s: A.validate_schedule(s, g, "groq_like"), "HwSpec"),
    "evaluate feed str": (lambda g, s: A.evaluate(g, feeds={"x": "str"}), "feed 'x'"),
    "compile validate str": (lambda g, s: A.compile(g, "groq_like", validate="no"), "validate"),
    "graph input shape str": (lambda g, s: A.Graph("x").input("a", "ab"), "shape"),
    "graph input shape floats": (lambda g, s: A.Graph("x").input("a", (2.5, 2)), "shape"),
    "simulate port_contention str": (lambda g, s: A.simulate(s, port_contention="x"), "port_contention"),
    "plot_timeline not a result": (lambda g, s: A.viz.plot_timeline(None, "x.png"), "Result"),
    "plot_timeline unwritable": (lambda g, s: A.viz.plot_timeline(A.simulate(s), "/proc/nope/x.png"), "/proc/nope"),
    "plot_memory not a result": (lambda g, s: A.viz.plot_memory("r"), "Result"),
    "write_perfetto unwritable": (lambda g, s: A.viz.write_perfetto(A.simulate(s), "/proc/nope/t.json"), "/proc/nope"),
    "graph_costs None": (lambda g, s: A.cost.graph_costs(None, g), "HwSpec"),
    "run_summary None": (lambda g, s: A.run_summary(None, None), "Schedule"),
    "conv2d padding str": (lambda g, s: _conv(padding="a"), "padding"),
    "conv2d stride float": (lambda g, s: _conv(stride=1.5), "stride"),
    "constant from a string": (lambda g, s: A.Graph("t").input("x", (2,)) + "a", "constant"),
    "param with an unknown init": (lambda g, s: A.Graph("t").param("w", (2,), init="bogus"), "init"),
    "evaluate a 10^24-element graph": (lambda g, s: A.evaluate(_huge()), "limit"),
}


def _conv(**attrs):
    g = A.Graph("t")
    return A.ops.conv2d(g.input("x", (1, 3, 8, 8)), g.param("w", (4, 3, 3, 3)), **attrs)


def _huge():
    g = A.Graph("t")
    A.ops.relu(g.input("x", (10**12, 10**12)))
    return g


@pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py
@pytest.mark.parametrize("name", sorted(CASES))
def test_wrong_types_are_refused_by_name(name, step):
    fn, word = CASES[name]
    with pytest.raises(A.AccelsimError) as e:
        fn(*step)
    assert word in str(e.value)


def test_numpy_integers_are_counts(step):
    graph, _ = step
    sched = A.compile(graph, "groq_like", microbatches=np.int64(2), pipeline_stages=np.int32(1))
    assert sched.options.microbatches == 2 and type(sched.options.microbatches) is int
    repo = Path(__file__).resolve().parent.parent.parent
    assert A.load_hw(repo / "hwconfigs" / "groq_like.yaml").name == "groq_like"
