"""Converters of ONNX's loss ops: SoftmaxCrossEntropyLoss, which torch.onnx.export makes of F.cross_entropy
inside a module's forward (ONNX node -> the registry's softmax_cross_entropy). Its int64 labels are a graph
input (reshaped at most) whose range the scores' classes set here (ImportContext.claim_labels)."""
from __future__ import annotations

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef


def _softmax_cross_entropy(ctx: ImportContext) -> list[Value]:
    """Mean reduction over (N, C) scores and (N,) labels, no class weights; an ignore_index outside [0, C)
    (torch's -100) never matches a label and changes nothing; one inside would, and is refused."""
    scores = ctx.tensor(0)
    if scores.ndim != 2:
        raise ctx.unsupported(f"scores of shape {scores.shape}; only (N, C) scores are supported")
    classes = scores.shape[1]
    reduction = ctx.attr("reduction", "mean")
    if reduction != "mean":
        raise ctx.unsupported(f"reduction={reduction!r}; only 'mean' is supported")
    if ctx.has(2):
        raise ctx.unsupported("class weights (input 2) are not supported")
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("its log_prob output is used")
    ignore = ctx.attr("ignore_index")
    if ignore is not None and 0 <= int(ignore) < classes:
        raise ctx.unsupported(f"ignore_index={ignore} inside the class range [0, {classes})")
    labels = ctx.tensor(1)
    if labels.dtype != "int64" or labels.shape != (scores.shape[0],):
        raise ctx.unsupported(f"labels {labels.dtype}{list(labels.shape)}; expected int64 labels of shape "
                              f"({scores.shape[0]},)")
    ctx.claim_labels(labels, classes)
    return [F.softmax_cross_entropy(scores, labels)]


LOSS_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("SoftmaxCrossEntropyLoss", _softmax_cross_entropy,
              "softmax_cross_entropy; mean reduction, no class weights, ignore_index outside the classes"),
)
