"""Independent gradient oracle: central finite differences in float64."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping

import numpy as np

from accelsim.compare import NEGLIGIBLE, Mismatch, first_mismatch, max_rel_err, scale
from accelsim.errors import GraphError
from accelsim.evaluate import evaluate
from accelsim.graph.ir import Graph

__all__ = ["NEGLIGIBLE", "finite_difference_grads", "grad_report", "max_rel_err"]


def _check_coords(max_coords: int | None) -> None:
    """None: every coordinate; 0: none (finite differences skipped, as for a model whose ties make them meaningless)."""
    if max_coords is not None and (isinstance(max_coords, bool) or not isinstance(max_coords, (int, np.integer))
                                   or max_coords < 0):
        raise GraphError(f"finite differences: the number of coordinates per tensor (--fd-coords) must be an "
                         f"integer >= 0, got {max_coords!r}")


def finite_difference_grads(graph: Graph, loss: str, wrt: list[str], feeds: Mapping[str, np.ndarray],
                            eps: float = 1e-6, max_coords: int | None = None,
                            rng: np.random.Generator | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """d(loss)/d(x) by central differences at up to `max_coords` coordinates of each x.

    Returns {name: (flat coordinate indices, derivative values)}. Needs a float64 graph.
    """
    _check_coords(max_coords)
    if not (isinstance(eps, (int, float, np.floating)) and math.isfinite(eps) and eps > 0):
        raise GraphError(f"finite differences: eps must be a finite number > 0, got {eps!r}")
    if graph.dtype != "float64":
        raise GraphError(f"finite differences need a float64 graph, got {graph.dtype}")
    missing = [name for name in wrt if name not in feeds]
    if missing:
        raise GraphError(f"finite differences: no value fed for {', '.join(map(repr, missing))}")
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


def grad_report(graph: Graph, fd_coords: int = 8, use_torch: bool = True, seed: int = 0) -> dict:
    """Loss/outputs and d(loss)/d(every float input and trainable parameter) of a float64 forward
    graph, checked against central finite differences and, when installed, PyTorch autograd.

    Keys: outputs, grads (name -> array), fd_max_rel_err, torch_max_rel_err (None without torch),
    nonfinite (one line per tensor that is NaN or infinite on either side, naming the first index).
    Errors are per tensor (max_rel_err), floored at NEGLIGIBLE x the largest gradient; a non-finite
    value on either side makes the error inf.
    """
    from accelsim.autodiff import gradients

    _check_coords(fd_coords)
    if graph.loss is None:
        raise GraphError(f"graph {graph.name!r} has no loss to differentiate")
    g = graph.copy()
    wrt = [n for n in g.nodes if (n.op == "input" and n.dtype != "int64") or (n.op == "param" and n.trainable)]
    grads = gradients(g, g.loss, [n.id for n in wrt])
    feeds = {n.name: g.leaf_value(n.id) for n in g.nodes if n.op in ("input", "param")}
    keep = [grads[n.id].id for n in wrt if n.id in grads]
    values = evaluate(g, feeds, keep=keep)
    grad_values = {n.name: (values[f"%{grads[n.id].id}"] if n.id in grads else np.zeros(n.shape)) for n in wrt}
    outputs = {k: values[k] for k in graph.outputs}
    fd = finite_difference_grads(graph, "loss", [n.name for n in wrt], feeds, max_coords=fd_coords,
                                 rng=np.random.default_rng(seed))
    floor = NEGLIGIBLE * scale(*grad_values.values())
    # every comparison the report makes: (label, ours, the oracle's, floor, the sampled flat coordinates
    # of the tensor's shape, or None for the whole tensor)
    fd_pairs = [(f"d loss / d {k} (finite differences)", grad_values[k].reshape(-1)[idx], v, floor,
                 (idx, grad_values[k].shape)) for k, (idx, v) in fd.items()]
    fd_err = max((max_rel_err(ours, theirs, f) for _, ours, theirs, f, _ in fd_pairs), default=0.0)
    torch_err, torch_pairs = None, []
    if use_torch and _torch_available():
        from accelsim.torch_oracle import torch_gradients

        t_out, t_grads = torch_gradients(graph, feeds, [n.name for n in wrt])
        torch_pairs = [(f"d loss / d {k} (PyTorch)", grad_values[k], t_grads[k], floor, None) for k in t_grads]
        torch_pairs += [(f"{k} (PyTorch)", outputs[k], t_out[k], 0.0, None) for k in outputs if k in t_out]
        torch_err = max((max_rel_err(ours, theirs, f) for _, ours, theirs, f, _ in torch_pairs), default=0.0)
    nonfinite = [f"{label}: {_in_tensor(m, sampled)}" for label, ours, theirs, _, sampled in fd_pairs + torch_pairs
                 if (m := first_mismatch(ours, theirs, math.inf)) is not None]
    return {"outputs": outputs, "grads": grad_values, "fd_max_rel_err": fd_err, "torch_max_rel_err": torch_err,
            "nonfinite": nonfinite}


def _in_tensor(m: Mismatch, sampled: tuple[np.ndarray, tuple[int, ...]] | None) -> Mismatch:
    """A mismatch among sampled coordinates, re-indexed to its place in the whole tensor."""
    if sampled is None or m.index is None:
        return m
    idx, shape = sampled
    return replace(m, index=tuple(int(i) for i in np.unravel_index(int(idx[m.index[0]]), shape)))


def _torch_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None
