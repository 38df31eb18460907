"""The seeds' worked examples and the MLP of the TensorFlow example (seeds 002-004)."""
from __future__ import annotations

from accelsim import ops as F
from accelsim.graph.ir import Graph
from accelsim.models.layers import linear


def seed_autodiff(x1: float = 2.0, x2: float = 5.0, dtype: str = "float64", seed: int = 0) -> Graph:
    """y = ln(x1) + x1*x2 - sin(x2) (seed 002): y = 11.652, dy/dx1 = 5.5, dy/dx2 = 1.716 at (2, 5)."""
    g = Graph("seed_autodiff", dtype=dtype, seed=seed)
    a = g.input("x1", (), init="full", value=x1)
    b = g.input("x2", (), init="full", value=x2)
    g.set_loss(F.log(a) + a * b - F.sin(b))
    g.output("y", g.var(g.loss))
    return g


def regression(x: float = 2.0, y: float = 5.0, w: float = 1.0, b: float = 0.0, dtype: str = "float64",
               seed: int = 0) -> Graph:
    """y_hat = w*x + b, L = (y_hat - y)^2 (seed 003): L = 9, dL/dw = -12, dL/db = -6 at the defaults."""
    g = Graph("regression", dtype=dtype, seed=seed)
    xv = g.input("x", (), init="full", value=x)
    yv = g.input("y", (), init="full", value=y)
    wv = g.param("w", (), init="full", value=w)
    bv = g.param("b", (), init="full", value=b)
    y_hat = wv * xv + bv
    g.output("y_hat", y_hat)
    g.set_loss(F.square(y_hat - yv))
    return g


def mlp(batch: int = 64, sizes: tuple[int, ...] = (784, 100, 10), dtype: str = "float32", seed: int = 0) -> Graph:
    """784-100-10 with ReLU and softmax cross-entropy (the TensorFlow MNIST example of seeds 003/004)."""
    g = Graph("mlp", dtype=dtype, seed=seed)
    h = g.input("x", (batch, sizes[0]), init="uniform", low=0.0, high=1.0)
    labels = g.input("labels", (batch,), dtype="int64", init="randint", high=sizes[-1])
    for i, n in enumerate(sizes[1:]):
        h = linear(g, h, n, f"fc{i + 1}")
        if i < len(sizes) - 2:
            h = F.relu(h)
    g.output("logits", h)
    with g.layer("loss"):
        g.set_loss(F.softmax_cross_entropy(h, labels))
    return g
