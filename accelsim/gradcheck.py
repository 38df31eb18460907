"""Independent gradient oracle: central finite differences in float64."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from accelsim.errors import GraphError
from accelsim.evaluate import evaluate
from accelsim.graph.ir import Graph


def max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max|a - b| / max(max|a|, max|b|): relative to the tensor's scale, so tiny entries don't dominate."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(float(np.max(np.abs(a), initial=0.0)), float(np.max(np.abs(b), initial=0.0)))
    return float(np.max(np.abs(a - b), initial=0.0)) / scale if scale > 0 else 0.0


def finite_difference_grads(graph: Graph, loss: str, wrt: list[str], feeds: Mapping[str, np.ndarray],
                            eps: float = 1e-6, max_coords: int | None = None,
                            rng: np.random.Generator | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """d(loss)/d(x) by central differences at up to `max_coords` coordinates of each x.

    Returns {name: (flat coordinate indices, derivative values)}. Needs a float64 graph.
    """
    if graph.dtype != "float64":
        raise GraphError(f"finite differences need a float64 graph, got {graph.dtype}")
    rng = rng or np.random.default_rng(0)
    base = {k: np.array(v, dtype=np.float64) for k, v in feeds.items()}
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for name in wrt:
        x = base[name]
        idx = np.arange(x.size)
        if max_coords is not None and x.size > max_coords:
            idx = np.sort(rng.choice(x.size, size=max_coords, replace=False))
        vals = np.empty(idx.size)
        for j, flat in enumerate(idx):
            saved = x.flat[flat]
            h = eps * max(1.0, abs(saved))
            x.flat[flat] = saved + h
            up = float(evaluate(graph, base, [loss])[loss])
            x.flat[flat] = saved - h
            down = float(evaluate(graph, base, [loss])[loss])
            x.flat[flat] = saved
            vals[j] = (up - down) / (2 * h)
        out[name] = (idx, vals)
    return out
