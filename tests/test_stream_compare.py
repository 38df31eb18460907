"""The Stream comparison's inputs (experiments/stream_compare.py): Stream's saved answer parses and says what the
comparison needs, and Stream's four-core chip in accelsim's language loads and runs a small inference step with
layer fusion off and on, a fused step's tiles spreading over the four cores as Stream's do (no Stream in CI)."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.compiler.fusion import step_graph
from accelsim.schedule.traffic import placed_io

REPO = Path(__file__).resolve().parent.parent
HW_FILE = REPO / "experiments" / "hw" / "stream_tpu_like_quad_core.yaml"


def _compare_module():
    """experiments/stream_compare.py, loaded once (its dataclasses need their module in sys.modules)."""
    if "stream_compare" not in sys.modules:
        spec = importlib.util.spec_from_file_location("stream_compare", REPO / "experiments" / "stream_compare.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["stream_compare"] = module
        spec.loader.exec_module(module)
    return sys.modules["stream_compare"]


def _conv_chain(channels: int = 8, size: int = 16) -> A.Graph:
    """conv -> relu -> conv -> relu: a chain fusion tiles along H, small enough to compile in well under a second."""
    g = A.Graph("conv_chain", dtype="float32")
    x = g.input("x", (1, channels, size, size))
    h = F.relu(F.conv2d(x, g.param("w1", (channels, channels, 3, 3)), padding=1))
    g.output("y", F.relu(F.conv2d(h, g.param("w2", (channels, channels, 3, 3)), padding=1)))
    return g


def test_the_saved_stream_answer_has_both_modes_and_their_splits():
    compare = _compare_module()
    data = compare.load_reference()
    assert data["stream_dse_version"] and data["script"] == "experiments/stream_reference.py"
    assert set(data["modes"]) == {"layer", "fused"}
    layer, fused = data["modes"]["layer"], data["modes"]["fused"]
    assert len(layer["groups"]) > len(fused["groups"]) > 1  # one group per layer against fused groups
    for result in (layer, fused):
        figures = compare.stream_figures(result)
        assert figures.energy_pj == pytest.approx(result["energy_pj"], rel=1e-9)
        assert 0 < figures.off_chip_pj < figures.energy_pj


def test_a_broken_stream_answer_is_refused_naming_the_key(tmp_path):
    compare = _compare_module()
    path = tmp_path / "stream.json"
    path.write_text(json.dumps({"modes": {"layer": {"cycles": float("nan"), "energy_pj": 1.0}}}))
    with pytest.raises(compare.StreamReferenceError, match=r"modes\.layer\.cycles is nan; expected a positive"):
        compare.load_reference(path)
    with pytest.raises(compare.StreamReferenceError, match="no saved Stream answer"):
        compare.load_reference(tmp_path / "missing.json")


def test_the_chip_has_four_cores_that_are_not_a_gang():
    hw = A.load_hw(HW_FILE)
    core = next(u for u in hw.chips[0].units if u.name == "core")
    assert (core.count, core.gang, core.array.rows, core.array.cols) == (4, False, 32, 32)


def test_fusion_off_runs_each_layer_on_one_core_and_fused_tiles_spread_over_the_cores():
    """On the file's chip as it is: its activations placement sends a layer's output through the DRAM, but a fused
    group's internal tiles stay in the SRAM (hw/placement.GROUP_INTERNAL), so spreading them shortens the step."""
    g, hw = _conv_chain(), A.load_hw(HW_FILE)
    plain = A.compile(g, hw, effort="fast")
    cores = lambda s: {t.instance for t in s.tasks if t.resource == "core"}  # noqa: E731
    assert len(cores(plain)) == 1  # a chain: each layer waits for the last, on one core at a time
    fused = A.compile(g, hw, fusion=4, effort="fast")
    assert len(cores(fused)) > 1  # the tiles of a layer are independent tasks
    assert fused.makespan_cycles < plain.makespan_cycles
    assert A.simulate(fused, graph=step_graph(g, fused)[0]).makespan_cycles == fused.makespan_cycles
    auto = A.compile(g, hw, fusion="auto", effort="fast")
    assert auto.makespan_cycles <= min(plain.makespan_cycles, fused.makespan_cycles)


