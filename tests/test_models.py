"""Model zoo: every model builds, evaluates, and its gradients pass both oracles on small sizes."""
import numpy as np
import pytest

import accelsim as A
from accelsim.gradcheck import grad_report
from accelsim.graph import verify
from work_meter import WorkMeter


def build(name, **opts):
    """A.models.build, with the IR's invariants checked on every graph these tests build."""
    return verify(A.models.build(name, **opts))

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
    g = build(name)
    assert g.loss is not None and g.nodes[g.loss].shape == ()
    assert g.source == A.graph.ModelSource(name, tuple(A.models.options(name).items()))


@pytest.mark.parametrize("name", ["mlp", "superres", "resnet_block", "transformer_block", "gpt2"])
def test_small_model_gradients_match_finite_differences(name):
    opts = dict(SMALL[name], dtype="float64")
    report = grad_report(build(name, **opts), fd_coords=4, use_torch=False)
    assert np.isfinite(float(report["outputs"]["loss"]))
    assert report["fd_max_rel_err"] < 1e-6


def test_resnet50_small_gradients_match_pytorch():
    """Finite differences are meaningless here (max-pool windows of ReLU zeros tie); torch shares the
    subgradient convention. At 64x64 the last stage still has 2x2 maps, so batch norm is well posed."""
    pytest.importorskip("torch")
    opts = dict(SMALL["resnet50"], size=64, dtype="float64")
    report = grad_report(build("resnet50", **opts), fd_coords=0)
    assert report["torch_max_rel_err"] < 1e-6


def test_published_parameter_counts():
    """GPT-2 small has 124,439,808 parameters; torchvision's ResNet-50 has 25,557,032."""
    count = lambda g: sum(int(np.prod(n.shape)) for n in g.params if n.trainable)  # noqa: E731
    assert count(build("gpt2")) == 124_439_808
    assert count(build("resnet50")) == 25_557_032


def test_resnet50_forward_flops_match_the_published_4_1_gmacs():
    from accelsim.graph.stats import graph_stats
    flops = graph_stats(build("resnet50")).flops_by_phase["forward"]
    assert 2 * 4.0e9 < flops < 2 * 4.2e9


def test_superres_shapes_follow_the_seed():
    g = build("superres", batch=2)
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
    g = build("mlp", sizes="16,8,4")
    assert build("mlp", sizes="(16, 8, 4)").nodes[-1].shape == g.nodes[-1].shape
    assert build("mlp", sizes=[16, 8, 4]).source == g.source
    assert [n.shape for n in g.params if n.name.endswith(".w")] == [(16, 8), (8, 4)]
    with pytest.raises(A.ModelError, match="option sizes='3,x' is invalid"):
        A.models.build("mlp", sizes="3,x")


def test_source_records_every_option_sorted_and_rebuilds_the_same_graph():
    g = build("mlp", batch=3, sizes=[8, 6, 4])
    assert g.source.model == "mlp"
    assert [k for k, _ in g.source.options] == sorted(A.models.options("mlp"))
    assert g.source.options_dict()["sizes"] == (8, 6, 4)
    again = build(g.source.model, **g.source.options_dict())
    assert again.dump() == g.dump() and again.source == g.source


@pytest.mark.parametrize("model, opts, match", [
    ("mlp", {"batch": 2.5}, r"option batch=2.5 is invalid; expected an integer from 1 to 2147483647"),
    ("mlp", {"batch": True}, "option batch=True is invalid"),
    ("mlp", {"batch": "3"}, "option batch='3' is invalid"),
    ("mlp", {"batch": -1}, "option batch=-1 is invalid"),
    ("mlp", {"batch": 2**40}, "option batch=1099511627776 is invalid"),
    ("mlp", {"seed": -1}, r"option seed=-1 is invalid; expected an integer from 0 to 4294967295"),
    ("gpt2", {"layers": 10_000}, "option layers=10000 is invalid; expected an integer from 1 to 128"),
    ("mlp", {"sizes": "16,8.5,4"}, "option sizes='16,8.5,4' is invalid; expected 2 to 129 integers"),
    ("mlp", {"sizes": [16, 0, 4]}, r"option sizes=\[16, 0, 4\] is invalid"),
    ("mlp", {"sizes": [16, True]}, "option sizes=.* is invalid"),
    ("mlp", {"sizes": "16"}, "option sizes='16' is invalid"),
    ("mlp", {"sizes": 16}, "option sizes=16 is invalid"),
    ("mlp", {"dtype": "int64"}, "option dtype='int64' is invalid; expected one of float32, float64"),
    ("regression", {"x": float("nan")}, "option x=nan is invalid; expected a finite number"),
    ("regression", {"w": float("inf")}, "option w=inf is invalid"),
    ("regression", {"y": "5"}, "option y='5' is invalid"),
    ("regression", {"b": False}, "option b=False is invalid"),
    ("seed_autodiff", {"x1": 0.0}, r"option x1=0.0 is invalid; expected a finite number > 0 \(ln"),
])
def test_option_of_the_wrong_type_or_range_is_refused_naming_model_option_and_value(model, opts, match):
    with pytest.raises(A.ModelError, match=f"model {model!r}: {match}"):
        A.models.build(model, **opts)


def test_an_int_for_a_float_option_is_a_float():
    assert build("regression", x=3).source.options_dict()["x"] == 3.0


def test_unknown_options_list_the_known_ones():
    with pytest.raises(A.ModelError, match="no option 'colour'; its options are: batch=64, sizes="):
        A.models.build("mlp", colour=1)


def test_unknown_model_lists_the_zoo():
    with pytest.raises(A.ModelError, match="unknown model 'alexnet'; available models: seed_autodiff"):
        A.models.build("alexnet")


def test_a_billion_batch_is_refused_before_building_with_the_estimate():
    # ~2k Python steps and no allocation (tests/work_meter.py); building the graph would take far more.
    with WorkMeter(max_steps=100_000) as work, pytest.raises(A.ModelError) as e:
        A.models.build("mlp", batch=1_000_000_000)
    assert work.peak_bytes < 16 * 2**20, work.line()
    msg = str(e.value)
    assert "model 'mlp' with batch=1000000000" in msg
    assert "%0 'x' of shape (1000000000, 784), has 7.84e+11 elements" in msg
    assert "over the limit of 2147483648 (max_tensor_elements)" in msg and "limits=models.ModelLimits(" in msg


def test_the_total_element_limit_counts_every_tensor():
    """Each tensor of gpt2 batch=20 is under 2**31 elements, but together they are over 2**34."""
    with pytest.raises(A.ModelError, match="tensors hold .* elements in all .*max_total_elements") as e:
        A.models.build("gpt2", batch=20)
    assert "max_tensor_elements" not in str(e.value)


def test_limits_can_be_raised_or_lowered():
    small = A.models.ModelLimits(max_tensor_elements=100)
    with pytest.raises(A.ModelError, match="over the limit of 100"):
        A.models.build("mlp", batch=2, sizes=(64, 2), limits=small)
    g = build("mlp", batch=2, sizes=(64, 2), limits=A.models.ModelLimits(max_tensor_elements=128))
    assert g.nodes[0].shape == (2, 64)
    with pytest.raises(A.ModelError, match="max_total_elements=0 is invalid"):
        A.models.ModelLimits(max_total_elements=0)
    with pytest.raises(A.ModelError, match="limits=5 is invalid"):
        A.models.build("mlp", limits=5)
