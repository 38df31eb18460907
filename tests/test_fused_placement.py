"""A fusion group's internal values stay on chip whatever the activations placement says (hw/placement.py's
GROUP_INTERNAL): only the group's inputs and its output (the concat of its tiles) go where activations live."""
import math
from pathlib import Path

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import dram_bytes, step_graph
from accelsim.fusion_groups import fusion_groups, group_internal_nodes
from accelsim.passes.fuse_layers import fuse_layers
from accelsim.schedule.traffic import placed_io, task_loads

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
    # the DRAM moves the weights once (staged on chip for both tiles) and the group's output, nothing between tiles
    weights = sum(width * math.prod(n.shape) for n in g.nodes if n.op == "param")
    assert dram_bytes(s, hw) == weights + width * CHANNELS * SIZE * SIZE
    assert dram_bytes(s, hw) < dram_bytes(A.compile(g, hw, effort="fast"), hw)  # unfused: every layer crosses


def _staging(sram: str, tiles: int = 4):
    """The chain on Stream's chip with `sram` of SRAM, fused into `tiles` tiles: the schedule, its fused graph's
    group, where each staged weight lives, and the DRAM bytes the staging tasks and the tiles' convs move."""
    hw = A.load_hw(HW_FILE, {"chips.0.memories.0.capacity_bytes": sram})
    g = _conv_chain()
    s = A.compile(g, hw, fusion=tiles, effort="fast")
    fused = step_graph(g, s)[0]
    (group,) = fusion_groups(fused)
    loads = task_loads(s, hw, placed_io(s, hw))
    homes = {x.node: x.memory for x in s.tensors if x.task >= 0}
    staging = [loads[t.id].get("dram", 0) for t in s.tasks if t.node in group.staged]
    convs = [loads[t.id].get("dram", 0) for t in s.tasks if fused.nodes[t.node].op == "conv2d"]
    return s, hw, fused, group, [homes[i] for i in group.staged], staging, convs


def test_a_groups_weights_are_staged_on_chip_once_and_no_tile_reads_them_from_the_dram():
    s, hw, fused, group, homes, staging, convs = _staging("8 MiB")
    weight_bytes = [4 * math.prod(n.shape) for n in fused.nodes if n.op == "param"]
    assert [fused.nodes[i].inputs[0] for i in group.staged] == [n.id for n in fused.nodes if n.op == "param"]
    assert homes == ["sram", "sram"] and staging == weight_bytes  # one read of each weight, at 4 B per element
    assert len(convs) == 8 and convs == [0] * 8  # every tile's conv reads the staged copy on chip
    assert all(set(fused.nodes[i].inputs) & set(group.staged) for tile in group.tiles for i in tile
               if fused.nodes[i].op == "conv2d")
    static, dynamic = (A.simulate(s, hw, graph=fused, mode=mode) for mode in ("static", "dynamic"))  # validated
    assert static.makespan_cycles == s.makespan_cycles
    dram = {"chip0:dram": sum(weight_bytes) + 4 * CHANNELS * SIZE * SIZE}  # the weights once, the group's output
    assert {k: v for k, v in static.summary()["port_bytes"].items() if "dram" in k} == dram
    assert dynamic.summary()["port_bytes"] == static.summary()["port_bytes"]  # the work queue moves the same bytes
    assert A.check(s, "numpy", graph=fused, hw=hw).passed


def test_a_staged_weight_without_room_on_chip_is_read_by_every_tile_where_the_planner_put_it():
    _, _, fused, _, homes, _, convs = _staging("4 KiB")
    assert homes == ["dram", "dram"]  # the memory planner found no room: no flag decided it
    weight_bytes = 4 * CHANNELS * CHANNELS * 9
    assert len(convs) == 8 and all(c >= weight_bytes for c in convs)
