"""README's "Your first hour" walk-through, run line by line as written, in an empty folder: a new user's
path (template -> validate -> train -> sweep -> compile -> replay without the hardware file) stays true."""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from accelsim.cli import main

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = "<!-- new-user-path"


def _blocks() -> tuple[str, list[str]]:
    """(the sweep spec's YAML, the shell lines) of the two fenced blocks after README's marker."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index(MARKER):]
    yaml_block, bash_block = re.findall(r"```(?:yaml|bash)\n(.*?)```", after, flags=re.S)[:2]
    lines = [line.split("  #")[0].strip() for line in bash_block.splitlines()]
    return yaml_block, [line for line in lines if line]


def test_the_readme_names_each_step_of_the_path():
    spec, lines = _blocks()
    assert spec.startswith("# my_sweep.yaml")
    verbs = [line.split()[:2] for line in lines]
    assert verbs == [["accelsim", "hw"], ["accelsim", "hw"], ["accelsim", "run"], ["accelsim", "sweep"],
                     ["accelsim", "compile"], ["rm", "my_chip.yaml"], ["accelsim", "simulate"]]


@pytest.mark.timeout(1800)  # a hang guard: the sweep's four points and the runs take seconds each
def test_a_new_user_s_path_runs_as_the_readme_writes_it(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")  # the sweep extra
    spec, lines = _blocks()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_sweep.yaml").write_text(spec, encoding="utf-8")
    printed = {}
    for line in lines:
        words = shlex.split(line)
        if words[0] == "rm":
            for name in words[1:]:
                (tmp_path / name).unlink()
            continue
        assert words[0] == "accelsim", line
        capsys.readouterr()
        assert main(words[1:]) in (0, None), line
        printed[" ".join(words[1:3])] = capsys.readouterr().out
    assert "my_chip.yaml: ok" in printed["hw validate"]
    assert "energy by component" in printed["run --hw"]
    assert "layers by time" in printed["run --hw"] and "layers by dynamic energy" in printed["run --hw"]
    summary = json.loads((tmp_path / "run.json").read_text())
    assert summary["hw"] == "my_accelerator" and summary["energy_j"] > 0
    import pandas as pd

    df = pd.read_parquet(tmp_path / "my_sweep" / "results.parquet")
    assert len(df) == 4 and df["feasible"].all()
    assert sorted(set(df["chips.0.memories.sram.capacity_bytes_bytes"])) == [256 * 1024, 32 * 2**20]
    assert not (tmp_path / "my_chip.yaml").exists()
    assert "makespan" in printed["simulate my_step.json"]
