"""CUDA kernel of conv_transpose2d: conv2d_grad_input's implicit GEMM (ops/conv_transpose.py says why)."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.kernels.cuda.conv import _SIGNATURE, _conv_grad_input, conv2d_grad_input
from accelsim.kernels.cuda.launch import ptx_cases
from accelsim.kernels.registry import kernel

ptx_cases("conv_transpose2d", _conv_grad_input, _SIGNATURE, name="implicit_gemm_grad_input")


@kernel("conv_transpose2d", "cuda")
def conv_transpose2d(x: np.ndarray, w: np.ndarray, output_shape: Any, **geometry: Any) -> np.ndarray:
    return conv2d_grad_input(x, w, input_shape=output_shape, **geometry)
