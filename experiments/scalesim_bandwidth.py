"""Run SCALE-Sim with a fixed interface bandwidth and small SRAMs on GEMM and conv cases, save its cycles and
DRAM traffic to tests/data/scalesim_bandwidth.json, and print them next to accelsim's unique-bytes roofline.

SCALE-Sim lives in the same throw-away virtualenv as for experiments/scalesim_compare.py:

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy==1.26.*"

then, from the repo root, with the project venv:

    .venv/bin/python experiments/scalesim_bandwidth.py                 # SCALE-Sim (~13 min, 2 cores), JSON, table
    .venv/bin/python experiments/scalesim_bandwidth.py --table-only    # only compare with the saved JSON

The table covers this file's cases (all `tuning`: the tile model, accelsim/cost/tile_traffic.py, was fitted
with them in view) and experiments/scalesim_small_buffers.py's (small SRAMs, each case `tuning` or `held_out`,
marked [T] / [H]), then the tile model's error against SCALE-Sim's total cycles by split and dataflow.

SCALE-Sim runs in its USER bandwidth mode ([run_presets] InterfaceBandwidth: USER). There its ifmap and
filter SRAMs fill from DRAM at [layout] IfmapSRAMBankBandwidth / FilterSRAMBankBandwidth words per cycle and
only the ofmap SRAM drains at [architecture_presets] Bandwidth, so all three are set to the case's bandwidth
(one bank each, since a bank count must divide the bandwidth). Words are 1 byte (fixed in SCALE-Sim), so an
SRAM of S kB holds 1024*S words, half of it the active buffer and half the prefetch (or drain) buffer.
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import tempfile
import time
from multiprocessing import Pool
from pathlib import Path

from scalesim_compare import (DATAFLOWS, SUPERRES_CONVS, SUPERRES_HW, _topology_csv, accelsim_view, cli,
                              scalesim_config)

REPO = Path(__file__).resolve().parents[1]
REFERENCE_JSON = REPO / "tests" / "data" / "scalesim_bandwidth.json"  # every case 'tuning' (its "split")
SMALL_JSON = REPO / "tests" / "data" / "scalesim_bandwidth_small.json"  # experiments/scalesim_small_buffers.py
SRAM_KB = (64, 128, 256, 512, 1024)
BANDWIDTHS_WORDS_PER_CYCLE = (4, 8, 10, 16, 32, 64)
ARRAYS = (32, 128)
WORD_SIZE_BYTES = 1  # SCALE-Sim 3.0.0 hard-codes word_size = 1 in single_layer_sim.run

# (name, M, K, N): operands about one small SRAM each, a large output, a long reduction.
GEMMS = [("256x256x256", 256, 256, 256), ("1024x64x512", 1024, 64, 512), ("256x1024x128", 256, 1024, 128)]

# The anchor (superres conv2, output stationary, 32x32 array, 64 kB SRAMs, 10 words/cycle), then one
# factor at a time around it: the SRAM size at 10 words/cycle and the bandwidth at 64 kB.
ANCHOR = dict(layer="conv2", rows=32, cols=32, dataflow="os", sram_kb=64, bandwidth=10)
ANCHOR_SRAM_SWEEP_KB = (128, 256, 512, 1024)
ANCHOR_BANDWIDTH_SWEEP = (4, 64)
# A non-square array, rows != cols, once per GEMM: (gemm, dataflow, SRAM kB, words/cycle).
NONSQUARE_ARRAY = (16, 64)
NONSQUARE_CASES = [("256x256x256", "os", 256, 8), ("1024x64x512", "ws", 64, 32), ("256x1024x128", "is", 512, 16)]

FIELDS = {  # every field of a case: its meaning and unit
    "id": "case name: layer, array rows x cols, dataflow, SRAM kB, bandwidth in words/cycle",
    "kind": "'gemm' or 'conv'",
    "m": "gemm only: rows of the left operand and of the output",
    "k": "gemm only: the reduction length",
    "n": "gemm: columns of the right operand and of the output; conv: batch (always 1)",
    "c": "conv only: input channels",
    "h": "conv only: input height, unpadded (SCALE-Sim is given h + 2 * padding)",
    "w": "conv only: input width, unpadded (SCALE-Sim is given w + 2 * padding)",
    "o": "conv only: output channels (filters)",
    "kh": "conv only: filter height",
    "kw": "conv only: filter width",
    "stride": "conv only: [height, width] stride",
    "padding": "conv only: [height, width] zero padding on each side",
    "rows": "systolic array height, PEs",
    "cols": "systolic array width, PEs",
    "dataflow": "'os' output, 'ws' weight or 'is' input stationary",
    "ifmap_sram_kb": "IfmapSramSzkB: ifmap SRAM, kB of 1-byte words, double-buffered (half active)",
    "filter_sram_kb": "FilterSramSzkB: filter SRAM, kB of 1-byte words, double-buffered (half active)",
    "ofmap_sram_kb": "OfmapSramSzkB: ofmap SRAM, kB of 1-byte words, double-buffered (half drains)",
    "bandwidth_words_per_cycle": "DRAM interface bandwidth of each SRAM (ifmap, filter and ofmap each), "
                                 "words/cycle",
    "word_size_bytes": "bytes per word (fixed at 1 in SCALE-Sim)",
    "scalesim_total_cycles": "COMPUTE_REPORT 'Total Cycles': the 0-based cycle in which the last ofmap row "
                             "reaches the ofmap SRAM; stalls included, the fill before and the drain after not",
    "scalesim_total_cycles_incl_prefetch": "COMPUTE_REPORT 'Total Cycles (incl. prefetch)': last ofmap DRAM "
                                           "write minus first ifmap/filter DRAM read (the fill runs at negative "
                                           "cycles), cycles",
    "scalesim_stall_cycles": "COMPUTE_REPORT 'Stall Cycles': the sum over demand rows of the largest of the "
                             "three SRAMs' stalls at that row, cycles",
    "scalesim_compute_cycles": "rows of SCALE-Sim's demand matrices: its stall-free cycle count (not in its "
                               "reports)",
    "scalesim_ifmap_sram_reads": "DETAILED_ACCESS_REPORT 'SRAM IFMAP Reads': ifmap words the array read, words",
    "scalesim_filter_sram_reads": "DETAILED_ACCESS_REPORT 'SRAM Filter Reads': filter words the array read, words",
    "scalesim_ofmap_sram_writes": "DETAILED_ACCESS_REPORT 'SRAM OFMAP Writes': output words the array wrote "
                                  "(partial sums of every K fold for ws/is), words",
    "scalesim_ifmap_dram_reads": "DETAILED_ACCESS_REPORT 'DRAM IFMAP Reads': words, counted in whole "
                                 "bandwidth-wide request lines, re-fetches included",
    "scalesim_filter_dram_reads": "DETAILED_ACCESS_REPORT 'DRAM Filter Reads': words, as the ifmap's",
    "scalesim_ofmap_dram_writes": "DETAILED_ACCESS_REPORT 'DRAM OFMAP Writes': words drained to DRAM",
    "scalesim_ifmap_dram_start_cycle": "DETAILED_ACCESS_REPORT 'DRAM IFMAP Start Cycle'",
    "scalesim_ifmap_dram_stop_cycle": "DETAILED_ACCESS_REPORT 'DRAM IFMAP Stop Cycle'",
    "scalesim_filter_dram_start_cycle": "DETAILED_ACCESS_REPORT 'DRAM Filter Start Cycle'",
    "scalesim_filter_dram_stop_cycle": "DETAILED_ACCESS_REPORT 'DRAM Filter Stop Cycle'",
    "scalesim_ofmap_dram_start_cycle": "DETAILED_ACCESS_REPORT 'DRAM OFMAP Start Cycle'",
    "scalesim_ofmap_dram_stop_cycle": "DETAILED_ACCESS_REPORT 'DRAM OFMAP Stop Cycle' (after the final drain)",
}
NOTE = ("USER mode: the ifmap and filter SRAMs fill from DRAM at [layout] IfmapSRAMBankBandwidth / "
        "FilterSRAMBankBandwidth words/cycle and the ofmap SRAM drains at [architecture_presets] Bandwidth, each "
        "over its own channel (3 x bandwidth in all); all three are set to bandwidth_words_per_cycle. Before "
        "cycle 0 each read SRAM fills its active half (or the whole operand if smaller); after the last row "
        "the ofmap SRAM drains. The fetch order is SCALE-Sim's prefetch matrix (the operand in fold order, "
        "im2col for convs, rolled along diagonals); a read SRAM holds a sliding window of it and wraps around "
        "to its start when a later fold needs the data again, so DRAM reads exceed the operand's size when it "
        "does not fit the active half. ws/is write every K fold's partial sums to DRAM (never read back).")

# Report column -> JSON field, read from the CSV files run_scale writes.
COMPUTE_COLUMNS = {"Total Cycles (incl. prefetch)": "scalesim_total_cycles_incl_prefetch",
                   "Total Cycles": "scalesim_total_cycles", "Stall Cycles": "scalesim_stall_cycles"}
# DETAILED_ACCESS_REPORT names operands IFMAP / Filter / OFMAP; the output is written, the others read.
DETAIL_COLUMNS = {f"{memory} {label} {column}": f"scalesim_{operand}_{memory.lower()}_{field}"
                  for label, operand, access in (("IFMAP", "ifmap", "Reads"), ("Filter", "filter", "Reads"),
                                                 ("OFMAP", "ofmap", "Writes"))
                  for memory, column, field in (("SRAM", access, access.lower()), ("DRAM", access, access.lower()),
                                                ("DRAM", "Start Cycle", "start_cycle"),
                                                ("DRAM", "Stop Cycle", "stop_cycle"))}


def _layer(name: str) -> dict:
    """The layer's shape fields: a GEMM of GEMMS or a superres conv."""
    for gemm, m, k, n in GEMMS:
        if gemm == name:
            return dict(layer=f"gemm_{name}", kind="gemm", m=m, k=k, n=n)
    for conv, c, o, kernel, pad in SUPERRES_CONVS:
        if conv == name:
            return dict(layer=f"superres_{name}", kind="conv", n=1, c=c, h=SUPERRES_HW, w=SUPERRES_HW, o=o,
                        kh=kernel, kw=kernel, stride=[1, 1], padding=[pad, pad])
    raise ValueError(f"unknown layer {name!r}")


