"""CUDA kernel of tp_allreduce: the ranks' partial values summed in rank order on the device, one
accumulating launch per partial (on a real machine NCCL does this sum inside the collective; here it
checks the numbers), so the result rounds exactly as the reference's left-to-right sum does."""
from __future__ import annotations

import numpy as np
from numba import cuda

from accelsim.kernels.cuda.launch import launch_1d, ptx_cases, to_device, to_host
from accelsim.kernels.registry import kernel


@cuda.jit
def _accumulate(total, partial):
    i = cuda.grid(1)
    if i < total.size:
        total[i] += partial[i]


ptx_cases("tp_allreduce", _accumulate, "void({T}[::1], {T}[::1])")


@kernel("tp_allreduce", "cuda")
def tp_allreduce(*partials: np.ndarray) -> np.ndarray:
    first = np.asarray(partials[0])
    total = to_device(first.reshape(-1))
    for p in partials[1:]:
        launch_1d(_accumulate, first.size, total, to_device(np.asarray(p, dtype=first.dtype).reshape(-1)))
    return to_host(total, first.shape)
