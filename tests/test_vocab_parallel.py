"""Megatron-LM's vocabulary-parallel GPT-2: embedding, LM head and cross-entropy split over the vocabulary.

Oracle: the unsharded model (t = 1, whose loss is softmax_cross_entropy and is itself checked against
PyTorch elsewhere). A rank's table is a slice of the unsharded table, so in float64 the t = 2 and t = 4
steps' loss and gradients equal t = 1's to 1e-12, padded vocabularies included.
"""
from __future__ import annotations

import numpy as np
import pytest

import accelsim as A
from accelsim.errors import AccelsimError
from accelsim.evaluate import evaluate
from accelsim.models.parallel_layers import padded_vocab

X4 = "hwconfigs/groq_like_x4.yaml"


def gpt2(t: int, vocab: int, dtype: str = "float64"):
    return A.models.build("gpt2", batch=2, seq=4, layers=1, d_model=8, heads=4, vocab=vocab, tensor_parallel=t,
                          dtype=dtype)


def step_values(t: int, vocab: int, optimizer: str = "sgd") -> dict[str, np.ndarray]:
    return evaluate(A.training_graph(gpt2(t, vocab), optimizer=optimizer))


def whole_table(values: dict[str, np.ndarray], t: int, suffix: str = ".grad") -> np.ndarray:
    if t == 1:
        return values[f"wte{suffix}"]
    return np.concatenate([values[f"wte[{k}/{t}]{suffix}"] for k in range(t)])


@pytest.mark.parametrize("vocab", [32, 30])  # 30: padded to 32 at t = 4 (and kept at t = 2)
@pytest.mark.parametrize("t", [2, 4])
def test_loss_and_every_gradient_equal_the_unsharded_models(t, vocab):
    ref, got = step_values(1, vocab), step_values(t, vocab)
    assert abs(got["loss"] - ref["loss"]) <= 1e-12 * abs(ref["loss"])
    table = whole_table(got, t)
    assert table.shape[0] == padded_vocab(vocab, t)
    np.testing.assert_allclose(table[:vocab], ref["wte.grad"], rtol=0, atol=1e-12)
    assert not table[vocab:].any(), "padding rows are never read, so their gradient is exactly zero"
    for name in ref:
        if name.endswith(".grad") and not name.startswith("wte"):
            scale = max(1.0, np.abs(ref[name]).max())
            # block weights are sharded too (parallel_layers); compare the ones held whole by every rank
            if name in got:
                np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=1e-12 * scale, err_msg=name)
    logits = np.concatenate([got[f"logits[{k}/{t}]"] for k in range(t)], axis=-1)
    assert logits.shape[-1] == padded_vocab(vocab, t)  # the padding rows' logits exist, as in Megatron
    np.testing.assert_allclose(logits[..., :vocab], ref["logits"], rtol=0, atol=1e-12)


def test_adam_update_of_the_sharded_table_equals_the_unsharded_one():
    ref, got = step_values(1, 30, "adam"), step_values(4, 30, "adam")
    np.testing.assert_allclose(whole_table(got, 4, ".new")[:30], ref["wte.new"], rtol=0, atol=1e-12)


def test_no_rank_holds_the_whole_vocabulary():
    """The point of the split: every node sized by the vocabulary holds V/t of it (the LM head's logits,
    the cross-entropy's exps, the table and its gradient)."""
    vocab, t = 64, 4
    step = A.training_graph(gpt2(t, vocab, "float32"), optimizer="adam")
    sized = [n for n in step.nodes if vocab in n.shape or vocab // t in n.shape]
    assert sized and all(vocab not in n.shape for n in sized)
    assert all(n.rank >= 0 for n in sized if vocab // t in n.shape)
    ops = {n.op for n in step.nodes}
    assert {"vocab_embedding", "vocab_parallel_xent", "tp_allreduce_xent", "vocab_parallel_xent_grad",
            "vocab_embedding_grad"} <= ops
    assert "softmax_cross_entropy" not in ops and "embedding" not in ops


def test_padding_is_to_a_multiple_of_t_and_too_small_a_vocabulary_is_refused():
    assert [padded_vocab(50257, t) for t in (1, 2, 4, 8)] == [50257, 50258, 50260, 50264]
    with pytest.raises(AccelsimError, match="vocab=5 is too small for tensor_parallel=4"):
        padded_vocab(5, 4)
    with pytest.raises(AccelsimError, match="too small for tensor_parallel=4"):
        gpt2(4, 5)


@pytest.mark.parametrize("t", [2, 4])
def test_vocab_parallel_step_compiles_and_checks_numerically(t):
    # SGD: the attention key bias's gradient is zero in exact arithmetic, and Adam would scale its float32
    # rounding noise by lr / eps past check's tolerance (tests/test_tensor_parallel.py says the same)
    step = A.training_graph(gpt2(t, 30, "float32"), optimizer="sgd")
    sched = A.compile(step, X4, tensor_parallel=t)
    collectives = [x for x in sched.tasks if x.kind == "tp_allreduce"]
    assert {x.op for x in collectives} >= {"tp_allreduce", "tp_allreduce_xent"}
    result = A.check(sched)
    assert result.passed, result


@pytest.mark.parametrize("vocab", [32, 30])
def test_every_rank_is_a_copy_of_rank_zero_for_the_scheduler(vocab):
    """The ranks differ only in which rows they hold (OpDef.rank_attrs), padded or not, so symmetry
    reduction times one rank and stamps the others."""
    from accelsim.compiler.planning.rank_twins import rank_twins
    step = A.training_graph(gpt2(4, vocab, "float32"), optimizer="adam")
    twins = rank_twins(step)
    assert len(twins) == 4 and sum(map(len, twins)) == sum(1 for n in step.nodes if n.rank >= 0)


@pytest.mark.parametrize("t, vocab", [(2, 32), (4, 30)])
def test_pytorch_autograd_agrees_with_the_sharded_models_loss_and_gradients(t, vocab):
    """An independent oracle: the sharded forward graph run op by op in torch, differentiated by autograd."""
    pytest.importorskip("torch")
    from accelsim.torch_oracle import torch_gradients
    fwd = gpt2(t, vocab)
    names = [p.name for p in fwd.params if p.attrs.get("trainable", True)]
    feeds = {n.name: fwd.leaf_value(n.id) for n in fwd.nodes if n.op in ("input", "param")}
    t_out, t_grads = torch_gradients(fwd, feeds, names)
    ours = evaluate(A.training_graph(fwd))
    assert abs(ours["loss"] - t_out["loss"]) <= 1e-12 * abs(t_out["loss"])
    for name in names:
        np.testing.assert_allclose(ours[f"{name}.grad"], t_grads[name], rtol=0, atol=1e-12, err_msg=name)
