"""A unit's `peaks:` (hw/peaks.py) where a hardware author reads them: `accelsim hw show` prints a line per
step precision, and `accelsim hw template` carries a commented example that loads once uncommented.

Oracle: the hardware files themselves (a100_like's declared peaks, the template's example)."""
from __future__ import annotations

import re

import accelsim as A
from accelsim.cli import main
from accelsim.hw.peaks import STEP_PRECISIONS
from accelsim.hw.template import hw_template

MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]


def _peak_lines(out: str, unit: str) -> dict[str, str]:
    """precision -> the rest of its line, under `unit`'s peaks heading in `hw show`'s output."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"peaks of unit {unit!r}"))
    rows = {}
    for line in lines[start + 1:]:
        m = re.match(r"  (\w+)\s+(.*)", line)
        if m is None or m.group(1) not in STEP_PRECISIONS:
            break
        rows[m.group(1)] = m.group(2)
    return rows


def test_hw_show_prints_a_line_per_precision_with_the_declared_peak(capsys):
    assert main(["hw", "show", "a100_like"]) == 0
    out = capsys.readouterr().out
    [chip] = A.load_hw("a100_like").chips
    for unit in chip.units:
        rows = _peak_lines(out, unit.name)
        assert list(rows) == list(STEP_PRECISIONS)
        for p, text in rows.items():
            declared = unit.peaks.at(p)
            if declared is None:
                assert "refused" in text, (unit.name, p, text)
            else:
                assert float(text.split()[0]) == declared and text.endswith("TFLOP/s"), (unit.name, p, text)


def test_hw_show_says_when_a_unit_declares_no_peaks(capsys):
    assert main(["hw", "show", "groq_like"]) == 0
    out = capsys.readouterr().out
    assert "peaks of unit 'mxm': none declared, so a step at any --precision is refused" in out


def test_the_templates_commented_peaks_example_loads_shows_and_runs_a_bf16_step(tmp_path, capsys):
    text = hw_template(1)
    assert "        # peaks:" in text and "TFLOP/s" in text  # commented: the template's own machine is unchanged
    (tmp_path / "plain.yaml").write_text(text)
    assert A.load_hw(tmp_path / "plain.yaml").chips[0].units[0].peaks is None
    live = re.sub(r"^        # (peaks:|  \w+: [\d.]+)", r"        \1", text, flags=re.M)
    assert live != text
    path = tmp_path / "peaks.yaml"
    path.write_text(live)
    mxu = A.load_hw(path).chips[0].units[0]
    assert mxu.peaks is not None and mxu.peaks.declared() == ("fp32", "bf16")
    assert main(["hw", "show", str(path)]) == 0
    rows = _peak_lines(capsys.readouterr().out, mxu.name)
    assert float(rows["bf16"].split()[0]) == mxu.peaks.bf16 and "refused" in rows["fp8"]
    assert main(["compile", "--hw", str(path), *MLP, "--precision", "bf16", "-o", str(tmp_path / "s.json")]) == 0
