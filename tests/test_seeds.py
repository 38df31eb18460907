"""The seeds' worked numbers (seed 002: autodiff example; seed 003: single-layer regression)."""
import numpy as np
import pytest

import accelsim as A
from accelsim.graph import verify


def _loss_and_grads(name):
    g = A.models.build(name)
    wrt = [n for n in g.nodes if n.op in ("input", "param")]
    grads = A.gradients(g, g.loss, [n.id for n in wrt])
    for n in wrt:
        g.output(f"d/{n.name}", grads[n.id])
    return A.evaluate(verify(g))


def test_seed_autodiff_forward_and_reverse_mode_values():
    out = _loss_and_grads("seed_autodiff")
    assert out["y"] == pytest.approx(11.652, abs=1e-3)
    assert out["d/x1"] == pytest.approx(5.5, abs=1e-3)
    assert out["d/x2"] == pytest.approx(1.716, abs=1e-3)


def test_regression_loss_and_parameter_gradients():
    out = _loss_and_grads("regression")
    assert out["loss"] == pytest.approx(9.0, abs=1e-3)
    assert out["d/w"] == pytest.approx(-12.0, abs=1e-3)
    assert out["d/b"] == pytest.approx(-6.0, abs=1e-3)


def test_regression_sgd_step_moves_parameters_against_the_gradient():
    train = verify(A.training_graph(A.models.build("regression"), optimizer="sgd", lr=0.1))
    out = A.evaluate(train)
    assert out["w.new"] == pytest.approx(1.0 + 0.1 * 12.0)
    assert out["b.new"] == pytest.approx(0.0 + 0.1 * 6.0)


def test_seed_autodiff_backward_graph_sums_adjoints_of_both_consumers():
    """x2 feeds mul and sin: its adjoint is the sum of two partials, one add node (seed 002)."""
    g = A.models.build("seed_autodiff")
    n_forward = len(g)
    grads = A.gradients(g, g.loss, [g.by_name("x2").id])
    backward = g.nodes[n_forward:]
    assert all(n.phase == "backward" for n in backward)
    assert g.nodes[grads[g.by_name("x2").id].id].op == "add"
    assert np.isclose(A.evaluate(g, keep=[grads[1].id])["%" + str(grads[1].id)], 5 * 0 + 2 - np.cos(5))
