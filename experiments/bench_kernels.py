"""GFLOP/s of the numba CPU matmul and conv2d kernels against numpy and PyTorch CPU, float32.

Matmul: square n x n for n in 256, 512, 1024, 2048, against numpy's BLAS (a @ b) and torch.matmul.
Conv2d: the four superres layers at batch 8 on 64x64 images, against numpy's reference
(OPS["conv2d"].ref: im2col + BLAS) and torch.nn.functional.conv2d. Every case is warmed up,
then timed --repeat times in a row (see _medians), and the table shows the medians, with ratios
numba/numpy and numba/torch (above 1: numba is faster). Each library uses its default
thread count. Machines shared with other work give noisy numbers: the load average is printed.

OpenBLAS (numpy's BLAS) picks its kernels by CPU; on some processors this workplace sets
OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE), which can select a slower kernel. This benchmark leaves
the environment as it is and prints both variables: to compare against the BLAS a user would
normally get, run it with both unset (e.g. `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...`).

Check: the wall time of `accelsim check` on the superres training step (CHECK_ARGS) in a fresh
subprocess, so it includes interpreter start, imports and compiling the schedule, and the
check's own time as the CLI prints it. Warm: numba's on-disk cache (cache=True kernels) is
filled by one untimed run first, then the median of --repeat runs. Cold (--check-cold, a minute or
more): one run with NUMBA_CACHE_DIR pointed at a new empty directory, so numba compiles every
kernel it calls from scratch and leaves the project's own cache untouched; the number of cache
index files it wrote there shows that it did.

Run: python experiments/bench_kernels.py [--repeat 7] [--check-cold] [--no-check | --check-only]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import chain
from pathlib import Path
from typing import Callable, Iterator

import numba
import numpy as np
import torch
import torch.nn.functional as F

from accelsim.kernels import get_kernel
from accelsim.ops import OPS

MATMUL_SIZES = (256, 512, 1024, 2048)
# name, in channels, out channels, kernel, padding: the superres model's convolutions
SUPERRES_LAYERS = (("conv1", 1, 64, 5, 2), ("conv2", 64, 64, 3, 1), ("conv3", 64, 32, 3, 1), ("conv4", 32, 9, 3, 1))
BATCH, IMAGE = 8, 64
SETTLE_S = 0.5  # pause before each contender's runs (see _medians)
ROOT = Path(__file__).resolve().parents[1]
CHECK_ARGS = ("check", "--hw", "hwconfigs/bespoke_superres.yaml", "--model", "superres")
CHECK_LINE = re.compile(r"check passed in ([0-9.]+) s")  # printed by accelsim.cli.sched_cmds._check


def _medians(contenders: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median seconds of each callable: one warm-up call, then `repeat` timed calls back to back.

    Not interleaved: OpenMP (numba, torch) and OpenBLAS keep their idle worker threads spinning
    for a while after a call (Intel OpenMP 200 ms by default), so a run that starts right after
    another library's would time the fight for the 2 cores, not the kernel. A pause before each
    contender lets those threads go to sleep.
    """
    medians = {}
    for name, fn in contenders.items():
        time.sleep(SETTLE_S)
        fn()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        medians[name] = statistics.median(times)
    return medians


def _row(label: str, gflop: float, secs: dict[str, float]) -> str:
    rate = {name: gflop / s for name, s in secs.items()}
    return (f"{label:24s} {rate['numba']:9.1f} {rate['numpy']:9.1f} {rate['torch']:9.1f} "
            f"{secs['numpy'] / secs['numba']:12.2f} {secs['torch'] / secs['numba']:12.2f}")


def bench_matmul(repeat: int, rng: np.random.Generator) -> Iterator[str]:
    matmul = get_kernel("matmul", "numba")
    for n in MATMUL_SIZES:
        a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        secs = _medians({"numba": lambda: matmul(a, b), "numpy": lambda: a @ b,
                         "torch": lambda: torch.matmul(ta, tb)}, repeat)
        yield _row(f"matmul {n}x{n}x{n}", 2 * n**3 / 1e9, secs)


