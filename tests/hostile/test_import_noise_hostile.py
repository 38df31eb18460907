"""What torch says to itself never reaches the user: importing a good .pt2 prints nothing on stderr (torch's
FutureWarning about LeafSpec, its log lines), a truncated .pt2 prints only accelsim's paragraph (not torch's
logged traceback), and a module with data-dependent control flow gets accelsim's paragraph without the FX graph
torch prints.

Each case runs twice: in a fresh child process under an address-space cap and a hang guard (a library's
warning shows there exactly as a user would see it, since pytest records warnings in-process) and in-process
with capfd (torch's log handlers and prints write to the file descriptors capfd captures)."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelsim.cli import main
from accelsim.errors import FrontendError

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
CHILD_MEMORY_BYTES = 6 << 30
CHILD_TIMEOUT_S = 500
"""A hang guard, not a measurement: the child imports torch, which takes minutes on a loaded machine."""
CLI = "import sys\nfrom accelsim.cli import main\nsys.exit(main(sys.argv[1:]))\n"


class DataDependent(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x - 1


SNIPPET = ("import sys, torch\nimport accelsim as A\nfrom accelsim.frontends import from_torch\n"
           "class C(torch.nn.Module):\n    def forward(self, x):\n        return x * 2 if x.sum() > 0 else x - 1\n"
           "try:\n    from_torch(C(), (torch.ones(2, 4),))\n"
           "except A.AccelsimError as e:\n    print(e, file=sys.stderr); sys.exit(1)\n")


@pytest.fixture(scope="module")
def pt2_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("pt2_noise")
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    torch.export.save(torch.export.export(m, (torch.randn(2, 4),)), d / "good.pt2")
    data = (d / "good.pt2").read_bytes()
    (d / "truncated.pt2").write_bytes(data[: len(data) // 2])
    return d


@dataclass
class ChildRun:
    code: int | None
    out: str
    err: str
    note: str = ""


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))


def _child(code: str, *args: str) -> ChildRun:
    """`python -c code args` in a fresh interpreter under the memory cap; a hung one is killed."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                           timeout=CHILD_TIMEOUT_S, preexec_fn=_cap_memory)
    except subprocess.TimeoutExpired:
        return ChildRun(None, "", "", f"still running after {CHILD_TIMEOUT_S} s: killed")
    return ChildRun(p.returncode, p.stdout, p.stderr)


@pytest.fixture(scope="module")
def child_runs(pt2_files):
    d = pt2_files
    return {"good": _child(CLI, "import", str(d / "good.pt2"), "-o", str(d / "good.json")),
            "truncated": _child(CLI, "import", str(d / "truncated.pt2"), "-o", str(d / "t.json")),
            "data_dependent": _child(SNIPPET)}


def _no_traceback(run) -> None:
    assert run.code is not None, f"{run.note}; output:\n{(run.out + run.err)[-2000:]}"
    assert "Traceback" not in run.out + run.err, (run.out + run.err)[-3000:]


@pytest.mark.timeout(1800)
def test_importing_a_good_pt2_prints_nothing_on_stderr(child_runs):
    run = child_runs["good"]
    _no_traceback(run)
    assert run.code == 0 and run.err.strip() == "", run.err[-3000:]
    assert "wrote" in run.out


@pytest.mark.timeout(1800)
def test_a_truncated_pt2_prints_only_accelsims_paragraph(child_runs):
    run = child_runs["truncated"]
    _no_traceback(run)
    lines = run.err.strip().splitlines()
    assert run.code == 1 and len(lines) == 1, run.err[-3000:]
    assert lines[0].startswith("accelsim import: error:") and "truncated.pt2" in lines[0]
    assert "zip archive" in lines[0]


@pytest.mark.timeout(1800)
def test_data_dependent_control_flow_gets_one_paragraph_and_no_fx_graph(child_runs):
    run = child_runs["data_dependent"]
    _no_traceback(run)
    lines = run.err.strip().splitlines()
    assert run.code == 1 and len(lines) == 1, run.err[-3000:]
    assert "torch.export could not trace" in lines[0] and "data-dependent" in lines[0]
    assert "def forward" not in run.out + run.err


@pytest.mark.timeout(600)
def test_in_process_good_pt2_leaves_stderr_empty(pt2_files, tmp_path, capfd):
    capfd.readouterr()
    assert main(["import", str(pt2_files / "good.pt2"), "-o", str(tmp_path / "g.json")]) == 0
    out, err = capfd.readouterr()
    assert err == "" and "wrote" in out


@pytest.mark.timeout(600)
def test_in_process_truncated_pt2_writes_one_paragraph(pt2_files, tmp_path, capfd):
    capfd.readouterr()
    assert main(["import", str(pt2_files / "truncated.pt2"), "-o", str(tmp_path / "t.json")]) == 1
    out, err = capfd.readouterr()
    assert len(err.strip().splitlines()) == 1 and "truncated.pt2" in err and "Traceback" not in err, err


@pytest.mark.timeout(600)
def test_in_process_data_dependent_export_writes_nothing(capfd):
    from accelsim.frontends import from_torch

    capfd.readouterr()
    with pytest.raises(FrontendError, match="data-dependent"):
        from_torch(DataDependent(), (torch.ones(2, 4),))
    out, err = capfd.readouterr()
    assert out == "" and err == "", (out + err)[-3000:]


@pytest.mark.timeout(600)
def test_a_pt2_rezipped_with_deflate_still_imports_and_records_its_hash(pt2_files, tmp_path):
    """The archive check inflates deflated members itself: a genuine archive must pass it unchanged."""
    import hashlib
    import zipfile

    from accelsim.frontends import load_model

    source = zipfile.ZipFile(pt2_files / "good.pt2")
    path = tmp_path / "deflated.pt2"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for info in source.infolist():
            z.writestr(info.filename, source.read(info.filename))
    assert {i.compress_type for i in zipfile.ZipFile(path).infolist()} == {zipfile.ZIP_DEFLATED}
    graph = load_model(path)
    assert dict(graph.source.options)["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
