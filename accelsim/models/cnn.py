"""Convolutional models: the seeds' super-resolution CNN, a ResNet block, ResNet-50 v1.5."""
from __future__ import annotations

from accelsim import ops as F
from accelsim.graph.ir import Graph, Var
from accelsim.models.parallel_layers import conv_pair
from accelsim.models.layers import batch_norm, conv, linear


def superres(batch: int = 1, size: int = 64, upscale: int = 3, width: int = 64, dtype: str = "float32",
             seed: int = 0) -> Graph:
    """The super-resolution CNN of seeds 000/001 (seed 001's conv4), MSE against a high-res target.

    `width` is conv1's and conv2's channel count (64 in the seed; conv3 has half): small widths keep
    the layer structure for runs where every element costs, such as the CUDA simulator."""
    g = Graph("superres", dtype=dtype, seed=seed)
    x = g.input("x", (batch, 1, size, size), init="uniform", low=0.0, high=1.0)
    target = g.input("target", (batch, 1, size * upscale, size * upscale), init="uniform", low=0.0, high=1.0)
    h = F.relu(conv(g, x, width, 5, "conv1", padding=2))
    h = F.relu(conv(g, h, width, 3, "conv2", padding=1))
    h = F.relu(conv(g, h, max(1, width // 2), 3, "conv3", padding=1))
    y = F.pixel_shuffle(conv(g, h, upscale * upscale, 3, "conv4", padding=1), upscale)
    g.output("y", y)
    with g.layer("loss"):
        g.set_loss(F.mse_loss(y, target))
    return g


def resnet_block(batch: int = 8, channels: int = 64, size: int = 32, dtype: str = "float32", seed: int = 0,
                 tensor_parallel: int = 1) -> Graph:
    """conv-BN-ReLU, conv-BN, skip add, ReLU; MSE against a random target to make it trainable.
    `tensor_parallel`: the convolutions split by channels over that many ranks (models/parallel_layers.py)."""
    g = Graph("resnet_block", dtype=dtype, seed=seed)
    x = g.input("x", (batch, channels, size, size))
    target = g.input("target", (batch, channels, size, size))
    y = conv_pair(g, x, channels, tensor_parallel)
    with g.layer("residual"):
        y = F.relu(y + x)
    g.output("y", y)
    with g.layer("loss"):
        g.set_loss(F.mse_loss(y, target))
    return g


def _bottleneck(g: Graph, x: Var, width: int, stride: int, prefix: str) -> Var:
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 conv; projection shortcut when shapes change. The ReLUs
    and the residual add are in layer `prefix`; each convolution and batch norm is its own layer."""
    out_c = 4 * width
    with g.layer(prefix):
        h = F.relu(batch_norm(g, conv(g, x, width, 1, f"{prefix}.conv1", bias=False), f"{prefix}.bn1"))
        h = F.relu(batch_norm(g, conv(g, h, width, 3, f"{prefix}.conv2", stride=stride, padding=1, bias=False),
                              f"{prefix}.bn2"))
        h = batch_norm(g, conv(g, h, out_c, 1, f"{prefix}.conv3", bias=False), f"{prefix}.bn3")
        if stride != 1 or x.shape[1] != out_c:
            x = batch_norm(g, conv(g, x, out_c, 1, f"{prefix}.down", stride=stride, bias=False),
                           f"{prefix}.down_bn")
        return F.relu(h + x)


def resnet50(batch: int = 1, size: int = 224, classes: int = 1000, width: int = 64, dtype: str = "float32",
             seed: int = 0) -> Graph:
    """ResNet-50 v1.5 (stages of 3, 4, 6, 3 bottlenecks), softmax cross-entropy over `classes`.

    `width` is the stem's channel count (64 in the paper); stages use width, 2x, 4x, 8x. A small width keeps
    the full depth and op mix for quick checks."""
    g = Graph("resnet50", dtype=dtype, seed=seed)
    x = g.input("x", (batch, 3, size, size))
    labels = g.input("labels", (batch,), dtype="int64", init="randint", high=classes)
    with g.layer("stem"):
        h = F.relu(batch_norm(g, conv(g, x, width, 7, "stem.conv", stride=2, padding=3, bias=False), "stem.bn"))
        h = F.max_pool2d(h, 3, stride=2, padding=1)
    for stage, blocks in enumerate((3, 4, 6, 3)):
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            h = _bottleneck(g, h, width << stage, stride, f"layer{stage + 1}.{i}")
    with g.layer("avgpool"):
        pooled = F.mean(h, (2, 3))
    logits = linear(g, pooled, classes, "fc")
    g.output("logits", logits)
    with g.layer("loss"):
        g.set_loss(F.softmax_cross_entropy(logits, labels))
    return g
