"""Neural-network ops: softmax family, losses, embedding lookup and the causal attention mask."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.elementwise import exp
from accelsim.ops.reduce import sum
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

__all__ = ["softmax", "log_softmax", "softmax_cross_entropy", "mse_loss", "embedding", "causal_mask"]


# ---- builders -------------------------------------------------------------------------

def _axis(axis: int, ndim: int) -> int:
    """Negative axes count from the end; out-of-range ones are left for infer to report."""
    axis = int(axis)
    return axis + ndim if -ndim <= axis < 0 else axis


def softmax(x: Any, axis: int = -1) -> Any:
    """exp(x) / sum(exp(x)) along `axis`, computed after subtracting the max for stability."""
    return apply("softmax", x, axis=_axis(axis, x.ndim))


def log_softmax(x: Any, axis: int = -1) -> Any:
    """x - logsumexp(x) along `axis`, stable for large logits."""
    return apply("log_softmax", x, axis=_axis(axis, x.ndim))


def softmax_cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean over N of -log softmax(logits)[i, labels[i]]; logits (N, C), labels (N,) int64."""
    return apply("softmax_cross_entropy", logits, labels)


def mse_loss(pred: Any, target: Any) -> Any:
    """mean((pred - target)^2) over every element; shapes must match exactly."""
    return apply("mse_loss", pred, target)


def embedding(ids: Any, table: Any) -> Any:
    """Rows of table (V, D) picked by int64 ids of any shape: ids.shape + (D,)."""
    return apply("embedding", ids, table)


def causal_mask(x: Any, fill: float = float("-inf")) -> Any:
    """x (..., T, T) with every entry above the diagonal (column > row) set to `fill`."""
    return apply("causal_mask", x, fill=float(fill))


# ---- softmax and log_softmax ----------------------------------------------------------

def _axis_infer(x: Shape, axis: int) -> Shape:
    if not 0 <= axis < len(x):
        raise ShapeError(f"axis {axis} out of range for a tensor of rank {len(x)}")
    return x


def _softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _softmax_examples(rng: np.random.Generator) -> list[Example]:
    x = rng.normal(size=(2, 3, 4)) * 2.0
    return [((x,), {"axis": 2}), ((x,), {"axis": 0}), ((rng.normal(size=(5,)) + 100.0,), {"axis": 0})]


def _five_per_elem(out: Shape, x: Shape, **attrs: Any) -> int:
    return 5 * numel(x)  # max, subtract, exp, sum, divide (or log and subtract)


register(OpDef(
    "softmax", "reduction", infer=_axis_infer, ref=_softmax_ref, flops=_five_per_elem,
    grad=lambda g, y, x, axis: (y * (g - sum(g * y, axis, keepdims=True)),),
    examples=_softmax_examples, doc="numerically stable softmax along one axis"))
register(OpDef(
    "log_softmax", "reduction", infer=_axis_infer, ref=_log_softmax_ref, flops=_five_per_elem,
    grad=lambda g, y, x, axis: (g - exp(y) * sum(g, axis, keepdims=True),),
    examples=_softmax_examples, doc="numerically stable log-softmax along one axis"))


# ---- softmax_cross_entropy ------------------------------------------------------------

def _check_logits_labels(logits: Shape, labels: Shape) -> None:
    if len(logits) != 2 or labels != logits[:1]:
        raise ShapeError(f"needs logits (N, C) and labels (N,), got logits {logits} and labels {labels}")


def _xent_infer(logits: Shape, labels: Shape) -> Shape:
    _check_logits_labels(logits, labels)
    return ()


def _picked(x: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """x[i, labels[i]] for each row i."""
    return x[np.arange(x.shape[0]), labels.astype(np.int64)]


def _xent_ref(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return -np.mean(_picked(_log_softmax_ref(logits, 1), labels))


def _xent_grad_infer(g: Shape, logits: Shape, labels: Shape) -> Shape:
    if g != ():
        raise ShapeError(f"g must be a scalar (the loss's adjoint), got {g}")
    _check_logits_labels(logits, labels)
    return logits


def _xent_grad_ref(g: np.ndarray, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    d = _softmax_ref(logits, 1)
    d[np.arange(logits.shape[0]), labels.astype(np.int64)] -= 1.0
    return g * d / logits.shape[0]


def _xent_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(n, c)) * 2.0, rng.integers(0, c, size=n)), {}) for n, c in ((4, 3), (1, 5))]


register(OpDef(
    "softmax_cross_entropy", "reduction", infer=_xent_infer, ref=_xent_ref, integer_inputs=(1,),
    flops=lambda out, logits, labels: 5 * numel(logits) + 2 * logits[0],
    grad=lambda g, out, logits, labels: (apply("softmax_cross_entropy_grad", g, logits, labels), None),
    examples=_xent_examples, doc="mean cross-entropy of logits (N, C) against int64 class labels (N,)"))
