"""makespan / bound for every zoo model on every shipped hwconfig, training and inference.

The bound is the larger of the critical path and the busiest single-choice resource's work; a
ratio near 1 means the schedule is near optimal or the bound is tight. "no fit" means the step's
tensors exceed the machine's memories (e.g. GPT-2 training on a chip without DRAM).
Run: python experiments/bound_table.py [--set gpt2.seq=256 ...]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import accelsim as A
from accelsim.passes import inference_graph

HWCONFIGS = sorted(p.stem for p in (Path(__file__).resolve().parent.parent / "hwconfigs").glob("*.yaml"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=VALUE")
    args = parser.parse_args()
    overrides: dict[str, dict] = {}
    for item in args.set:
        key, value = item.split("=", 1)
        model, opt = key.split(".", 1)
        overrides.setdefault(model, {})[opt] = int(value)
    print(f"{'model':18s} {'mode':6s} " + " ".join(f"{h:>16s}" for h in HWCONFIGS))
    for name in A.models.names():
        fwd = A.models.build(name, **overrides.get(name, {}))
        for mode, graph in (("train", A.training_graph(fwd)), ("infer", inference_graph(fwd))):
            cells = []
            for hw_name in HWCONFIGS:
                try:
                    s = A.compile(graph, A.load_hw(hw_name))
                    cells.append(f"{s.bound_ratio:.3f}")
                except A.MappingError:
                    cells.append("no unit")
                except A.AccelsimError:
                    cells.append("no fit")
            print(f"{name:18s} {mode:6s} " + " ".join(f"{c:>16s}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
