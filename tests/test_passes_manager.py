"""The pass manager: names and types checked, every pass verified (IR and numbers), skips explained."""
import re

import pytest

import accelsim as A
from accelsim.limits import Limits
from accelsim.models.sizes import SMALL
from accelsim.passes import PASSES, AppliedPass, PassDef, Rewrite, inference_graph, optimize_with_log
from accelsim.passes.fold_batchnorm import fold_batchnorm
from accelsim.passes.freeze import freeze_batchnorm
from accelsim.passes.rebuild import Rebuild

BOTH = ("inference", "training")


def _transformer(kind: str = "inf", dtype: str = "float64") -> A.Graph:
    fwd = A.models.build("transformer_block", **{**SMALL["transformer_block"], "dtype": dtype})
    return inference_graph(fwd) if kind == "inf" else A.training_graph(fwd)


def _scale_first_const(graph: A.Graph, factor: float) -> Rewrite:
    """A wrong rewrite: the first constant (attention's 1/sqrt(d)) is multiplied by `factor`."""
    rb = Rebuild(graph)
    for old in graph.nodes:
        if old.op == "const" and not rb.rewrites:
            rb.alias(old, rb.const(graph.leaf_value(old.id) * factor, old.phase), "scaled")
        else:
            rb.copy(old)
    return rb.finish()


def test_a_rewrite_that_changes_a_result_is_refused_naming_pass_output_and_node():
    planted = PassDef("planted", lambda g: _scale_first_const(g, 1.01), BOTH, "test only: scales a constant")
    g = _transformer()
    with pytest.raises(A.GraphError) as e:
        A.optimize(g, ["cse", planted])
    msg = str(e.value)
    const = next(n for n in g.nodes if n.op == "const")
    assert "pass 'planted'" in msg and "output 'y'" in msg and f"%{g.outputs['y']}" in msg
    assert f"%{const.id} const {const.name!r}" in msg  # the node it rewrote
    assert float(re.search(r"differs by ([0-9.e+-]+) relative", msg).group(1)) > 1e-9
    assert "\n" not in msg and "Traceback" not in msg


def test_a_rewrite_that_makes_a_result_nan_is_refused():
    planted = PassDef("nan", lambda g: _scale_first_const(g, float("nan")), BOTH, "test only")
    with pytest.raises(A.GraphError, match=r"pass 'nan' changes a result .* differs by inf relative"):
        A.optimize(_transformer(), [planted])


def test_a_change_below_float64_rounding_is_accepted_and_logged():
    tiny = PassDef("tiny", lambda g: _scale_first_const(g, 1.0 + 2**-52), BOTH, "test only: one ulp")
    _, log = optimize_with_log(_transformer(), [tiny])
    assert log.records[0].status == "applied" and log.records[0].max_error_ratio < 1.0


def test_unknown_pass_name_is_refused_listing_the_known_ones():
    with pytest.raises(A.GraphError) as e:
        A.optimize(_transformer(), "cse, fold_bn")
    msg = str(e.value)
    assert "'fold_bn'" in msg and all(name in msg for name in PASSES)


@pytest.mark.parametrize("kwargs,expected", [
    ({"graph": "gpt2"}, "needs a Graph"),
    ({"passes": 3}, "passes must be a list"),
    ({"passes": ["cse", 3]}, "pass 1 is 3 of type int"),
    ({"passes": [None]}, "pass 0 is None of type NoneType"),
    ({"verify": "yes"}, "verify must be True or False"),
    ({"hw": 5}, "hw must be a hardware description"),
    ({"limits": {"max_flops": 1}}, "limits must be an accelsim.limits.Limits"),
])
def test_wrong_types_from_python_are_refused(kwargs, expected):
    args = {"graph": _transformer(), "passes": ["cse"], **kwargs}
    with pytest.raises(A.GraphError, match=re.escape(expected)):
        A.optimize(**args)


