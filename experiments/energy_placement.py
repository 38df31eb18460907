"""Energy follows the bytes (issue 28): the 27-point sweep of experiments/sweeps/energy_placement.yaml (array
64-256, SRAM 8-64 MiB, HBM 128-512 GB/s), then per point its energy per sample and the breakdown that explains
it (static, off-chip memory, on-chip memory, arithmetic, unit buffers), the energy/throughput Pareto front and
whether it is a line, and a stacked-bar plot of the breakdown per point.
Run: python experiments/energy_placement.py [--out sweeps/energy_placement] [--workers 2] [--plot FILE.png]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import accelsim as A
from accelsim.dse.pareto import feasible_rows, pareto_front
from accelsim.hw.quantity import parse_bandwidth, parse_bytes
from accelsim.viz.energy import plot_energy_breakdown

SPEC = Path(__file__).resolve().parent / "sweeps" / "energy_placement.yaml"
ROWS = "chips.0.units.mxu.array.rows, chips.0.units.mxu.array.cols"
SRAM = "chips.0.memories.sram.capacity_bytes"
HBM = "chips.0.memories.hbm.bandwidth_bytes_per_s"
GOALS = {"throughput_samples_per_s": "max", "energy_per_sample_j": "min"}


def label(row) -> str:
    """"128/16MiB/256GB/s": array side, SRAM, HBM bandwidth of a point."""
    return f"{row['rows']}/{row['sram_mib']}MiB/{row['hbm_gbs']}GB/s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="sweeps/energy_placement")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--plot", default="plots/energy_placement_breakdown.png")
    args = ap.parse_args()
    df = A.sweep(SPEC, out=args.out, workers=args.workers)
    failed = df[~feasible_rows(df)]
    for _, r in failed.iterrows():
        print(f"point {r.get('point', '?')} left out: {r['error'] or 'infeasible'}")
    df = df[feasible_rows(df)].copy()
    df["rows"] = df[ROWS].astype(int)
    df["sram_mib"] = df[SRAM].map(lambda v: round(parse_bytes(v) / 2**20))
    df["hbm_gbs"] = df[HBM].map(lambda v: round(parse_bandwidth(v) / 1e9))
    df["samples"] = df["energy_j"] / df["energy_per_sample_j"]
    df["unit_buffers_j"] = (df["dynamic_energy_j"] - df["arithmetic_energy_j"] - df["memory_energy_j"]
                            - df["link_energy_j"]).clip(lower=0)
    df = df.sort_values(["rows", "sram_mib", "hbm_gbs"])
    print(f"{'array/SRAM/HBM':<20} {'samples/s':>10} {'uJ/sample':>10} {'static':>7} {'off-chip':>8} "
          f"{'on-chip':>8} {'arith':>7} {'buffers':>7}  (shares of the step's energy)")
    for _, r in df.iterrows():
        e = r["energy_j"]
        print(f"{label(r):<20} {r['throughput_samples_per_s']:>10.1f} {r['energy_per_sample_j'] * 1e6:>10.2f} "
              f"{r['static_energy_j'] / e:>7.1%} {r['off_chip_energy_j'] / e:>8.1%} "
              f"{(r['memory_energy_j'] - r['off_chip_energy_j']) / e:>8.1%} {r['arithmetic_energy_j'] / e:>7.1%} "
              f"{r['unit_buffers_j'] / e:>7.1%}")
    distinct = df["energy_per_sample_j"].round(12).nunique()
    print(f"\n{distinct} distinct energies per sample over {len(df)} points "
          f"({df['energy_per_sample_j'].min() * 1e6:.2f}-{df['energy_per_sample_j'].max() * 1e6:.2f} uJ)")
    front = pareto_front(df, "throughput_samples_per_s", "energy_per_sample_j", GOALS)
    pts = list(zip(front["throughput_samples_per_s"], front["energy_per_sample_j"]))
    print(f"Pareto front (max throughput, min energy per sample): {len(pts)} points")
    for _, r in front.iterrows():
        print(f"  {label(r):<20} {r['throughput_samples_per_s']:>10.1f} samples/s {r['energy_per_sample_j'] * 1e6:>8.2f} uJ")
    if len(pts) >= 3:
        (x0, y0), (x1, y1) = pts[0], pts[-1]
        off = max(abs((y - y0) - (y1 - y0) * (x - x0) / (x1 - x0)) for x, y in pts[1:-1])
        print(f"largest distance of a front point from the chord between its ends: {off * 1e6:.3f} uJ "
              f"({off / (max(y for _, y in pts) - min(y for _, y in pts)):.0%} of the front's energy range)")
    uj = 1e6 / df["samples"]  # J per step -> uJ per sample
    bars = {label(r): {"arithmetic": r["arithmetic_energy_j"] * u, "unit buffers": r["unit_buffers_j"] * u,
                       "on-chip memory": (r["memory_energy_j"] - r["off_chip_energy_j"]) * u,
                       "off-chip memory": r["off_chip_energy_j"] * u, "links": r["link_energy_j"] * u,
                       "static": r["static_energy_j"] * u}
            for (_, r), u in zip(df.iterrows(), uj)}
    fig = plot_energy_breakdown(bars, ylabel="energy per sample (uJ)",
                                title="ResNet-50 training step: energy by component (array/SRAM/HBM)")
    Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    print(f"stacked bar: {args.plot}")


if __name__ == "__main__":
    main()
