"""Run SCALE-Sim on strided convolutions with small SRAMs and narrow DRAM channels and save them to
tests/data/scalesim_bandwidth_strided.json, every case `held_out`: generated when the tile traffic model's stride
rule (accelsim/cost/tile_traffic.py) was being written, and never tuned on.

The layers cover the three ways a stride meets a kernel: stride < kernel (windows overlap, im2col pixels repeat
a stride apart), stride == kernel and a 1x1 kernel with stride 2 (no pixel repeats), and strides whose windows
do and do not run past the padded input (SCALE-Sim's ceil output size). SCALE-Sim runs as in
experiments/scalesim_bandwidth.py (USER bandwidth mode) in a throw-away virtualenv:

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy==1.26.*"
    .venv/bin/python experiments/scalesim_strided.py        # SCALE-Sim (a few CPU minutes), JSON, table
    .venv/bin/python experiments/scalesim_strided.py --table-only

After the table it prints the tile model's errors over all three reference files, the model given the layer
SCALE-Sim ran (scalesim_bandwidth.scalesim_layer, as tests/test_tile_traffic_vs_scalesim.py does): a conv's output
ceil((H + 2p - k + s) / s) wide, one window column and row more where the stride does not divide H + 2p - k;
those windows run off the padded input, so SCALE-Sim's stream skips their missing pixels, and the model is given
the input's extents to do the same (cost/im2col_holes.py).
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from scalesim_bandwidth import (FIELDS, REFERENCE_JSON, SMALL_JSON, WORD_SIZE_BYTES, print_table,
                                scalesim_cycle_count, tile_model, write_reference)
from scalesim_compare import DATAFLOWS, cli

REPO = Path(__file__).resolve().parents[1]
STRIDED_JSON = REPO / "tests" / "data" / "scalesim_bandwidth_strided.json"

# (name, C, H = W, O, kernel, stride, padding): batch-1 convs, every one held out.
CONVS = [("c16o32k3s2_33", 16, 33, 32, 3, 2, 1),   # overlap; floor and ceil output sizes agree (17)
         ("c32o16k1s2_28", 32, 28, 16, 1, 2, 0),   # 1x1 stride 2: no repeats; SCALE-Sim's output is 15, not 14
         ("c8o32k2s2_32", 8, 32, 32, 2, 2, 0),     # stride == kernel: no repeats
         ("c24o24k3s3_30", 24, 30, 24, 3, 3, 0),   # stride == kernel, 3x3
         ("c16o48k5s2_24", 16, 24, 48, 5, 2, 2)]   # 5x5 stride 2: repeats two columns apart; output 13, not 12
ARRAYS = [(8, 8), (16, 16), (32, 32), (16, 32), (32, 8)]
SRAM_KB = (4, 8, 16, 32)
BANDWIDTHS_WORDS_PER_CYCLE = (2, 4, 8, 16)
SPLIT_FIELD = {"split": "'held_out': never tuned on (every case of this file)"}


def cases() -> list[dict]:
    """Every conv once per dataflow; the array, SRAM size and bandwidth rotate with the layer and the dataflow."""
    out = []
    for index, (name, c, hw, o, kernel, stride, pad) in enumerate(CONVS):
        for slot, dataflow in enumerate(DATAFLOWS):
            rows, cols = ARRAYS[(index + slot + 2) % len(ARRAYS)]
            sram_kb = SRAM_KB[(index + 2 * slot + 1) % len(SRAM_KB)]
            bandwidth = BANDWIDTHS_WORDS_PER_CYCLE[(2 * index + slot + 1) % len(BANDWIDTHS_WORDS_PER_CYCLE)]
            out.append(dict(id=f"conv_{name}_{rows}x{cols}_{dataflow}_{sram_kb}kB_{bandwidth}wpc", kind="conv", n=1,
                            c=c, h=hw, w=hw, o=o, kh=kernel, kw=kernel, stride=[stride, stride],
                            padding=[pad, pad], rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kb=sram_kb,
                            filter_sram_kb=sram_kb, ofmap_sram_kb=sram_kb, bandwidth_words_per_cycle=bandwidth,
                            word_size_bytes=WORD_SIZE_BYTES, split="held_out"))
    return out


def worker(out_path: Path, jobs: int) -> None:
    """Run SCALE-Sim on every case (under the SCALE-Sim venv) and write the reference JSON."""
    write_reference(out_path, jobs, cases(), FIELDS | SPLIT_FIELD)


def print_model_errors(strided: dict) -> None:
    """The tile model's errors over the three reference files, given the layer SCALE-Sim ran."""
    files = {"bandwidth": json.loads(REFERENCE_JSON.read_text()), "small": json.loads(SMALL_JSON.read_text()),
             "strided": strided}
    errors = []
    for name, reference in files.items():
        for case in reference["cases"]:
            case = dict(case, split=case.get("split", reference.get("split", "tuning")))
            cycles, _ = tile_model(case)
            errors.append((name, case, abs(cycles - scalesim_cycle_count(case)) / scalesim_cycle_count(case)))
    print(f"tile model given SCALE-Sim's layer: median {statistics.median(e for *_, e in errors):.1%} over "
          f"{len(errors)}; stall-free worst {max(e for _, c, e in errors if c['scalesim_stall_cycles'] == 0):.1%}; "
          f"by dataflow and split (median / worst):")
    for dataflow in DATAFLOWS:
        for split in (None, "tuning", "held_out"):
            mine = [e for _, c, e in errors if c["dataflow"] == dataflow and split in (None, c["split"])]
            print(f"  {dataflow} {split or 'all':8}: {statistics.median(mine):6.1%} / {max(mine):6.1%} ({len(mine)})")
    for name, case, error in sorted(errors, key=lambda row: -row[2])[:5]:
        print(f"  worst: {error:6.1%} {case['id']} [{case['split']}, {name}]")


def print_results(strided: dict) -> None:
    print_table(strided)
    print()
    print_model_errors(strided)


def main() -> None:
    cli(__doc__, STRIDED_JSON, worker, print_results, __file__)


if __name__ == "__main__":
    main()
