"""Vocabulary-parallel ops (Megatron-LM): the embedding, LM head and cross-entropy split over the vocabulary.

Tensor-parallel rank k of t holds rows [start, start + C) of the (padded) vocabulary:

- vocab_embedding: the rows of rank k's table that the ids pick, zero for ids another rank holds; a
  tp_allreduce (sum) of every rank's result is the whole lookup, exactly (each row has one nonzero term).
- vocab_parallel_xent: for rank k's logits (N, C), per row (N, 2): [log-sum-exp over its first `valid`
  columns, the label's logit if rank k holds the label, else 0]; one pass over the shard, like
  softmax_cross_entropy. Columns past `valid` are the padding of a vocabulary padded to a multiple of t
  (computed, as Megatron computes them, but left out of the loss here, so the loss is the unpadded one's).
- tp_allreduce_xent: the collective combining every rank's (N, 2): [log sum_k exp(lse_k), sum_k picked_k],
  i.e. each row's log-sum-exp over the whole vocabulary and its label's logit. Megatron all-reduces the
  max, the sum of exps and the target logit; a log-sum-exp reduction of the (max, sum) pairs is the same
  arithmetic in one collective, and every rank's loss is then LSE - target. Its gradient needs no max:
  d LSE / d lse_k = exp(lse_k - LSE), so every op here has an exact, smooth gradient rule.
"""
from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

__all__ = ["vocab_embedding", "vocab_parallel_xent", "tp_allreduce_xent"]


# ---- builders -------------------------------------------------------------------------

def vocab_embedding(ids: Any, table: Any, start: int) -> Any:
    """Rows `ids - start` of table (C, D) for ids in [start, start + C), zeros elsewhere: ids.shape + (D,)."""
    return apply("vocab_embedding", ids, table, start=int(start))


def vocab_parallel_xent(logits: Any, labels: Any, start: int, valid: int | None = None) -> Any:
    """Per row of logits (N, C) holding vocabulary columns [start, start + C): (N, 2) of [logsumexp of the
    first `valid` columns (default: all), the label's logit or 0 where the label is outside this shard]."""
    valid = logits.shape[-1] if valid is None else int(valid)
    return apply("vocab_parallel_xent", logits, labels, start=int(start), valid=valid)


def tp_allreduce_xent(*partials: Any) -> Any:
    """Every rank's vocab_parallel_xent (N, 2) combined: [log-sum-exp of the lse column, sum of the picked
    column], held whole by every rank."""
    return apply("tp_allreduce_xent", *partials)


# ---- shared checks --------------------------------------------------------------------

def _check_start(start: object) -> int:
    if isinstance(start, bool) or not isinstance(start, Integral) or start < 0:
        raise ShapeError(f"start (the shard's first vocabulary row) must be a non-negative integer, got {start!r}")
    return int(start)


