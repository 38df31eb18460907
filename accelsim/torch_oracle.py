"""PyTorch as an independent oracle: run a forward graph's ops with torch and differentiate with autograd.

Only ops that model builders emit need an entry here; backward-only ops are autograd's job.
Import torch lazily: it is an optional, test-time dependency.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph


def _torch_ops() -> dict[str, Callable[..., Any]]:
    import torch
    import torch.nn.functional as tf

    def matmul(a, b, transpose_a, transpose_b):
        return torch.matmul(a.transpose(-1, -2) if transpose_a else a, b.transpose(-1, -2) if transpose_b else b)

    def pool(fn):
        return lambda x, kernel, stride, padding: fn(x, kernel, stride, padding)

    def causal_mask(x, fill):
        t = x.shape[-1]
        upper = torch.ones(t, t, dtype=torch.bool).triu(1)
        return x.masked_fill(upper, fill)

    def sum_to(x, shape):
        lead = x.dim() - len(shape)
        dims = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and x.shape[lead + i] != 1)
        return x.sum(dim=dims, keepdim=True).reshape(shape) if dims else x.reshape(shape)

    def bn_inference(x, gamma, beta, mean, var, eps):
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) + beta.reshape(shape)

    def vocab_embedding(ids, table, start):
        held = (ids >= start) & (ids < start + table.shape[0])
        return tf.embedding(torch.where(held, ids - start, 0), table) * held.unsqueeze(-1)

    def vocab_parallel_xent(logits, labels, start, valid):
        real = logits[:, :valid]
        held = (labels >= start) & (labels < start + valid)
        picked = real.gather(1, torch.where(held, labels - start, 0).unsqueeze(1))[:, 0] * held
        return torch.stack([torch.logsumexp(real, dim=1), picked], dim=1)

    def tp_allreduce_xent(*partials):
        stacked = torch.stack(partials)
        return torch.stack([torch.logsumexp(stacked[:, :, 0], dim=0), stacked[:, :, 1].sum(dim=0)], dim=1)

    return {
        "tp_allreduce": lambda *xs: torch.stack(xs).sum(dim=0), "tp_allreduce_xent": tp_allreduce_xent,
        "vocab_embedding": vocab_embedding, "vocab_parallel_xent": vocab_parallel_xent,
        "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "neg": torch.neg,
        "exp": torch.exp, "log": torch.log, "sin": torch.sin, "cos": torch.cos, "erf": torch.erf, "square": torch.square,
        "pow": lambda x, exponent: torch.pow(x, exponent), "sqrt": torch.sqrt, "relu": torch.relu,
        "sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": lambda x: tf.gelu(x, approximate="tanh"),
        "matmul": matmul,
        "conv2d": lambda x, w, stride, padding, dilation, groups: tf.conv2d(x, w, None, stride, padding, dilation, groups),
        "max_pool2d": pool(tf.max_pool2d), "avg_pool2d": pool(tf.avg_pool2d),
        "pixel_shuffle": lambda x, upscale: tf.pixel_shuffle(x, upscale),
        "pixel_unshuffle": lambda x, downscale: tf.pixel_unshuffle(x, downscale),
        "batch_norm": lambda x, gamma, beta, eps: tf.batch_norm(x, None, None, gamma, beta, True, 0.0, eps),
        "batch_norm_inference": bn_inference,
        "layer_norm": lambda x, gamma, beta, eps: tf.layer_norm(x, x.shape[-1:], gamma, beta, eps),
        "reshape": lambda x, shape: x.reshape(shape), "transpose": lambda x, axes: x.permute(*axes),
        "concat": lambda *xs, axis: torch.cat(xs, dim=axis),
        "slice": lambda x, starts, stops: x[tuple(slice(s, e) for s, e in zip(starts, stops))],
        "broadcast_to": lambda x, shape: x.expand(shape), "sum_to": sum_to,
        "sum": lambda x, axes, keepdims: x.sum(dim=axes, keepdim=keepdims) if axes else x,
        "mean": lambda x, axes, keepdims: x.mean(dim=axes, keepdim=keepdims) if axes else x,
        "max": lambda x, axes, keepdims: x.amax(dim=axes, keepdim=keepdims) if axes else x,
        "softmax": lambda x, axis: torch.softmax(x, dim=axis),
        "log_softmax": lambda x, axis: torch.log_softmax(x, dim=axis),
        "softmax_cross_entropy": lambda logits, labels: tf.cross_entropy(logits, labels),
        "mse_loss": lambda p, t: tf.mse_loss(p, t),
        "embedding": lambda ids, table: tf.embedding(ids, table),
        "causal_mask": causal_mask,
    }


def torch_gradients(graph: Graph, feeds: Mapping[str, np.ndarray], wrt: list[str],
                    loss: str = "loss") -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Evaluate the forward graph's outputs in torch (float64) and d(loss)/d(wrt) by autograd.

    Returns (outputs by name, gradients by leaf name). Raises if an op has no torch twin.
    """
    import torch

    table = _torch_ops()
    wanted = set(wrt)
    last = max(graph.outputs.values())
    values: dict[int, Any] = {}
    leaves: dict[str, Any] = {}
    for node in graph.nodes[: last + 1]:
        if node.is_leaf:
            arr = np.asarray(feeds[node.name]) if node.name in feeds else graph.leaf_value(node.id)
            t = torch.tensor(arr, dtype=torch.int64 if node.dtype == "int64" else torch.float64)
            if node.name in wanted:
                t.requires_grad_(True)
                leaves[node.name] = t
            values[node.id] = t
        elif node.phase == "forward":
            if node.op not in table:
                raise AccelsimError(f"torch oracle: op {node.op!r} (node %{node.id}) has no PyTorch twin")
            attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in node.attrs.items()}
            values[node.id] = table[node.op](*(values[i] for i in node.inputs), **attrs)
    loss_t = values[graph.outputs[loss]]
    grads = torch.autograd.grad(loss_t, [leaves[n] for n in wrt], allow_unused=True)
    outputs = {k: values[v].detach().numpy() for k, v in graph.outputs.items() if v in values}
    return outputs, {n: (np.zeros(tuple(leaves[n].shape)) if gr is None else gr.numpy()) for n, gr in zip(wrt, grads)}
