"""ZigZag's own answer for its tpu_like example chip on its resnet18.onnx workload, saved per layer as the
reference that experiments/zigzag_compare.py and tests/test_zigzag_compare.py read:
ZigZag (outside accelsim) -> tests/data/zigzag_tpu_like_resnet18.json.

ZigZag is not a dependency of accelsim, of its tests or of CI: this script runs in a throwaway virtualenv,
  python -m venv /work/zzvenv && /work/zzvenv/bin/pip install zigzag-dse six   (3.9.1 imports six, undeclared)
  /work/zzvenv/bin/python experiments/zigzag_reference.py
with ZigZag's defaults (LOMA temporal search, latency objective, the example mapping file's spatial mapping).
It records per layer the loop sizes, operand precisions, latency (ZigZag's latency_total2: compute with
stalls, plus data on-loading, off-loading and the systolic drain) and its parts, the energy split into the
MACs and each (operand, memory level), and the spatial mapping and temporal loop order ZigZag chose.
"""
from __future__ import annotations

import json
import shlex
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "zigzag_tpu_like_resnet18.json"


def _inputs() -> tuple[Path, Path, Path]:
    """ZigZag's example files as the installed package ships them."""
    import zigzag

    root = Path(zigzag.__file__).parent / "inputs"
    return (root / "workload" / "resnet18.onnx", root / "hardware" / "tpu_like.yaml",
            root / "mapping" / "tpu_like.yaml")


def _layer_cmes(entries: list) -> list:
    """The per-layer evaluations under ZigZag's result list, whose entries are (evaluation, extra) pairs and
    whose sum stage's extra is the list of the layers' pairs."""
    out = []
    for cme, extra in entries:
        out += [cme] if hasattr(cme, "layer") else _layer_cmes(extra)
    return out


def _layer_record(cme) -> dict:
    """One layer's figures from ZigZag's CostModelEvaluation."""
    layer = cme.layer
    memories = {}
    for op, levels in cme.mem_energy_breakdown.items():
        mem_op = cme.memory_operand_links.layer_to_mem_op(op)
        names = [lv.name for lv in cme.accelerator.memory_hierarchy.get_memory_levels(mem_op=mem_op)]
        memories[str(op)] = {name: float(e) for name, e in zip(names, levels)}
    return {
        "name": layer.name,
        "id": int(layer.id),
        "type": str(getattr(layer, "type", "")),
        "loop_sizes": {str(d): int(s) for d, s in layer.layer_dim_sizes.items()},
        "precision_bits": {str(k): int(v) for k, v in layer.operand_precision.data.items()},
        "total_macs": int(layer.total_mac_count),
        "latency_cycles": float(cme.latency_total2),
        "ideal_cycles": float(cme.ideal_cycle),
        "ideal_temporal_cycles": float(cme.ideal_temporal_cycle),
        "stall_slack_cycles": float(cme.stall_slack_comb),
        "onloading_cycles": float(cme.data_onloading_cycle),
        "offloading_cycles": float(cme.data_offloading_cycle),
        "systolic_drain_cycles": float(getattr(cme, "systolic_drain_cycle", 0)),
        "energy_pj": float(cme.energy_total),
        "mac_energy_pj": float(cme.mac_energy),
        "memory_energy_pj": memories,
        "spatial_mapping": str(cme.layer.spatial_mapping),
        "temporal_mapping": str(cme.temporal_mapping),
    }


def main() -> None:
    from zigzag.api import get_hardware_performance_zigzag

    workload, accelerator, mapping = _inputs()
    dump = tempfile.mkdtemp(prefix="zigzag_tpu_like_")  # ZigZag's own per-layer files, left for inspection
    start = time.process_time()
    energy, latency, cmes = get_hardware_performance_zigzag(
        str(workload), str(accelerator), str(mapping), dump_folder=dump, loma_show_progress_bar=False)
    cpu_s = time.process_time() - start
    layers = [_layer_record(cme) for cme in _layer_cmes(cmes)]
    record = {
        "zigzag_version": metadata.version("zigzag-dse"),
        "command": "/work/zzvenv/bin/python experiments/zigzag_reference.py  (zigzag-dse from PyPI in a throwaway "
                   "venv; get_hardware_performance_zigzag(resnet18.onnx, hardware/tpu_like.yaml, "
                   "mapping/tpu_like.yaml), defaults otherwise)",
        "argv": shlex.join(sys.argv),
        "workload": "zigzag/inputs/workload/resnet18.onnx",
        "accelerator": "zigzag/inputs/hardware/tpu_like.yaml",
        "mapping": "zigzag/inputs/mapping/tpu_like.yaml",
        "total_energy_pj": float(energy),
        "total_latency_cycles": float(latency),
        "zigzag_cpu_s": round(cpu_s, 1),
        "layers": layers,
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"ZigZag's files: {dump}")
    print(f"{len(layers)} layers, {energy:.4g} pJ, {latency:.4g} cycles, {cpu_s:.0f} s CPU -> {OUT}")


if __name__ == "__main__":
    main()
