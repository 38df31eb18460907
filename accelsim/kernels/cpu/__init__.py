"""numba CPU kernels (@njit): importing this package registers every one."""
from accelsim.kernels.cpu import conv, elementwise, matmul, nn, norm, pool, reduce, shape  # noqa: F401