def _case(layer: str, rows: int, cols: int, dataflow: str, sram_kb: int, bandwidth: int) -> dict:
    shape = _layer(layer)
    case_id = f"{shape.pop('layer')}_{rows}x{cols}_{dataflow}_{sram_kb}kB_{bandwidth}wpc"
    return dict(id=case_id, **shape, rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kb=sram_kb,
                filter_sram_kb=sram_kb, ofmap_sram_kb=sram_kb, bandwidth_words_per_cycle=bandwidth,
                word_size_bytes=WORD_SIZE_BYTES)


def cases() -> list[dict]:
    """The anchor and its one-factor sweeps, every layer x dataflow x square array once, the non-square cases.

    The grid rotates SRAM size and bandwidth with the layer's index and the dataflow/array slot, so each layer,
    dataflow and array meets most SRAM sizes and several bandwidths without running every combination. It
    skips conv2 on 32x32, which the anchor cases cover and which SCALE-Sim needs minutes per case for.
    """
    a = ANCHOR
    anchor_like = [(a["sram_kb"], a["bandwidth"])] + [(kb, a["bandwidth"]) for kb in ANCHOR_SRAM_SWEEP_KB]
    anchor_like += [(a["sram_kb"], bw) for bw in ANCHOR_BANDWIDTH_SWEEP]
    out = [_case(a["layer"], a["rows"], a["cols"], a["dataflow"], kb, bw) for kb, bw in anchor_like]
    layers = [name for name, *_ in GEMMS] + [name for name, *_ in SUPERRES_CONVS]
    for index, layer in enumerate(layers):
        for slot, (dataflow, array) in enumerate((df, arr) for df in DATAFLOWS for arr in ARRAYS):
            if (layer, array) == (a["layer"], a["rows"]):
                continue
            sram_kb = SRAM_KB[(index + slot) % len(SRAM_KB)]
            bandwidth = BANDWIDTHS_WORDS_PER_CYCLE[(index + 2 * slot) % len(BANDWIDTHS_WORDS_PER_CYCLE)]
            out.append(_case(layer, array, array, dataflow, sram_kb, bandwidth))
    rows, cols = NONSQUARE_ARRAY
    out += [_case(gemm, rows, cols, df, kb, bw) for gemm, df, kb, bw in NONSQUARE_CASES]
    return out


