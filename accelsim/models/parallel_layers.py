"""Megatron-LM's tensor-parallel layers (Shoeybi et al., 2019), written as graph builders.

A layer of `t` ranks builds each rank's share inside `with g.rank(k)` (graph/ir.py), so the planner
puts rank k's nodes on rank k's chip:

- column_linear: W split by output columns; every rank reads the whole (replicated) input and owns a
  slice of the output. No communication in forward; in backward the input's gradient is the sum of
  every rank's contribution, which autodiff forms as one tp_allreduce (Megatron's `f`).
- row_linear: W split by input rows; rank k reads its own input slice (a column-parallel layer's
  output) and produces a partial sum of the whole output; one tp_allreduce sums them (Megatron's `g`),
  then the bias is added once, replicated.
- attention: Q, K and V column-parallel, so each rank owns heads/t whole heads and computes their
  attention alone; the output projection row-parallel.
- convolutions the same way by channels: column_conv splits output channels, row_conv input channels.
- the vocabulary (Megatron-LM's VocabParallelEmbedding and vocab-parallel cross-entropy): rank k holds
  rows [k V/t, (k+1) V/t) of the tied embedding; the lookup is each rank's rows (zeros for ids it does
  not hold) summed by one tp_allreduce; the LM head computes each rank's V/t logits, and the loss
  combines each rank's per-row log-sum-exp and label logit in one collective (ops/vocab.py), so no rank
  ever holds all V logits.

The zoo's builders call these for t >= 2 and their unsharded layers (models/layers.py) for t == 1, so
a model built for one rank is exactly the zoo's model. Shards draw their initial values as slices of the whole tensor (Graph.param's
`shard`), so a sharded model computes the unsharded model's function from the same weights; the tests
check outputs and gradients against it.
"""
from __future__ import annotations

import math

from accelsim import ops as F
from accelsim.errors import ModelError
from accelsim.graph.ir import Graph, Var
from accelsim.models.layers import batch_norm, conv, layer_norm
from accelsim.ops.parallel import tp_allreduce
from accelsim.ops.vocab import tp_allreduce_xent, vocab_embedding, vocab_parallel_xent


def _divides(what: str, size: int, t: int) -> None:
    if size % t:
        raise ModelError(f"tensor_parallel={t} must divide {what} ({size}): each rank takes an equal share")


def column_linear(g: Graph, x: Var, n_out: int, prefix: str, t: int, std: float | None = None) -> list[Var]:
    """Rank k's x @ W[:, cols_k] + b[cols_k], one Var per rank (its rank's slice of the output)."""
    _divides(f"{prefix}'s {n_out} output features", n_out, t)
    n_in = x.shape[-1]
    std = std if std is not None else 1.0 / math.sqrt(n_in)
    outs = []
    for k in range(t):
        with g.rank(k), g.layer(prefix):
            w = g.param(f"{prefix}.w", (n_in, n_out), std=std, shard=(1, k, t))
            outs.append(F.matmul(x, w) + g.param(f"{prefix}.b", (n_out,), init="zeros", shard=(0, k, t)))
    return outs


def row_linear(g: Graph, xs: list[Var], n_out: int, prefix: str, std: float | None = None) -> Var:
    """sum_k xs[k] @ W[rows_k] + b: rank k's partial product, one all-reduce, the bias once (replicated)."""
    t = len(xs)
    n_in = xs[0].shape[-1] * t
    std = std if std is not None else 1.0 / math.sqrt(n_in)
    partials = []
    for k, x in enumerate(xs):
        with g.rank(k), g.layer(prefix):
            partials.append(F.matmul(x, g.param(f"{prefix}.w", (n_in, n_out), std=std, shard=(0, k, t))))
    with g.layer(prefix):
        return tp_allreduce(*partials) + g.param(f"{prefix}.b", (n_out,), init="zeros")


