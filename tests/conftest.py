import os

# CUDA kernels run under numba's simulator unless a GPU run sets this to 0 first.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
