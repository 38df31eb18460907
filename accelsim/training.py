"""Training graphs: forward + backward + optimizer update in one Graph (Graph -> Graph)."""
from __future__ import annotations

from accelsim.autodiff import gradients
from accelsim.errors import GraphError
from accelsim.graph.ir import Graph, Var
from accelsim.graph.provenance import OPTIMIZERS, OptimizerSettings
from accelsim.layer_names import param_layers
from accelsim.ops import sqrt
from accelsim.passes.dce import prune_to_outputs

__all__ = ["OPTIMIZERS", "training_graph"]


def training_graph(forward: Graph, loss: Var | int | None = None, optimizer: str = "sgd", lr: float = 0.01,
                   momentum: float = 0.9, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                   step: int = 1) -> Graph:
    """One training step: outputs `loss`, `<param>.grad` and `<param>.new` (and `<state>.new`).

    Updates follow PyTorch's conventions: momentum v = mu*v + g, w -= lr*v; Adam with bias
    correction at `step` (1 for a first step from zero state). The hyperparameters are checked
    (see OptimizerSettings for the ranges) and recorded as the result's `optimizer`.
    """
    if not isinstance(forward, Graph):
        raise GraphError(f"training_graph needs a forward Graph (from A.models.build or A.Graph), got "
                         f"{type(forward).__name__}")
    settings = OptimizerSettings(optimizer=optimizer, lr=lr, momentum=momentum, beta1=beta1, beta2=beta2,
                                 eps=eps, step=step)
    loss_id = _loss_id(forward, loss)
    later = next((n for n in forward.nodes if n.phase != "forward"), None)
    if later is not None:
        raise GraphError(f"training_graph needs a forward graph; graph {forward.name!r} already has "
                         f"{later.phase} node %{later.id} ({later.name!r})")
    g = forward.copy(name=f"{forward.name}.train")
    params = [p for p in g.params if p.trainable]
    grads = gradients(g, loss_id, [p.id for p in params])
    layers = param_layers(g)
    with g.phase("update"):
        for p in params:
            if p.id not in grads:
                continue  # the loss does not depend on p: it keeps its value
            g.output(f"{p.name}.grad", grads[p.id])
            # a parameter shard is updated, with its optimizer state, on its rank, in its layer
            with g.rank(p.rank), g.layer(layers[p.id]):
                g.output(f"{p.name}.new", _update(g, g.var(p.id), grads[p.id], settings))
    # gradient rules emit an adjoint for every input of a node; those of inputs and targets (the
    # stem convolution's input gradient, MSE's target gradient) feed nothing, so they go
    out = prune_to_outputs(g, g.outputs)
    out.optimizer = settings
    return out


def _update(g: Graph, w: Var, dw: Var, s: OptimizerSettings) -> Var:
    """The new value of parameter `w` with gradient `dw`; optimizer state is added as outputs."""
    name = w.node.name
    if s.optimizer == "sgd":
        return w - dw * s.lr
    if s.optimizer == "momentum":
        v = g.param(f"{name}.momentum", w.shape, init="zeros", trainable=False)
        v_new = v * s.momentum + dw
        g.output(f"{v.node.name}.new", v_new)
        return w - v_new * s.lr
    m = g.param(f"{name}.adam_m", w.shape, init="zeros", trainable=False)
    v = g.param(f"{name}.adam_v", w.shape, init="zeros", trainable=False)
    m_new = m * s.beta1 + dw * (1.0 - s.beta1)
    v_new = v * s.beta2 + (dw * dw) * (1.0 - s.beta2)
    g.output(f"{m.node.name}.new", m_new)
    g.output(f"{v.node.name}.new", v_new)
    m_hat = m_new * (1.0 / (1.0 - s.beta1**s.step))
    v_hat = v_new * (1.0 / (1.0 - s.beta2**s.step))
    return w - (m_hat * s.lr) / (sqrt(v_hat) + s.eps)


def _loss_id(forward: Graph, loss: Var | int | None) -> int:
    """The loss node's id: `loss` (a Var of `forward` or an id) or the graph's own loss; a scalar."""
    if loss is None:
        loss_id = forward.loss
        if loss_id is None:
            raise GraphError(f"graph {forward.name!r} has no loss: call set_loss or pass loss=")
    elif isinstance(loss, Var):
        if loss.graph is not forward:
            raise GraphError(f"training_graph: loss {loss!r} is a node of another graph than {forward.name!r}")
        loss_id = loss.id
    elif isinstance(loss, int) and not isinstance(loss, bool):
        loss_id = loss
    else:
        raise GraphError(f"training_graph: loss must be a Var, a node id or None, got {loss!r}")
    if not 0 <= loss_id < len(forward.nodes):
        raise GraphError(f"training_graph: graph {forward.name!r} has no node %{loss_id} to use as the loss")
    if forward.nodes[loss_id].shape != ():
        raise GraphError(f"training_graph: loss %{loss_id} ({forward.nodes[loss_id].name!r}) must be a scalar, "
                         f"got shape {forward.nodes[loss_id].shape}")
    return loss_id