def _split_heads(x: Var, heads: int) -> Var:
    b, s, d = x.shape
    return F.transpose(F.reshape(x, (b, s, heads, d // heads)), (0, 2, 1, 3))


def _head_attention(q: Var, k: Var, v: Var, heads: int, head_dim: int) -> Var:
    """Causal attention of `heads` heads of `head_dim` each; (b, s, heads * head_dim) out."""
    b, s, _ = q.shape
    q, k, v = (_split_heads(z, heads) for z in (q, k, v))
    scores = F.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(head_dim))
    p = F.softmax(F.causal_mask(scores), axis=-1)
    return F.reshape(F.transpose(F.matmul(p, v), (0, 2, 1, 3)), (b, s, heads * head_dim))


def attention(g: Graph, x: Var, heads: int, prefix: str, t: int, std: float | None = None) -> Var:
    """Causal multi-head self-attention, heads/t whole heads per rank (Megatron-LM's split)."""
    d = x.shape[-1]
    _divides(f"{prefix}'s {heads} heads", heads, t)
    qs, ks, vs = (column_linear(g, x, d, f"{prefix}.{n}", t, std=std) for n in ("q", "k", "v"))
    ctx = []
    for r in range(t):
        with g.rank(r), g.layer(prefix):
            ctx.append(_head_attention(qs[r], ks[r], vs[r], heads // t, d // heads))
    return row_linear(g, ctx, d, f"{prefix}.proj", std=std)


def mlp(g: Graph, x: Var, hidden: int, prefix_fc: str, prefix_proj: str, t: int, std: float | None = None) -> Var:
    """GELU MLP: fc column-parallel, GELU on each rank's slice, projection row-parallel."""
    d = x.shape[-1]
    hs = column_linear(g, x, hidden, prefix_fc, t, std=std)
    acts = []
    for r, h in enumerate(hs):
        with g.rank(r), g.layer(prefix_fc):
            acts.append(F.gelu(h))
    return row_linear(g, acts, d, prefix_proj, std=std)


def block(g: Graph, x: Var, heads: int, prefix: str, t: int = 1, std: float | None = None) -> Var:
    """Pre-LN block x + attn(ln1(x)), then + mlp(ln2(.)); layer norms and residuals replicated, as in
    Megatron-LM (they are cheap, and replicating them saves two collectives per block)."""
    d = x.shape[-1]
    with g.layer(prefix):  # the residual adds
        h = x + attention(g, layer_norm(g, x, f"{prefix}.ln1"), heads, f"{prefix}.attn", t, std)
        return h + mlp(g, layer_norm(g, h, f"{prefix}.ln2"), 4 * d, f"{prefix}.fc", f"{prefix}.mlp_proj", t, std)


def column_conv(g: Graph, x: Var, c_out: int, kernel: int, prefix: str, t: int, padding: int = 0) -> list[Var]:
    """Rank k's convolution with its slice of the filters (output channels), no bias."""
    _divides(f"{prefix}'s {c_out} output channels", c_out, t)
    c_in = x.shape[1]
    std = math.sqrt(2.0 / (c_in * kernel * kernel))
    outs = []
    for k in range(t):
        with g.rank(k), g.layer(prefix):
            w = g.param(f"{prefix}.w", (c_out, c_in, kernel, kernel), std=std, shard=(0, k, t))
            outs.append(F.conv2d(x, w, padding=padding))
    return outs


def row_conv(g: Graph, xs: list[Var], c_out: int, kernel: int, prefix: str, padding: int = 0) -> Var:
    """sum_k conv(xs[k], W[:, channels_k]): each rank convolves its input channels, one all-reduce."""
    t = len(xs)
    c_in = xs[0].shape[1] * t
    std = math.sqrt(2.0 / (c_in * kernel * kernel))
    partials = []
    for k, x in enumerate(xs):
        with g.rank(k), g.layer(prefix):
            w = g.param(f"{prefix}.w", (c_out, c_in, kernel, kernel), std=std, shard=(1, k, t))
            partials.append(F.conv2d(x, w, padding=padding))
    with g.layer(prefix):
        return tp_allreduce(*partials)


def sharded_batch_norm(g: Graph, x: Var, prefix: str, k: int, t: int) -> Var:
    """Batch norm of rank k's channels: per-channel statistics need no other rank's channels."""
    c = x.shape[1] * t
    with g.layer(prefix):
        return F.batch_norm(x, g.param(f"{prefix}.gamma", (c,), init="ones", shard=(0, k, t)),
                            g.param(f"{prefix}.beta", (c,), init="zeros", shard=(0, k, t)))


def conv_pair(g: Graph, x: Var, channels: int, t: int) -> Var:
    """resnet_block's conv1-BN-ReLU-conv2-BN with the convolutions split by channels over t ranks:
    conv1 by output channels (BN and ReLU stay on each rank's channels), conv2 by input channels, one
    all-reduce of conv2's partial sums, bn2 replicated."""
    if t == 1:
        h = F.relu(batch_norm(g, conv(g, x, channels, 3, "conv1", padding=1, bias=False), "bn1"))
        return batch_norm(g, conv(g, h, channels, 3, "conv2", padding=1, bias=False), "bn2")
    hs = column_conv(g, x, channels, 3, "conv1", t, padding=1)
    acts = []
    for k, h in enumerate(hs):
        with g.rank(k):
            acts.append(F.relu(sharded_batch_norm(g, h, "bn1", k, t)))
    return batch_norm(g, row_conv(g, acts, channels, 3, "conv2", padding=1), "bn2")


def padded_vocab(vocab: int, t: int) -> int:
    """The vocabulary rounded up to a multiple of t, as Megatron-LM pads it (--make-vocab-size-divisible-by;
    Megatron pads to a multiple of 128 t, accelsim only to t). The padded rows are never looked up and
    their logits are left out of the loss, so the loss and the real rows' gradients are the unpadded
    model's (Megatron's padded logits do enter its softmax) and the padded rows' gradient is zero."""
    padded = -(-vocab // t) * t
    rows = padded // t
    if vocab <= (t - 1) * rows:
        raise ModelError(f"vocab={vocab} is too small for tensor_parallel={t}: split in {t} shards of {rows} rows, "
                         f"the last rank would hold no real word; use a vocabulary of more than {(t - 1) * rows} "
                         f"words or fewer ranks")
    return padded


def vocab_parallel_embedding(g: Graph, ids: Var, vocab: int, d: int, name: str, t: int,
                             std: float) -> tuple[Var, list[Var]]:
    """(the embedding of ids, replicated; each rank's table shard): rank k looks up the ids among its
    rows and one tp_allreduce sums the ranks' lookups (exactly: every row has one nonzero term)."""
    padded = padded_vocab(vocab, t)
    rows = padded // t
    tables, parts = [], []
    for k in range(t):
        with g.rank(k):
            table = g.param(name, (padded, d), std=std, shard=(0, k, t))
            tables.append(table)
            parts.append(vocab_embedding(ids, table, start=k * rows))
    return tp_allreduce(*parts), tables


def vocab_parallel_lm_head_loss(g: Graph, h: Var, tables: list[Var], labels: Var,
                                vocab: int) -> tuple[Var, list[Var]]:
    """(the mean cross-entropy of h @ table^T against labels; each rank's logits (..., rows)): the LM head
    tied to vocab_parallel_embedding's shards, rank k computing only its rows' logits, and the loss from
    one tp_allreduce_xent of the ranks' per-row log-sum-exp and label logit. The last rank's padding rows
    get logits, as in Megatron, but no part in the loss (so no gradient), which keeps every rank's nodes
    the same shapes: copies of rank 0's for the scheduler."""
    n = labels.shape[0]
    rows = tables[0].shape[0]
    logits, partials = [], []
    for k, table in enumerate(tables):
        with g.rank(k):
            with g.layer("lm_head"):  # tied to wte, as the unsplit model names it
                z = F.matmul(h, table, transpose_b=True)
            logits.append(z)
            with g.layer("loss"):
                partials.append(vocab_parallel_xent(F.reshape(z, (n, rows)), labels, start=k * rows,
                                                    valid=min(rows, vocab - k * rows)))
    with g.layer("loss"):
        totals = tp_allreduce_xent(*partials)  # [:, 0] each row's log-sum-exp, [:, 1] its label's logit
        lse, picked = F.slice(totals, (0, 0), (n, 1)), F.slice(totals, (0, 1), (n, 2))
        return F.mean(lse - picked), logits
