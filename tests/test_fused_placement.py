"""A fusion group's internal values stay on chip whatever the activations placement says (hw/placement.py's
GROUP_INTERNAL): only the group's inputs and its output (the concat of its tiles) go where activations live."""
import math
from pathlib import Path

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import dram_bytes, step_graph
from accelsim.fusion_groups import fusion_groups, group_internal_nodes
from accelsim.passes.fuse_layers import fuse_layers

# Stream's chip: activations and weights placed in the DRAM at 4 bytes per element, the arithmetic at 1
HW_FILE = Path(__file__).resolve().parent.parent / "experiments" / "hw" / "stream_tpu_like_quad_core.yaml"
CHANNELS, SIZE = 8, 16


def _conv_chain() -> A.Graph:
    """conv -> relu -> conv -> relu, one chain that fusion tiles along H."""
    g = A.Graph("conv_chain", dtype="float32")
    x = g.input("x", (1, CHANNELS, SIZE, SIZE))
    h = F.relu(F.conv2d(x, g.param("w1", (CHANNELS, CHANNELS, 3, 3)), padding=1))
    g.output("y", F.relu(F.conv2d(h, g.param("w2", (CHANNELS, CHANNELS, 3, 3)), padding=1)))
    return g


def test_a_groups_internal_nodes_are_its_nodes_but_its_concat():
    fused = fuse_layers(_conv_chain(), 2).graph
    (group,) = fusion_groups(fused)
    assert group_internal_nodes(fused) == set(group.nodes()) - {group.concat}
    assert group_internal_nodes(_conv_chain()) == frozenset()  # no fusion groups, nothing internal


def test_a_tile_value_read_outside_its_group_or_kept_as_an_output_is_no_internal_one():
    fused = fuse_layers(_conv_chain(), 2).graph
    (group,) = fusion_groups(fused)
    first_relu, last_relu = (next(i for i in tile if fused.nodes[i].op == "relu") for tile in group.tiles)
    F.relu(fused.var(first_relu))  # read again after the group
    fused.output("tile2", fused.var(last_relu))
    internal = group_internal_nodes(fused)
    assert first_relu not in internal and last_relu not in internal
    assert internal == set(group.nodes()) - {group.concat, first_relu, last_relu}


def test_only_a_fused_groups_output_crosses_the_dram_and_its_tiles_stay_on_chip_at_the_class_width():
    g, hw = _conv_chain(), A.load_hw(HW_FILE)
    s = A.compile(g, hw, fusion=2, effort="fast")
    fused = step_graph(g, s)[0]
    (group,) = fusion_groups(fused)
    homes = {t.node: x for t in s.tasks for x in s.tensors if x.task == t.id and t.kind == "node"}
    assert {homes[i].memory for i in group.nodes() if i != group.concat} == {"sram"}
    assert homes[group.concat].memory == "dram"
    width = 4  # the activations placement's bytes_per_element: the internal values keep it
    assert all(homes[i].size_bytes == width * math.prod(fused.nodes[i].shape) for i in group.nodes())
    # the DRAM moves each tile's weights (read by the tile's conv) and the group's output, nothing between tiles
    weights = sum(width * math.prod(n.shape) for n in g.nodes if n.op == "param")
    assert dram_bytes(s, hw) == 2 * weights + width * CHANNELS * SIZE * SIZE
    assert dram_bytes(s, hw) < dram_bytes(A.compile(g, hw, effort="fast"), hw)  # unfused: every layer crosses
