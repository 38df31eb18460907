"""Every rewrite pass on every zoo model it applies to (small sizes): same outputs in float64, the
expected change in node count, idempotent, deterministic, and a no-op where nothing matches."""
import hashlib

import numpy as np
import pytest

import accelsim as A
from accelsim.models.sizes import SMALL
from accelsim.passes import freeze_batchnorm, inference_graph, optimize_with_log


def _graph(model: str, kind: str, dtype: str = "float64") -> A.Graph:
    fwd = A.models.build(model, **{**SMALL[model], "dtype": dtype})
    if kind == "train":
        return A.training_graph(fwd)
    return freeze_batchnorm(inference_graph(fwd))  # the zoo's CNNs are built with training-mode batch norm


def _fingerprint(g: A.Graph) -> str:
    """Everything that defines a graph's computation, constants' values included."""
    h = hashlib.sha256(g.dump().encode())
    h.update(repr((sorted(g.outputs.items()), g.loss, g.seed, g.source)).encode())
    for n in g.nodes:
        if n.op == "const":
            h.update(g.leaf_value(n.id).tobytes())
    return h.hexdigest()


def _count(g: A.Graph, op: str) -> int:
    return sum(n.op == op for n in g.nodes)


# (pass, model, graph kind, expected node count after, from the graph before)
APPLIES = [
    ("cse", "transformer_block", "train", lambda g: len(g) - 1),  # at most: strictly fewer
    ("cse", "gpt2", "train", lambda g: len(g) - 1),
    ("cse", "resnet50", "train", lambda g: len(g) - 1),
    ("constant_fold", "transformer_block", "train", lambda g: len(g) - 1),
    ("constant_fold", "superres", "train", lambda g: len(g) - 1),
    ("simplify", "gpt2", "train", lambda g: len(g) - 1),
    ("simplify", "superres", "train", lambda g: len(g) - 1),
    # a folded batch norm drops bn, gamma, beta, mean, var and W for W', b' and one bias add
    ("fold_batchnorm", "resnet_block", "inf", lambda g: len(g) - 3 * _count(g, "batch_norm_inference")),
    ("fold_batchnorm", "resnet50", "inf", lambda g: len(g) - 3 * _count(g, "batch_norm_inference")),
    # one group of three matmuls per attention: + concat + merged matmul + 3 slices - 3 matmuls
    ("merge_qkv", "transformer_block", "inf", lambda g: len(g) + 2),
    ("merge_qkv", "transformer_block", "train", lambda g: len(g) + 2),
    ("merge_qkv", "gpt2", "inf", lambda g: len(g) + 2 * SMALL["gpt2"]["layers"]),
    ("merge_qkv", "gpt2", "train", lambda g: len(g) + 2 * SMALL["gpt2"]["layers"]),
    # layer1.0's conv1 and downsample shortcut share the stem's output (both 1x1, stride 1)
    ("merge_parallel_convs", "resnet50", "inf", lambda g: len(g) + 2),
    ("merge_parallel_convs", "resnet50", "train", lambda g: len(g) + 2),
    # fusions: strictly fewer nodes (their own tests count groups and places)
    ("fuse_epilogue", "superres", "inf", lambda g: len(g) - 1),
    ("fuse_epilogue", "resnet50", "inf", lambda g: len(g) - 1),  # the fc's bias (convs have none until folded)
    ("fuse_epilogue", "gpt2", "train", lambda g: len(g) - 1),
    ("fuse_epilogue", "transformer_block", "inf", lambda g: len(g) - 1),
    ("fuse_elementwise", "transformer_block", "train", lambda g: len(g) - 1),
    ("fuse_elementwise", "gpt2", "inf", lambda g: len(g) - 1),
    ("fuse_elementwise", "superres", "train", lambda g: len(g) - 1),
    ("fuse_elementwise", "resnet_block", "train", lambda g: len(g) - 1),
]