def test_a_pass_that_breaks_the_graphs_interface_is_refused():
    def drop_outputs(g: A.Graph) -> Rewrite:
        out = g.copy()
        out.outputs = {}
        return Rewrite(out, ("dropped every output",))

    def not_a_graph(g: A.Graph):
        return "graph"

    for run, expected in ((drop_outputs, "its outputs are []"), (not_a_graph, "returned a str, not a Rewrite")):
        with pytest.raises(A.GraphError, match=re.escape(expected)):
            A.optimize(_transformer(), [PassDef("broken", run, BOTH, "test only")])


def test_names_as_a_string_or_a_list_give_the_same_graph():
    g = _transformer("train")
    a = A.optimize(g, "cse, simplify,merge_qkv")
    b = A.optimize(g, ["cse", "simplify", "merge_qkv"])
    assert a.dump() == b.dump()
    assert len(A.optimize(g, "")) == len(g)


def test_inference_only_pass_is_skipped_on_a_training_graph_with_the_reason():
    g = _transformer("train")
    out, log = optimize_with_log(g, ["fold_batchnorm", "cse"])
    skipped, applied = log.records
    assert skipped.status == "skipped" and "inference" in skipped.reason and "training graph" in skipped.reason
    assert applied.status == "applied"


def test_fold_and_freeze_called_directly_refuse_a_training_graph():
    g = A.training_graph(A.models.build("resnet_block", **SMALL["resnet_block"]))
    for fn in (fold_batchnorm, freeze_batchnorm):
        with pytest.raises(A.GraphError, match="inference graphs"):
            fn(g)


def test_a_pass_whose_new_op_no_unit_runs_is_skipped_with_the_reason():
    """bespoke_superres has no unit for concat or slice: merged q, k, v could not run there."""
    g = _transformer()
    out, log = optimize_with_log(g, ["merge_qkv"], hw="bespoke_superres")
    (rec,) = log.records
    assert rec.status == "skipped" and "bespoke_superres" in rec.reason and "concat" in rec.reason
    assert out.dump() == g.dump()
    _, log = optimize_with_log(g, ["merge_qkv"], hw=A.load_hw("groq_like"))
    assert log.records[0].status == "applied"


def test_numeric_check_is_skipped_with_the_estimate_above_the_limits():
    g = _transformer("train")
    _, log = optimize_with_log(g, ["cse"], limits=Limits(max_flops=1000))
    assert log.check.startswith("skipped") and "FLOPs" in log.check and "limit" in log.check
    assert log.records[0].status == "applied" and log.records[0].max_error_ratio is None
    _, log = optimize_with_log(g, ["cse"], limits=Limits(max_tensor_bytes=1000))
    assert log.check.startswith("skipped") and "bytes" in log.check
    _, log = optimize_with_log(g, ["cse"], verify=False)
    assert log.check.startswith("off") and log.records[0].max_error_ratio is None


def test_log_counts_nodes_flops_and_bytes_of_each_pass():
    g = _transformer("train")
    out, log = optimize_with_log(g, ["cse", "merge_qkv"])
    cse, merge = log.records
    assert (cse.nodes_before, cse.nodes_after, merge.nodes_before, merge.nodes_after) == (
        len(g), merge.nodes_before, cse.nodes_after, len(out))
    assert cse.nodes_after < cse.nodes_before and len(cse.rewrites) == cse.nodes_before - cse.nodes_after
    assert merge.flops_after == merge.flops_before  # the same multiply-adds in one matmul
    assert merge.bytes_after > merge.bytes_before  # the concat of the weights and the slices move bytes
    assert all(line.startswith("%") for line in cse.rewrites + merge.rewrites)
    assert len(log.summary().splitlines()) == 3


def test_optimized_graph_keeps_its_model_source_and_records_only_the_passes_that_applied():
    g = _transformer()
    unchanged = A.optimize(g, ["fold_batchnorm"])
    assert unchanged.source == g.source and unchanged.passes == ()
    merged = A.optimize(g, ["cse", "merge_qkv"])  # cse finds nothing in the inference block
    assert merged.source == g.source and merged.passes == (AppliedPass("merge_qkv"),)
    assert A.optimize(merged, ["simplify", "cse"]).passes == merged.passes  # nothing more applies


def test_optimize_leaves_its_input_graph_unchanged():
    g = _transformer("train")
    before = g.dump()
    A.optimize(g, list(PASSES))
    assert g.dump() == before