def scalesim_cycle_count(case: dict) -> int:
    """SCALE-Sim's total cycles as a count (it reports the last cycle's 0-based index)."""
    return case["scalesim_total_cycles"] + 1


# ---------------------------------------------------------------- worker side (SCALE-Sim venv only)

def _config(case: dict) -> str:
    """USER mode: every SRAM's DRAM channel at the case's bandwidth, one bank per read SRAM (the bank count must
    divide the bandwidth)."""
    return scalesim_config(case["rows"], case["cols"], case["dataflow"], case["ifmap_sram_kb"], case["filter_sram_kb"],
                           case["ofmap_sram_kb"], interface="USER", bandwidth=case["bandwidth_words_per_cycle"],
                           bank_bandwidth=case["bandwidth_words_per_cycle"], banks=1)


def _report_row(path: Path, columns: dict[str, str]) -> dict[str, int]:
    """The one layer's row of a SCALE-Sim report CSV, the named columns as ints."""
    with path.open() as f:
        rows = [{key.strip(): value.strip() for key, value in row.items() if key and key.strip()}
                for row in csv.DictReader(f)]
    assert len(rows) == 1, f"{path}: expected one layer, got {len(rows)}"
    out = {}
    for column, field in columns.items():
        value = float(rows[0][column])
        assert value == int(value), f"{path}: {column} = {value} is not a whole number"
        out[field] = int(value)
    return out


