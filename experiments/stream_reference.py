"""Stream's answer for experiments/stream_compare.py: its tpu_like_quad_core example chip on ResNet-18
(batch 1, 3x224x224, the resnet18.onnx that zigzag-dse ships, which Stream's ONNX frontend reads), solved
layer by layer (one fusion group per layer) and layer-fused (the fusion groups Stream's mapping generator
derives) -> tests/data/stream_tpu_like_quad_core.json.

Runs only in a throwaway Stream venv, never in accelsim's (Stream is not an accelsim dependency):
  /root/.pyenv/versions/3.12.1/bin/python -m venv /work/streamvenv
  /work/streamvenv/bin/pip install stream-dse six      # stream-dse 2.1.1; its zigzag imports six
  /work/streamvenv/bin/python experiments/stream_reference.py [layer|fused ...] [--time-limit S]
Each mode writes its run under /tmp/stream_reference/<mode>; the per-core cost tables ZigZag computes (the
slow part: about a minute of CPU per distinct convolution) are cached there, so a rerun reuses them.

stream-dse 2.1.1's API is `evaluate_mapping` (the genetic and constraint allocators of Stream 1.x are gone):
each fusion group is solved by its constraint-optimization allocator (OR-tools) with its default constraint
families (`energy` among them, so the run reports energy). Per group it records the cycles, the cores each
node was allocated to, and the energy split Stream reports (nodes on their cores: ZigZag's MAC and
on-core memory energy; transfers: DMA bits through the DRAM port, the bus and the links); per node the
ZigZag cost table's latency and energy on the chosen core, with its MAC / memory split.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pickle
import sys
import time
from importlib import metadata
from pathlib import Path

import stream
import zigzag
from stream.api import SolveOptions, evaluate_mapping

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "data" / "stream_tpu_like_quad_core.json"
HW = Path(stream.__file__).parent / "inputs" / "examples" / "hardware" / "tpu_like_quad_core.yaml"
ONNX = Path(zigzag.__file__).parent / "inputs" / "workload" / "resnet18.onnx"
WORK = Path("/tmp/stream_reference")
MODES = {"layer": {"fusion_cut_points": "per-layer"}, "fused": {}}


def _node_costs(group_dir: Path) -> dict[str, dict]:
    """Per node and core, ZigZag's latency and energy (MAC and memory) from the group's cached cost table."""
    out: dict[str, dict] = {}
    path = group_dir / "core_cost_lut.pickle"
    if not path.is_file():
        return out
    with path.open("rb") as f:
        saved = pickle.load(f)
    table = saved["lut"] if isinstance(saved, dict) and "lut" in saved else getattr(saved, "lut", saved)
    for node, cores in table.items():
        per_core = {}
        for core, entry in cores.items():
            cme = getattr(entry, "cme", None)
            per_core[str(getattr(core, "id", core))] = {
                "latency_cycles": float(entry.latency_total),
                "ideal_cycles": float(entry.ideal_cycle),
                "energy_pj": float(entry.energy_total),
                "mac_energy_pj": float(cme.mac_energy) if cme is not None else None,
                "mem_energy_pj": float(cme.mem_energy) if cme is not None else None,
            }
        out[node.name] = per_core
    return out


def solve(mode: str, time_limit_s: float) -> dict:
    """One mode's whole-network figures and its per-group detail."""
    options = SolveOptions(artifacts=False, time_limit_s=time_limit_s, stage_options=MODES[mode])
    out_dir = WORK / mode
    start = time.process_time()
    estimate = evaluate_mapping(str(HW), str(ONNX), str(out_dir), None, options)
    cpu_s = time.process_time() - start
    ctx = estimate.context
    groups = []
    allocations = ctx.get("group_allocations")
    for i in sorted(ctx.get("group_cycles")):
        alloc = allocations[i] or {}
        perf = alloc.get("performance") or {}
        energy = perf.get("energy") or {}
        nodes = {name: {"resource_allocation": node.get("resource_allocation")}
                 for name, node in (alloc.get("mapping_nodes") or {}).items()}
        groups.append({
            "cycles": float(ctx.get("group_cycles")[i]),
            "layers": [layer for g in alloc.get("fused_groups") or [] for layer in g.get("layers", [])],
            "nodes": nodes,
            "energy": energy,
            "bottleneck": perf.get("bottleneck"),
            "node_costs": _node_costs(out_dir / f"group_{i}"),
        })
    node_pj = sum(g["energy"].get("total_pj", 0.0) * _share(g["energy"], "node_pj_per_iteration") for g in groups)
    transfer_pj = sum(g["energy"].get("total_pj", 0.0) * _share(g["energy"], "transfer_pj_per_iteration")
                      for g in groups)
    return {
        "cycles": float(estimate.cycles),
        "group_cycles_sum": float(sum(estimate.group_cycles)),
        "dispatch_cycles": float(estimate.dispatch_cycles),
        "energy_pj": node_pj + transfer_pj,
        "node_energy_pj": node_pj,
        "transfer_energy_pj": transfer_pj,
        "groups": groups,
        "cpu_s": cpu_s,
    }


def _share(energy: dict, key: str) -> float:
    """`key`'s share of one iteration's energy (the run's total is per iteration x iterations)."""
    per = energy.get("per_iteration_pj", 0.0)
    return energy.get(key, 0.0) / per if per else 0.0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modes", nargs="*", default=list(MODES), choices=list(MODES))
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per allocation solve")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    saved = {
        "stream_dse_version": metadata.version("stream-dse"),
        "zigzag_dse_version": metadata.version("zigzag-dse"),
        "hardware": "stream/inputs/examples/hardware/tpu_like_quad_core.yaml",
        "workload": "zigzag/inputs/workload/resnet18.onnx (batch 1, 3x224x224)",
        "script": "experiments/stream_reference.py",
        "time_limit_s": args.time_limit,
    }
    for mode in args.modes:  # one file per mode, so that modes may run as separate processes
        result = solve(mode, args.time_limit)
        (WORK / f"{mode}.json").write_text(json.dumps(result, sort_keys=True))
        print(mode, result["cycles"], result["energy_pj"], file=sys.stderr)
    saved["modes"] = {m: json.loads((WORK / f"{m}.json").read_text()) for m in MODES if (WORK / f"{m}.json").is_file()}
    OUT.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
