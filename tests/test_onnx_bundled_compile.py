"""Every model bundled in the onnx package's backend test data compiles as imported (issue 30: "the 9 bundled
ONNX models import, compile and match onnxruntime"; test_import_onnx_coverage.py matches them against
onnxruntime), and a graph with a one-element constant of any rank has a hash (inception_v1's (1, 1, 1, 1)
constant made graph_hash raise numpy's TypeError)."""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim.schedule.plan import graph_hash

onnx = pytest.importorskip("onnx")
from accelsim.frontends.onnx_import import from_onnx  # noqa: E402
from test_import_onnx_coverage import LIGHT, LIGHT_MODELS  # noqa: E402


@pytest.mark.parametrize("shape", [(), (1,), (1, 1, 1, 1)])
def test_a_one_element_constant_of_any_rank_is_hashed_by_its_value(shape):
    hashes = []
    for value in (2.0, 3.0):
        g = A.Graph("c")
        x = g.input("x", (1, 1, 1, 1))
        g.output("y", x * g.const(np.full(shape, value, np.float32)))
        hashes.append(graph_hash(g))
        assert f"value={value}" in g.dump()
    assert hashes[0] != hashes[1]


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_a_bundled_model_compiles_as_imported(name):
    path = LIGHT / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"the installed onnx package does not ship {path.name}")
    graph = from_onnx(path, loss="none")
    schedule = A.compile(graph, A.load_hw("groq_like"), effort="fast")  # validated as it is made
    assert schedule.makespan_cycles > 0 and schedule.graph_hash == graph_hash(graph)
