"""Run SCALE-Sim on GEMM and conv cases, save its cycles to tests/data/scalesim_cycles.json, and print
them next to accelsim.cost.systolic.gemm_cycles.

SCALE-Sim lives in a throw-away virtualenv outside the repo (scalesim 3.0.0 crashes under numpy 2):

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy==1.26.*"

then, from the repo root, with the project venv:

    .venv/bin/python experiments/scalesim_compare.py                 # SCALE-Sim (~8 min, 2 cores), JSON, table
    .venv/bin/python experiments/scalesim_compare.py --table-only    # only compare with the saved JSON

The project venv re-runs this file under the SCALE-Sim venv (`--worker`), since neither venv has the
other's packages. SCALE-Sim runs through its Python API with save_disk_space=True (no per-cycle
traces), its SRAMs large enough that it never stalls, and its outputs under a temporary folder in /tmp.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from multiprocessing import Pool
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_JSON = REPO / "tests" / "data" / "scalesim_cycles.json"
DEFAULT_SCALESIM_PYTHON = "/tmp/scalesim-venv/bin/python"
DATAFLOWS = ("os", "ws", "is")
SRAM_KB = 65536  # every operand fits: no memory stalls, so SCALE-Sim's cycles are pure compute

NOTE = ("scalesim_total_cycles is SCALE-Sim's per-layer 'Total Cycles' (COMPUTE_REPORT.csv), "
        "int(max(ofmap serviced cycle)) in double_buffered_scratchpad_mem.py: the 0-based index of the "
        "layer's last cycle, so the layer takes scalesim_total_cycles - scalesim_stall_cycles + 1 cycles. "
        "Conv cases give SCALE-Sim the input size including padding.")

# (name, M, K, N): tiny, exact multiples of the array, and ragged shapes that leave the last fold partly empty.
GEMMS = {
    8: [("1x1x1", 1, 1, 1), ("3x5x2", 3, 5, 2), ("8x8x8", 8, 8, 8), ("100x37x70", 100, 37, 70)],
    32: [("64x64x64", 64, 64, 64), ("200x300x129", 200, 300, 129), ("1x1000x1", 1, 1000, 1)],
    (16, 64): [("130x70x500", 130, 70, 500)],
    128: [("512x256x384", 512, 256, 384)],
    256: [("1000x600x300", 1000, 600, 300)],
}

# The super-resolution CNN (64x64 single-channel input, batch 1): (name, C, O, kernel, padding).
SUPERRES_CONVS = [("conv1", 1, 64, 5, 2), ("conv2", 64, 64, 3, 1), ("conv3", 64, 32, 3, 1), ("conv4", 32, 9, 3, 1)]
SUPERRES_HW = 64
# Arrays per conv, kept to those SCALE-Sim's per-cycle Python loops finish in seconds to a few minutes.
SUPERRES_ARRAYS = {"conv1": [8, 32, 128, 256], "conv2": [32, 128, 256], "conv3": [32, 128],
                   "conv4": [8, 32, 128, 256]}


def _dims(array: int | tuple[int, int]) -> tuple[int, int]:
    return (array, array) if isinstance(array, int) else array


def cases() -> list[dict]:
    """Every case with its parameters; SCALE-Sim's numbers are added by the worker."""
    out = []
    for array, gemms in GEMMS.items():
        rows, cols = _dims(array)
        for name, m, k, n in gemms:
            for df in DATAFLOWS:
                out.append(dict(id=f"gemm_{name}_{rows}x{cols}_{df}", kind="gemm", m=m, k=k, n=n,
                                rows=rows, cols=cols, dataflow=df))
    for name, c, o, kernel, pad in SUPERRES_CONVS:
        for array in SUPERRES_ARRAYS[name]:
            rows, cols = _dims(array)
            for df in DATAFLOWS:
                out.append(dict(id=f"superres_{name}_{rows}x{cols}_{df}", kind="conv", n=1, c=c,
                                h=SUPERRES_HW, w=SUPERRES_HW, o=o, kh=kernel, kw=kernel, stride=[1, 1],
                                padding=[pad, pad], rows=rows, cols=cols, dataflow=df))
    return out


def accelsim_view(case: dict) -> tuple[int, int, int, int]:
    """(batch, M, K, N) of a case as accelsim sees it."""
    from accelsim.cost.systolic import conv_as_gemm

    if case["kind"] == "gemm":
        return 1, case["m"], case["k"], case["n"]
    return conv_as_gemm(case["n"], case["c"], case["h"], case["w"], case["o"], case["kh"], case["kw"],
                        stride=tuple(case["stride"]), padding=tuple(case["padding"]))


def scalesim_cycle_count(case: dict) -> int:
    """SCALE-Sim's compute cycles as a count (it reports the last cycle's 0-based index)."""
    return case["scalesim_total_cycles"] - case["scalesim_stall_cycles"] + 1


# ---------------------------------------------------------------- worker side (SCALE-Sim venv only)

_CONFIG_TEMPLATE = """[general]
run_name = run

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_sram_kb}
FilterSramSzkB: {filter_sram_kb}
OfmapSramSzkB: {ofmap_sram_kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Dataflow: {dataflow}
Bandwidth: {bandwidth}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bank_bandwidth}
IfmapSRAMBankNum: {banks}
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bank_bandwidth}
FilterSRAMBankNum: {banks}
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: {interface}
UseRamulatorTrace: False
"""


