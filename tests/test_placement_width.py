"""A placement's storage width per output class (hw/placement.py `bytes_per_element`): the class's tensors are
stored, written, read and charged at that width, the arithmetic is not, and a bad width is refused."""
from __future__ import annotations

import copy
import math

import pytest
import yaml

import accelsim as A
from accelsim.compiler.planning.prefetch import output_classes
from accelsim.hw.load import bundled_path
from accelsim.passes import inference_graph
from accelsim.schedule.levels import aligned

DRAM = "weight_dram"
"""tpu_v1_like's DDR3 (the machine stores every tensor in 1 byte: int8)."""


def tpu_with(extra: dict) -> A.HwSpec:
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["chips"][0]["placement"].update(copy.deepcopy(extra))
    return A.load_hw(d)


def graph():
    return inference_graph(A.models.build("mlp", batch=8, sizes=(64, 128, 32)))


@pytest.fixture(scope="module")
def runs():
    g = graph()
    out = {}
    for width in (None, 4):
        acts = {"memory": DRAM} if width is None else {"memory": DRAM, "bytes_per_element": width}
        hw = tpu_with({"activations": acts})
        s = A.compile(g, hw, effort="fast")
        out[width] = (hw, s, A.simulate(s, hw, graph=g))
    return g, out


def activation_tasks(g, s) -> list:
    """Node tasks of the activations class (the model's output too: no step_results placement claims it)."""
    classes = output_classes(g)
    return [t for t in s.tasks if t.kind == "node" and classes.get(t.node) == "activations"]


def dram_bytes(res) -> float:
    return sum(i.quantity for i in res.energy.items if i.name == f"chip0:{DRAM}" and i.kind.startswith("memory_"))


def test_activations_are_stored_at_their_width_and_nothing_else_is(runs):
    g, r = runs
    narrow, wide = r[None][1], r[4][1]
    acts = activation_tasks(g, wide)
    assert acts
    for t in acts:
        assert t.out_bytes == 4 * math.prod(g.nodes[t.node].shape)
    sizes = {x.task: x.size_bytes for x in wide.tensors if x.task >= 0}
    assert all(sizes[t.id] == aligned(t.out_bytes) for t in acts)
    key = lambda t: (t.kind, t.node, t.microbatch, t.part)  # noqa: E731
    scaled = {key(t) for t in acts}
    assert {key(t): t.out_bytes for t in wide.tasks if key(t) not in scaled} == {
        key(t): t.out_bytes for t in narrow.tasks if key(t) not in scaled}
    assert {t.id: t.out_bytes for t in activation_tasks(g, narrow)} == {
        t.id: math.prod(g.nodes[t.node].shape) for t in activation_tasks(g, narrow)}


def test_the_width_moves_bytes_time_and_dram_energy_but_not_the_arithmetic(runs):
    _, r = runs
    (_, s1, r1), (_, s4, r4) = r[None], r[4]
    assert [(t.flops, t.bytes_moved) for t in s1.tasks] == [(t.flops, t.bytes_moved) for t in s4.tasks]
    assert r4.energy.kind_pj("arithmetic") == r1.energy.kind_pj("arithmetic")
    # every activation is written to and read back from DDR3: four times the bytes of the 1-byte run's
    assert dram_bytes(r4) > dram_bytes(r1)
    assert r4.energy.off_chip_pj > r1.energy.off_chip_pj
    assert r4.makespan_cycles > r1.makespan_cycles


def test_check_computes_the_same_numbers_at_a_narrower_width():
    """A width below numpy's (1 byte on a machine that stores fp32 in 4) still leaves room for the values."""
    g = graph()
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["bytes_per_element"] = {"float32": 4, "float64": 4}
    d["chips"][0]["placement"]["activations"] = {"memory": DRAM, "bytes_per_element": 1}
    hw = A.load_hw(d)
    s = A.compile(g, hw, effort="fast")
    assert {t.out_bytes for t in activation_tasks(g, s)} == {math.prod(g.nodes[t.node].shape) for t in activation_tasks(g, s)}
    assert A.check(s, backend="numpy", graph=g, hw=hw).passed


def test_a_placement_without_a_width_dumps_and_hashes_as_before():
    plain, given = tpu_with({"activations": {"memory": DRAM}}), tpu_with({"activations": {"memory": DRAM,
                                                                                       "bytes_per_element": 4}})
    assert "bytes_per_element" not in plain.model_dump()["chips"][0]["placement"]["activations"]
    assert given.model_dump()["chips"][0]["placement"]["activations"]["bytes_per_element"] == 4
    assert plain.model_dump() != given.model_dump()


