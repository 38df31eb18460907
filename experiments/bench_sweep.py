"""Sweep throughput: one fixed 18-point sweep (transformer_block training on tpu_v1_like, array shape x
micro-batches, about 0.4-1 s a point) run by the local process pool and by a Dask LocalCluster, both
with 2 workers, in the same run; points per minute of each (wall time of the whole sweep, starting the
workers included), their ratio, and whether the two results tables are identical apart from wall_s.

Run: python experiments/bench_sweep.py [--repeat 3] [--workers 2]
"""
from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

from accelsim.dse import run_sweep

SPEC = {
    "name": "bench_sweep",
    "hw": "tpu_v1_like",
    "model": "transformer_block",
    "parameters": {
        "chips.0.units.mxu.array.rows": [64, 128, 256],
        "chips.0.units.mxu.array.cols": [128, 256],
        "options.microbatches": [1, 2, 4],
    },
    "metrics": ["throughput_samples_per_s", "makespan_cycles", "peak_memory_bytes", "energy_per_sample_j",
                "area_mm2"],
}
POINTS = 18
EXECUTORS = {"process pool": {}, "dask LocalCluster": {"dask": "local"}}


def table_bytes_without_wall_time(path: Path) -> bytes:
    sink = io.BytesIO()
    pq.write_table(pq.read_table(path).drop(["wall_s"]), sink)
    return sink.getvalue()


def timed_run(workers: int, extra: dict) -> tuple[float, bytes, int]:
    """(seconds, results without wall_s as Parquet bytes, points evaluated) of one fresh sweep."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        run = run_sweep(SPEC, out=out, workers=workers, **extra)
        seconds = time.perf_counter() - start
        return seconds, table_bytes_without_wall_time(run.results_path), run.new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per executor (the median is reported)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    rates, tables = {}, {}
    print(f"{POINTS}-point sweep ({SPEC['model']} training on {SPEC['hw']}), {args.workers} workers, "
          f"median of {args.repeat} run(s) each, interleaved")
    times: dict[str, list[float]] = {name: [] for name in EXECUTORS}
    for _ in range(args.repeat):
        for name, extra in EXECUTORS.items():  # interleaved, so a slow spell of the machine hits both
            seconds, table, new = timed_run(args.workers, extra)
            assert new == POINTS, f"{name}: evaluated {new} points, expected {POINTS}"
            times[name].append(seconds)
            tables.setdefault(name, set()).add(table)
    for name, runs in times.items():
        median = statistics.median(runs)
        rates[name] = POINTS / median * 60
        print(f"  {name:18s} {rates[name]:7.1f} points/min (median {median:.2f} s; runs "
              f"{', '.join(f'{t:.2f}' for t in runs)} s)")
    pool, dask = rates["process pool"], rates["dask LocalCluster"]
    print(f"  dask / pool: {dask / pool:.2f}x")
    distinct = set().union(*tables.values())
    print(f"  results identical apart from wall_s across every run of both: {'yes' if len(distinct) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