def _run_one(case: dict) -> dict:
    from scalesim.scale_sim import scalesim

    start_s = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scalesim-", dir="/tmp") as tmp:
        config, topology, layout = (os.path.join(tmp, f) for f in ("run.cfg", "topology.csv", "layout.csv"))
        Path(config).write_text(_config(case))
        Path(topology).write_text(_topology_csv(case))
        Path(layout).write_text("Layer name,\n")  # required file; unused without custom layouts
        sim = scalesim(save_disk_space=True, verbose=False, config=config, topology=topology, layout=layout,
                       input_type_gemm=case["kind"] == "gemm")
        sim.run_scale(top_path=tmp)
        reports = Path(tmp) / "run"
        result = _report_row(reports / "COMPUTE_REPORT.csv", COMPUTE_COLUMNS)
        result |= _report_row(reports / "DETAILED_ACCESS_REPORT.csv", DETAIL_COLUMNS)
        layer = sim.runner.single_layer_sim_object_list[0]
        result["scalesim_compute_cycles"] = int(layer.compute_system.get_ofmap_demand_mat().shape[0])
    seconds = time.monotonic() - start_s
    print(f"  {case['id']}: total cycles {result['scalesim_total_cycles']}, stalls "
          f"{result['scalesim_stall_cycles']} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    return dict(case, **result)


def worker(out_path: Path, jobs: int) -> None:
    """Run SCALE-Sim on every case (under the SCALE-Sim venv) and write the reference JSON."""
    todo = cases()
    slow_first = sorted(todo, key=lambda case: case["kind"] != "conv")  # the quick GEMMs fill the tail
    write_reference(out_path, jobs, todo, FIELDS, order=slow_first, split="tuning")


def write_reference(out_path: Path, jobs: int, todo: list[dict], fields: dict, order: list[dict] | None = None,
                    **extra: object) -> None:
    """Run SCALE-Sim on `todo` over `jobs` processes (in `order`, default todo's) and write the reference JSON
    with the cases in todo's order: the one writer of this file's and its siblings' reference sets."""
    from importlib.metadata import version

    start_s = time.monotonic()
    with Pool(jobs) as pool:
        by_id = {case["id"]: case for case in pool.imap_unordered(_run_one, order or todo)}
    done = [by_id[case["id"]] for case in todo]
    print(f"SCALE-Sim: {len(done)} cases in {time.monotonic() - start_s:.0f} s on {jobs} processes",
          file=sys.stderr)
    reference = dict(scalesim_version=version("scalesim"), numpy_version=version("numpy"),
                     interface_bandwidth="USER", fields=fields, note=NOTE, cases=done, **extra)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(dump_reference(reference))


def dump_reference(reference: dict) -> str:
    """JSON with sorted keys, one field description and one case per line, so a diff after a re-run shows
    which cases moved."""
    head = [f" {json.dumps(key)}: {json.dumps(value)}" for key, value in sorted(reference.items())
            if key not in ("cases", "fields")]
    fields = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in sorted(reference["fields"].items())]
    cases_json = [f"  {json.dumps(case, sort_keys=True)}" for case in reference["cases"]]
    return ("{\n" + ",\n".join(head) + ',\n "fields": {\n' + ",\n".join(fields) + "\n },\n"
            ' "cases": [\n' + ",\n".join(cases_json) + "\n ]\n}\n")


