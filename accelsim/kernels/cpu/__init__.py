"""numba CPU kernels (@njit): importing this package registers every one, each wrapped so small calls
stay on one thread (threads.py)."""
from accelsim.kernels.cpu import conv, elementwise, matmul, nn, norm, pool, reduce, shape  # noqa: F401
from accelsim.kernels.cpu import fused  # noqa: F401  (fused_elementwise)
from accelsim.kernels.cpu import epilogue  # noqa: F401  (matmul_epilogue, conv2d_epilogue)
from accelsim.kernels.cpu import parallel  # noqa: F401  (tp_allreduce)
from accelsim.kernels.cpu import select  # noqa: F401  (comparisons, where)
from accelsim.kernels.cpu import conv_transpose  # noqa: F401  (conv_transpose2d)
from accelsim.kernels.cpu import vocab  # noqa: F401  (vocabulary-parallel ops)
from accelsim.kernels.cpu import fused_optimizer  # noqa: F401  (fused_adam, fused_sgd)
from accelsim.kernels.cpu.threads import sized
from accelsim.kernels.registry import KERNELS

KERNELS["numba"].update({op: sized(fn) for op, fn in KERNELS["numba"].items()})
