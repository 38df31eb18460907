"""A commented starting hardware file (`accelsim hw template`): one chip kind with a systolic array, a
vector unit, SRAM and DRAM, every number saying what it is and what is typical, so that a first
description is edited from a file that loads rather than written from prose.
"""
from __future__ import annotations

from accelsim.errors import HwConfigError
from accelsim.hw.fields import RANGES

SCHEMA_FILE = "accelsim-hw.schema.json"
"""Where the template's first line tells a YAML language server to find the schema (`hw schema -o`)."""

_HEAD = """\
# yaml-language-server: $schema={schema}
# A hardware description for accelsim, to edit into your own. The line above lets an editor with a YAML
# language server complete and check keys: write the schema beside this file with
#   accelsim hw schema -o {schema}
# Then: `accelsim hw validate FILE` checks it, `accelsim hw show FILE` prints its units, peaks and
# memories, `accelsim run --hw FILE --model mlp` trains a small model on it.
# Sizes and bandwidths take units: B is a byte and b a bit ("32 MiB", "1.5 GB", "34 GB/s", "200 Gb/s");
# a plain number is bytes (bytes/s). Area and energy are derived from technology_nm unless given.
name: my_accelerator  # a plain identifier; reports, plots and schedule file names use it
description: >-
  A starting point: one systolic array for matmul and convolution, one vector unit for everything
  else, on-chip SRAM and off-chip HBM.
clock_hz: 1 GHz  # every cycle count is in this clock; accelerators run at 0.7 to 2 GHz
bytes_per_element:
  float32: 2  # bytes a float32 tensor takes on the machine: 2 for fp16/bf16 (training), 1 int8, 4 fp32
chips:
  - name: chip
    count: {count}  # identical copies of this chip; more than 1 needs the interconnect at the end
    technology_nm: 7  # process node in nm (5, 7, 14, 16, 22, 28 or 45); sets derived area and energy
    units:
      - name: mxu  # the matrix unit
        categories: [tensor]  # matmul and conv2d with their gradient ops (listing `ops: [matmul]`
                              # instead would leave a training step's conv2d_grad_* without a unit)
        count: 1  # identical arrays on the chip; 1 to 4 is usual (TPU v4: 4 per core)
        array:
          rows: 128  # processing elements down the array; 128 in TPU v2-v4, 256 in TPU v1
          cols: 128  # processing elements across it; usually as many as rows
          dataflow: ws  # weight stationary, as TPUs; os (output) and is (input stationary) also exist
        latency_cycles: 0  # extra pipeline cycles per node; 0 to a few dozen
        # peaks:  # dense TFLOP/s of all this unit's instances at each step precision (`--precision`), from
        #         # a datasheet; a step at a precision left out is refused (fp32, tf32, bf16, fp16, fp8), so
        #         # every unit that computes declares the step's precision (see the vpu's below)
        #   bf16: 32.8  # 128 x 128 MACs x 2 ops x 1 GHz
        #   fp32: 8.2  # e.g. a quarter of the rate when each fp32 multiply takes four passes
        reads: [sram, hbm]  # memories it reads operands from; the first (fastest) streams them
        writes: [sram]  # memories it writes results to
      - name: vpu  # the vector unit: activations, normalization, losses, reshapes
        categories: [elementwise, reduction, data_movement]
        vector:
          lanes: 128  # SIMD lanes; often as many as the array's columns, 8 to 2048
          ops_per_lane_per_cycle: 1  # elementwise ops each lane finishes per cycle; 1 to 16
        # peaks: {{bf16: 0.128, fp32: 0.064}}  # TFLOP/s by step precision, as the mxu's: 128 lanes x 1 GHz
        reads: [sram]
        writes: [sram]
    memories:
      - name: sram
        kind: sram  # on-chip
        capacity_bytes: 32 MiB  # 8 to 256 MiB on accelerators (TPU v1: 24 MiB, Groq: 220 MiB)
        bandwidth_bytes_per_cycle: 1024  # bytes per clock cycle; a few hundred to a few thousand
        latency_cycles: 2  # cycles to the first byte; 1 to 10 on chip
      - name: hbm
        kind: hbm  # off-chip (dram for DDR/LPDDR)
        capacity_bytes: 16 GiB  # 8 to 80 GiB of HBM (DDR: 4 to 64 GiB)
        bandwidth_bytes_per_s: 800 GB/s  # 0.4 to 3.3 TB/s for HBM (DDR4: 20 to 50 GB/s)
        latency_cycles: 200  # cycles to the first byte; 100 to 500 off chip
"""

_INTERCONNECT = """\
interconnect:  # links between the chips
  topology: ring  # ring (each chip to its two neighbours), fully_connected or switch
  bandwidth_bytes_per_s: 50 GB/s  # per link and direction: 25 to 100 GB/s; NICs are rated in bits (200 Gb/s)
  link_latency_cycles: 500  # cycles per hop; a few hundred (0.5 us at 1 GHz)
"""


def hw_template(chips: int = 1) -> str:
    """The commented starting file for a machine of `chips` chips (an interconnect when more than one)."""
    rng = RANGES["chip_count"]
    if isinstance(chips, bool) or not isinstance(chips, int) or not rng.lo <= chips <= rng.hi:
        raise HwConfigError(f"a template for {chips!r} chips: {rng.describe()}")
    return _HEAD.format(schema=SCHEMA_FILE, count=chips) + (_INTERCONNECT if chips > 1 else "")
