"""The `fusion` step option (compiler/fusion.py): a fused step compiles, checks and simulates as the fused
graph's schedule, auto keeps the unfused step unless fusion wins, bad values and graphs are refused."""
import math
import re

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cli import main
from accelsim.compiler.fusion import dram_bytes, step_graph
from accelsim.errors import MemoryFitError, ScheduleError
from accelsim.layer_names import layer_names
from accelsim.passes import inference_graph


def _superres(size: int = 8, width: int = 4) -> A.Graph:
    return inference_graph(A.models.build("superres", size=size, width=width))


def test_fusion_is_off_by_default_and_left_out_of_the_schedule():
    g = _superres()
    plain = A.compile(g, "tpu_v1_like", effort="fast")
    assert plain.options.fusion == "off" and "fusion" not in plain.model_dump_json()
    assert A.compile(g, "tpu_v1_like", effort="fast", fusion="off").model_dump_json() == plain.model_dump_json()


def test_a_fused_step_checks_and_simulates_as_the_fused_graph():
    g = _superres()
    s = A.compile(g, "tpu_v1_like", fusion=2, effort="fast")
    assert s.options.fusion == 2 and [p.name for p in s.source.passes] == ["fuse_layers_t2"]
    report = A.check(s, backend="numpy")  # the fused graph rebuilt from the schedule's source
    assert all(e.mismatch is None and e.max_rel_err <= e.tolerance for e in report.entries)
    assert A.simulate(s).makespan_cycles == s.makespan_cycles
    fused, groups = step_graph(g, s)
    assert len(groups) == 1 and "-> 2 tiles along H" in groups[0]
    assert {"conv1[tile 1/2]", "conv4[tile 2/2]"} <= set(layer_names(fused))


def test_two_fused_compiles_are_byte_identical():
    g = _superres()
    for fusion in (2, "auto"):
        a = A.compile(g, "tpu_v1_like", fusion=fusion, effort="fast").model_dump_json()
        assert a == A.compile(g, "tpu_v1_like", fusion=fusion, effort="fast").model_dump_json()


def test_auto_keeps_the_unfused_step_when_fusion_is_no_shorter():
    g = _superres()
    hw = A.load_hw("tpu_v1_like")
    fused = A.compile(g, hw, fusion=2, effort="fast")
    plain = A.compile(g, hw, effort="fast")
    assert fused.makespan_cycles > plain.makespan_cycles  # weights fetched once per tile on a tiny image
    assert A.compile(g, hw, fusion="auto", effort="fast").model_dump_json() == plain.model_dump_json()


def test_auto_fuses_a_step_whose_whole_layers_do_not_fit_the_buffer():
    g = _superres(size=16, width=16)
    hw = A.load_hw("tpu_v1_like", {"chips.0.memories.unified_buffer.capacity_bytes": 6144})
    with pytest.raises(MemoryFitError):
        A.compile(g, hw, effort="fast")
    s = A.compile(g, hw, fusion="auto", effort="fast")
    assert s.options.fusion in (2, 4, 8, 16) and s.source.passes[0].name == f"fuse_layers_t{s.options.fusion}"
    assert 0 < dram_bytes(s, hw)


@pytest.mark.parametrize("value", [0, -2, 3, 10**9, math.nan, math.inf, "x", "", True, 4.0, None, [4]])
def test_a_bad_fusion_value_is_refused_naming_the_choices(value):
    with pytest.raises(ScheduleError, match=r"fusion: expected 'off', 'auto' or a tile count \(2, 4, 8, 16\)"):
        A.compile(_superres(), "tpu_v1_like", fusion=value)


def test_fusion_of_a_training_step_is_refused_and_auto_leaves_it_unfused():
    train = A.training_graph(A.models.build("superres", size=8, width=4))
    with pytest.raises(ScheduleError, match="layer fusion applies to inference graphs.*backward pass reads") as e:
        A.compile(train, "tpu_v1_like", fusion=2)
    assert re.search(r"a backward pass \(its first node %\d+ \w+ in layer 'loss'\)", str(e.value))  # not a const
    assert A.compile(train, "tpu_v1_like", fusion="auto", effort="fast").options.fusion == "off"


def test_a_tile_count_that_fuses_nothing_is_refused_with_the_chains_reasons():
    g = A.Graph("one_conv", dtype="float32")
    x = g.input("x", (1, 2, 8, 8))
    g.output("y", F.relu(F.conv2d(x, g.param("w", (2, 2, 3, 3)), padding=1)))
    with pytest.raises(ScheduleError, match=r"no chain of 'one_conv' fuses into 4 tiles .*fusion needs 2"):
        A.compile(g, "tpu_v1_like", fusion=4)


def test_the_cli_compiles_a_fused_step_and_prints_its_groups(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["compile", "--model", "superres", "--inference", "--set", "size=8", "--set", "width=4",
                 "--hw", "tpu_v1_like", "--effort", "fast", "--fusion", "2", "-o", str(out)]) == 0
    assert "fusion: " in capsys.readouterr().out and '"fusion":2' in out.read_text().replace(" ", "")
    assert main(["compile", "--model", "superres", "--inference", "--hw", "tpu_v1_like", "--fusion", "3",
                 "-o", str(out)]) == 1
    assert "fusion: expected 'off', 'auto' or a tile count" in capsys.readouterr().err


def test_the_cli_prints_nothing_of_fusion_for_an_unfused_step(tmp_path, capsys):
    assert main(["compile", "--model", "superres", "--inference", "--set", "size=8", "--set", "width=4",
                 "--hw", "tpu_v1_like", "--effort", "fast", "-o", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "fusion" not in out and not out.startswith("\n")


def test_fusion_on_a_chip_without_a_data_movement_unit_is_refused_naming_the_node():
    # bespoke_superres has no unit for the tiles' slices, padding blocks and concat
    with pytest.raises(ScheduleError, match=r"fuse_layers_t2 skipped: no unit of bespoke_superres runs"):
        A.compile(_superres(), "bespoke_superres", fusion=2)


def test_a_sweep_point_simulates_and_checks_its_fused_step(tmp_path):
    import yaml

    from accelsim.dse.evaluate import evaluate_point, load_spec, spec_payload

    path = tmp_path / "fusion.yaml"
    path.write_text(yaml.safe_dump({
        "name": "fusion_point", "hw": "tpu_v1_like", "model": "superres", "model_options": {"size": 8, "width": 4},
        "options": {"training": False, "simulate": True, "check": True, "effort": "fast"},
        "parameters": {"options.fusion": ["off", "2"]}, "search": {"method": "grid"},
        "metrics": ["makespan_cycles", "simulated_makespan_cycles"]}))
    record = evaluate_point(spec_payload(load_spec(path)), {"options.fusion": "2"})
    assert record["error"] == "" and record["metrics"]["check_passed"] == 1.0
    assert record["metrics"]["simulated_makespan_cycles"] == record["metrics"]["makespan_cycles"]
