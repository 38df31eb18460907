"""Graph IR: builder, shape errors, dump, deterministic leaf values."""
import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F


def test_shape_error_names_op_node_and_shapes():
    g = A.Graph("bad")
    a = g.input("a", (3, 4))
    b = g.input("b", (5, 6))
    with pytest.raises(A.ShapeError) as e:
        F.matmul(a, b, )
    msg = str(e.value)
    assert "matmul node %2" in msg and "(3, 4)" in msg and "(5, 6)" in msg


def test_broadcast_mismatch_is_reported():
    g = A.Graph("bad")
    with pytest.raises(A.ShapeError, match=r"add node %2.*\(3,\).*\(4,\)"):
        g.input("a", (3,)) + g.input("b", (4,))


def test_nodes_are_in_topological_order_and_carry_their_phase():
    g = A.models.build("mlp", batch=2, sizes=(4, 3, 2))
    for n in g.nodes:
        assert n.id == g.nodes.index(n)
        assert all(i < n.id for i in n.inputs)
        assert n.phase == "forward"


def test_dump_lists_every_node_with_type_and_phase():
    g = A.models.build("seed_autodiff")
    text = g.dump()
    assert "%2 = log(%0) : f64[]  [forward]" in text
    assert len(text.splitlines()) == len(g) + 2


def test_leaf_values_depend_on_seed_and_name_not_build_order():
    g1 = A.Graph("a", seed=3)
    g1.param("p", (4,))
    q1 = g1.param("q", (4,))
    g2 = A.Graph("b", seed=3)
    q2 = g2.param("q", (4,))
    np.testing.assert_array_equal(g1.leaf_value(q1.id), g2.leaf_value(q2.id))
    g3 = A.Graph("c", seed=4)
    assert not np.array_equal(g3.leaf_value(g3.param("q", (4,)).id), g1.leaf_value(q1.id))


def test_duplicate_leaf_names_are_rejected():
    g = A.Graph("dup")
    g.input("x", (2,))
    with pytest.raises(A.GraphError, match="'x' is already used"):
        g.param("x", (2,))


def test_feeding_a_wrong_shape_is_rejected():
    g = A.models.build("seed_autodiff")
    with pytest.raises(A.ShapeError, match="feed 'x1'"):
        A.evaluate(g, {"x1": np.ones(3)})