def scalesim_config(rows: int, cols: int, dataflow: str, ifmap_sram_kb: int, filter_sram_kb: int, ofmap_sram_kb: int,
                    interface: str = "CALC", bandwidth: int = 10, bank_bandwidth: int = 10, banks: int = 10) -> str:
    """SCALE-Sim's config file for one run. The defaults are its CALC bandwidth mode (it sizes DRAM bandwidth
    so that nothing stalls); USER mode (experiments/scalesim_bandwidth.py) fixes `bandwidth` for the ofmap
    SRAM and `bank_bandwidth` x `banks` for each read SRAM."""
    return _CONFIG_TEMPLATE.format(rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kb=ifmap_sram_kb,
                                   filter_sram_kb=filter_sram_kb, ofmap_sram_kb=ofmap_sram_kb, interface=interface,
                                   bandwidth=bandwidth, bank_bandwidth=bank_bandwidth, banks=banks)


def _topology_csv(case: dict) -> str:
    if case["kind"] == "gemm":  # SCALE-Sim's GEMM topology columns are M, N, K (in that order)
        return f"Layer, M, N, K,\nlayer, {case['m']}, {case['n']}, {case['k']},\n"
    assert case["n"] == 1 and case["stride"][0] == case["stride"][1], "SCALE-Sim convs: batch 1, one stride"
    h = case["h"] + 2 * case["padding"][0]  # SCALE-Sim takes the padded input size
    w = case["w"] + 2 * case["padding"][1]
    return ("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
            f"layer, {h}, {w}, {case['kh']}, {case['kw']}, {case['c']}, {case['o']}, {case['stride'][0]},\n")


def _run_one(case: dict) -> dict:
    from scalesim.scale_sim import scalesim

    with tempfile.TemporaryDirectory(prefix="scalesim-", dir="/tmp") as tmp:
        config, topology, layout = (os.path.join(tmp, f) for f in ("run.cfg", "topology.csv", "layout.csv"))
        Path(config).write_text(scalesim_config(case["rows"], case["cols"], case["dataflow"], SRAM_KB, SRAM_KB,
                                                SRAM_KB))
        Path(topology).write_text(_topology_csv(case))
        Path(layout).write_text("Layer name,\n")  # required file; unused without custom layouts
        sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology, layout=layout,
                       input_type_gemm=case["kind"] == "gemm")
        sim.run_scale(top_path=tmp)
        # [total incl. DRAM prefetch, total cycles, stall cycles, utilizations...]
        _, total, stall, *_ = sim.runner.single_layer_sim_object_list[0].get_compute_report_items()
    print(f"  {case['id']}: total cycles {total}, stalls {stall}", file=sys.stderr, flush=True)
    return dict(case, scalesim_total_cycles=int(total), scalesim_stall_cycles=int(stall))


def worker(out_path: Path, jobs: int) -> None:
    """Run SCALE-Sim on every case (under the SCALE-Sim venv) and write the reference JSON."""
    from importlib.metadata import version

    todo = cases()
    with Pool(jobs) as pool:
        done = pool.map(_run_one, todo, chunksize=1)
    reference = dict(scalesim_version=version("scalesim"), numpy_version=version("numpy"),
                     sram_kb=SRAM_KB, interface_bandwidth="CALC", note=NOTE, cases=done)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(dump_reference(reference))


def dump_reference(reference: dict) -> str:
    """JSON with one case per line, so a diff after a re-run shows which cases moved."""
    head = {key: value for key, value in reference.items() if key != "cases"}
    lines = [f" {json.dumps(key)}: {json.dumps(value)}," for key, value in head.items()]
    cases_json = ",\n".join(f"  {json.dumps(case)}" for case in reference["cases"])
    return "{\n" + "\n".join(lines) + '\n "cases": [\n' + cases_json + "\n ]\n}\n"


# ---------------------------------------------------------------- driver side (project venv)

def print_table(reference: dict) -> float:
    """Print ours vs SCALE-Sim's cycles per case; return the largest relative difference."""
    from accelsim.cost.systolic import gemm_cycles

    print(f"SCALE-Sim {reference['scalesim_version']} vs accelsim.cost.systolic.gemm_cycles")
    print(f"{'case':38} {'B,M,K,N':>22} {'folds':>6} {'ours':>9} {'scalesim':>9} {'rel diff':>9}")
    worst = 0.0
    for case in reference["cases"]:
        batch, m, k, n = accelsim_view(case)
        ours = gemm_cycles(m, k, n, case["rows"], case["cols"], case["dataflow"], batch)
        theirs = scalesim_cycle_count(case)
        rel = abs(ours.compute_cycles - theirs) / theirs
        worst = max(worst, rel)
        print(f"{case['id']:38} {f'{batch},{m},{k},{n}':>22} {ours.folds:>6} {ours.compute_cycles:>9} "
              f"{theirs:>9} {rel:>9.2%}")
    print(f"max relative difference: {worst:.4%} over {len(reference['cases'])} cases")
    return worst


def cli(doc: str, default_out: Path, run_worker, print_results, script: str) -> None:
    """The command line both SCALE-Sim scripts share: run SCALE-Sim in its own venv (this script again,
    with --worker, under that venv's python), save its JSON, print the comparison table."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--scalesim-python", default=DEFAULT_SCALESIM_PYTHON,
                        help="python of the venv that has scalesim 3.0.0 and numpy 1.26")
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--table-only", action="store_true", help="skip SCALE-Sim; compare with --out")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        run_worker(args.out, args.jobs)
        return
    if not args.table_only:
        if not Path(args.scalesim_python).exists():
            sys.exit(f"no SCALE-Sim venv at {args.scalesim_python}; create it as this file's docstring says")
        subprocess.run([args.scalesim_python, script, "--worker", "--out", str(args.out),
                        "--jobs", str(args.jobs)], check=True)
    print_results(json.loads(args.out.read_text()))


def main() -> None:
    cli(__doc__, REFERENCE_JSON, worker, print_table, __file__)


if __name__ == "__main__":
    main()