# ---------------------------------------------------------------- driver side (project venv)

def unique_words(case: dict) -> int:
    """Operand and output elements that accelsim's cost model moves: each input read once, the output written
    once (OpDef.read_elems + written_elems; the conv input unpadded)."""
    from accelsim.ops.registry import get_op

    if case["kind"] == "gemm":
        op, shapes = get_op("matmul"), ((case["m"], case["k"]), (case["k"], case["n"]))
        attrs = dict(transpose_a=False, transpose_b=False)
    else:
        op = get_op("conv2d")
        shapes = ((case["n"], case["c"], case["h"], case["w"]), (case["o"], case["c"], case["kh"], case["kw"]))
        attrs = dict(stride=tuple(case["stride"]), padding=tuple(case["padding"]), dilation=(1, 1), groups=1)
    out = op.infer(*shapes, **attrs)
    return int(op.read_elems(out, *shapes, **attrs)) + int(op.written_elems(out, *shapes, **attrs))


def roofline_cycles(case: dict) -> tuple[int, int]:
    """(accelsim compute cycles, unique-bytes roofline cycles = max(compute, unique words / bandwidth))."""
    from accelsim.cost.systolic import gemm_cycles

    batch, m, k, n = accelsim_view(case)
    compute = gemm_cycles(m, k, n, case["rows"], case["cols"], case["dataflow"], batch).compute_cycles
    memory = -(-unique_words(case) // case["bandwidth_words_per_cycle"])
    return compute, max(compute, memory)


def emulate(case: dict):
    """accelsim's exact emulation of SCALE-Sim's memory system (accelsim.cost.scalesim_memory) on one case."""
    from accelsim.cost.scalesim_memory import scalesim_conv_traffic, scalesim_gemm_traffic

    bandwidth = case["bandwidth_words_per_cycle"]
    buffers = tuple(case[f"{operand}_sram_kb"] * 1024 // case["word_size_bytes"]
                    for operand in ("ifmap", "filter", "ofmap")) + (bandwidth,) * 3
    if case["kind"] == "gemm":
        return scalesim_gemm_traffic(case["m"], case["k"], case["n"], case["rows"], case["cols"], case["dataflow"],
                                     *buffers)
    return scalesim_conv_traffic(case["c"], case["h"], case["w"], case["o"], case["kh"], case["kw"],
                                 case["stride"][0], case["padding"][0], case["rows"], case["cols"],
                                 case["dataflow"], *buffers)


def scalesim_layer(case: dict) -> tuple[int, int, int, int, tuple[int, ...] | None]:
    """The workload SCALE-Sim ran, as the tile model takes it: (batch, m, k, n, im2col). A conv's output is
    SCALE-Sim's ceil((H + 2p - k + s) / s) a side (one window more than accelsim's floor((H + 2p - k) / s) + 1
    where s does not divide H + 2p - k), with the padded input's extents so the windows off it are holes."""
    if case["kind"] != "conv":
        return accelsim_view(case)[:4] + (None,)
    stride = case["stride"][1]
    in_h, in_w = case["h"] + 2 * case["padding"][0], case["w"] + 2 * case["padding"][1]
    out_h, out_w = (-(-(size - kernel + stride) // stride) for size, kernel in ((in_h, case["kh"]), (in_w, case["kw"])))
    assert case["n"] == 1, f"{case['id']}: SCALE-Sim's reference convs are batch 1"
    return (1, out_h * out_w, case["kh"] * case["kw"] * case["c"], case["o"],
            (case["c"], case["kw"], out_w, stride, in_w, in_h))


def tile_model(case: dict) -> tuple[int, int]:
    """accelsim's own tile-level model (accelsim.cost.tile_traffic) on one case, given the layer SCALE-Sim ran
    (scalesim_layer): (cycles from the first MAC to the last output, as SCALE-Sim's Total Cycles count them: the
    model leaves the fill and drain to the neighbouring nodes; DRAM words, ifmap + filter + ofmap)."""
    from accelsim.cost.systolic import gemm_cycles
    from accelsim.cost.tile_traffic import BufferConfig, tile_traffic

    batch, m, k, n, im2col = scalesim_layer(case)
    compute = gemm_cycles(m, k, n, case["rows"], case["cols"], case["dataflow"], batch).compute_cycles
    buffers = BufferConfig(*(case[f"{operand}_sram_kb"] * 1024 for operand in ("ifmap", "filter", "ofmap")),
                           case["bandwidth_words_per_cycle"])
    t = tile_traffic(batch, m, k, n, case["rows"], case["cols"], case["dataflow"], compute,
                     case["word_size_bytes"], buffers, im2col=im2col)
    return t.total_cycles, t.input_fetch_elems + t.weight_fetch_elems + t.output_write_elems


def split_of(case: dict, reference: dict) -> str:
    """'tuning' or 'held_out': a case's own mark, else its file's (this script's cases are all tuning)."""
    return case.get("split", reference.get("split", "tuning"))


def tile_summary(reference: dict) -> None:
    """The tile model's |error| against SCALE-Sim's total cycles by split and dataflow, and on stall-free cases."""
    rows = []
    for case in reference["cases"]:
        cycles, _ = tile_model(case)
        total = scalesim_cycle_count(case)
        rows.append((split_of(case, reference), case["dataflow"], case["scalesim_stall_cycles"] == 0,
                     abs(cycles - total) / total))
    print("tile model vs SCALE-Sim total cycles, |error|: median / worst (cases)")
    for split in ("tuning", "held_out", None):
        for dataflow in DATAFLOWS + (None,):
            errors = [e for s, d, _, e in rows if split in (None, s) and dataflow in (None, d)]
            if errors:
                print(f"  {split or 'all':9} {dataflow or 'all':4} {statistics.median(errors):7.1%} {max(errors):7.1%} "
                      f"({len(errors)})")
    stall_free = [e for _, _, free, e in rows if free]
    if stall_free:
        print(f"  stall-free cases: worst {max(stall_free):.1%} ({len(stall_free)})")


def print_table(reference: dict) -> tuple[float, float]:
    """Print SCALE-Sim's cycles and traffic next to accelsim's roofline and its exact emulation; return the
    median and max |relative error| of the roofline against SCALE-Sim's total cycles."""
    print(f"SCALE-Sim {reference['scalesim_version']} (USER bandwidth) vs accelsim's unique-bytes roofline "
          "= max(compute, unique words / bandwidth) and its emulation of SCALE-Sim's memory (emul)")
    print("total: SCALE-Sim's Total Cycles as a count; +fill/drain: its Total Cycles (incl. prefetch); "
          "dram/uniq: its DRAM words over the unique words; dram: its DRAM words (ifmap + filter + ofmap)")
    print(f"{'case [T tuning, H held out]':50} {'total':>9} {'stalls':>9} {'compute':>8} {'same':>4} {'roofline':>8} {'roof/tot':>8} "
          f"{'+fill/drain':>11} {'roof/+fd':>8} {'dram/uniq':>9} {'emul':>9} {'emul/tot':>8} {'dram':>10} "
          f"{'emul dram':>10} {'emul/dram':>9} {'tile/tot':>8} {'tile/dram':>9}")
    errors, errors_with_fill, emul_errors, emul_dram_errors = [], [], [], []
    tile_errors, tile_dram_errors = [], []
    start_s = time.monotonic()
    for case in reference["cases"]:
        compute, roofline = roofline_cycles(case)
        total, with_fill = scalesim_cycle_count(case), case["scalesim_total_cycles_incl_prefetch"]
        errors.append(abs(roofline - total) / total)
        errors_with_fill.append(abs(roofline - with_fill) / with_fill)
        dram = sum(case[f"scalesim_{op}_dram_{access}"]
                   for op, access in (("ifmap", "reads"), ("filter", "reads"), ("ofmap", "writes")))
        emul = emulate(case)
        emul_dram = emul.ifmap_dram_words + emul.filter_dram_words + emul.ofmap_dram_words
        emul_errors.append(abs(emul.total_cycles - total) / total)
        emul_dram_errors.append(abs(emul_dram - dram) / dram)
        tile_cycles, tile_dram = tile_model(case)
        tile_errors.append(abs(tile_cycles - total) / total)
        case_label = f"{case['id']} [{'H' if split_of(case, reference) == 'held_out' else 'T'}]"
        tile_dram_errors.append(abs(tile_dram - dram) / dram)
        same = "yes" if compute == case["scalesim_compute_cycles"] else "NO"
        print(f"{case_label:50} {total:>9} {case['scalesim_stall_cycles']:>9} {compute:>8} {same:>4} "
              f"{roofline:>8} "
              f"{roofline / total:>8.3f} {with_fill:>11} {roofline / with_fill:>8.3f} "
              f"{dram / unique_words(case):>9.1f} {emul.total_cycles:>9} {emul.total_cycles / total:>8.3f} "
              f"{dram:>10} {emul_dram:>10} {emul_dram / dram:>9.3f} {tile_cycles / total:>8.3f} "
              f"{tile_dram / dram:>9.3f}")
    median, worst = statistics.median(errors), max(errors)
    print(f"roofline vs SCALE-Sim over {len(errors)} cases: |error| against total cycles median {median:.1%}, "
          f"max {worst:.1%}; against total incl. fill/drain median {statistics.median(errors_with_fill):.1%}, "
          f"max {max(errors_with_fill):.1%}")
    print(f"emulation vs SCALE-Sim: |error| of total cycles median {statistics.median(emul_errors):.2%}, max "
          f"{max(emul_errors):.2%}; of DRAM words median {statistics.median(emul_dram_errors):.2%}, max "
          f"{max(emul_dram_errors):.2%} ({time.monotonic() - start_s:.1f} s for the table, emulation included)")
    print(f"tile model vs SCALE-Sim: |error| of total cycles median {statistics.median(tile_errors):.1%}, max "
          f"{max(tile_errors):.1%}; of DRAM words median {statistics.median(tile_dram_errors):.1%}, max "
          f"{max(tile_dram_errors):.1%}")
    tile_summary(reference)
    return median, worst


def print_both(reference: dict) -> None:
    """The table for this script's reference and then for experiments/scalesim_small_buffers.py's, with the
    tile model's errors over both together."""
    print_table(reference)
    small = json.loads(SMALL_JSON.read_text())
    print()
    print_table(small)
    print()
    print("both files together:")
    both = dict(reference, cases=[dict(case, split=split_of(case, reference)) for case in reference["cases"]]
                + small["cases"])
    tile_summary(both)


def main() -> None:
    cli(__doc__, REFERENCE_JSON, worker, print_both, __file__)


if __name__ == "__main__":
    main()
