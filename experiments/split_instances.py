"""What splitting a layer across unit instances buys (schedule/split.py): makespan with tensor nodes
kept whole (`split=False`), cut wherever their parts are faster (`split=True`), and compile's default
(`split=None`: both, the shorter kept), on the shipped configs whose tensor units have several
instances. One micro-batch is latency: more instances per layer shorten it. Many micro-batches in
flight already fill every instance, and the parts' extra fill/drain makes splitting a loss there, which
the default notices.

Run: python experiments/split_instances.py [--quick]
"""
from __future__ import annotations

import argparse
import time

import accelsim as A
from accelsim.passes import inference_graph

CASES = [  # (label, hardware, model, training, micro-batches)
    ("superres training", "groq_like", "superres", True, 1),
    ("superres training", "multicore_cpu", "superres", True, 1),
    ("ResNet-50 inference, batch 1", "groq_like", "resnet50", False, 1),
    ("ResNet-50 inference, batch 1", "groq_like", "resnet50", False, 16),
    ("MLP training", "groq_like_x4", "mlp", True, 1),
]


def graph_of(model: str, training: bool):
    fwd = A.models.build(model, batch=1) if model == "resnet50" else A.models.build(model)
    return A.training_graph(fwd) if training else inference_graph(fwd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the 16-micro-batch ResNet-50 case")
    args = parser.parse_args()
    print(f"{'case':34s} {'hardware':14s} {'mb':>3s} {'whole':>10s} {'split':>10s} {'split/whole':>11s} "
          f"{'parts':>6s} {'default':>8s} {'compile s':>9s}")
    for label, hw_name, model, training, m in CASES:
        if args.quick and m > 1:
            continue
        hw = A.load_hw(hw_name)
        graph = graph_of(model, training)
        whole = A.compile(graph, hw, microbatches=m, split=False)
        cut = A.compile(graph, hw, microbatches=m, split=True)
        start = time.process_time()
        auto = A.compile(graph, hw, microbatches=m)
        seconds = time.process_time() - start
        parts = sum(t.is_part for t in cut.tasks)
        print(f"{label:34s} {hw_name:14s} {m:3d} {whole.makespan_cycles:10,d} {cut.makespan_cycles:10,d} "
              f"{cut.makespan_cycles / whole.makespan_cycles:11.3f} {parts:6d} "
              f"{'split' if auto.options.split else 'whole':>8s} {seconds:9.2f}", flush=True)
        assert auto.makespan_cycles == min(whole.makespan_cycles, cut.makespan_cycles)


if __name__ == "__main__":
    main()
