"""Dropout's seeded mask: the keep mask of one dropout, drawn from (graph seed, draw key) with numpy's Generator,
so an importer can hold it as a constant that evaluate, check and every backend read alike.

The key is the dropout's ordinal among the random draws of its graph (0 for the first dropout in forward order,
1 for the next, ...), not its node id: the torch and ONNX importers decompose a model into different numbers of
nodes, yet draw the same masks for it, so the two imports of one model compute the same step.

A mask is a constant: every micro-batch and replica of a step multiplies by the same one, where real training
draws a fresh mask per micro-batch. Per-micro-batch masks would be graph inputs drawn per sample
(Graph.input_value), which the executor and `check` already feed per (micro-batch, replica)."""
from __future__ import annotations

import math

import numpy as np

from accelsim.errors import GraphError

MAX_MASK_ELEMENTS = 1 << 24
"""Largest mask drawn (elements): a mask is a graph constant, stored in the graph (as the torch importer's folded
constants are, frontends/torch_fold.py)."""
DROPOUT_STREAM = 0xD209
"""Keys the dropout masks' random stream apart from the leaves' default values (keyed by node name)."""


def check_dropout_p(p: object, what: str = "dropout p") -> str | None:
    """None when `p` is a dropout probability a training graph can express (0 <= p < 1), else why not (`what`
    names the value: torch's "dropout p", ONNX's "Dropout ratio")."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(p) or not 0.0 <= p <= 1.0:
        return f"{what}={p!r}: expected a probability in [0, 1)"
    if p == 1.0:
        return (f"{what}=1 in training mode zeroes its input and every gradient before it (and its 1/(1 - p) "
                "scale is infinite); expected p < 1")
    return None


def _check_size(label: str, shape: tuple[int, ...]) -> None:
    elements = math.prod(int(d) for d in shape)
    if elements > MAX_MASK_ELEMENTS:
        raise GraphError(f"{label} of shape {tuple(shape)}: {elements} elements, more than the "
                         f"{MAX_MASK_ELEMENTS} a graph constant may hold; import at a smaller batch or sequence "
                         "length, or in eval mode (dropout is the identity then)")


def uniform_draw(seed: int, node_id: int, shape: tuple[int, ...], *, key: int | None = None) -> np.ndarray:
    """float64 uniform [0, 1) numbers of `shape`, the same for the same (seed, key) (key: node_id when None):
    the draw keep_mask thresholds, which an ONNX RandomUniformLike becomes."""
    _check_size(f"uniform draw %{node_id}", shape)
    rng = np.random.default_rng([int(seed), DROPOUT_STREAM, int(node_id if key is None else key)])
    return rng.random(shape)


def keep_mask(seed: int, node_id: int, shape: tuple[int, ...], keep: float, dtype: str, *,
              key: int | None = None) -> np.ndarray:
    """0/1 mask of `shape`, each element 1 with probability `keep` (torch.bernoulli's draw), the same for the
    same (seed, key); `node_id` is the id the mask's node gets (named in errors), `key` the draw's ordinal
    (node_id when None)."""
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or math.isnan(keep) or not 0.0 <= keep <= 1.0:
        raise GraphError(f"keep mask %{node_id}: probability {keep!r}: expected a number in [0, 1]")
    _check_size(f"keep mask %{node_id}", shape)
    return (uniform_draw(seed, node_id, shape, key=key) < keep).astype(dtype)


def dropout_mask(seed: int, node_id: int, shape: tuple[int, ...], p: float, dtype: str, *,
                 key: int | None = None) -> np.ndarray:
    """keep_mask(keep = 1 - p) scaled by 1/(1 - p) (values 0 or 1/(1 - p)): inverted dropout multiplies its input
    by it."""
    problem = check_dropout_p(p)
    if problem is not None:
        raise GraphError(f"dropout mask %{node_id}: {problem}")
    return keep_mask(seed, node_id, shape, 1.0 - p, dtype, key=key) * np.asarray(1.0 / (1.0 - p), dtype)
