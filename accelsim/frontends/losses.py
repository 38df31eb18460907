"""What an imported forward graph ends in: one `LossHead` per `loss=` name (graph, outputs -> loss or None).

Zoo models end in a scalar loss against a data input (`set_loss`), which `training_graph` differentiates; an
imported module returns predictions, so the importer appends the same kind of head:

- "mse": mean squared error against an input `target` shaped like the (single) output (the zoo's superres);
- "cross_entropy": softmax cross-entropy of (N, C) logits against int64 `labels` (N,) (the zoo's mlp, resnet50);
- "output": the module already returns a scalar loss; it is the graph's loss;
- "none": no loss: an inference graph (`training_graph` then says the graph has no loss).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from accelsim import ops as F
from accelsim.errors import FrontendError
from accelsim.graph.ir import Graph, Var


@dataclass(frozen=True)
class LossHead:
    name: str
    build: Callable[[Graph, list[Var]], Var | None]
    doc: str


def _single(g: Graph, outputs: list[Var], head: str) -> Var:
    floats = [v for v in outputs if v.dtype != "int64"]
    if len(outputs) != 1 or not floats:
        raise FrontendError(f"model {g.name!r}: loss={head!r} needs exactly one float output, the module returns "
                            f"{len(outputs)} ({', '.join(str(v.shape) for v in outputs)}); use loss='none' or "
                            "wrap the module so it returns one tensor")
    return floats[0]


def _mse(g: Graph, outputs: list[Var]) -> Var:
    y = _single(g, outputs, "mse")
    return F.mse_loss(y, g.input("target", y.shape))


def _cross_entropy(g: Graph, outputs: list[Var]) -> Var:
    y = _single(g, outputs, "cross_entropy")
    if y.ndim != 2:
        raise FrontendError(f"model {g.name!r}: loss='cross_entropy' needs (N, C) logits, the module returns shape "
                            f"{y.shape}; use loss='mse' or reshape the output in the module")
    labels = g.input("labels", (y.shape[0],), dtype="int64", init="randint", high=y.shape[1])
    return F.softmax_cross_entropy(y, labels)


def _output(g: Graph, outputs: list[Var]) -> Var:
    y = _single(g, outputs, "output")
    if y.shape != ():
        raise FrontendError(f"model {g.name!r}: loss='output' needs the module to return a scalar loss, it returns "
                            f"shape {y.shape}; use loss='mse' or 'cross_entropy'")
    return y


LOSSES: dict[str, LossHead] = {h.name: h for h in (
    LossHead("mse", _mse, "mean squared error against an input 'target' shaped like the output"),
    LossHead("cross_entropy", _cross_entropy, "softmax cross-entropy against int64 input 'labels' (N,)"),
    LossHead("output", _output, "the module's scalar output is the loss"),
    LossHead("none", lambda g, outputs: None, "no loss (inference only)"),
)}


def loss_head(name: object) -> LossHead:
    if not isinstance(name, str) or name not in LOSSES:
        raise FrontendError(f"loss must be one of {', '.join(repr(k) for k in LOSSES)}, got {name!r}")
    return LOSSES[name]
