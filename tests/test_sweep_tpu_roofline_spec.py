"""The shipped tpu_v1_roofline sweep moves the weight stream's bandwidth with the Weight Memory's: tpu_v1_like
streams every weight through its DMA engine, so a faster DRAM alone would leave the step where it was."""
from pathlib import Path

import yaml

from accelsim.dse.evaluate import compile_point
from accelsim.dse.load import load_spec

SPEC = Path(__file__).resolve().parents[1] / "experiments" / "sweeps" / "tpu_v1_roofline.yaml"
ARRAY = "chips.0.units.mxu.array.rows, chips.0.units.mxu.array.cols"


def _spec():
    """The shipped spec with two of MLP0's layers (4M weights each, still streamed), to keep the test cheap."""
    data = yaml.safe_load(SPEC.read_text())
    data["model_options"]["sizes"] = [2000, 2000, 2000]
    return load_spec(data)


def test_the_dram_bandwidth_parameter_sets_the_weight_stream_too():
    spec = _spec()
    bandwidth = next(k for k in spec.parameters if "weight_dram.bandwidth" in k)
    fast, hw, _ = compile_point(spec, {ARRAY: 256, bandwidth: "544 GB/s"})
    chip = hw.chips[0]
    dram = next(m for m in chip.memories if m.name == "weight_dram")
    assert chip.placement.parameters.stream.bandwidth_bytes_per_s == dram.bandwidth_bytes_per_s == 544e9
    slow, _, _ = compile_point(spec, {ARRAY: 256, bandwidth: "34 GB/s"})
    assert fast.makespan_cycles * 3 < slow.makespan_cycles  # the stream-bound step speeds up with its stream


def test_every_shipped_sweep_that_varies_the_weight_dram_varies_its_stream_with_it():
    for path in sorted(SPEC.parent.glob("*.yaml")):
        for key in yaml.safe_load(path.read_text()).get("parameters", {}):
            if "weight_dram.bandwidth" in key:
                assert "placement.parameters.stream.bandwidth" in key, (path.name, key)
