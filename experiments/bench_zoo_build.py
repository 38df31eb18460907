"""CPU seconds to build a zoo preset at scale: the forward graph (shapes only, no evaluation limit) and its
Adam training step, with the step's task estimate for a d x p x t configuration (accelsim.limits).

Run: python experiments/bench_zoo_build.py [--size gpt3-175b] [--seq 2048] [--tensor-parallel 8]
                                           [--data-parallel 8] [--pipeline-stages 16] [--microbatches 64]
"""
from __future__ import annotations

import argparse
import time

import accelsim as A
from accelsim.limits import estimate_tasks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", default="gpt3-175b", help="a gpt2 size preset (default gpt3-175b)")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--tensor-parallel", type=int, default=8)
    p.add_argument("--data-parallel", type=int, default=8)
    p.add_argument("--pipeline-stages", type=int, default=16)
    p.add_argument("--microbatches", type=int, default=64)
    args = p.parse_args()
    start = time.process_time()
    forward = A.models.build("gpt2", size=args.size, seq=args.seq, tensor_parallel=args.tensor_parallel,
                             limits=None)
    built = time.process_time()
    step = A.training_graph(forward, optimizer="adam")
    trained = time.process_time()
    m, d, s = args.microbatches, args.data_parallel, args.pipeline_stages
    tasks = estimate_tasks(step, m, d, s)
    print(f"gpt2 size={args.size} seq={args.seq} tensor_parallel={args.tensor_parallel}: forward "
          f"{len(forward.nodes):,} nodes in {built - start:.2f} s CPU, Adam training step {len(step.nodes):,} "
          f"nodes in {trained - built:.2f} s CPU ({trained - start:.2f} s in all); estimate_tasks(M={m}, d={d}, "
          f"p={s}) = {tasks:,} ({time.process_time() - trained:.2f} s)")


if __name__ == "__main__":
    main()
