"""Pre-LN causal transformer blocks and GPT-2 (embedding, n blocks, tied LM head), with named sizes."""
from __future__ import annotations

import inspect
import math
from numbers import Integral

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
    with g.layer(prefix):  # the head split, scores, softmax and context; the projections are their own layers
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
    with g.layer(prefix):  # the residual adds
        h = x + attention(g, layer_norm(g, x, f"{prefix}.ln1"), heads, f"{prefix}.attn", std)
        fc = linear(g, layer_norm(g, h, f"{prefix}.ln2"), 4 * d, f"{prefix}.fc", std=std)
        with g.layer(f"{prefix}.fc"):
            m = F.gelu(fc)
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
    with g.layer("loss"):
        g.set_loss(F.mse_loss(y, target))
    return g


GPT2_SIZES: dict[str, dict[str, int]] = {
    # GPT-2 (Radford et al. 2019, Table 2: layers and d_model); heads from OpenAI's released
    # hparams.json (n_head 12, 16, 20, 25). The paper's 117M/345M/762M/1542M undercount: with the
    # tied LM head these sizes have 124M/355M/774M/1558M parameters (gpt2_param_count, seq=1024).
    "small": {"layers": 12, "d_model": 768, "heads": 12},
    "medium": {"layers": 24, "d_model": 1024, "heads": 16},
    "large": {"layers": 36, "d_model": 1280, "heads": 20},
    "xl": {"layers": 48, "d_model": 1600, "heads": 25},
    # GPT-3-like (Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: n_layers,
    # d_model, n_heads; every size trained with n_ctx 2048, which is --set seq=2048: these presets keep
    # gpt2's seq and vocabulary, 50,257 as GPT-3's). GPT-3 alternates dense and locally banded sparse
    # attention; this builder's attention is dense. Two rows of the table do not multiply out: XL
    # (1.3B) lists d_model 2048 with 24 heads of d_head 128, and 13B d_model 5140 with 40 heads of 128;
    # here XL has 16 heads of 128 (d_model 2048, as GPT-Neo 1.3B and Megatron-LM's GPT-3 1.3B recipe)
    # and 13B d_model 5120 (40 x 128). Counts at seq 2048 are within 2% of the names (the paper's
    # 350M, 1.3B and 2.7B are rounded down as GPT-2's were).
    "gpt3-125m": {"layers": 12, "d_model": 768, "heads": 12},
    "gpt3-350m": {"layers": 24, "d_model": 1024, "heads": 16},
    "gpt3-760m": {"layers": 24, "d_model": 1536, "heads": 16},
    "gpt3-1.3b": {"layers": 24, "d_model": 2048, "heads": 16},
    "gpt3-2.7b": {"layers": 32, "d_model": 2560, "heads": 32},
    "gpt3-6.7b": {"layers": 32, "d_model": 4096, "heads": 32},
    "gpt3-13b": {"layers": 40, "d_model": 5120, "heads": 40},
    "gpt3-175b": {"layers": 96, "d_model": 12288, "heads": 96},
    # Megatron-LM's weak-scaling GPT models (Narayanan et al., "Efficient Large-Scale Language Model
    # Training on GPU Clusters Using Megatron-LM", SC21, Table 1: attention heads, hidden size, layers;
    # "All models use a vocabulary size of 51,200 ... and a sequence length of 2048"). The paper's
    # parameter counts (its Eq. 2, 12lh^2 (1 + 13/12h + (V + s)/12lh)) are this builder's to 0.1B:
    # its position table has s rows and its LM head is tied, as Megatron-LM's.
    "megatron-1.7b": {"layers": 24, "d_model": 2304, "heads": 24, "vocab": 51200, "seq": 2048},
    "megatron-3.6b": {"layers": 30, "d_model": 3072, "heads": 32, "vocab": 51200, "seq": 2048},
    "megatron-7.5b": {"layers": 36, "d_model": 4096, "heads": 32, "vocab": 51200, "seq": 2048},
    "megatron-18.4b": {"layers": 40, "d_model": 6144, "heads": 48, "vocab": 51200, "seq": 2048},
    "megatron-39.1b": {"layers": 48, "d_model": 8192, "heads": 64, "vocab": 51200, "seq": 2048},
    "megatron-76.1b": {"layers": 60, "d_model": 10240, "heads": 80, "vocab": 51200, "seq": 2048},
    "megatron-145.6b": {"layers": 80, "d_model": 12288, "heads": 96, "vocab": 51200, "seq": 2048},
    "megatron-310.1b": {"layers": 96, "d_model": 16384, "heads": 128, "vocab": 51200, "seq": 2048},
    "megatron-529.6b": {"layers": 105, "d_model": 20480, "heads": 128, "vocab": 51200, "seq": 2048},
    "megatron-1t": {"layers": 128, "d_model": 25600, "heads": 160, "vocab": 51200, "seq": 2048},
}
"""gpt2's `size` option: `models.build("gpt2", size=...)` takes layers, d_model and heads (and, for the
Megatron-LM configurations, vocab and seq) from here unless they are given too (explicit options win)."""