@pytest.mark.parametrize("name,model,kind,expected", APPLIES, ids=[f"{p}-{m}-{k}" for p, m, k, _ in APPLIES])
def test_pass_rewrites_zoo_graph_keeping_every_output(name, model, kind, expected):
    g = _graph(model, kind)
    out, log = optimize_with_log(g, [name])  # refuses any output off by more than 1e-9 relative
    (rec,) = log.records
    assert rec.status == "applied" and rec.rewrites
    assert rec.max_error_ratio is not None and rec.max_error_ratio <= 1.0
    if name.startswith("merge"):
        assert len(out) == expected(g)
    elif name == "fold_batchnorm":
        assert len(out) == expected(g) and _count(out, "batch_norm_inference") == 0
    else:
        assert len(out) <= expected(g)
    if kind == "train":  # the same gradients and parameter updates, element by element
        before, after = A.evaluate(g), A.evaluate(out)
        assert set(before) == set(after)
        for k, v in before.items():
            np.testing.assert_allclose(after[k], v, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(v).max()), err_msg=k)


ONE_PER_PASS = [("cse", "gpt2", "train"), ("constant_fold", "transformer_block", "train"),
                ("simplify", "gpt2", "train"), ("fold_batchnorm", "resnet50", "inf"),
                ("merge_qkv", "gpt2", "train"), ("merge_parallel_convs", "resnet50", "inf"),
                ("fuse_epilogue", "superres", "train"), ("fuse_elementwise", "gpt2", "train")]


@pytest.mark.parametrize("name,model,kind", ONE_PER_PASS, ids=[p for p, _, _ in ONE_PER_PASS])
def test_pass_is_idempotent_and_deterministic(name, model, kind):
    once, _ = optimize_with_log(_graph(model, kind), [name], verify=False)
    again, log = optimize_with_log(once, [name], verify=False)
    assert log.records[0].status == "unchanged"
    assert _fingerprint(again) == _fingerprint(once)
    rebuilt, _ = optimize_with_log(_graph(model, kind), [name], verify=False)
    assert _fingerprint(rebuilt) == _fingerprint(once)


NO_MATCH = [("cse", "mlp", "inf"), ("constant_fold", "resnet50", "inf"), ("simplify", "transformer_block", "inf"),
            ("fold_batchnorm", "gpt2", "inf"), ("merge_qkv", "resnet_block", "inf"),
            ("merge_parallel_convs", "transformer_block", "train"), ("merge_parallel_convs", "resnet_block", "inf")]


@pytest.mark.parametrize("name,model,kind", NO_MATCH, ids=[f"{p}-{m}" for p, m, _ in NO_MATCH])
def test_pass_with_nothing_to_rewrite_returns_an_equal_graph(name, model, kind):
    g = _graph(model, kind)
    out, log = optimize_with_log(g, [name])
    assert log.records[0].status == "unchanged"
    assert out is not g and _fingerprint(out) == _fingerprint(g)


@pytest.mark.parametrize("model,kind", [("resnet50", "inf"), ("gpt2", "train"), ("transformer_block", "train"),
                                        ("superres", "train")])
def test_every_pass_in_sequence_keeps_the_outputs(model, kind):
    g = _graph(model, kind)
    out, log = optimize_with_log(g, "cse,constant_fold,simplify,fold_batchnorm,merge_qkv,merge_parallel_convs,"
                                    "fuse_epilogue,fuse_elementwise,constant_fold,cse")
    assert all(r.max_error_ratio is None or r.max_error_ratio <= 1.0 for r in log.records)
    assert log.records[-1].nodes_after == len(out)


def test_float32_fold_is_checked_against_the_graphs_own_rounding():
    """Folded float32 weights round once more than the original's parameters: the check allows what
    float32 arithmetic itself moves each output, and still refuses a real change."""
    g = _graph("resnet50", "inf", dtype="float32")
    out, log = optimize_with_log(g, ["fold_batchnorm"])
    assert 0.0 < log.records[0].max_error_ratio <= 1.0
    assert "float32" in log.check
