"""Reverse-mode autodiff and training graphs: structure, pruning and optimizer updates."""
import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F


def _two_branch_graph():
    g = A.Graph("branches", dtype="float64")
    x = g.input("x", (3,))
    w = g.param("w", (3,))
    unused = g.param("unused", (3,))
    F.exp(unused * x)  # a branch the loss never reads
    g.set_loss(F.sum(F.square(w * x)))
    return g, x, w, unused


def test_unused_branch_gets_no_gradient_nodes():
    g, x, w, unused = _two_branch_graph()
    n_before = len(g)
    grads = A.gradients(g, g.loss, [w.id, unused.id])
    assert unused.id not in grads and w.id in grads
    new_nodes = g.nodes[n_before:]
    read = {i for n in new_nodes for i in n.inputs}
    assert unused.id not in read and all(i != 4 for i in read)  # node 4 = mul(unused, x)


def test_gradient_of_a_tensor_used_twice_is_the_sum_of_both_uses():
    g = A.Graph("fanout", dtype="float64")
    x = g.input("x", (4,), init="uniform", low=0.5, high=2.0)
    g.set_loss(F.sum(x * x + F.exp(x)))
    dx = A.gradients(g, g.loss, [x.id])[x.id]
    g.output("dx", dx)
    out = A.evaluate(g)
    xv = g.leaf_value(x.id)
    np.testing.assert_allclose(out["dx"], 2 * xv + np.exp(xv), rtol=1e-12)


def test_loss_must_be_scalar_and_integer_tensors_are_not_differentiable():
    g = A.Graph("bad", dtype="float64")
    x = g.input("x", (2,))
    ids = g.input("ids", (2,), dtype="int64", init="randint", high=3)
    with pytest.raises(A.ShapeError, match="scalar"):
        g.set_loss(x * 2.0)
    g.set_loss(F.sum(x))
    with pytest.raises(A.GraphError, match="integer"):
        A.gradients(g, g.loss, [ids.id])


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_training_graph_update_matches_the_optimizer_formula(optimizer):
    fwd = A.models.build("mlp", batch=4, sizes=(6, 5, 3), dtype="float64")
    train = A.training_graph(fwd, optimizer=optimizer, lr=0.05)
    out = A.evaluate(train)
    phases = {n.phase for n in train.nodes}
    assert phases == {"forward", "backward", "update"}
    for p in (n for n in fwd.params if n.trainable):
        w, dw = fwd.leaf_value(p.id), out[f"{p.name}.grad"]
        if optimizer == "sgd":
            expected = w - 0.05 * dw
        elif optimizer == "momentum":
            expected = w - 0.05 * dw  # zero initial velocity: v = g
            np.testing.assert_allclose(out[f"{p.name}.momentum.new"], dw)
        else:  # Adam's first step from zero state is lr * sign-like g / (|g| + eps)
            expected = w - 0.05 * dw / (np.abs(dw) + 1e-8)
        np.testing.assert_allclose(out[f"{p.name}.new"], expected, rtol=1e-7, atol=1e-12)


def test_training_graph_rejects_unknown_optimizer_and_bad_lr():
    fwd = A.models.build("regression")
    with pytest.raises(A.GraphError, match="optimizer"):
        A.training_graph(fwd, optimizer="lbfgs")
    with pytest.raises(A.GraphError, match="learning rate"):
        A.training_graph(fwd, lr=0.0)


def test_training_graph_leaves_the_forward_graph_untouched():
    fwd = A.models.build("mlp", batch=2, sizes=(4, 3, 2))
    n = len(fwd)
    A.training_graph(fwd)
    assert len(fwd) == n and set(fwd.outputs) == {"logits", "loss"}


@pytest.mark.parametrize("model", ["superres", "resnet_block", "transformer_block"])
def test_a_training_graph_computes_nothing_that_no_output_needs(model):
    """No gradient of an input or target (the first conv's input gradient, MSE's target gradient):
    every node is an output or feeds one."""
    g = A.training_graph(A.models.build(model, **A.models.sizes.SMALL[model]))
    read = {i for n in g.nodes for i in n.inputs} | set(g.outputs.values())
    assert [n for n in g.nodes if n.id not in read] == []
    assert not any(n.op == "conv2d_grad_input" and g.nodes[n.inputs[0]].op == "input" for n in g.nodes)