def test_the_chip_moves_activations_and_weights_through_the_dram_at_32_bits():
    """Stream's tensors keep their ONNX type's width (float32: 4 bytes) on the int8 array; the placement says so."""
    g, hw = _conv_chain(), A.load_hw(HW_FILE)
    s = A.compile(g, hw, effort="fast")
    outputs = {x.task: x for x in s.tensors if x.task >= 0}
    convs = [t for t in s.tasks if t.kind == "node" and t.op == "conv2d"]
    assert convs and all(t.out_bytes == 4 * 8 * 16 * 16 and outputs[t.id].memory == "dram" for t in convs)
    weights = [x for x in s.tensors if x.task < 0 and g.nodes[x.node].op == "param"]
    assert weights and all(x.memory == "dram" and x.size_bytes == 4 * 8 * 8 * 3 * 3 for x in weights)
    assert hw.elem_bytes("float32") == 1  # the arithmetic stays int8


def test_both_comparisons_read_one_resnet18():
    compare = _compare_module()
    assert compare.ONNX_FILE == REPO / "tests" / "data" / "zigzag_resnet18.onnx"  # zigzag_compare's too
    assert compare.ONNX_FILE.is_file()


def test_a_fused_groups_tiles_read_their_bands_of_its_input_from_the_dram_not_all_of_it():
    """The group's input, an activation, lives in the DRAM on the file's chip; each tile's slice reads its band of
    rows (with the halo) there, so 4 tiles read the input about once (28 of 16 rows), not 4 times as when a task
    read its inputs whole."""
    g = A.Graph("added_chain", dtype="float32")
    x = g.input("x", (1, 8, 16, 16))
    h = F.relu(F.conv2d(F.add(g.input("r", (1, 8, 16, 16)), x), g.param("w1", (8, 8, 3, 3)), padding=1))
    g.output("y", F.relu(F.conv2d(h, g.param("w2", (8, 8, 3, 3)), padding=1)))
    hw = A.load_hw(HW_FILE)
    s = A.compile(g, hw, fusion=4, effort="fast")
    step = step_graph(g, s)[0]
    add = next(t for t in s.tasks if t.op == "add")
    cuts = [t for t in s.tasks if t.op == "slice" and add.id in t.deps]
    rows = [step.nodes[t.node].attrs["stops"][2] - step.nodes[t.node].attrs["starts"][2] for t in cuts]
    assert len(cuts) == 4 and sum(rows) < 2 * 16
    inputs, _ = placed_io(s, hw)
    assert [inputs[t.id] for t in cuts] == [[("dram", add.out_bytes * r // 16)] for r in rows]
    assert A.simulate(s, graph=step).makespan_cycles == s.makespan_cycles


def test_auto_fuses_a_chain_whose_tiles_and_staged_weights_stay_in_the_sram_though_activations_go_to_the_dram():
    """A fused group's intermediates and staged weights are placed on chip whatever the activations placement says
    (hw/placement.GROUP_INTERNAL), so fusion's estimate charges them no DRAM round trip on the file's chip. It did
    (it took the on-chip room to be where the unfused step put activations: none here), estimated this chain
    slower fused at every tile count, and `auto` kept the unfused step, almost twice as long as the fused one."""
    from accelsim.compiler.fusion import chain_choices

    g, hw = _conv_chain(channels=16, size=8), A.load_hw(HW_FILE)
    plain = A.compile(g, hw, effort="fast")
    (choice,) = chain_choices(g, hw, plain.options, plain)
    assert choice.tiles is not None and dict(choice.fused_cycles)[choice.tiles] < choice.unfused_cycles
    auto = A.compile(g, hw, fusion="auto", effort="fast")
    assert auto.options.fusion == choice.tiles and auto.makespan_cycles < plain.makespan_cycles
