"""Layer fusion (passes/fuse_layers.py): tiled chains compute the unfused graph's values, the halo follows
the windows, unfusable chains are refused with the reason, and the pass is deterministic."""
import numpy as np
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import GraphError
from accelsim.fusion_groups import fusion_groups
from accelsim.layer_names import layer_names
from accelsim.passes import optimize_with_log
from accelsim.passes.fuse_chains import plan_fusion
from accelsim.passes.fuse_layers import FUSION_TILES, fuse_layers, pass_name
from accelsim.passes.layer_tiles import RowWindow, chain_bands, input_band, tile_rows


def _chain(dtype: str = "float64", h: int = 13) -> A.Graph:
    """conv (stride 2, padding 2, dilation 2) + bias + relu, max pool (padding 1), conv 3x3 (padding 1),
    inference batch norm, average pool (stride 2, padding 1)."""
    g = A.Graph("chain", dtype=dtype)
    x = g.input("x", (2, 3, h, 9))
    with g.layer("c1"):
        y = F.conv2d(x, g.param("w1", (4, 3, 3, 3)), stride=2, padding=2, dilation=2)
        y = F.relu(y + F.reshape(g.param("b1", (4,), init="normal"), (1, 4, 1, 1)))
    with g.layer("pool"):
        y = F.max_pool2d(y, 3, stride=1, padding=1)
    with g.layer("c2"):
        y = F.conv2d(y, g.param("w2", (5, 4, 3, 3)), padding=1)
    with g.layer("bn"):
        stats = [g.param("gamma", (5,), init="uniform", low=0.5, high=1.5), g.param("beta", (5,)),
                 g.param("mean", (5,)), g.param("var", (5,), init="uniform", low=0.5, high=2.0)]
        y = F.batch_norm_inference(y, *stats, eps=1e-3)
    with g.layer("pool2"):
        y = F.avg_pool2d(y, 3, stride=2, padding=1)
    g.output("out", y)
    return g


def _assert_same(a: A.Graph, b: A.Graph, rtol: float) -> None:
    ea, eb = A.evaluate(a), A.evaluate(b)
    assert set(ea) == set(eb)
    for k in ea:
        np.testing.assert_allclose(eb[k], ea[k], rtol=rtol, atol=rtol, err_msg=k)


@pytest.mark.parametrize("tiles", [2, 4])
def test_a_fused_chain_with_stride_padding_dilation_and_pools_equals_the_unfused_graph(tiles):
    g = _chain()
    out = fuse_layers(g, tiles)
    first_conv = next(n.id for n in g.nodes if n.op == "conv2d")
    assert len(out.rewrites) == 1 and out.sites == (first_conv,)
    convs = [n for n in out.graph.nodes if n.op == "conv2d"]
    assert len(convs) == 2 * tiles and all(n.attrs["padding"][0] == 0 for n in convs)
    assert sum(n.op == "max_pool2d" for n in out.graph.nodes) == tiles
    _assert_same(g, out.graph, 1e-12)


def test_float32_fused_values_equal_the_unfused_to_rounding():
    g = _chain("float32", h=16)
    _assert_same(g, fuse_layers(g, 4).graph, 1e-5)


def test_tile_nodes_are_named_after_their_layer_and_tile():
    names = set(layer_names(fuse_layers(_chain(), 2).graph))
    assert {"c1[tile 1/2]", "c1[tile 2/2]", "pool[tile 2/2]", "c2[tile 1/2]", "pool2[tile 2/2]"} <= names
    assert "layers c1 .. pool2 -> 2 tiles along H" in fuse_layers(_chain(), 2).rewrites[0]


def test_the_band_of_a_window_is_its_receptive_field_with_the_halo():
    # output rows 2..3 of a 3x3 conv, stride 2, padding 1 read padded rows 4..8 = input rows 3..7
    band = input_band(RowWindow(3, 2, 1, 1), 2, 4, 8)
    assert (band.start, band.stop, band.pad_top, band.pad_bottom) == (3, 8, 0, 0)
    top = input_band(RowWindow(3, 1, 1, 2), 0, 2, 8)  # dilation 2: row 1 reads rows 0, 2, 4; row 0 padding
    assert (top.start, top.stop, top.pad_top, top.pad_bottom) == (0, 5, 1, 0)
    assert tile_rows(10, 4) == [(0, 2), (2, 5), (5, 7), (7, 10)]
    two = chain_bands([RowWindow(3, 1, 1, 1), RowWindow(3, 1, 1, 1)], [8, 8], 4, 8)
    assert [(b.start, b.stop, b.pad_bottom) for b in two] == [(2, 8, 1), (3, 8, 1)]


def test_the_pass_counts_the_recomputed_halo_and_the_flops_grow_by_it():
    g = _chain()
    out, log = optimize_with_log(g, [pass_name(4)])
    record = log.records[0]
    assert record.status == "applied" and "halo row(s) recomputed" in record.rewrites[0]
    assert record.flops_after > record.flops_before


