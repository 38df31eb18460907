"""Pre-LN causal transformer blocks and GPT-2 (embedding, n blocks, tied LM head)."""
from __future__ import annotations

import math

from accelsim import ops as F
from accelsim.errors import ModelError
from accelsim.graph.ir import Graph, Var
from accelsim.models import parallel_layers
from accelsim.models.layers import layer_norm, linear


def _split_heads(x: Var, heads: int) -> Var:
    b, t, d = x.shape
    return F.transpose(F.reshape(x, (b, t, heads, d // heads)), (0, 2, 1, 3))


def attention(g: Graph, x: Var, heads: int, prefix: str, std: float | None = None) -> Var:
    """Causal multi-head self-attention with separate Q, K, V projections."""
    b, t, d = x.shape
    q, k, v = (_split_heads(linear(g, x, d, f"{prefix}.{n}", std=std), heads) for n in ("q", "k", "v"))
    scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(d // heads))
    p = F.softmax(F.causal_mask(scores), axis=-1)
    ctx = F.reshape(F.transpose(F.matmul(p, v), (0, 2, 1, 3)), (b, t, d))
    return linear(g, ctx, d, f"{prefix}.proj", std=std)


def block(g: Graph, x: Var, heads: int, prefix: str, std: float | None = None, tensor_parallel: int = 1) -> Var:
    """Pre-LN block: x + attn(ln1(x)), then + mlp(ln2(.)) with a 4x GELU MLP; over `tensor_parallel` > 1
    ranks, Megatron-LM's sharded block (models/parallel_layers.py)."""
    if tensor_parallel > 1:
        return parallel_layers.block(g, x, heads, prefix, tensor_parallel, std)
    d = x.shape[-1]
    h = x + attention(g, layer_norm(g, x, f"{prefix}.ln1"), heads, f"{prefix}.attn", std)
    m = F.gelu(linear(g, layer_norm(g, h, f"{prefix}.ln2"), 4 * d, f"{prefix}.fc", std=std))
    return h + linear(g, m, d, f"{prefix}.mlp_proj", std=std)


def _check_heads(d_model: int, heads: int) -> None:
    if heads <= 0 or d_model % heads:
        raise ModelError(f"d_model={d_model} must be divisible by heads={heads}")


def transformer_block(batch: int = 2, seq: int = 128, d_model: int = 256, heads: int = 4, dtype: str = "float32",
                      seed: int = 0, tensor_parallel: int = 1) -> Graph:
    """One pre-LN causal block, trained with MSE against a random target; `tensor_parallel`: Megatron-LM's
    split over that many ranks."""
    _check_heads(d_model, heads)
    g = Graph("transformer_block", dtype=dtype, seed=seed)
    x = g.input("x", (batch, seq, d_model))
    target = g.input("target", (batch, seq, d_model))
    y = block(g, x, heads, "block", tensor_parallel=tensor_parallel)
    g.output("y", y)
    g.set_loss(F.mse_loss(y, target))
    return g


def gpt2(batch: int = 1, seq: int = 1024, layers: int = 12, d_model: int = 768, heads: int = 12,
         vocab: int = 50257, dtype: str = "float32", seed: int = 0, tensor_parallel: int = 1) -> Graph:
    """GPT-2 (small by default): token + position embeddings, blocks, final LN, LM head tied to wte.
    `tensor_parallel`: the blocks split Megatron-LM's way over that many ranks; the embeddings, final LN
    and tied LM head stay replicated (Megatron also splits the vocabulary; accelsim does not)."""
    _check_heads(d_model, heads)
    g = Graph("gpt2", dtype=dtype, seed=seed)
    ids = g.input("ids", (batch, seq), dtype="int64", init="randint", high=vocab)
    labels = g.input("labels", (batch * seq,), dtype="int64", init="randint", high=vocab)
    wte = g.param("wte", (vocab, d_model), std=0.02)
    h = F.embedding(ids, wte) + g.param("wpe", (seq, d_model), std=0.01)
    for i in range(layers):
        h = block(g, h, heads, f"h{i}", std=0.02, tensor_parallel=tensor_parallel)
    h = layer_norm(g, h, "ln_f")
    logits = F.matmul(h, wte, transpose_b=True)
    g.output("logits", logits)
    g.set_loss(F.softmax_cross_entropy(F.reshape(logits, (batch * seq, vocab)), labels))
    return g
