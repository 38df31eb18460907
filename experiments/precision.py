"""GPT-2 small training (Adam) on a100_like at fp32 and at bf16: simulated step time and each step's peak
memory with its parts at the peak (the table in README.md's "Mixed precision").

    python experiments/precision.py [--batches 1 8]

About 10 s of CPU per configuration.
"""
from __future__ import annotations

import argparse

import accelsim as A
from accelsim.memory_split import chip_memory

GIB, MIB = 2**30, 2**20


def _size(nbytes: int) -> str:
    return f"{nbytes / GIB:.3g} GiB" if nbytes >= GIB else f"{nbytes / MIB:.3g} MiB"


def row(batch: int, precision: str) -> str:
    """One table row: simulated step time, peak memory and its parameters, optimizer state and activations."""
    hw = A.load_hw("a100_like")
    graph = A.training_graph(A.models.build("gpt2", batch=batch, limits=None), optimizer="adam")
    schedule = A.compile(graph, hw, precision=precision)
    seconds = A.simulate(schedule, hw).makespan_cycles / hw.clock_hz
    peak = max(chip_memory(schedule, graph), key=lambda c: c.peak_bytes)
    return (f"| {precision} | {batch} | {seconds * 1e3:.3g} ms | {_size(peak.peak_bytes)} | "
            f"{_size(peak.parameter_bytes)} | {_size(peak.optimizer_state_bytes)} | {_size(peak.activation_bytes)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()
    print("| precision | batch | step | peak memory | parameters | optimizer state | activations |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for batch in args.batches:
        for precision in ("fp32", "bf16"):
            print(row(batch, precision), flush=True)


if __name__ == "__main__":
    main()
