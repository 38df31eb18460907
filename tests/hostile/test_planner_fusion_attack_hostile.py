"""Hostile hardware for the memory planner's rule table (compiler/timing/memory_planner.py) and hostile graphs for
fusion `auto`'s chain search (compiler/fusion.py, fusion_choice.py): each ends with a schedule or one AccelsimError
naming the chip, memory or node, never an IndexError or a step fused where nothing fuses."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import step_graph

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py


def _memory(name: str, kind: str = "sram", capacity_bytes: int = 1 << 16) -> dict:
    return {"name": name, "kind": kind, "capacity_bytes": capacity_bytes, "bandwidth_bytes_per_cycle": 64}


def _hw(memories: list[dict], placement: dict | None = None, units: int = 1) -> A.HwSpec:
    names = [m["name"] for m in memories]
    unit = {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement", "tensor"], "count": units,
            "vector": {"lanes": 8}, "reads": names, "writes": names}
    chip = {"units": [unit], "memories": memories} | ({"placement": placement} if placement else {})
    return A.hw.parse_hw({"name": "toy", "clock_hz": 1e9, "chips": [chip]})


def _streamed(memory: str, buffer: str, tile_bytes: int = 1024) -> dict:
    return {"memory": memory, "stream": {"buffer": buffer, "bandwidth_bytes_per_s": 1e9, "prefetch_depth": 2,
                                         "tile_bytes": tile_bytes}}


@pytest.fixture(scope="module")
def mlp() -> A.Graph:
    return A.models.build("mlp", batch=2, sizes=(16, 8, 4))


def test_a_chip_whose_every_memory_is_a_prefetch_buffer_is_refused_naming_them(hostile, mlp):
    """Parameters streamed from a into b and optimizer state from b into a: the hardware check passes, and the
    planner's candidate list for an activation was empty (IndexError in the first rule)."""
    hw = _hw([_memory("a"), _memory("b")], {"parameters": _streamed("a", "b"), "optimizer_state": _streamed("b", "a")})
    hostile.refuses(lambda: A.compile(mlp, hw), "toy", "chip0", "(a, b)", "prefetch buffers",
                    "b for dma.parameters", "leaf %0 'x'", "no stream's buffer")


def test_a_prefetch_buffer_smaller_than_a_tile_is_refused_naming_it(hostile, mlp):
    hw = _hw([_memory("a", capacity_bytes=8), _memory("d", "dram")],
             {"parameters": {"memory": "d", "stream": {"buffer": "a", "bandwidth_bytes_per_s": 1e9,
                                                       "prefetch_depth": 1, "tile_bytes": 8}}})
    hostile.refuses(lambda: A.compile(mlp, hw), "prefetch", "chip0:a 8 B", "more memory")


# -- fusion auto ----------------------------------------------------------------------------------------------

def _one_node() -> A.Graph:
    g = A.Graph("one_node", dtype="float32")
    g.output("y", F.relu(g.input("x", (1, 2, 5, 5))))
    return g


def _one_conv() -> A.Graph:
    g = A.Graph("one_conv", dtype="float32")
    g.output("y", F.conv2d(g.input("x", (1, 2, 5, 5)), g.param("w", (2, 2, 3, 3)), padding=1))
    return g


def _chain(rows: int) -> A.Graph:
    """conv -> relu -> conv -> relu on `rows` x `rows` inputs: 7 rows cut into 2 or 4 uneven tiles, 3 into none."""
    g = A.Graph(f"chain_{rows}", dtype="float32")
    h = g.input("x", (1, 2, rows, rows))
    for i in range(2):
        h = F.relu(F.conv2d(h, g.param(f"w{i}", (2, 2, 3, 3)), padding=1))
    g.output("y", h)
    return g


NO_DRAM = _hw([_memory("sram", capacity_bytes=1 << 20)], units=2)


@pytest.mark.parametrize("build", [_one_node, _one_conv, lambda: _chain(3)], ids=["one_node", "one_conv", "3_rows"])
def test_auto_on_a_graph_with_nothing_to_fuse_keeps_the_unfused_step_and_a_tile_count_is_refused(hostile, build):
    graph = build()
    step = A.compile(graph, NO_DRAM, fusion="auto", effort="fast")
    assert step.options.fusion == "off" and step.options.fusion_chains is None
    assert step.makespan_cycles == A.compile(graph, NO_DRAM, effort="fast").makespan_cycles
    hostile.refuses(lambda: A.compile(graph, NO_DRAM, fusion=4, effort="fast"), "fusion=4",
                    f"no chain of {graph.name!r} fuses into 4 tiles", "fusion='off'")


