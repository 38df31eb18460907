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


# ---- provenance and training settings ---------------------------------------------------

def test_gradient_nodes_are_the_backward_nodes_the_update_reads():
    from accelsim.graph import verify
    for optimizer in A.training.OPTIMIZERS:
        train = verify(A.training_graph(A.models.build("mlp", batch=2, sizes=(4, 3, 2)), optimizer=optimizer))
        grads = sorted(v for k, v in train.outputs.items() if k.endswith(".grad"))
        assert train.gradient_nodes() == grads and len(grads) == 4
    assert A.models.build("mlp").gradient_nodes() == []


def test_copy_and_pruning_carry_the_source_and_optimizer():
    from accelsim.passes import inference_graph, prune_to_outputs
    fwd = A.models.build("regression")
    train = A.training_graph(fwd, optimizer="momentum", lr=0.5)
    assert train.source == fwd.source and train.source.model == "regression"
    assert train.optimizer == A.graph.OptimizerSettings("momentum", lr=0.5)
    for g in (train.copy(), prune_to_outputs(train, ["w.new"]), inference_graph(fwd)):
        assert g.source == fwd.source
    assert prune_to_outputs(train, ["loss"]).optimizer == train.optimizer
    assert fwd.optimizer is None and inference_graph(fwd).optimizer is None


def test_optimizer_kwargs_rebuild_the_same_training_graph():
    fwd = A.models.build("mlp", batch=2, sizes=(4, 3, 2))
    train = A.training_graph(fwd, optimizer="adam", lr=1, beta1=0.5, eps=1e-6, step=3)
    assert train.optimizer.kwargs() == {"optimizer": "adam", "lr": 1.0, "momentum": 0.9, "beta1": 0.5,
                                        "beta2": 0.999, "eps": 1e-6, "step": 3}
    assert A.training_graph(fwd, **train.optimizer.kwargs()).dump() == train.dump()


@pytest.mark.parametrize("kwargs, match", [
    ({"lr": float("inf")}, r"learning rate lr=inf is invalid; expected a finite float > 0"),
    ({"lr": float("nan")}, r"lr=nan is invalid"),
    ({"lr": -0.1}, r"lr=-0.1 is invalid"),
    ({"lr": "0.1"}, r"lr='0.1' is invalid"),
    ({"lr": True}, r"lr=True is invalid"),
    ({"momentum": 1.0}, r"momentum=1.0 is invalid; expected a finite float >= 0 and < 1"),
    ({"momentum": -0.5}, r"momentum=-0.5 is invalid"),
    ({"beta1": 1.5}, r"beta1=1.5 is invalid; expected a finite float >= 0 and < 1"),
    ({"beta2": float("nan")}, r"beta2=nan is invalid"),
    ({"eps": 0.0}, r"eps=0.0 is invalid; expected a finite float > 0"),
    ({"eps": float("inf")}, r"eps=inf is invalid"),
    ({"step": 0}, r"step=0 is invalid; expected a positive int"),
    ({"step": 1.5}, r"step=1.5 is invalid"),
    ({"step": True}, r"step=True is invalid"),
    ({"optimizer": "lbfgs"}, r"optimizer must be one of \('sgd', 'momentum', 'adam'\), got 'lbfgs'"),
])
def test_training_hyperparameters_out_of_range_are_refused_by_name(kwargs, match):
    with pytest.raises(A.GraphError, match=match):
        A.training_graph(A.models.build("regression"), **kwargs)


def test_training_graph_needs_a_forward_graph_and_a_scalar_loss():
    train = A.training_graph(A.models.build("regression"))
    with pytest.raises(A.GraphError, match="needs a forward graph; .* already has backward node"):
        A.training_graph(train)
    fwd = A.models.build("mlp", batch=2, sizes=(4, 3, 2))
    with pytest.raises(A.GraphError, match="has no node %99"):
        A.training_graph(fwd, loss=99)
    with pytest.raises(A.GraphError, match="must be a scalar"):
        A.training_graph(fwd, loss=fwd.outputs["logits"])


def test_model_source_normalizes_options_and_refuses_other_data():
    src = A.graph.ModelSource("mlp", {"sizes": [4, 3], "batch": 2})
    assert src.options == (("batch", 2), ("sizes", (4, 3)))
    assert src.options_dict() == {"batch": 2, "sizes": (4, 3)}
    assert hash(src) == hash(A.graph.ModelSource("mlp", (("sizes", (4, 3)), ("batch", 2))))
    with pytest.raises(A.GraphError, match="option f=.* is not plain data"):
        A.graph.ModelSource("mlp", {"f": object()})
    with pytest.raises(A.GraphError, match="source must be a ModelSource"):
        A.Graph("g", source={"model": "mlp"})


def test_add_node_refuses_inputs_that_are_not_earlier_nodes():
    g = A.Graph("g")
    g.input("x", (2,))
    for bad in (5, -1):
        with pytest.raises(A.GraphError, match=rf"relu node %1: inputs \[{bad}\] are not nodes"):
            g.add_node("relu", (bad,), {})
