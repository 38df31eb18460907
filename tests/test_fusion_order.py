"""Fused tiles run depth-first (compiler/planning/tile_order.py): the fusion groups are read back from the records
the fusion pass leaves on the fused graph's nodes (fusion_groups.py), never from layer names, and on the schedule
tile t of a group starts only after tile t - TILES_IN_FLIGHT ended."""
import pytest
from rich.console import Console

import accelsim as A
from accelsim.cli.layer_table import energy_table, time_table
from accelsim.compiler.fusion import step_graph
from accelsim.compiler.planning.tile_order import TILES_IN_FLIGHT
from accelsim.compiler.verify import verify_schedule
from accelsim import ops as F
from accelsim.fusion_groups import fusion_groups, group_internal_nodes, group_of_nodes, tile_layer
from accelsim.graph.ir import FusedTile
from accelsim.passes import inference_graph
from accelsim.passes.fuse_layers import fuse_layers


def _superres(size: int = 16) -> A.Graph:
    return inference_graph(A.models.build("superres", size=size, width=4))


def test_the_fusion_groups_are_read_back_from_the_fused_graph():
    g = _superres()
    assert fusion_groups(g) == ()
    fused = fuse_layers(g, 4).graph
    (group,) = fusion_groups(fused)
    assert group.label == "conv1 .. conv4" and len(group.tiles) == 4
    assert fused.nodes[group.concat].op == "concat"
    assert fused.nodes[group.concat].inputs == tuple(tile[-1] for tile in group.tiles)
    for t, tile in enumerate(group.tiles, 1):
        assert {fused.nodes[i].fused for i in tile} == {FusedTile(1, t, 4, "conv1 .. conv4")}
        assert {fused.nodes[i].layer.endswith(f"[tile {t}/4]") for i in tile} == {True}  # what people see
        assert [fused.nodes[i].op for i in tile].count("conv2d") == 4
    assert fused.nodes[group.concat].fused == FusedTile(1, 0, 4, "conv1 .. conv4")
    assert set(group_of_nodes(fused)) == set(group.nodes())


def test_a_fusion_group_survives_a_later_pass_that_rewrites_its_tiles():
    g = _superres(size=8)
    fused = A.optimize(g, ["fuse_layers_t2", "fuse_epilogue"], verify=False)
    (group,) = fusion_groups(fused)
    assert [[fused.nodes[i].op for i in tile].count("conv2d_epilogue") for tile in group.tiles] == [4, 4]
    assert {fused.nodes[i].fused.tile for i in group.tiles[1]} == {2}  # the epilogue stands in the tile it replaced


def _hand_tiled(name) -> A.Graph:
    """A user's graph of three row bands of one convolution and the concat of their outputs, its band layers
    named name(band, 3): built by hand, not by the fusion pass."""
    g = A.Graph("lookalike", dtype="float32")
    x = g.input("x", (1, 4, 8, 8))
    w = g.param("w", (4, 4, 3, 3))
    outs = []
    for t, (start, stop) in enumerate(((0, 4), (2, 6), (4, 8)), 1):
        with g.layer(name(t, 3)):
            outs.append(F.relu(F.conv2d(F.slice(x, (0, 0, start), (1, 4, stop)), w)))
    with g.layer("conv"):
        g.output("y", F.concat(outs, axis=2))
    return g


def test_a_layer_named_like_a_tile_is_not_a_fusion_group():
    g = _hand_tiled(lambda t, of: tile_layer("conv", t, of))
    assert [n.layer for n in g.nodes if n.op == "conv2d"] == ["conv[tile 1/3]", "conv[tile 2/3]", "conv[tile 3/3]"]
    assert fusion_groups(g) == () and group_of_nodes(g) == {} and group_internal_nodes(g) == frozenset()
    plain = _hand_tiled(lambda t, of: f"conv.band{t}")
    timing = [[(t.node, t.start, t.end, t.after) for t in A.compile(graph, "tpu_v1_like", effort="fast").tasks]
              for graph in (g, plain)]
    assert timing[0] == timing[1]  # no depth-first edge, no tile kept on chip: the names change nothing


def test_each_tile_starts_after_the_tile_two_before_it_ended():
    g = _superres()
    s = A.compile(g, "tpu_v1_like", fusion=4, effort="fast")
    fused, _ = step_graph(g, s)
    (group,) = fusion_groups(fused)
    by_node: dict[int, list] = {}
    for t in s.tasks:
        by_node.setdefault(t.node, []).append(t)
    ordered = 0
    for k in range(TILES_IN_FLIGHT, len(group.tiles)):
        done = max(t.end for t in by_node[group.tiles[k - TILES_IN_FLIGHT][-1]])
        started = min(t.start for i in group.tiles[k] for t in by_node.get(i, []))
        assert started >= done
        ordered += 1
    assert ordered == 2
    edges = {a for i in group.tiles[2] for t in by_node.get(i, []) for a in t.after}
    assert any(s.tasks[a].node == group.tiles[0][-1] for a in edges)
    verify_schedule(s, fused, A.load_hw("tpu_v1_like"))  # the plan expanded again has the same edges


