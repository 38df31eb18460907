"""experiments/zigzag_compare.py against ZigZag's saved answer (tests/data/zigzag_tpu_like_resnet18.json, made by
experiments/zigzag_reference.py with zigzag-dse outside CI): ResNet-18 on ZigZag's tpu_like chip, per layer.
ZigZag itself is not needed here."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim.mapping.by_node import GivenMappings

pytest.importorskip("onnx")

REPO = Path(__file__).resolve().parent.parent
PATH = REPO / "experiments" / "zigzag_compare.py"


@pytest.fixture(scope="module")
def zz():
    spec = importlib.util.spec_from_file_location("zigzag_compare", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def setup(zz):
    return zz.load_reference(), A.load_hw(zz.HW_FILE), zz.resnet18_graph()


@pytest.fixture(scope="module")
def rows(zz, setup):
    reference, hw, graph = setup
    return zz.compare(hw, graph, reference)


@pytest.fixture(scope="module")
def constrained(zz, setup):
    """The mapper under ZigZag's mapping file's spatial constraints (rows <- C, cols <- K), the order searched."""
    reference, hw, graph = setup
    return zz.compare(hw, graph, reference, given={e.layer: e for e in zz.zigzag_spatial_entries(graph)})


def test_the_reference_is_zigzags_run_of_resnet18s_21_array_layers(zz, setup):
    reference, _, graph = setup
    assert reference["zigzag_version"] and "zigzag_reference.py" in reference["command"]
    names = [layer["name"] for layer in reference["layers"]]
    assert sorted(names) == sorted(zz.onnx_name(n) for n in zz.array_layers(graph))
    assert len(names) == 21
    assert zz.ONNX_FILE == REPO / "tests" / "data" / "zigzag_resnet18.onnx"  # stream_compare's too, shape-only
    total = sum(layer["energy_pj"] for layer in reference["layers"])
    assert total == pytest.approx(reference["total_energy_pj"], rel=1e-9)


def test_most_layers_are_within_20_percent_of_zigzag(zz, rows):
    """Issue 28 asks latency within 20% on 18 of 21 layers and whole-network energy within 25%, issue 31 latency
    and energy within 20% on 19 with the mapping accelsim chooses. Measured: latency (each layer run alone, its
    on-loading first) on 19 against ZigZag's total, the scheduled cost on 17 against ZigZag's latency without
    on- and off-loading; energy on 21; both on 19; whole network 0.92 (the experiment's docstring explains each
    layer outside)."""
    assert len(rows) == 21
    assert sum(zz.within(r.latency_ratio) for r in rows) >= 19
    assert sum(zz.within(r.overlapped_ratio) for r in rows) >= 17
    assert sum(zz.within(r.energy_ratio) for r in rows) == 21
    assert sum(zz.within(r.latency_ratio) and zz.within(r.energy_ratio) for r in rows) >= 19
    whole = sum(r.accelsim.energy_pj for r in rows) / sum(r.zigzag_energy_pj for r in rows)
    assert abs(whole - 1) <= 0.25


def test_the_layers_outside_are_the_ones_the_experiment_explains(zz, rows):
    """The first conv's mapping and the one downsample whose weight and output transfers ZigZag overlaps on its
    DRAM port. The strided 1x1 downsamples read a quarter of their input (ops/conv.py), as ZigZag fetches, so
    their traffic is ZigZag's."""
    outside = {r.name for r in rows if not (zz.within(r.latency_ratio) and zz.within(r.energy_ratio))}
    assert outside <= {"/conv1/Conv", "/layer3/layer3.0/downsample/downsample.0/Conv"}
    downsamples = [r for r in rows if "downsample" in r.name]
    assert len(downsamples) == 3 and all(zz.within(r.energy_ratio) for r in downsamples)


