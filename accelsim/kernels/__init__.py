"""Kernels: numba CPU and numba-CUDA implementations of every op, checked against the numpy reference."""
from accelsim.kernels.registry import BACKENDS, KERNELS, KernelError, cuda_available, get_kernel, kernel, load_backend

__all__ = ["BACKENDS", "KERNELS", "KernelError", "cuda_available", "get_kernel", "kernel", "load_backend"]
