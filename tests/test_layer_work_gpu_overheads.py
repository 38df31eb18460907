"""Per-layer report on a GPU-like chip: a kernel's launch and tail are latency, not a wait for memory."""
import accelsim as A
from accelsim.cost.model import best_cost


def test_launch_bound_kernels_report_their_launch_as_latency_not_memory_stall():
    fwd = A.models.build("mlp", batch=4, sizes=(32, 16, 8))
    hw = A.load_hw("a100_like")
    report = A.layer_report(A.compile(fwd, hw), hw, fwd)
    matmul = next(n for n in fwd.nodes if n.op == "matmul")
    cost = best_cost(hw, fwd, matmul)
    assert cost.overhead_cycles > cost.compute_cycles  # tiny kernels: the launch is most of the time
    for row in report.layers:
        for node in row.nodes:
            w = node.work
            assert w.memory_stall_cycles == 0, (row.layer, node.op, w)
            assert w.latency_cycles >= cost.overhead_cycles