def bench_conv(repeat: int, rng: np.random.Generator) -> Iterator[str]:
    conv = get_kernel("conv2d", "numba")
    ref = OPS["conv2d"].ref
    for name, c_in, c_out, k, pad in SUPERRES_LAYERS:
        x = rng.standard_normal((BATCH, c_in, IMAGE, IMAGE), dtype=np.float32)
        w = rng.standard_normal((c_out, c_in, k, k), dtype=np.float32)
        attrs = {"stride": (1, 1), "padding": (pad, pad), "dilation": (1, 1), "groups": 1}
        tx, tw = torch.from_numpy(x), torch.from_numpy(w)
        secs = _medians({"numba": lambda: conv(x, w, **attrs), "numpy": lambda: ref(x, w, **attrs),
                         "torch": lambda: F.conv2d(tx, tw, padding=pad)}, repeat)
        gflop = 2 * BATCH * c_out * IMAGE * IMAGE * c_in * k * k / 1e9
        yield _row(f"{name} {c_in}->{c_out} {k}x{k}", gflop, secs)


def _time_check(env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds of `python -m accelsim` CHECK_ARGS in a subprocess, the check's own seconds)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "accelsim", *CHECK_ARGS], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall_s = time.perf_counter() - start
    found = CHECK_LINE.search(proc.stdout)
    if proc.returncode != 0 or found is None:
        why = f"exit {proc.returncode}" if proc.returncode else f"no line matching {CHECK_LINE.pattern!r}"
        raise RuntimeError(f"accelsim {' '.join(CHECK_ARGS)}: {why}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return wall_s, float(found.group(1))


def _check_row(label: str, wall_s: float, check_s: float) -> str:
    return f"{label:24s} {wall_s:9.2f} {check_s:9.2f}"


def bench_check(repeat: int, cold: bool) -> Iterator[str]:
    """Rows of `accelsim check` seconds: warm (median of `repeat` after one untimed run), then cold."""
    time.sleep(SETTLE_S)
    env = dict(os.environ)
    _time_check(env)  # fills numba's cache if this source tree has not yet
    runs = [_time_check(env) for _ in range(repeat)]
    yield _check_row("check superres warm", statistics.median(r[0] for r in runs),
                     statistics.median(r[1] for r in runs))
    if cold:
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache_dir:
            env["NUMBA_CACHE_DIR"] = cache_dir
            env.pop("NUMBA_CACHE_LOCATOR_CLASSES", None)  # a locator list set there may bypass NUMBA_CACHE_DIR
            wall_s, check_s = _time_check(env)
            written = sum(1 for _ in Path(cache_dir).rglob("*.nbi"))
        yield _check_row("check superres cold", wall_s, check_s) + f"   (1 run; {written} numba functions compiled)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--check-cold", action="store_true", help="also time one check with an empty numba cache")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--no-check", action="store_true", help="skip timing `accelsim check`")
    group.add_argument("--check-only", action="store_true", help="time `accelsim check` only, no kernels")
    args = parser.parse_args()
    if args.no_check and args.check_cold:
        parser.error("--check-cold times a check: drop --no-check")
    rng = np.random.default_rng(0)
    env = ", ".join(f"{v}={os.environ.get(v, '(unset)')}" for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"))
    print(f"float32, medians of {args.repeat} runs; threads: numba {numba.get_num_threads()}, "
          f"torch {torch.get_num_threads()}; {env}")
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    if not args.check_only:
        header = f"{'case':24s} {'numba':>9s} {'numpy':>9s} {'torch':>9s} {'numba/numpy':>12s} {'numba/torch':>12s}"
        print(header + "\n" + " " * 25 + "GFLOP/s " + "-" * 20)
        for line in chain(bench_matmul(args.repeat, rng), bench_conv(args.repeat, rng)):
            print(line, flush=True)
    if not args.no_check:
        print(f"\n{'case':24s} {'wall':>9s} {'check':>9s}\n" + " " * 25 + "seconds " + "-" * 11
              + f"   accelsim {' '.join(CHECK_ARGS)}")
        for line in bench_check(args.repeat, args.check_cold):
            print(line, flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
