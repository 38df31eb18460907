"""numba CPU kernels (@njit): importing this package registers every one, each wrapped so small calls
stay on one thread (threads.py)."""
from accelsim.kernels.cpu import conv, elementwise, matmul, nn, norm, pool, reduce, shape  # noqa: F401
from accelsim.kernels.cpu.threads import sized
from accelsim.kernels.registry import KERNELS

KERNELS["numba"].update({op: sized(fn) for op, fn in KERNELS["numba"].items()})