def gpt2_param_count(size: str = "small", seq: int | None = None, vocab: int | None = None,
                     layers: int | None = None, d_model: int | None = None) -> int:
    """Trainable parameters of `models.build("gpt2", size=size, seq=seq, vocab=vocab, ...)`, counted from
    the architecture: wte (vocab x d) + wpe (seq x d: this builder's position table has `seq` rows) +
    per block 12 d^2 + 13 d (Q, K, V, projection: 4 (d^2 + d); MLP d -> 4d -> d: 8 d^2 + 5d; two layer
    norms: 4d) + the final layer norm's 2d; the LM head is tied to wte. Heads change no count. An
    option left None takes the size's preset value, else the builder's default (seq 1024, vocab 50,257)."""
    if not isinstance(size, str) or size not in GPT2_SIZES:
        raise ModelError(f"gpt2_param_count: unknown size {size!r}; known sizes: {', '.join(GPT2_SIZES)}")
    builder = inspect.signature(gpt2).parameters  # the builder's own defaults, read where they are written
    preset = {"seq": builder["seq"].default, "vocab": builder["vocab"].default, **GPT2_SIZES[size]}
    given = {"seq": seq, "vocab": vocab, "layers": layers, "d_model": d_model}
    values = {k: preset[k] if v is None else v for k, v in given.items()}
    for name, value in values.items():
        if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
            raise ModelError(f"gpt2_param_count: {name}={value!r} is invalid; expected a positive integer")
    d = int(values["d_model"])
    return (int(values["vocab"]) + int(values["seq"])) * d + int(values["layers"]) * (12 * d * d + 13 * d) + 2 * d


_SMALL = GPT2_SIZES["small"]


def gpt2(batch: int = 1, seq: int = 1024, layers: int = _SMALL["layers"], d_model: int = _SMALL["d_model"],
         heads: int = _SMALL["heads"], vocab: int = 50257, dtype: str = "float32", seed: int = 0,
         tensor_parallel: int = 1) -> Graph:
    """GPT-2 (small by default): token + position embeddings, blocks, final LN, LM head tied to wte.
    `tensor_parallel` t > 1: Megatron-LM's split over t ranks: the blocks (models/parallel_layers.py) and
    the vocabulary: each rank holds V/t rows of the tied embedding (`wte[k/t]`, padded to a multiple of t:
    parallel_layers.padded_vocab), computes its V/t logits (outputs `logits[k/t]`, not gathered) and its
    share of the cross-entropy; position embeddings and the final LN stay replicated. Named sizes
    (GPT2_SIZES) are `models.build`'s `size` option; the builder takes the three numbers."""
    _check_heads(d_model, heads)
    g = Graph("gpt2", dtype=dtype, seed=seed)
    ids = g.input("ids", (batch, seq), dtype="int64", init="randint", high=vocab)
    labels = g.input("labels", (batch * seq,), dtype="int64", init="randint", high=vocab)
    if tensor_parallel > 1:
        with g.layer("wte"):  # each rank's shard wte[k/t] and its lookup, named as the unsplit model's
            emb, tables = parallel_layers.vocab_parallel_embedding(g, ids, vocab, d_model, "wte", tensor_parallel,
                                                                   std=0.02)
    else:
        wte = g.param("wte", (vocab, d_model), std=0.02)
        with g.layer("wte"):
            emb = F.embedding(ids, wte)
    with g.layer("wpe"):
        h = emb + g.param("wpe", (seq, d_model), std=0.01)
    for i in range(layers):
        h = block(g, h, heads, f"h{i}", std=0.02, tensor_parallel=tensor_parallel)
    h = layer_norm(g, h, "ln_f")
    if tensor_parallel > 1:
        loss, shards = parallel_layers.vocab_parallel_lm_head_loss(g, h, tables, labels, vocab)
        for k, z in enumerate(shards):
            g.output(f"logits[{k}/{tensor_parallel}]", z)
        g.set_loss(loss)
        return g
    with g.layer("lm_head"):  # tied to wte
        logits = F.matmul(h, wte, transpose_b=True)
    g.output("logits", logits)
    with g.layer("loss"):
        g.set_loss(F.softmax_cross_entropy(F.reshape(logits, (batch * seq, vocab)), labels))
    return g
