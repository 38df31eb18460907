"""Run SCALE-Sim on memory-bound convolutions (and a few GEMMs) with small SRAMs and narrow DRAM channels, and save
them to tests/data/scalesim_bandwidth_small.json, each case marked `tuning` or `held_out`.

The tile traffic model (accelsim/cost/tile_traffic.py) was fitted to the cases of tests/data/scalesim_bandwidth.json
and this file's `tuning` cases only; the `held_out` cases (whole layer shapes and GEMMs it never saw) were run once
the model was written and are only ever compared against. experiments/scalesim_bandwidth.py prints both sets with
the split. SCALE-Sim runs as in that script (USER bandwidth mode, same throw-away virtualenv):

    python3 -m venv /tmp/scalesim-venv
    /tmp/scalesim-venv/bin/pip install scalesim==3.0.0 "numpy==1.26.*"
    .venv/bin/python experiments/scalesim_small_buffers.py        # SCALE-Sim (~5 CPU min), JSON, table
    .venv/bin/python experiments/scalesim_small_buffers.py --table-only

Every case is small (at most ~80k stall-free cycles) so SCALE-Sim's per-cycle loops finish in seconds.
"""
from __future__ import annotations

from pathlib import Path

from scalesim_bandwidth import FIELDS, WORD_SIZE_BYTES, print_table, write_reference
from scalesim_compare import DATAFLOWS, cli

REPO = Path(__file__).resolve().parents[1]
SMALL_JSON = REPO / "tests" / "data" / "scalesim_bandwidth_small.json"

# (name, C, H = W, O, kernel, stride, padding, split): batch-1 convs of a few to 64 channels; the held-out layers
# differ in shape (1x1, stride 2, a 7x7 stem, an unpadded 3x3) from the tuning ones.
CONVS = [("c16o32k3s1_32", 16, 32, 32, 3, 1, 1, "tuning"), ("c32o32k3s2_32", 32, 32, 32, 3, 2, 1, "held_out"),
         ("c8o64k5s1_24", 8, 24, 64, 5, 1, 2, "tuning"), ("c64o16k1s1_28", 64, 28, 16, 1, 1, 0, "held_out"),
         ("c24o48k3s1_20", 24, 20, 48, 3, 1, 1, "tuning"), ("c3o32k7s2_48", 3, 48, 32, 7, 2, 3, "held_out"),
         ("c48o24k3s1_16", 48, 16, 24, 3, 1, 0, "held_out"), ("c32o64k3s1_16", 32, 16, 64, 3, 1, 1, "tuning")]
GEMMS = [("300x200x100", 300, 200, 100, "held_out"), ("128x512x64", 128, 512, 64, "held_out")]
ARRAYS = [(8, 8), (16, 16), (32, 32), (16, 32), (32, 8)]
SRAM_KB = (4, 8, 16, 32)
BANDWIDTHS_WORDS_PER_CYCLE = (2, 4, 8, 16)
SPLIT_FIELD = {"split": "'tuning': the tile model was fitted with it in view; 'held_out': never tuned on"}


def _common(layer: str, rows: int, cols: int, dataflow: str, sram_kb: int, bandwidth: int, split: str) -> dict:
    return dict(id=f"{layer}_{rows}x{cols}_{dataflow}_{sram_kb}kB_{bandwidth}wpc", rows=rows, cols=cols,
                dataflow=dataflow, ifmap_sram_kb=sram_kb, filter_sram_kb=sram_kb, ofmap_sram_kb=sram_kb,
                bandwidth_words_per_cycle=bandwidth, word_size_bytes=WORD_SIZE_BYTES, split=split)


def cases() -> list[dict]:
    """Every conv and GEMM once per dataflow; the array, SRAM size and bandwidth rotate with the layer and the
    dataflow, so each dataflow meets every array, SRAM size and bandwidth somewhere."""
    out = []
    for index, (name, c, hw, o, kernel, stride, pad, split) in enumerate(CONVS):
        for slot, dataflow in enumerate(DATAFLOWS):
            rows, cols = ARRAYS[(index + slot) % len(ARRAYS)]
            common = _common(f"conv_{name}", rows, cols, dataflow, SRAM_KB[(index + 2 * slot) % len(SRAM_KB)],
                             BANDWIDTHS_WORDS_PER_CYCLE[(2 * index + slot) % len(BANDWIDTHS_WORDS_PER_CYCLE)], split)
            out.append(dict(common, kind="conv", n=1, c=c, h=hw, w=hw, o=o, kh=kernel, kw=kernel,
                            stride=[stride, stride], padding=[pad, pad]))
    for index, (name, m, k, n, split) in enumerate(GEMMS):
        for slot, dataflow in enumerate(DATAFLOWS):
            rows, cols = ARRAYS[(index + 2 * slot + 1) % len(ARRAYS)]
            common = _common(f"gemm_{name}", rows, cols, dataflow, SRAM_KB[(index + slot + 1) % len(SRAM_KB)],
                             BANDWIDTHS_WORDS_PER_CYCLE[(index + 2 * slot) % len(BANDWIDTHS_WORDS_PER_CYCLE)], split)
            out.append(dict(common, kind="gemm", m=m, k=k, n=n))
    return out


def worker(out_path: Path, jobs: int) -> None:
    """Run SCALE-Sim on every case (under the SCALE-Sim venv) and write the reference JSON."""
    write_reference(out_path, jobs, cases(), FIELDS | SPLIT_FIELD)


def main() -> None:
    cli(__doc__, SMALL_JSON, worker, print_table, __file__)


if __name__ == "__main__":
    main()
