"""numba CPU kernel of conv_transpose2d: conv2d_grad_input's kernel (ops/conv_transpose.py says why)."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.kernels.cpu.conv import conv2d_grad_input
from accelsim.kernels.registry import kernel


@kernel("conv_transpose2d", "numba")
def conv_transpose2d(x: np.ndarray, w: np.ndarray, output_shape: Any, **geometry: Any) -> np.ndarray:
    return conv2d_grad_input(x, w, input_shape=output_shape, **geometry)
