"""Multi-phase ops (ops/registry.py Passes, cost/kernel_overheads.reread_bytes): batch norm reads its input once
per phase exactly when the input exceeds the capacity of the chip's `gpu_overheads.phase_memory` (the A100's
L2); layer norm's span is one row; chips without the key, and its hostile values."""
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import capable_units, node_cost
from accelsim.hw.gpu_overheads import GpuOverheads
from accelsim.hw.overrides import parse_assignments

X = (2, 3, 4, 4)  # 96 elements: 192 bytes at the a100 configs' 2 bytes per element
C = X[1]
ELEM = 2


def _a100(*sets: str) -> A.HwSpec:
    return A.load_hw("a100_like", overrides=parse_assignments(list(sets)))


def _l2_holding(nbytes: int) -> A.HwSpec:
    """a100_like with an L2 (memories[1]) of `nbytes`."""
    hw = _a100(f"chips.0.memories.1.capacity_bytes={nbytes}")
    assert hw.chips[0].memories[1].name == "l2" and hw.chips[0].gpu_overheads.phase_memory == "l2"
    return hw


def _training_bn() -> tuple[A.Graph, dict[str, A.Graph]]:
    """A training graph of sum(batch_norm(x)) with its batch_norm, _grad_input and _grad_gamma nodes by op."""
    g = A.Graph("bn", dtype="float32")
    x = g.param("x", X)  # a parameter, so the backward pass needs d/dx
    y = F.batch_norm(x, g.param("gamma", (C,)), g.param("beta", (C,)))
    loss = F.sum(y * y, (0, 1, 2, 3))
    g.output("loss", loss)
    g.set_loss(loss)
    train = A.training_graph(g, optimizer="sgd", lr=0.01)
    return train, {n.op: n for n in train.nodes if n.op.startswith("batch_norm")}


def _cost(hw: A.HwSpec, graph: A.Graph, node) -> "A.NodeCost":
    unit = next(u for u in capable_units(hw, graph, node) if u.name == "cuda_cores")
    return node_cost(hw, graph, node, unit)


def test_batch_norm_reads_its_input_twice_exactly_when_it_exceeds_the_l2():
    """x is 192 bytes: an L2 of 192 holds it between statistics and normalize (x, gamma and beta read once:
    (96 + 3 + 3) x 2 = 204 bytes); an L2 of 191 does not, and the normalize pass reads x's 192 bytes again."""
    graph, nodes = _training_bn()
    fits, spills = _cost(_l2_holding(192), graph, nodes["batch_norm"]), _cost(_l2_holding(191), graph, nodes["batch_norm"])
    assert fits.bytes_read == (96 + 2 * C) * ELEM == 204
    assert spills.bytes_read == 204 + 192
    assert spills.bytes_written == fits.bytes_written == 192
    assert spills.energy_pj > fits.energy_pj


def test_batch_norm_gradient_rereads_dy_and_x_and_its_gamma_gradient_stays_one_pass():
    """d/dx needs the sums of dy and dy * xhat before any dx: dy and x (2 x 192 bytes) are its span and its
    re-read. d/dgamma's output is the reduction itself: one pass whatever the L2."""
    graph, nodes = _training_bn()
    fits, spills = _l2_holding(384), _l2_holding(383)
    assert _cost(fits, graph, nodes["batch_norm_grad_input"]).bytes_read == (2 * 96 + C) * ELEM
    assert _cost(spills, graph, nodes["batch_norm_grad_input"]).bytes_read == (2 * 96 + C) * ELEM + 2 * 192
    tiny = _l2_holding(1)
    assert _cost(tiny, graph, nodes["batch_norm_grad_gamma"]).bytes_read == 2 * 96 * ELEM


def test_the_rereads_stream_from_hbm_at_its_achievable_rate():
    """A batch norm over 32 MiB of x (2^24 elements) on the shipped 40 MiB L2 is one pass; over 64 MiB it is two:
    the memory cycles grow by x's bytes at 0.88 of 2,039 GB/s."""
    def memory_cycles(shape):
        g = A.Graph("big", dtype="float32")
        y = F.batch_norm(g.input("x", shape), g.param("gamma", (64,)), g.param("beta", (64,)))
        g.output("y", y)
        return _cost(_a100(), g, y.node).memory_cycles

    hw = _a100()
    rate = hw.chips[0].memories[0].bytes_per_cycle(hw.clock_hz) * hw.chips[0].gpu_overheads.hbm_fraction
    small, large = memory_cycles((16, 64, 128, 128)), memory_cycles((32, 64, 128, 128))
    assert small == pytest.approx(2 * 2**25 / rate, abs=1)  # x read once, y written once
    assert large == pytest.approx((3 * 2**26) / rate, abs=1)  # x read twice, y written once


def test_layer_norm_keeps_one_pass_when_its_tensor_exceeds_the_l2_but_a_row_fits():
    """Layer norm's statistics are per row: a 192-byte tensor of 8-element rows on a 32-byte L2 is one pass;
    an L2 smaller than one row (8 x 2 bytes) would re-read it."""
    g = A.Graph("ln", dtype="float32")
    y = F.layer_norm(g.input("x", (12, 8)), g.param("gamma", (8,)), g.param("beta", (8,)))
    g.output("y", y)
    once = (96 + 16) * ELEM
    assert _cost(_l2_holding(32), g, y.node).bytes_read == once
    assert _cost(_l2_holding(15), g, y.node).bytes_read == once + 96 * ELEM


@pytest.mark.parametrize("hw_name", ["groq_like", "tpu_v1_like", "multicore_cpu"])
def test_a_chip_without_a_phase_memory_charges_one_pass_over_any_input(hw_name):
    """No chip but the a100s declares a phase memory: batch norm reads x, gamma and beta once, however large x
    (here 2^26 elements, larger than any shipped SRAM), at the chip's bytes per element."""
    hw = A.load_hw(hw_name)
    g = A.Graph("big", dtype="float32")
    y = F.batch_norm(g.input("x", (64, 64, 128, 128)), g.param("gamma", (64,)), g.param("beta", (64,)))
    g.output("y", y)
    elem = hw.elem_bytes("float32")
    for unit in capable_units(hw, g, y.node):
        assert node_cost(hw, g, y.node, unit).bytes_read == (2**26 + 128) * elem, unit.name


def test_a_gpu_overheads_key_without_a_phase_memory_dumps_as_before():
    """The field is left out of the dump when absent, so the hardware hashes of schedules compiled before hold."""
    overheads = GpuOverheads(launch_latency_us=10, tail_latency_us=1, hbm_fraction=0.88)
    assert overheads.phase_memory is None and "phase_memory" not in overheads.model_dump()
    assert A.load_hw("a100_like").model_dump()["chips"][0]["gpu_overheads"]["phase_memory"] == "l2"


@pytest.mark.parametrize("value, expected", [
    ("hbm", "memory 'hbm' of chip 'a100' is of kind hbm, off chip"),
    ("l3", "chip 'a100' has no memory 'l3' (memories: hbm, l2)"),
    ("5", "expected a name"),
    ("'a b'", "a name must be a plain identifier"),
    ("[l2]", "expected a name"),
])
def test_a_hostile_phase_memory_is_refused_naming_the_key_and_value(value, expected):
    with pytest.raises(A.HwConfigError) as err:
        _a100(f"chips.0.gpu_overheads.phase_memory={value}")
    assert "gpu_overheads.phase_memory" in str(err.value) and expected in str(err.value)