register(OpDef(
    "softmax_cross_entropy_grad", "reduction", infer=_xent_grad_infer, ref=_xent_grad_ref,
    integer_inputs=(2,), backward_only=True, flops=lambda out, g, logits, labels: 6 * numel(logits),
    examples=lambda rng: [((rng.normal(),) + ins, a) for ins, a in _xent_examples(rng)],
    doc="g * (softmax(logits) - onehot(labels)) / N"))


# ---- mse_loss -------------------------------------------------------------------------

def _mse_infer(pred: Shape, target: Shape) -> Shape:
    if pred != target:
        raise ShapeError(f"pred {pred} and target {target} must have the same shape")
    return ()


def _mse_grad(g: Any, out: Any, pred: Any, target: Any) -> tuple[Any, Any]:
    d = (pred - target) * (g * (2.0 / max(numel(pred.shape), 1)))
    return d, -d


register(OpDef(
    "mse_loss", "reduction", infer=_mse_infer, ref=lambda pred, target: np.mean(np.square(pred - target)),
    flops=lambda out, pred, target: 3 * numel(pred), grad=_mse_grad,
    examples=lambda rng: [((rng.normal(size=s), rng.normal(size=s)), {}) for s in ((3, 4), (5,), ())],
    doc="mean squared error over every element"))


# ---- embedding ------------------------------------------------------------------------

def _embedding_infer(ids: Shape, table: Shape) -> Shape:
    if len(table) != 2:
        raise ShapeError(f"table must be (num_embeddings, dim), got {table}")
    return ids + table[1:]


def _embedding_ref(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[ids.astype(np.int64)]


def _embedding_grad_infer(g: Shape, ids: Shape, num_embeddings: int) -> Shape:
    if len(g) != len(ids) + 1 or g[:-1] != ids:
        raise ShapeError(f"g must have shape ids.shape + (dim,) = {ids} + (dim,), got {g}")
    if num_embeddings < 1:
        raise ShapeError(f"num_embeddings must be positive, got {num_embeddings}")
    return (num_embeddings, g[-1])


def _embedding_grad_ref(g: np.ndarray, ids: np.ndarray, num_embeddings: int) -> np.ndarray:
    out = np.zeros((num_embeddings, g.shape[-1]), dtype=g.dtype)
    np.add.at(out, ids.astype(np.int64).reshape(-1), g.reshape(-1, g.shape[-1]))  # repeated ids accumulate
    return out


def _embedding_examples(rng: np.random.Generator) -> list[Example]:
    table = rng.normal(size=(5, 3))
    return [((rng.integers(0, 5, size=(2, 4)), table), {}), ((rng.integers(0, 5, size=(6,)), table), {}),
            ((np.array([1, 1, 3]), table), {})]


register(OpDef(
    "embedding", "data_movement", infer=_embedding_infer, ref=_embedding_ref, integer_inputs=(0,), dtype_from=1,
    read_elems=lambda out, ids, table: numel(ids) * table[1] + numel(ids),  # only the looked-up rows
    grad=lambda g, out, ids, table: (None, apply("embedding_grad", g, ids, num_embeddings=table.shape[0])),
    examples=_embedding_examples, doc="table[ids]: gathers rows of a (V, D) table"))
register(OpDef(
    "embedding_grad", "data_movement", infer=_embedding_grad_infer, ref=_embedding_grad_ref,
    integer_inputs=(1,), dtype_from=0, backward_only=True, flops=lambda out, g, ids, **a: numel(g),
    examples=lambda rng: [((rng.normal(size=ids.shape + (3,)), ids), {"num_embeddings": 5})
                          for (ids, _), _ in _embedding_examples(rng)],
    doc="scatter-adds rows of g into a zero (num_embeddings, D) table (embedding's adjoint)"))


# ---- causal_mask ----------------------------------------------------------------------

def _causal_infer(x: Shape, fill: float) -> Shape:
    if len(x) < 2 or x[-1] != x[-2]:
        raise ShapeError(f"needs x (..., T, T), square in its last two axes, got {x}")
    return x


def _causal_ref(x: np.ndarray, fill: float) -> np.ndarray:
    above = np.triu(np.ones(x.shape[-2:], dtype=bool), k=1)
    return np.where(above, np.asarray(fill, dtype=x.dtype), x)


register(OpDef(
    "causal_mask", "elementwise", infer=_causal_infer, ref=_causal_ref,
    flops=lambda out, x, **a: numel(x),  # one select per element
    grad=lambda g, out, x, fill: (causal_mask(g, fill=0.0),),
    examples=lambda rng: [((rng.normal(size=(4, 4)),), {"fill": 0.0}), ((rng.normal(size=(2, 3, 3)),), {"fill": 0.0}),
                          ((rng.normal(size=(3, 3)),), {"fill": -1e4})],
    doc="sets entries with column > row in the last two axes to fill (attention's causal mask)"))