def _in_shard(ids: np.ndarray, start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(mask of ids this shard holds, their local rows, 0 where not held)."""
    flat = np.asarray(ids).astype(np.int64)
    held = (flat >= start) & (flat < start + count)
    return held, np.where(held, flat - start, 0)


# ---- vocab_embedding ------------------------------------------------------------------

def _embedding_infer(ids: Shape, table: Shape, start: int) -> Shape:
    _check_start(start)
    if len(table) != 2:
        raise ShapeError(f"table must be (rows, dim), got {table}")
    return ids + table[1:]


def _embedding_ref(ids: np.ndarray, table: np.ndarray, start: int) -> np.ndarray:
    held, local = _in_shard(ids, start, table.shape[0])
    return np.where(held[..., None], table[local], np.zeros((), dtype=table.dtype))


def _embedding_grad_infer(g: Shape, ids: Shape, start: int, num_embeddings: int) -> Shape:
    _check_start(start)
    if len(g) != len(ids) + 1 or g[:-1] != ids:
        raise ShapeError(f"g must have shape ids.shape + (dim,) = {ids} + (dim,), got {g}")
    if num_embeddings < 1:
        raise ShapeError(f"num_embeddings must be positive, got {num_embeddings}")
    return (num_embeddings, g[-1])


def _embedding_grad_ref(g: np.ndarray, ids: np.ndarray, start: int, num_embeddings: int) -> np.ndarray:
    held, local = _in_shard(ids, start, num_embeddings)
    out = np.zeros((num_embeddings, g.shape[-1]), dtype=g.dtype)
    rows = g.reshape(-1, g.shape[-1])[held.reshape(-1)]
    np.add.at(out, local.reshape(-1)[held.reshape(-1)], rows)  # repeated ids accumulate in id order
    return out


def _embedding_examples(rng: np.random.Generator) -> list[Example]:
    table = rng.normal(size=(4, 3))
    return [((rng.integers(0, 12, size=(2, 5)), table), {"start": 4}),
            ((rng.integers(0, 4, size=(6,)), table), {"start": 0}),
            ((np.array([5, 5, 9, 2]), table), {"start": 5})]


register(OpDef(
    "vocab_embedding", "data_movement", infer=_embedding_infer, ref=_embedding_ref, integer_inputs=(0,),
    dtype_from=1, read_elems=lambda out, ids, table, **a: numel(ids) * table[1] + numel(ids),
    grad=lambda g, out, ids, table, start: (
        None, apply("vocab_embedding_grad", g, ids, start=start, num_embeddings=table.shape[0])),
    examples=_embedding_examples, rank_attrs=("start",),
    doc="table[ids - start] for the ids this vocabulary shard holds, zero rows for the others"))
register(OpDef(
    "vocab_embedding_grad", "data_movement", infer=_embedding_grad_infer, ref=_embedding_grad_ref,
    integer_inputs=(1,), dtype_from=0, backward_only=True, flops=lambda out, g, ids, **a: numel(g),
    examples=lambda rng: [((rng.normal(size=ids.shape + (3,)), ids), {"start": a["start"], "num_embeddings": 4})
                          for (ids, _), a in _embedding_examples(rng)], rank_attrs=("start",),
    doc="scatter-adds the rows of g whose ids this shard holds into a zero (num_embeddings, D) table"))


# ---- vocab_parallel_xent --------------------------------------------------------------

def _check_logits_labels(logits: Shape, labels: Shape) -> None:
    if len(logits) != 2 or labels != logits[:1] or logits[1] < 1:
        raise ShapeError(f"needs logits (N, C) with C >= 1 and labels (N,), got logits {logits} and labels {labels}")


def _check_valid(logits: Shape, valid: object) -> None:
    if isinstance(valid, bool) or not isinstance(valid, Integral) or not 1 <= valid <= logits[1]:
        raise ShapeError(f"valid (the shard's real, unpadded columns) must be an integer from 1 to {logits[1]}, "
                         f"got {valid!r}")


def _xent_infer(logits: Shape, labels: Shape, start: int, valid: int) -> Shape:
    _check_start(start)
    _check_logits_labels(logits, labels)
    _check_valid(logits, valid)
    return (logits[0], 2)


def _xent_ref(logits: np.ndarray, labels: np.ndarray, start: int, valid: int) -> np.ndarray:
    real = logits[:, :valid]
    top = real.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(real - top).sum(axis=1))
    held, local = _in_shard(labels, start, valid)
    picked = np.where(held, logits[np.arange(logits.shape[0]), local], 0.0)
    return np.stack([lse, picked], axis=1).astype(logits.dtype)


def _xent_grad_infer(g: Shape, logits: Shape, labels: Shape, partial: Shape, start: int, valid: int) -> Shape:
    _check_start(start)
    _check_logits_labels(logits, labels)
    _check_valid(logits, valid)
    if g != (logits[0], 2) or partial != (logits[0], 2):
        raise ShapeError(f"g and partial must be (N, 2) = {(logits[0], 2)}, got {g} and {partial}")
    return logits


def _xent_grad_ref(g: np.ndarray, logits: np.ndarray, labels: np.ndarray, partial: np.ndarray,
                   start: int, valid: int) -> np.ndarray:
    out = g[:, :1] * np.exp(logits - partial[:, :1])
    out[:, valid:] = 0.0  # padding columns are not in the loss
    held, local = _in_shard(labels, start, valid)
    rows = np.flatnonzero(held)
    out[rows, local[rows]] += g[rows, 1]
    return out


def _xent_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(n, c)) * 2.0, rng.integers(0, total, size=n)), {"start": start, "valid": valid})
            for n, c, total, start, valid in ((4, 3, 9, 3, 3), (5, 4, 4, 0, 4), (3, 2, 6, 4, 2), (4, 4, 7, 4, 3))]


def _xent_grad_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(ins[0].shape[0], 2)), *ins, _xent_ref(*ins, **a)), a) for ins, a in _xent_examples(rng)]


register(OpDef(
    "vocab_parallel_xent", "reduction", infer=_xent_infer, ref=_xent_ref, integer_inputs=(1,),
    flops=lambda out, logits, labels, **a: 4 * numel(logits) + 2 * logits[0],  # max, sub, exp, sum; log, pick
    grad=lambda g, out, logits, labels, start, valid: (
        apply("vocab_parallel_xent_grad", g, logits, labels, out, start=start, valid=valid), None),
    examples=_xent_examples, rank_attrs=("start", "valid"),
    doc="per row of a vocabulary shard's logits: [logsumexp, the label's logit if the shard holds it, else 0]"))
register(OpDef(
    "vocab_parallel_xent_grad", "reduction", infer=_xent_grad_infer, ref=_xent_grad_ref, integer_inputs=(2,),
    backward_only=True, flops=lambda out, g, logits, *ins, **a: 4 * numel(logits),
    examples=_xent_grad_examples, rank_attrs=("start", "valid"),
    doc="g[:, 0] * exp(logits - lse) + g[:, 1] * onehot(label - start): vocab_parallel_xent's adjoint"))


# ---- tp_allreduce_xent ----------------------------------------------------------------

MAX_INPUTS = 1024
"""One input per tensor-parallel rank (graph.ir.MAX_RANKS)."""


def _combine_infer(*shapes: Shape) -> Shape:
    if not shapes or len(shapes) > MAX_INPUTS:
        raise ShapeError(f"tp_allreduce_xent needs 1 to {MAX_INPUTS} inputs (one per rank), got {len(shapes)}")
    if any(s != shapes[0] for s in shapes) or len(shapes[0]) != 2 or shapes[0][1] != 2:
        raise ShapeError(f"tp_allreduce_xent combines (N, 2) partials of one shape, got {list(shapes)}")
    return shapes[0]


def _combine_ref(*partials: np.ndarray) -> np.ndarray:
    lse = np.stack([p[:, 0] for p in partials])
    top = lse.max(axis=0)
    total = np.zeros_like(top)
    for row in lse:  # rank order, as the kernels sum
        total = total + np.exp(row - top)
    picked = np.array(partials[0][:, 1], copy=True)
    for p in partials[1:]:
        picked = picked + p[:, 1]
    return np.stack([top + np.log(total), picked], axis=1)


def _combine_grad(g: Any, out: Any, *partials: Any) -> tuple[Any, ...]:
    """Each rank's adjoint on its own rank: [g_lse * exp(lse_k - LSE), g_picked] (N, 2)."""
    grads = []
    for p in partials:
        with p.graph.rank(p.node.rank):
            grads.append(apply("tp_allreduce_xent_grad", g, p, out))
    return tuple(grads)


def _combine_grad_infer(g: Shape, partial: Shape, total: Shape) -> Shape:
    if not (g == partial == total) or len(g) != 2 or g[1] != 2:
        raise ShapeError(f"g, partial and total must be one (N, 2) shape, got {g}, {partial} and {total}")
    return g


def _combine_grad_ref(g: np.ndarray, partial: np.ndarray, total: np.ndarray) -> np.ndarray:
    return np.stack([g[:, 0] * np.exp(partial[:, 0] - total[:, 0]), g[:, 1]], axis=1)


def _combine_examples(rng: np.random.Generator) -> list[Example]:
    return [(tuple(rng.normal(size=(n, 2)) * 3.0 for _ in range(t)), {}) for n, t in ((4, 2), (3, 4), (2, 1))]


register(OpDef(
    "tp_allreduce_xent", "reduction", infer=_combine_infer, ref=_combine_ref,
    flops=lambda out, *ins: 4 * len(ins) * out[0], grad=_combine_grad, examples=_combine_examples,
    collective="allreduce",
    doc="log-sum-exp (column 0) and sum (column 1) over tensor-parallel ranks; an all-reduce on their chips"))
register(OpDef(
    "tp_allreduce_xent_grad", "reduction", infer=_combine_grad_infer, ref=_combine_grad_ref,
    backward_only=True, flops=lambda out, *ins: 3 * out[0],
    examples=lambda rng: [((rng.normal(size=(3, 2)), p, _combine_ref(p, q)), {})
                          for p, q in [(rng.normal(size=(3, 2)), rng.normal(size=(3, 2)))]],
    doc="[g_lse * exp(lse_k - LSE), g_picked]: one rank's adjoint of tp_allreduce_xent"))
