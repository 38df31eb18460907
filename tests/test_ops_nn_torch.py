"""Norm and nn ops, forward and gradients, against PyTorch autograd in float64."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest

import accelsim
from accelsim import ops as F
from accelsim.compare import max_rel_err

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-6


def _accelsim_run(build: Callable[..., Any], feeds: dict[str, np.ndarray], weight: np.ndarray) -> dict[str, np.ndarray]:
    """out = build(*inputs); loss = sum(out * weight); returns out and d(loss)/d(each float input)."""
    g = accelsim.Graph("t", dtype="float64")
    ins = {name: g.input(name, arr.shape, dtype="int64" if arr.dtype.kind == "i" else "float64")
           for name, arr in feeds.items()}
    out = build(*ins.values())
    w = g.input("w", out.shape)
    g.set_loss(F.sum(out * w))
    g.output("out", out)
    floats = [v for v in ins.values() if v.dtype == "float64"]
    grads = accelsim.gradients(g, g.loss, [v.id for v in floats])
    for v in floats:
        g.output(f"d{v.node.name}", grads[v.id])
    return accelsim.evaluate(g, {**feeds, "w": weight})


def _torch_run(fn: Callable[..., Any], feeds: dict[str, np.ndarray], weight: np.ndarray) -> dict[str, np.ndarray]:
    """The same loss in torch autograd."""
    ts = {name: torch.tensor(arr, requires_grad=arr.dtype.kind == "f") for name, arr in feeds.items()}
    out = fn(*ts.values())
    (out * torch.tensor(weight)).sum().backward()
    result = {"out": out.detach().numpy()}
    result.update({f"d{name}": t.grad.numpy() for name, t in ts.items() if t.requires_grad})
    return result


def _assert_matches_torch(build: Callable[..., Any], fn: Callable[..., Any], feeds: dict[str, np.ndarray]) -> None:
    with torch.no_grad():
        out_shape = tuple(fn(*(torch.tensor(a) for a in feeds.values())).shape)
    weight = np.random.default_rng(7).normal(size=out_shape)
    got, want = _accelsim_run(build, feeds, weight), _torch_run(fn, feeds, weight)
    for key in want:
        assert got[key].shape == want[key].shape, key
        err = max_rel_err(got[key], want[key])
        assert err < TOL, f"{key}: rel err {err:.2e}"


def _bn_feeds(rng: np.random.Generator, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    c = shape[1]
    return {"x": rng.normal(size=shape) * 2.0 + 1.0, "gamma": rng.uniform(0.5, 1.5, size=c), "beta": rng.normal(size=c)}


@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 5, 2)])
def test_batch_norm_training_matches_torch(shape):
    feeds = _bn_feeds(np.random.default_rng(0), shape)
    _assert_matches_torch(lambda x, gm, bt: F.batch_norm(x, gm, bt, eps=1e-5),
                          lambda x, gm, bt: TF.batch_norm(x, None, None, gm, bt, training=True, eps=1e-5), feeds)


def _bn_inference_torch(x, gamma, beta, mean, var, eps=1e-5):
    shape = (-1,) + (1,) * (x.ndim - 2)  # torch's batch_norm has no gradient for running mean/var
    return (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps) * gamma.view(shape) + beta.view(shape)


@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 4, 4)])
def test_batch_norm_inference_matches_torch(shape):
    rng = np.random.default_rng(1)
    feeds = {**_bn_feeds(rng, shape), "mean": rng.normal(size=shape[1]), "var": rng.uniform(0.5, 2.0, size=shape[1])}
    _assert_matches_torch(F.batch_norm_inference, _bn_inference_torch, feeds)
    x, gamma, beta, mean, var = (torch.tensor(a) for a in feeds.values())
    assert torch.allclose(_bn_inference_torch(x, gamma, beta, mean, var),
                          TF.batch_norm(x, mean, var, gamma, beta, training=False, eps=1e-5), rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(7,), (3, 6), (2, 3, 8)])
def test_layer_norm_matches_torch(shape):
    rng = np.random.default_rng(2)
    d = shape[-1]
    feeds = {"x": rng.normal(size=shape) * 3.0, "gamma": rng.uniform(0.5, 1.5, size=d), "beta": rng.normal(size=d)}
    _assert_matches_torch(lambda x, gm, bt: F.layer_norm(x, gm, bt, eps=1e-5),
                          lambda x, gm, bt: TF.layer_norm(x, (d,), gm, bt, eps=1e-5), feeds)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_matches_torch(axis):
    feeds = {"x": np.random.default_rng(3).normal(size=(3, 4, 5)) * 3.0}
    _assert_matches_torch(lambda x: F.softmax(x, axis), lambda x: torch.softmax(x, axis), feeds)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_log_softmax_matches_torch(axis):
    feeds = {"x": np.random.default_rng(4).normal(size=(3, 4, 5)) * 3.0}
    _assert_matches_torch(lambda x: F.log_softmax(x, axis), lambda x: torch.log_softmax(x, axis), feeds)


def test_softmax_is_stable_for_large_logits():
    feeds = {"x": np.random.default_rng(5).normal(size=(2, 6)) + 1000.0}
    _assert_matches_torch(F.softmax, lambda x: torch.softmax(x, -1), feeds)
    _assert_matches_torch(F.log_softmax, lambda x: torch.log_softmax(x, -1), feeds)


def test_softmax_cross_entropy_matches_torch():
    rng = np.random.default_rng(6)
    feeds = {"logits": rng.normal(size=(8, 5)) * 2.0, "labels": rng.integers(0, 5, size=8)}
    _assert_matches_torch(F.softmax_cross_entropy, TF.cross_entropy, feeds)


def test_mse_loss_matches_torch():
    rng = np.random.default_rng(7)
    feeds = {"pred": rng.normal(size=(4, 3, 2)), "target": rng.normal(size=(4, 3, 2))}
    _assert_matches_torch(F.mse_loss, TF.mse_loss, feeds)


def test_embedding_matches_torch_and_accumulates_repeated_ids():
    rng = np.random.default_rng(8)
    feeds = {"ids": rng.integers(0, 5, size=(3, 4)), "table": rng.normal(size=(5, 6))}  # 12 ids, 5 rows: repeats
    _assert_matches_torch(F.embedding, TF.embedding, feeds)


def _causal_attention(q, k, v):
    scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(q.shape[-1]))
    return F.matmul(F.softmax(F.causal_mask(scores)), v)


def test_causal_self_attention_matches_torch_sdpa():
    rng = np.random.default_rng(9)
    feeds = {name: rng.normal(size=(2, 5, 4)) for name in ("q", "k", "v")}
    _assert_matches_torch(_causal_attention,
                          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), feeds)


def test_causal_mask_fills_only_above_the_diagonal():
    g = accelsim.Graph("t", dtype="float64")
    out = F.causal_mask(g.input("x", (3, 3), init="ones"), fill=-5.0)
    g.output("out", out)
    np.testing.assert_array_equal(accelsim.evaluate(g)["out"], [[1, -5, -5], [1, 1, -5], [1, 1, 1]])


def test_softmax_axis_attr_is_normalized_to_non_negative():
    g = accelsim.Graph("t", dtype="float64")
    assert F.softmax(g.input("x", (2, 3, 4)), axis=-2).node.attrs["axis"] == 1


def test_layer_norm_with_wrong_gamma_size_names_op_and_node():
    g = accelsim.Graph("t", dtype="float64")
    x, gamma, beta = g.input("x", (2, 8)), g.input("gamma", (7,)), g.input("beta", (8,))
    with pytest.raises(accelsim.ShapeError, match=r"layer_norm node %\d+.*gamma must have shape \(8,\)"):
        F.layer_norm(x, gamma, beta)


def test_cross_entropy_with_float_labels_names_op_and_node():
    g = accelsim.Graph("t", dtype="float64")
    logits, labels = g.input("logits", (4, 3)), g.input("labels", (4,))
    with pytest.raises(accelsim.ShapeError, match=r"softmax_cross_entropy node %\d+.*'labels'.*int64"):
        F.softmax_cross_entropy(logits, labels)


def test_softmax_with_out_of_range_axis_names_op_and_node():
    g = accelsim.Graph("t", dtype="float64")
    with pytest.raises(accelsim.ShapeError, match=r"softmax node %\d+.*axis 3 out of range"):
        F.softmax(g.input("x", (2, 3)), axis=3)
