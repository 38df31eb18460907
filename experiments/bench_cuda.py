"""GFLOP/s of accelsim's numba-CUDA matmul and conv2d kernels on a real GPU, against PyTorch (cuBLAS/cuDNN).

Two timings per case, float32:
- device: operands already on the GPU, only the kernel launch (what the kernel itself is worth);
- host:   the registered kernel as `accelsim check` calls it (host arrays in, copies to the device,
          kernel, copy back), against torch doing the same round trip.
PyTorch runs with TF32 off (strict float32, as the numba kernels compute), so the ratio compares
like with like. Every case is warmed up, then timed --repeat times; the table shows medians and
ratios numba/torch (below 1: numba is slower). The numba kernels are a plain shared-memory tiled
GEMM (one output element per thread, no tensor cores, no register blocking), so a large gap to
cuBLAS is expected; the kernels exist to compute the scheduled program's real numbers, not to be
a BLAS. Needs a CUDA GPU (numba.cuda.is_available()) and PyTorch with CUDA; exits 1 without them.

Run: python experiments/bench_cuda.py [--repeat 9]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable

import numpy as np

MATMUL_SIZES = (256, 512, 1024, 2048, 4096)
# the four super-resolution layers (seed 001) at batch 8 on 64x64 images: (C, O, K, pad)
SUPERRES_CONVS = ((1, 64, 5, 2), (64, 64, 3, 1), (64, 32, 3, 1), (32, 9, 3, 1))
BATCH, SIZE = 8, 64


def _median_s(fn: Callable[[], object], sync: Callable[[], None], repeat: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    from numba import cuda
    if not cuda.is_available():
        print("bench_cuda: no CUDA GPU here (numba.cuda.is_available() is False)", file=sys.stderr)
        return 1
    try:
        import torch
    except ImportError:
        print("bench_cuda: PyTorch is the baseline and is not installed", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("bench_cuda: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from accelsim.kernels.cuda import conv as cconv
    from accelsim.kernels.cuda import matmul as cmm

    sync_nb, sync_t = cuda.synchronize, torch.cuda.synchronize
    rng = np.random.default_rng(0)
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__} (TF32 off); median of {args.repeat}")
    print(f"{'case':34s} {'numba dev':>10s} {'torch dev':>10s} {'ratio':>6s} {'numba host':>11s} "
          f"{'torch host':>11s} {'ratio':>6s}   GFLOP/s")
    for n in MATMUL_SIZES:
        a, b = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
        flops = 2.0 * n ** 3
        da, db = cuda.to_device(a.reshape(1, n, n)), cuda.to_device(b.reshape(1, n, n))
        dout, geo = cuda.device_array((1, n, n), np.float32), cuda.to_device(np.zeros(1, np.int64))
        grid, block = cmm.gemm_launch(n, n, 1)
        ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        dev = _median_s(lambda: cmm._matmul[grid, block](da, db, dout, geo), sync_nb, args.repeat)
        tdev = _median_s(lambda: ta @ tb, sync_t, args.repeat)
        host = _median_s(lambda: cmm.matmul(a, b, False, False), sync_nb, args.repeat)
        thost = _median_s(lambda: (torch.from_numpy(a).cuda() @ torch.from_numpy(b).cuda()).cpu(), sync_t,
                          args.repeat)
        got = cmm.matmul(a, b, False, False)
        err = float(np.max(np.abs(got - (ta @ tb).cpu().numpy())) / np.max(np.abs(a @ b)))
        _row(f"matmul {n}x{n}x{n} (rel err {err:.1e})", flops, dev, tdev, host, thost)
    for c, o, k, pad in SUPERRES_CONVS:
        x = rng.standard_normal((BATCH, c, SIZE, SIZE), np.float32)
        w = rng.standard_normal((o, c, k, k), np.float32)
        flops = 2.0 * BATCH * o * SIZE * SIZE * c * k * k
        args_ = ((1, 1), (pad, pad), (1, 1), 1)
        dx, dw = cuda.to_device(x), cuda.to_device(w)
        dout = cuda.device_array((BATCH, o, SIZE, SIZE), np.float32)
        dgeo = cuda.to_device(np.array([1, 1, pad, pad, 1, 1, 1], np.int64))
        grid, block = cmm.gemm_launch(BATCH * SIZE * SIZE, o, 1)
        tx, tw = torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda()
        conv = torch.nn.functional.conv2d
        dev = _median_s(lambda: cconv._conv_fwd[grid, block](dx, dw, dout, dgeo), sync_nb, args.repeat)
        tdev = _median_s(lambda: conv(tx, tw, padding=pad), sync_t, args.repeat)
        host = _median_s(lambda: cconv.conv2d(x, w, *args_), sync_nb, args.repeat)
        thost = _median_s(lambda: conv(torch.from_numpy(x).cuda(), torch.from_numpy(w).cuda(), padding=pad).cpu(),
                          sync_t, args.repeat)
        got = cconv.conv2d(x, w, *args_)
        ref = conv(tx, tw, padding=pad).cpu().numpy()
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        _row(f"conv {c}->{o} k{k} b{BATCH} {SIZE}px (err {err:.0e})", flops, dev, tdev, host, thost)
    return 0


def _row(name: str, flops: float, dev: float, tdev: float, host: float, thost: float) -> None:
    g = [flops / t / 1e9 for t in (dev, tdev, host, thost)]
    print(f"{name:34s} {g[0]:10.0f} {g[1]:10.0f} {g[0] / g[1]:6.3f} {g[2]:11.0f} {g[3]:11.0f} {g[2] / g[3]:6.3f}",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
