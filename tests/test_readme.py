"""The README's Python examples run as written (in a scratch directory): bring your own PyTorch model, the
design-space sweep in 20 lines, and the Python API tour with its hand-built CNN."""
from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_block(section: str, index: int) -> str:
    """The index-th ```python block of the section under the heading `## <section>`."""
    text = README.read_text()
    start = text.index(f"\n## {section}\n") + 1
    end = text.find("\n## ", start)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end if end > 0 else None], re.S)
    assert len(blocks) > index, f"no python block {index} under {section!r}"
    return blocks[index]


@pytest.mark.parametrize("section, index, printed", [
    ("A design-space sweep in 20 lines", 0, "best throughput per mm^2"),
    ("Bring your own PyTorch model", 0, "True"),
    ("Python API", 0, "critical_path_cycles="),
    ("Python API", 1, "True"),
])
def test_readme_example_runs(section, index, printed, tmp_path, monkeypatch, capsys):
    if section == "Bring your own PyTorch model":
        pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(_python_block(section, index))
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert printed in out.splitlines()[-1]
