"""Training graphs: forward + backward + optimizer update in one Graph (Graph -> Graph)."""
from __future__ import annotations

from accelsim.autodiff import gradients
from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Var
from accelsim.ops import sqrt
from accelsim.passes.dce import prune_to_outputs

OPTIMIZERS = ("sgd", "momentum", "adam")


def training_graph(forward: Graph, loss: Var | int | None = None, optimizer: str = "sgd", lr: float = 0.01,
                   momentum: float = 0.9, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   step: int = 1) -> Graph:
    """One training step: outputs `loss`, `<param>.grad` and `<param>.new` (and `<state>.new`).

    Updates follow PyTorch's conventions: momentum v = mu*v + g, w -= lr*v; Adam with bias
    correction at `step` (1 for a first step from zero state).
    """
    if optimizer not in OPTIMIZERS:
        raise GraphError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if not lr > 0:
        raise GraphError(f"learning rate must be > 0, got {lr}")
    loss_id = forward.loss if loss is None else (loss.id if isinstance(loss, Var) else int(loss))
    if loss_id is None:
        raise GraphError(f"graph {forward.name!r} has no loss: call set_loss or pass loss=")
    g = forward.copy(name=f"{forward.name}.train")
    params = [p for p in g.params if p.trainable]
    grads = gradients(g, loss_id, [p.id for p in params])
    g.meta.update(training=True, optimizer=optimizer, lr=lr, momentum=momentum, beta1=beta1, beta2=beta2, eps=eps,
                  step=step)
    with g.phase("update"):
        for p in params:
            if p.id not in grads:
                continue  # the loss does not depend on p: it keeps its value
            w, dw = g.var(p.id), grads[p.id]
            g.output(f"{p.name}.grad", dw)
            if optimizer == "sgd":
                new = w - dw * lr
            elif optimizer == "momentum":
                v = g.param(f"{p.name}.momentum", p.shape, init="zeros", trainable=False)
                v_new = v * momentum + dw
                g.output(f"{v.node.name}.new", v_new)
                new = w - v_new * lr
            else:
                m = g.param(f"{p.name}.adam_m", p.shape, init="zeros", trainable=False)
                v = g.param(f"{p.name}.adam_v", p.shape, init="zeros", trainable=False)
                m_new = m * beta1 + dw * (1.0 - beta1)
                v_new = v * beta2 + (dw * dw) * (1.0 - beta2)
                g.output(f"{m.node.name}.new", m_new)
                g.output(f"{v.node.name}.new", v_new)
                m_hat = m_new * (1.0 / (1.0 - beta1**step))
                v_hat = v_new * (1.0 / (1.0 - beta2**step))
                new = w - (m_hat * lr) / (sqrt(v_hat) + eps)
            g.output(f"{p.name}.new", new)
    # gradient rules emit an adjoint for every input of a node; those of inputs and targets (the
    # stem convolution's input gradient, MSE's target gradient) feed nothing, so they go
    return prune_to_outputs(g, g.outputs)
