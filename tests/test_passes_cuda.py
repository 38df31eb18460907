"""Optimized graphs on the CUDA kernels (numba's simulator, switched on by tests/conftest.py): the fused
ops the passes introduce run through the scheduled step's memory like every other op, and the result
matches the numpy reference. One small model each way, at TINY sizes (every simulated element costs
about a millisecond); experiments/check_matrix.py --backend cuda covers the rest on a GPU."""
import pytest

import accelsim as A
from accelsim.execute.check import check
from accelsim.models.sizes import TINY
from accelsim.passes import inference_graph

FUSING = ["fuse_epilogue", "fuse_elementwise"]


@pytest.mark.parametrize("model,training", [("mlp", False), ("transformer_block", True)])
def test_fused_graph_checks_on_cuda_kernels_under_the_simulator(model, training):
    hw = A.load_hw("groq_like")
    fwd = A.models.build(model, **TINY[model])
    graph = A.training_graph(fwd, optimizer="momentum", lr=0.05) if training else inference_graph(fwd)
    optimized = A.optimize(graph, FUSING, hw=hw)
    fused = {n.op for n in optimized.nodes} & {"fused_elementwise", "matmul_epilogue", "conv2d_epilogue"}
    assert fused, f"nothing fused in {model}: the test would check nothing new"
    report = check(A.compile(optimized, hw, microbatches=2), "cuda", graph=optimized, hw=hw)
    assert report.backend == "cuda"
    assert report.passed, [e for e in report.entries if not e.passed]