def test_auto_on_a_chain_whose_tiles_do_not_divide_its_rows_on_a_chip_without_dram_is_no_longer_than_unfused():
    """7 rows in 2, 4 tiles: uneven bands (4+3, 2+2+2+1); no off-chip memory prices no spill (no division by a
    DRAM bandwidth of 0). Whatever auto keeps, it is a step that runs as compiled and no longer than unfused."""
    graph = _chain(7)
    unfused = A.compile(graph, NO_DRAM, effort="fast")
    step = A.compile(graph, NO_DRAM, fusion="auto", effort="fast")
    assert step.makespan_cycles <= unfused.makespan_cycles
    assert A.simulate(step, NO_DRAM, graph=step_graph(graph, step)[0]).makespan_cycles == step.makespan_cycles
    fused4 = A.compile(graph, NO_DRAM, fusion=4, effort="fast")  # 4 uneven tiles fuse: a valid step of its own
    assert fused4.options.fusion == 4
    assert A.simulate(fused4, NO_DRAM, graph=step_graph(graph, fused4)[0]).makespan_cycles == fused4.makespan_cycles


def test_auto_where_no_step_fits_memory_fused_or_not_is_refused_with_the_unfused_error(hostile):
    tight = _hw([_memory("sram", capacity_bytes=900)], units=2)
    hostile.refuses(lambda: A.compile(_chain(7), tight, fusion="auto", effort="fast"), "no memory can hold",
                    "chip0:sram 900 B", "conv2d")


def test_auto_on_a_training_graph_is_the_unfused_step_and_its_chains_are_refused(hostile, mlp):
    train = A.training_graph(mlp, optimizer="sgd", lr=0.1)
    assert A.compile(train, NO_DRAM, fusion="auto", effort="fast").options.fusion == "off"
    hostile.refuses(lambda: A.compile(train, NO_DRAM, fusion="auto", fusion_chains=((2, 2),)), "fusion_chains",
                    "inference graphs")


def test_auto_on_fixed_function_units_that_cannot_run_a_tiles_slices_keeps_the_unfused_step(hostile):
    """bespoke_superres-like: a conv unit and a relu unit, no unit for slice or concat. The estimate expanded the
    fused graph and its MappingError (no unit runs slice) refused the whole step, which compiles unfused."""
    unit = {"vector": {"lanes": 8}, "reads": ["sram"], "writes": ["sram"], "count": 2}
    hw = A.hw.parse_hw({"name": "fixed", "clock_hz": 1e9, "chips": [{
        "units": [{"name": "conv", "ops": ["conv2d"], **unit}, {"name": "relu", "ops": ["relu"], **unit}],
        "memories": [_memory("sram", capacity_bytes=1 << 20)]}]})
    graph = _chain(8)
    step = A.compile(graph, hw, fusion="auto", effort="fast")
    assert step.options.fusion == "off"
    assert step.makespan_cycles == A.compile(graph, hw, effort="fast").makespan_cycles
    hostile.refuses(lambda: A.compile(graph, hw, fusion=2, effort="fast"), "no unit of fixed", "slice")


def test_a_leaf_its_placement_puts_in_a_memory_too_small_says_so(hostile, mlp):
    """The refusal listed the DRAM's 64 KiB beside the 64 B SRAM as if the planner had overlooked it: the
    placement's `parameters: {memory: s}` allows the SRAM alone, and the message now says so."""
    hw = _hw([_memory("s", capacity_bytes=64), _memory("d", "dram")], {"parameters": {"memory": "s"}})
    hostile.refuses(lambda: A.compile(mlp, hw), "leaf %2 'fc1.w'", "512 bytes", "chip0:s 64 B",
                    "the hardware's placement puts it in chip0:s alone")


def test_a_mapping_naming_a_layer_fusion_tiles_says_fusion_renamed_it(hostile):
    """fusion=2 with a mapping for conv2d2 was refused as "graph 'chain_8' has no layer 'conv2d2'", of a graph that
    has it: the fused graph names its tiles conv2d2.t1 and conv2d2.t2."""
    hw = A.load_hw("tpu_v1_like", {"chips.0.units.mxu.mapping": "search", "chips.0.units.mxu.dataflows": ["ws", "os"],
                                   "chips.0.units.mxu.array.rows": 16, "chips.0.units.mxu.array.cols": 16})
    graph = _chain(8)
    conv = next(n.name for n in graph.nodes if n.op == "conv2d")
    mapping = {"mappings": {conv: {"mxu": {"dataflow": "os"}}}}
    hostile.refuses(lambda: A.compile(graph, hw, mapping=mapping, fusion=2, effort="fast"), "fusion=2",
                    f"no layer {conv!r}", f"{conv}.t1", "Fusion replaces each fused layer by its tiles",
                    "fusion='off'")