def test_the_onloading_of_the_compute_bound_convs_is_zigzags(zz, setup, rows):
    """The 3x3 convs' own mappings (ws, column folds outermost) re-read the whole input in every fold of K, so
    it is loaded before the first MAC, as ZigZag's SRAM holds it (its onloading_cycles: the input over the 8-byte
    DRAM port); accelsim also loads the first fold's 32 x 32 weights (128 cycles), which ZigZag overlaps. The
    scheduled cost leaves the on-loading out: a schedule overlaps it with the predecessors."""
    reference, _, _ = setup
    convs = [r for r in rows[1:] if "FY=3" in r.loops]
    assert len(convs) == 16
    for r in convs:
        ref = zz.reference_layer(reference, r.name)
        assert r.accelsim.resident.input_reused_by == "cols"
        assert r.accelsim.onload_cycles == ref["onloading_cycles"] + 32 * 32 // zz.DRAM_PORT_BYTES_PER_CYCLE
        assert r.accelsim.isolated_cycles >= r.accelsim.cycles
    layer2 = next(r for r in rows if r.name == "/layer2/layer2.0/conv1/Conv")
    assert layer2.accelsim.isolated_cycles == layer2.accelsim.cycles + layer2.accelsim.onload_cycles
    assert zz.within(layer2.latency_ratio) and not zz.within(layer2.accelsim.cycles / layer2.zigzag_cycles)


def test_the_first_convolution_is_zigzags_latency_only_under_zigzags_spatial_mapping(zz, rows, constrained):
    """The mapper's own im2col choice (rows <- C x FY x FX) runs ~10x faster than ZigZag's fixed rows <- C;
    constraining the mapper to ZigZag's spatial mapping (only rows and cols given) reproduces ZigZag's cycles."""
    own, forced = rows[0], constrained[0]
    assert own.name == forced.name == "/conv1/Conv"
    assert own.accelsim.mapping.rows == ("C", "FY", "FX")
    assert own.latency_ratio < 0.15
    assert forced.accelsim.mapping.rows == ("C",) and forced.accelsim.mapping.cols == ("K",)
    assert forced.accelsim.folds == 7 * 7 * 2  # FY x FX taps x two column folds of K=64, one row fold of C=3
    assert zz.within(forced.latency_ratio)
    assert zz.within(forced.energy_ratio)


def test_under_zigzags_spatial_constraints_19_of_21_layers_are_within_20_percent(zz, setup, rows, constrained):
    """Issue 31's 19 of 21: reached with ZigZag's own spatial mapping given to the mapper; the two layers left
    out are ZigZag's on-loading (layer2.0's first conv) and its DRAM port (layer3.0's downsample)."""
    _, hw, graph = setup
    entries = zz.zigzag_spatial_entries(graph)
    assert len(entries) == 21 and all(e.given() == ("rows", "cols") for e in entries)
    GivenMappings(graph, hw.chips, entries)  # a mapping file A.compile(..., mapping=entries) accepts
    assert all((r.accelsim.mapping.rows, r.accelsim.mapping.cols) in ((("C",), ("K",)), (("K",), ("N",)))
               for r in constrained)
    # only the first conv's cycles move: with C a multiple of 32, C x FY x FX on the rows folds as C with
    # the taps temporal
    assert [r.accelsim.cycles for r in constrained[1:]] == [r.accelsim.cycles for r in rows[1:]]
    counts = zz.Counts.of(constrained)
    assert (counts.layers, counts.energy) == (21, 21)
    assert counts.latency >= 19 and counts.both >= 19
    outside = {r.name for r in constrained if not (zz.within(r.latency_ratio) and zz.within(r.energy_ratio))}
    assert outside <= {"/layer2/layer2.0/conv1/Conv", "/layer3/layer3.0/downsample/downsample.0/Conv"}


def test_zigzags_downsample_latency_is_below_what_its_one_dram_port_can_move(zz, setup, rows):
    """ZigZag's DRAM has one 64-bit read-write port for every operand. The bytes ZigZag itself charges there
    for layer3.0's downsample need more cycles on that port than the latency ZigZag reports; accelsim's cycles
    never undercut that bound, so its 1.29 is ZigZag's overlap, not a port accelsim lacks."""
    reference, _, _ = setup
    downsamples = [r for r in rows if "downsample" in r.name]
    for r in downsamples:
        bound = zz.zigzag_dram_port_cycles(zz.reference_layer(reference, r.name))
        assert r.accelsim.cycles >= bound
    worst = next(r for r in downsamples if r.name.startswith("/layer3/"))
    bound = zz.zigzag_dram_port_cycles(zz.reference_layer(reference, worst.name))
    assert worst.zigzag_cycles < 0.8 * bound
    assert not zz.within(worst.latency_ratio)


def test_a_reference_of_another_network_is_refused_naming_the_layer(zz, setup, tmp_path):
    reference, hw, graph = setup
    bad = json.loads(json.dumps(reference))
    bad["layers"][1]["total_macs"] += 1
    with pytest.raises(zz.ZigZagReferenceError, match=bad["layers"][1]["name"]):
        zz.compare(hw, graph, bad)
