"""Packaging: a wheel built from this tree installs in a fresh virtualenv and runs from outside the
repository; the bundled hardware configs ship inside it (accelsim.hwconfigs); the CUDA toolkit is an extra;
a bundled name is looked up, never joined to a path."""
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.errors import HwConfigError
from accelsim.hw.load import bundled_names, resolve

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
SHIPPED = sorted(p.name for p in (ROOT / "hwconfigs").glob("*.yaml"))
BUILD_INPUTS = ("pyproject.toml", "setup.py", "README.md", "accelsim", "hwconfigs")
"""What the build reads. It runs on a copy, so no build/ or egg-info lands in the working tree."""


def _run(cmd: list, cwd: Path, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _outside_env(**extra: str) -> dict:
    """The environment minus anything that could point Python at the source tree or another venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in BUILD_INPUTS:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    proc = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src], cwd=src,
                env=_outside_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    (whl,) = out.glob("accelsim-*.whl")
    return whl


def test_the_wheel_ships_every_hwconfig_and_no_tests(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n.removeprefix("accelsim/hwconfigs/") for n in names if n.startswith("accelsim/hwconfigs/")) \
        == SHIPPED
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n]
    assert "accelsim/hw/load.py" in names and "accelsim/cli/__init__.py" in names


def test_the_base_requirements_leave_the_cuda_toolkit_to_the_cuda_extra(wheel):
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(f"accelsim-{VERSION}.dist-info/METADATA").decode()
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata, re.MULTILINE)
    base = [r for r in requires if "extra ==" not in r]
    cuda = [r for r in requires if 'extra == "cuda"' in r]
    assert any(r.startswith("numba-cuda") for r in base)
    assert not [r for r in base if "cu13" in r or "cu12" in r or r.startswith(("cuda-toolkit", "nvidia-"))], base
    assert any(r.startswith("numba-cuda[cu13]") for r in cuda), cuda


def test_a_wheel_installed_in_a_fresh_venv_runs_from_outside_the_repository(wheel, tmp_path):
    """The README's main job with the bundled name (no hwconfigs/ folder out here), and the cuda backend
    without the cuda extra: refused in one paragraph that says how to enable it, or simulated."""
    venv, work = tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    proc = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=work)
    assert proc.returncode == 0, proc.stderr
    python, accelsim = venv / "bin" / "python", venv / "bin" / "accelsim"
    # this test's pip installs into the new venv (--python): quicker than bootstrapping a pip there, and
    # --no-compile halves the time (only what runs gets byte-compiled)
    proc = _run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile", wheel],
                cwd=work, env=_outside_env())
    assert proc.returncode == 0, proc.stderr[-4000:]
    env = _outside_env(NUMBA_ENABLE_CUDASIM="0")

    version = _run([accelsim, "--version"], cwd=work, env=env)
    assert version.returncode == 0 and version.stdout.strip() == f"accelsim {VERSION}", version

    run = _run([accelsim, "run", "--hw", "groq_like"], cwd=work, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "makespan" in run.stdout and "Traceback" not in run.stderr

    small_check = ["check", "--hw", "groq_like", "--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4",
                   "--backend", "cuda"]
    refused = _run([accelsim, *small_check], cwd=work, env=env)
    assert refused.returncode == 1, refused
    assert "Traceback" not in refused.stderr and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "pip install 'accelsim[cuda]'" in refused.stderr and "NUMBA_ENABLE_CUDASIM=1" in refused.stderr

    simulated = _run([accelsim, *small_check], cwd=work, env={**env, "NUMBA_ENABLE_CUDASIM": "1"})
    assert simulated.returncode == 0 and "check passed" in simulated.stdout, simulated.stderr[-4000:]


def test_version_comes_from_the_package_metadata(capsys):
    assert A.__version__ == VERSION
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"accelsim {VERSION}"


def test_the_bundled_names_are_the_repositorys_hwconfigs():
    assert bundled_names() == [name.removesuffix(".yaml") for name in SHIPPED]
    assert resolve("groq_like").read_bytes() == (ROOT / "hwconfigs" / "groq_like.yaml").read_bytes()
    assert resolve("groq_like.yaml") == resolve("groq_like")


@pytest.mark.parametrize("name, expected", [
    ("../groq_like", "no such file"),
    ("hwconfigs/../groq_like", "no such file"),
    ("groq_like/../groq_like", "no such file"),
    ("/groq_like", "no such file"),
    ("..", "is a directory"),
    ("../../etc/passwd", "no such file"),
    ("..\\groq_like", "no such file"),
    ("groq_like\0", "no such file"),
    ("groq_like\0../../etc/passwd", "no such file"),
    ("g" * 300, "not a usable path (File name too long)"),
    ("g" * 100_000, "not a usable path (File name too long)"),
    ("g" * 64, "no such file"),
    ("groq_like\n", "no such file"),
    ("GROQ_LIKE", "no such file"),
], ids=["parent", "folder_then_parent", "name_then_parent", "absolute", "dotdot", "escape", "backslash", "nul",
        "nul_then_path", "300_chars", "100k_chars", "64_chars", "newline", "upper_case"])
def test_a_bundled_name_with_a_path_in_it_is_refused_in_one_paragraph(name, expected, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of these names here; the repository's hwconfigs/ is elsewhere
    with pytest.raises(HwConfigError) as refused:
        A.load_hw(name)
    message = str(refused.value)
    assert expected in message and "\n" not in message and len(message) < 600, message
    if expected == "no such file":
        assert "bundled: " + ", ".join(bundled_names()) in message


@pytest.mark.parametrize("name", ["../groq_like", "groq_like/..", "groq_like\0", "g" * 5000],
                         ids=["parent", "name_then_parent", "nul", "5000_chars"])
def test_the_cli_refuses_a_hostile_hw_name_with_one_line_and_exit_1(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["hw", "show", name]) == 1
    err = capsys.readouterr().err
    assert err.startswith("accelsim hw show: error: ") and err.count("\n") == 1 and len(err) < 600, err
