"""CUDA kernels (numba-cuda) for every op; importing this package registers them.

Imported only when the cuda backend is asked for. Kernels run on a GPU, or in numba's simulator
when NUMBA_ENABLE_CUDASIM=1 was set before numba.cuda was first imported. Importing compiles and
launches nothing, so it works without a GPU either way (the PTX test relies on it).
"""
from accelsim.kernels.cuda import conv, elementwise, matmul, nn, norm, pool, reduce, shape  # noqa: F401
from accelsim.kernels.cuda import epilogue  # noqa: F401  (matmul_epilogue, conv2d_epilogue)
from accelsim.kernels.cuda import fused  # noqa: F401  (fused_elementwise)
from accelsim.kernels.cuda import parallel  # noqa: F401  (tp_allreduce)
from accelsim.kernels.cuda import select  # noqa: F401  (comparisons, where)
from accelsim.kernels.cuda import conv_transpose  # noqa: F401  (conv_transpose2d)
from accelsim.kernels.cuda import vocab  # noqa: F401  (vocabulary-parallel ops)
from accelsim.kernels.cuda import fused_optimizer  # noqa: F401  (fused_adam, fused_sgd)
