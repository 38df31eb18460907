"""`accelsim check` over every zoo model and shipped hwconfig: one momentum-SGD training step with
micro-batches and replicas, executed through the schedule's memory and compared with numpy.

The numba matrix at `sizes.SMALL` runs in CI (tests/test_check.py). This script adds what the suite
cannot afford: the CUDA backend on every hwconfig and on resnet50, which take minutes in numba's
simulator and seconds on a GPU. "no unit" means the hardware cannot run some op of the model
(bespoke_superres has units for the super-resolution CNN only).
Run: python experiments/check_matrix.py [--backend numba|cuda] [--simulator] [--models a,b] [--hw x,y]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HWCONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "hwconfigs").glob("*.yaml"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("numba", "cuda", "numpy"), default="numba")
    parser.add_argument("--simulator", action="store_true", help="run CUDA kernels in numba's simulator")
    parser.add_argument("--sizes", choices=("small", "tiny"), help="default: tiny for the simulator, else small")
    parser.add_argument("--models", help="comma-separated (default: the whole zoo)")
    parser.add_argument("--hw", help="comma-separated hwconfig names (default: all shipped)")
    parser.add_argument("--microbatches", type=int, default=2)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    if args.simulator:  # before anything imports numba.cuda
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import accelsim as A
    from accelsim.models import sizes

    table = getattr(sizes, (args.sizes or ("tiny" if args.simulator else "small")).upper())
    models = args.models.split(",") if args.models else list(table)
    hws = args.hw.split(",") if args.hw else HWCONFIGS
    print(f"backend {args.backend}{' (simulator)' if args.simulator else ''}; {args.microbatches} micro-batches "
          f"x {args.replicas} replicas; 'worst' is the largest max-rel-err / tolerance over the step's tensors")
    print(f"{'model':18s} {'hw':17s} {'tasks':>6s} {'result':>7s} {'worst':>6s} {'compile s':>9s} {'check s':>8s}  worst tensor")
    failed = 0
    for model in models:
        graph = A.training_graph(A.models.build(model, **table[model]), optimizer="momentum", lr=0.05)
        for hw_name in hws:
            hw = A.load_hw(hw_name)
            start = time.perf_counter()
            try:
                sched = A.compile(graph, hw, microbatches=args.microbatches, data_parallel=args.replicas)
            except A.MappingError:
                print(f"{model:18s} {hw_name:17s} {'':>6s} {'no unit':>7s}")
                continue
            compiled = time.perf_counter()
            report = A.check(sched, args.backend, graph=graph, hw=hw)  # validates the schedule first
            done = time.perf_counter()
            worst = max(report.entries, key=lambda e: e.max_rel_err / e.tolerance)
            failed += not report.passed
            print(f"{model:18s} {hw_name:17s} {len(sched.tasks):6d} {'pass' if report.passed else 'FAIL':>7s} "
                  f"{worst.max_rel_err / worst.tolerance:6.3f} {compiled - start:9.2f} {done - compiled:8.2f}  "
                  f"{worst.name}" + "".join(f"\n    corrupted: {c}" for c in report.corruptions), flush=True)
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