@pytest.mark.parametrize("extra, expected", [
    ({"activations": {"memory": DRAM, "bytes_per_element": 0}}, "activations.bytes_per_element: expected a whole "
                                                                "number from 1 to 16 bytes (got 0)"),
    ({"activations": {"memory": DRAM, "bytes_per_element": 32}}, "from 1 to 16 bytes (got 32)"),
    ({"activations": {"memory": DRAM, "bytes_per_element": 2.5}}, "activations.bytes_per_element"),
    ({"gradients": {"memory": DRAM, "bytes_per_element": "four"}}, "gradients.bytes_per_element"),
])
def test_a_bad_width_is_refused_in_one_paragraph_naming_chip_class_and_value(extra, expected):
    with pytest.raises(A.AccelsimError) as e:
        tpu_with(extra)
    message = str(e.value)
    assert expected in message and "chips[0].placement" in message
    assert "Traceback" not in message


def test_parameters_at_their_width_are_placed_and_streamed_at_it():
    """tpu_v1_like streams its weights from DDR3: at 4 bytes a weight, the leaves, the prefetched tiles and
    the DDR3 bytes grow; the arithmetic does not. (The chip's stream keeps matrix operands as whole 256x256
    tiles, `tile_shape`, tested in test_tpu_weight_tiles.py; left out here so the leaves' sizes are the width's
    alone, and the tiles' size at a width is checked on its own below.)"""
    g = graph()
    runs = {}
    for width in (None, 4):
        d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
        stream = d["chips"][0]["placement"]["parameters"]["stream"]
        assert stream.pop("tile_shape") == [256, 256]
        if width is not None:
            d["chips"][0]["placement"]["parameters"]["bytes_per_element"] = width
        hw = A.load_hw(d)
        s = A.compile(g, hw, effort="fast")
        runs[width] = (s, A.simulate(s, hw, graph=g))
    (s1, r1), (s4, r4) = runs[None], runs[4]
    params = {p.id for p in g.params}
    leaves = lambda s: {x.node: x.size_bytes for x in s.tensors if x.task < 0 and x.node in params}  # noqa: E731
    assert leaves(s4) == {i: aligned(4 * math.prod(g.nodes[i].shape)) for i in params}
    assert leaves(s1) == {i: aligned(math.prod(g.nodes[i].shape)) for i in params}
    moved = lambda s: sum(t.bytes_moved for t in s.tasks if t.kind == "prefetch")  # noqa: E731
    assert moved(s4) > moved(s1)
    assert [t.flops for t in s4.tasks if t.kind == "node"] == [t.flops for t in s1.tasks if t.kind == "node"]
    assert dram_bytes(r4) > dram_bytes(r1) and r4.makespan_cycles > r1.makespan_cycles
    tiled = A.load_hw(yaml.safe_load(bundled_path("tpu_v1_like").read_text())).chips[0].placement.parameters.stream
    assert tiled.stored_bytes((600, 600), 4) == 4 * tiled.stored_bytes((600, 600), 1) == 4 * 768 * 768


def test_a_leaf_width_under_a_step_precision_is_refused():
    d = yaml.safe_load(bundled_path("a100_like").read_text())
    chip = d["chips"][0]
    backing = [m["name"] for m in chip["memories"]][-1]
    chip["placement"] = {"parameters": {"memory": backing, "bytes_per_element": 4}}
    g = A.training_graph(A.models.build("mlp", batch=8, sizes=(16, 16, 8)), optimizer="sgd", lr=0.01)
    with pytest.raises(A.AccelsimError, match=r"parameters.bytes_per_element 4 on chip\(s\) .* under step "
                                              r"precision bf16"):
        A.compile(g, A.load_hw(d), precision="bf16", effort="fast")


def test_zero_with_a_gradient_width_is_refused():
    d = yaml.safe_load(bundled_path("tpu_v1_like").read_text())
    d["chips"][0]["count"] = 2
    d["interconnect"] = {"topology": "ring", "bandwidth_bytes_per_cycle": 8, "link_latency_cycles": 10}
    d["chips"][0]["placement"]["gradients"] = {"memory": DRAM, "bytes_per_element": 4}
    g = A.training_graph(A.models.build("mlp", batch=8, sizes=(16, 16, 8)), optimizer="sgd", lr=0.01)
    with pytest.raises(A.AccelsimError, match=r"ZeRO stage 1 .*bytes_per_element \(gradients 4 on tpu"):
        A.compile(g, A.load_hw(d), data_parallel=2, zero=1, effort="fast")
