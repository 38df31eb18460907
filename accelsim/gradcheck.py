"""Independent gradient oracle: central finite differences in float64."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from accelsim.errors import GraphError
from accelsim.evaluate import evaluate
from accelsim.graph.ir import Graph


def max_rel_err(a: np.ndarray, b: np.ndarray, floor: float = 0.0) -> float:
    """max|a - b| / max(max|a|, max|b|, floor): relative to the tensor's scale, so tiny entries don't
    dominate. `floor` keeps a tensor whose true value is ~0 (e.g. a key bias, which softmax ignores)
    from turning rounding noise into a relative error of 1."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(_scale(a), _scale(b), floor)
    return float(np.max(np.abs(a - b), initial=0.0)) / scale if scale > 0 else 0.0


def _scale(a: np.ndarray) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64)), initial=0.0))


NEGLIGIBLE = 1e-3
"""A gradient below NEGLIGIBLE x the largest gradient of the same report is compared at that floor."""


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


def grad_report(graph: Graph, fd_coords: int = 8, use_torch: bool = True, seed: int = 0) -> dict:
    """Loss/outputs and d(loss)/d(every float input and trainable parameter) of a float64 forward
    graph, checked against central finite differences and, when installed, PyTorch autograd.

    Keys: outputs, grads (name -> array), fd_max_rel_err, torch_max_rel_err (None without torch).
    Errors are per tensor (max_rel_err), floored at NEGLIGIBLE x the largest gradient.
    """
    from accelsim.autodiff import gradients

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
    floor = NEGLIGIBLE * max((_scale(v) for v in grad_values.values()), default=0.0)
    fd_err = max((max_rel_err(grad_values[k].reshape(-1)[idx], v, floor) for k, (idx, v) in fd.items()),
                 default=0.0)
    torch_err = None
    if use_torch and _torch_available():
        from accelsim.torch_oracle import torch_gradients

        t_out, t_grads = torch_gradients(graph, feeds, [n.name for n in wrt])
        errs = [max_rel_err(grad_values[k], t_grads[k], floor) for k in t_grads]
        errs += [max_rel_err(outputs[k], t_out[k]) for k in outputs if k in t_out]
        torch_err = max(errs, default=0.0)
    return {"outputs": outputs, "grads": grad_values, "fd_max_rel_err": fd_err, "torch_max_rel_err": torch_err}


def _torch_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("torch") is not None