@pytest.fixture(scope="module")
def fused_step():
    """superres (8 x 8) on tpu_v1_like fused into 2 tiles: its schedule and fused graph."""
    g = _superres(size=8)
    s = A.compile(g, "tpu_v1_like", fusion=2, effort="fast")
    return s, step_graph(g, s)[0], g


@pytest.fixture(scope="module")
def reports(fused_step):
    """The per-layer reports of the fused step and of the same graph unfused."""
    from accelsim.per_layer import layer_report

    s, fused, g = fused_step
    return layer_report(s, "tpu_v1_like", fused), layer_report(A.compile(g, "tpu_v1_like", effort="fast"),
                                                                "tpu_v1_like", g)


def test_the_per_layer_report_names_each_tile_layers_fusion_group(reports):
    report, plain = reports
    groups = {r.layer: r.fusion_group for r in report.layers}
    assert groups["conv1[tile 1/2]"] == groups["conv4[tile 2/2]"] == groups["conv4"] == "conv1 .. conv4"
    assert groups["conv1"] == "conv1 .. conv4"  # its weight staged for the tiles (beside its bias reshape)
    rows = {r["layer"]: r for r in report.rows()}
    assert "fusion_group" in report.columns() and rows["conv2[tile 2/2]"]["fusion_group"] == "conv1 .. conv4"
    assert [r.to_dict().get("fusion_group") for r in plain.layers[:1]] == [None]  # the key only where grouped
    assert "fusion_group" not in plain.columns() and not any(r.fusion_group for r in plain.layers)


def _printed(table) -> list[str]:
    console = Console(record=True, width=400)
    console.print(table)
    return console.export_text().splitlines()


@pytest.mark.parametrize("make_table", [time_table, energy_table])
def test_the_cli_layer_tables_name_the_fusion_group_only_of_a_fused_step(reports, make_table):
    report, plain = reports
    lines = _printed(make_table(report))
    header = next(line for line in lines if "┃ layer" in line)
    assert "fusion group" in header
    rows = {r.layer: r.fusion_group or "-" for r in report.layers}
    shown = [line for line in lines if line.split("│")[1:2] and line.split("│")[1].strip() in rows]
    assert shown and all(line.split("│")[-2].strip() == rows[line.split("│")[1].strip()] for line in shown)
    assert any("conv1 .. conv4" in line for line in shown)
    assert any("[tile 1/2]" in line for line in shown)  # the tile's layer printed whole, not eaten as markup
    assert not any("fusion group" in line for line in _printed(make_table(plain)))


def test_the_trace_names_a_fused_tasks_group_and_the_timeline_its_tile(fused_step, tmp_path):
    from accelsim.layer_names import layer_names
    from accelsim.viz import write_perfetto

    s, fused, _ = fused_step
    result = A.simulate(s, "tpu_v1_like", graph=fused)
    groups, names = group_of_nodes(fused), layer_names(fused)
    events = [e for e in write_perfetto(result, tmp_path / "t.json", layers=names, groups=groups)["traceEvents"]
              if e["ph"] == "X"]
    assert {e["args"].get("fusion_group") for e in events} == {"conv1 .. conv4", None}
    assert all((e["args"].get("fusion_group") is not None) == (e["args"]["node"] in groups) for e in events)
    assert {e["name"] for e in events if e["args"].get("fusion_group")} >= {"conv1[tile 1/2]", "conv4[tile 2/2]"}
    # the timeline's bars are named by the same layer names (tests/test_layer_report.py), a tile's with its tile
    assert all(names[i].endswith(f"[tile {t}/2]") for t, tile in enumerate(fusion_groups(fused)[0].tiles, 1)
               for i in tile)


def test_a_unit_with_four_instances_keeps_four_tiles_in_flight():
    from accelsim import ops as F
    from accelsim.compiler.planning.tile_order import tiles_in_flight

    assert [tiles_in_flight(n) for n in (1, 2, 4)] == [2, 2, 4]
    g = A.Graph("chain", dtype="float32")
    x = g.input("x", (1, 8, 16, 16))
    h = F.relu(F.conv2d(x, g.param("w1", (8, 8, 3, 3)), padding=1))
    g.output("y", F.relu(F.conv2d(h, g.param("w2", (8, 8, 3, 3)), padding=1)))
    from pathlib import Path

    hw = A.load_hw(Path(__file__).parents[1] / "experiments/hw/stream_tpu_like_quad_core.yaml")  # 4 cores, no gang
    s = A.compile(g, hw, fusion=8, effort="fast")
    (group,) = fusion_groups(step_graph(g, s)[0])
    exit_of = {t.id: k for k, tile in enumerate(group.tiles) for t in s.tasks if t.node == tile[-1]}
    waits = {k: {exit_of[a] for i in tile for t in s.tasks if t.node == i for a in t.after if a in exit_of}
             for k, tile in enumerate(group.tiles)}
    assert waits == {k: ({k - 4} if k >= 4 else set()) for k in range(8)}