def _single_conv() -> A.Graph:
    g = A.Graph("one", dtype="float64")
    x = g.input("x", (1, 2, 8, 8))
    y = F.relu(F.conv2d(x, g.param("w", (2, 2, 3, 3)), padding=1))
    g.output("out", y)
    return g


def _bn_between() -> A.Graph:
    g = A.Graph("bn", dtype="float64")
    x = g.input("x", (2, 2, 8, 8))
    y = F.conv2d(x, g.param("w", (2, 2, 3, 3)), padding=1)
    y = F.batch_norm(y, g.param("gamma", (2,), init="ones"), g.param("beta", (2,)))
    g.output("out", F.conv2d(y, g.param("w2", (2, 2, 3, 3)), padding=1))
    return g


def _read_twice() -> A.Graph:
    g = A.Graph("twice", dtype="float64")
    x = g.input("x", (1, 2, 8, 8))
    y = F.conv2d(x, g.param("w", (2, 2, 3, 3)), padding=1)
    g.output("mid", y)
    g.output("out", F.conv2d(y, g.param("w2", (2, 2, 3, 3)), padding=1))
    return g


@pytest.mark.parametrize("build, tiles, reason", [
    (_single_conv, 2, "1 windowed layer(s), fusion needs 2"),
    (_bn_between, 2, "batch_norm5', whose every row depends on all rows"),
    (_read_twice, 2, "1 windowed layer(s)"),
    (lambda: _chain(h=5), 4, "fewer than the 4 tiles"),
])
def test_an_unfusable_chain_is_left_alone_with_its_reason(build, tiles, reason):
    g = build()
    plan = plan_fusion(g, tiles)
    assert not plan.chains and any(reason in line for line in plan.refused), plan.refused
    assert fuse_layers(g, tiles).rewrites == ()


@pytest.mark.parametrize("tiles", [0, -4, 3, 4.0, 10**9, float("nan"), "4", True])
def test_a_tile_count_outside_the_fusion_tiles_is_refused(tiles):
    with pytest.raises(GraphError, match=r"tiles must be one of 2, 4, 8, 16"):
        fuse_layers(_chain(), tiles)


def test_only_must_be_a_set_of_ids():
    with pytest.raises(GraphError, match="only must be None or a set of node ids"):
        fuse_layers(_chain(), 2, only=[3])


def test_a_training_graph_is_skipped_with_the_reason():
    train = A.training_graph(A.models.build("superres", size=8, width=4))
    _, log = optimize_with_log(train, [pass_name(2)])
    assert log.records[0].status == "skipped" and "inference" in log.records[0].reason


def test_fusion_is_deterministic_and_every_tile_count_has_a_pass():
    assert [pass_name(t) for t in FUSION_TILES] == [f"fuse_layers_t{t}" for t in FUSION_TILES]
    assert all(pass_name(t, staged) in A.passes.PASSES for t in FUSION_TILES for staged in (True, False))
    assert fuse_layers(_chain(), 4).graph.dump() == fuse_layers(_chain(), 4).graph.dump()


def test_a_residual_read_by_the_chain_is_sliced_to_each_tiles_rows():
    g = A.Graph("residual", dtype="float64")
    x = g.input("x", (1, 3, 10, 6))
    y = F.relu(F.conv2d(x, g.param("w1", (3, 3, 3, 3)), padding=1))
    y = F.relu(F.conv2d(y, g.param("w2", (3, 3, 3, 3)), padding=1) + x)
    g.output("out", y)
    out = fuse_layers(g, 2)
    assert len(out.rewrites) == 1
    residual_slices = [n for n in out.graph.nodes if n.op == "slice" and n.shape[2] == 5]
    assert len(residual_slices) == 2  # the add reads rows 0..4 and 5..9 of x, the convs a halo more
    _assert_same(g, out.graph, 1e-12)


def test_unstaged_fusion_has_every_tile_read_the_weights_itself_with_the_same_values():
    g = _chain()
    staged, unstaged = fuse_layers(g, 2).graph, fuse_layers(g, 2, stage_weights=False).graph
    params = {n.id for n in unstaged.nodes if n.op == "param"}
    (group,) = fusion_groups(unstaged)
    assert group.staged == () and len(fusion_groups(staged)[0].staged) > 0
    convs = [n for n in unstaged.nodes if n.op == "conv2d"]
    assert len(convs) == 4 and all(n.inputs[1] in params for n in convs)  # the param itself, no copy
    assert len(unstaged.nodes) < len(staged.nodes)
    _assert_same(g, unstaged, 1e-12)
    assert pass_name(2, stage_weights=False) == "fuse_layers_t2_unstaged"
    out, log = optimize_with_log(g, [pass_name(2, stage_weights=False)])
    assert out.dump() == unstaged.dump() and "weights re-read per tile" in log.records[0].rewrites[0]
    with pytest.raises(GraphError, match="stage_weights must be True or False"):
        fuse_layers(g, 2, stage_weights="no")
