"""ATen losses computed inside a module's forward as accelsim ops (entries of ATEN_OPS).

`F.cross_entropy(logits, y)` is log_softmax then nll_loss; the importer keeps nll_loss whole (its core ATen
decomposition is a gather), and nll_loss of a log_softmax over the class axis of (N, C) logits is the registry's
softmax_cross_entropy of the logits. A graph's int64 labels are drawn from [0, C), so torch's default
ignore_index (-100) never matches one; an ignore_index inside [0, C) would change the loss and is refused.
"""
from __future__ import annotations

from typing import Any

from accelsim import ops as F
from accelsim.errors import FrontendError
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
"""ATen's reduction enum."""


def _val(x: Any) -> Any:
    return x.meta.get("val") if hasattr(x, "meta") else None


def _nll_refuse(args: Args, kwargs: Kwargs) -> str | None:
    logp, weight, reduction, ignore = _val(args[0]), args[2], int(args[3]), int(args[4])
    if weight is not None:
        return "class weights"
    if reduction not in (1, 2):
        return f"reduction={REDUCTIONS.get(reduction, reduction)!r} (expected 'mean' or 'sum')"
    if logp is not None and logp.dim() != 2:
        return f"input of rank {logp.dim()} (expected (N, C) log-probabilities)"
    if logp is not None and 0 <= ignore < int(logp.shape[1]):
        return f"ignore_index={ignore} inside the class range [0, {int(logp.shape[1])})"
    src = getattr(args[0], "target", None)
    if "log_softmax" not in str(src):
        return "an input that is not a log_softmax (use F.cross_entropy on logits)"
    return None


def _nll_loss(ctx: Ctx, logp: Any, target: Any, weight: Any, reduction: int, ignore_index: int) -> tuple[Any, None]:
    node = logp.node
    if node.op != "log_softmax" or node.attrs["axis"] != 1:
        raise FrontendError(f"nll_loss reads %{node.id} ({node.op}), expected a log_softmax over axis 1")
    loss = F.softmax_cross_entropy(ctx.graph.var(node.inputs[0]), target)
    return (loss if int(reduction) == 1 else loss * float(logp.shape[0]), None)


aten("aten.nll_loss_forward.default", _nll_loss, "softmax_cross_entropy of log_softmax's logits (x N for 'sum')",
     refuse=_nll_refuse)
