"""Model zoo: every model builds, evaluates, and its gradients pass both oracles on small sizes."""
import numpy as np
import pytest

import accelsim as A
from accelsim.gradcheck import grad_report

SMALL = {
    "seed_autodiff": {},
    "regression": {},
    "mlp": {"batch": 3, "sizes": (8, 6, 4)},
    "superres": {"batch": 1, "size": 6, "upscale": 2},
    "resnet_block": {"batch": 2, "channels": 3, "size": 5},
    "resnet50": {"batch": 2, "size": 64, "classes": 5},
    "transformer_block": {"batch": 2, "seq": 5, "d_model": 8, "heads": 2},
    "gpt2": {"batch": 1, "seq": 6, "layers": 2, "d_model": 8, "heads": 2, "vocab": 11},
}


def test_zoo_lists_every_required_model():
    assert set(A.models.names()) == set(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_model_builds_with_defaults_and_has_a_scalar_loss(name):
    g = A.models.build(name)
    assert g.loss is not None and g.nodes[g.loss].shape == ()
    assert g.meta["model"] == name


@pytest.mark.parametrize("name", ["mlp", "superres", "resnet_block", "transformer_block", "gpt2"])
def test_small_model_gradients_match_finite_differences(name):
    opts = dict(SMALL[name], dtype="float64")
    report = grad_report(A.models.build(name, **opts), fd_coords=4, use_torch=False)
    assert np.isfinite(float(report["outputs"]["loss"]))
    assert report["fd_max_rel_err"] < 1e-6


def test_resnet50_small_gradients_match_pytorch():
    """Finite differences are meaningless here (max-pool windows of ReLU zeros tie); torch shares the
    subgradient convention. At 64x64 the last stage still has 2x2 maps, so batch norm is well posed."""
    pytest.importorskip("torch")
    opts = dict(SMALL["resnet50"], size=64, dtype="float64")
    report = grad_report(A.models.build("resnet50", **opts), fd_coords=0)
    assert report["torch_max_rel_err"] < 1e-6


def test_published_parameter_counts():
    """GPT-2 small has 124,439,808 parameters; torchvision's ResNet-50 has 25,557,032."""
    count = lambda g: sum(int(np.prod(n.shape)) for n in g.params if n.trainable)  # noqa: E731
    assert count(A.models.build("gpt2")) == 124_439_808
    assert count(A.models.build("resnet50")) == 25_557_032


def test_resnet50_forward_flops_match_the_published_4_1_gmacs():
    from accelsim.graph.stats import graph_stats
    flops = graph_stats(A.models.build("resnet50")).flops_by_phase["forward"]
    assert 2 * 4.0e9 < flops < 2 * 4.2e9


def test_superres_shapes_follow_the_seed():
    g = A.models.build("superres", batch=2)
    convs = [n for n in g.nodes if n.op == "conv2d"]
    assert [g.nodes[n.inputs[1]].shape for n in convs] == [(64, 1, 5, 5), (64, 64, 3, 3), (32, 64, 3, 3),
                                                          (9, 32, 3, 3)]
    assert g.nodes[g.outputs["y"]].shape == (2, 1, 192, 192)


@pytest.mark.parametrize("opts, match", [
    ({"batch": 0}, "batch=0"), ({"batch": "x"}, "batch='x'"), ({"colour": 1}, "no option 'colour'"),
    ({"dtype": "float16"}, "dtype"),
])
def test_bad_model_options_raise_a_clear_error(opts, match):
    with pytest.raises(A.AccelsimError, match=match):
        A.models.build("mlp", **opts)


def test_transformer_heads_must_divide_width():
    with pytest.raises(A.ModelError, match="divisible"):
        A.models.build("transformer_block", d_model=10, heads=3)


def test_tuple_options_parse_from_command_line_strings():
    """`accelsim ... --set sizes=16,8,4` hands the builder a string."""
    g = A.models.build("mlp", sizes="16,8,4")
    assert A.models.build("mlp", sizes="(16, 8, 4)").nodes[-1].shape == g.nodes[-1].shape
    assert [n.shape for n in g.params if n.name.endswith(".w")] == [(16, 8), (8, 4)]
    with pytest.raises(A.ModelError, match="option sizes='3,x' is invalid"):
        A.models.build("mlp", sizes="3,x")
